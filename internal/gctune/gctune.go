// Package gctune sets the Go garbage collector's pace from the live heap.
//
// At Go's default (GOGC=100) a collection starts once the heap has grown
// by as much as was live after the last one. A broker's live heap is
// small (tens of MiB: indexes, connection state), while its allocations
// are its traffic (every message read, encoded, replicated, written):
// under load it collects many times a second, for little memory saved.
// The tuner gives the heap a fixed headroom instead, as a GOGC percentage
// of the live heap, bounded: a small live heap may grow by Headroom bytes
// before the next collection (at most MaxPercent of itself), and a large
// one (a memory stream of gigabytes) by MinPercent of itself, Go's
// default pace, so that memory never grows past twice what is live.
//
// The headroom is a trade: the more of it, the fewer collections, but the
// more memory the heap touches. Memory a process touches for the first
// time costs a page fault and the kernel's zeroing of the page (on a
// virtual machine, sometimes the host's fault too), which in a freshly
// started server costs more than the collections it saves: with 256 MiB,
// three R3 servers spent about 1.5 µs per 1 KiB message faulting in
// 264 MB each over a 200,000-message run, where a collection of their
// live heaps (11 to 47 MiB) takes about 5 ms of CPU. The default, 64 MiB,
// measured 7% less server CPU per message there than 256 MiB, and 32 MiB
// no better than 256 (docs/benchmarks/cluster-r3.md).
//
// It polls the live heap (runtime/metrics) every Interval and sets the
// percentage with debug.SetGCPercent. A process whose GOGC environment
// variable is set keeps it: the operator chose.
package gctune

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Options configure the tuner. The zero value of each field means its
// default.
type Options struct {
	// Headroom is the bytes a small live heap may grow by before the next
	// collection (default 64 MiB).
	Headroom int64
	// MinPercent and MaxPercent bound the GOGC percentage set (defaults
	// 100, Go's own, and 800).
	MinPercent, MaxPercent int
	// Interval is how often the live heap is read (default 1 s).
	Interval time.Duration
}

// Defaults of the Options.
const (
	DefaultHeadroom   = 64 << 20
	DefaultMinPercent = 100
	DefaultMaxPercent = 800
	DefaultInterval   = time.Second
)

func (o Options) withDefaults() Options {
	if o.Headroom <= 0 {
		o.Headroom = DefaultHeadroom
	}
	if o.MinPercent <= 0 {
		o.MinPercent = DefaultMinPercent
	}
	if o.MaxPercent < o.MinPercent {
		o.MaxPercent = max(DefaultMaxPercent, o.MinPercent)
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	return o
}

// Percent returns the GOGC percentage that lets a heap with live bytes
// live grow by o.Headroom, within o's bounds.
func Percent(live int64, o Options) int {
	o = o.withDefaults()
	if live <= 0 {
		return o.MaxPercent
	}
	p := o.Headroom * 100 / live
	return int(min(max(p, int64(o.MinPercent)), int64(o.MaxPercent)))
}

// liveHeap is the runtime metric read.
const liveHeap = "/gc/heap/live:bytes"

// Start runs the tuner until stop is called, unless the GOGC environment
// variable is set; then it changes nothing, and stop does nothing.
func Start(o Options) (stop func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	o = o.withDefaults()
	sample := []metrics.Sample{{Name: liveHeap}}
	tune := func() {
		metrics.Read(sample)
		if sample[0].Value.Kind() == metrics.KindUint64 {
			debug.SetGCPercent(Percent(int64(sample[0].Value.Uint64()), o))
		}
	}
	tune()
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(o.Interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				tune()
			}
		}
	}()
	var stopped bool
	return func() {
		if !stopped {
			stopped = true
			close(done)
		}
	}
}
