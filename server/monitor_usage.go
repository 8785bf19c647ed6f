package server

import (
	"bytes"
	"math"
	"os"
	"runtime/metrics"
	"strconv"
	"sync"
	"time"
)

// residentMemory returns the process's resident set size in bytes from
// /proc/self/statm where there is one (Linux), else the memory the Go
// runtime has mapped from the OS, which is close to it for a Go program.
func residentMemory() int64 {
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := bytes.Fields(b); len(f) > 1 {
			if pages, err := strconv.ParseInt(string(f[1]), 10, 64); err == nil {
				return pages * int64(os.Getpagesize())
			}
		}
	}
	sample := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(sample[0].Value.Uint64())
}

// minCPUWindow is the shortest interval a CPU figure is averaged over:
// over a shorter one a few scheduler ticks swing it widely.
const minCPUWindow = time.Second

// cpuSampler turns the process's CPU time into a percentage of one core
// (200 = two cores busy), the unit of the reference server's "cpu" and of
// ps. Each figure is the average since the previous sample; a request that
// comes sooner than minCPUWindow after it gets the previous figure again.
// The process's CPU time comes from getrusage, which costs one system
// call; where there is none the figure is 0. mu guards every other field.
type cpuSampler struct {
	mu     sync.Mutex
	at     time.Time     // when the last sample was taken
	used   time.Duration // the process's CPU time then
	figure float64       // the percentage computed then
}

func (c *cpuSampler) start(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = now
	c.used, _ = processCPUTime()
}

func (c *cpuSampler) percent(now time.Time) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.Sub(c.at) < minCPUWindow {
		return c.figure
	}
	used, ok := processCPUTime()
	if !ok {
		return 0
	}
	pct := 100 * float64(used-c.used) / float64(now.Sub(c.at))
	c.figure = math.Round(pct*10) / 10
	c.at, c.used = now, used
	return c.figure
}
