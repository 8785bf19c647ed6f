package multiraft

import (
	"sort"
	"sync"
	"time"
)

// after runs f once d has passed: on a timer goroutine, or, on a manual
// node, in Tick once the ticks have added up to d. f must not block.
func (n *Node) after(d time.Duration, f func()) {
	if !n.opts.Manual {
		time.AfterFunc(d, func() {
			if !n.isClosed() {
				f()
			}
		})
		return
	}
	n.clock.add(d, f)
}

// manualClock is the time of a manual node: it advances by Options.Tick in
// each Tick and nowhere else.
type manualClock struct {
	mu struct {
		sync.Mutex
		now    time.Duration
		seq    uint64
		timers []manualTimer
	}
}

type manualTimer struct {
	at  time.Duration
	seq uint64
	f   func()
}

// nanotime is the node's time in nanoseconds: the wall clock's, or a
// manual node's clock's.
func (n *Node) nanotime() int64 {
	if n.opts.Manual {
		return int64(n.clock.now())
	}
	return time.Now().UnixNano()
}

func (c *manualClock) now() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.now
}

func (c *manualClock) add(d time.Duration, f func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.seq++
	c.mu.timers = append(c.mu.timers, manualTimer{at: c.mu.now + d, seq: c.mu.seq, f: f})
}

// advance moves the clock by d and runs the timers due, earliest first
// (ties in the order they were set).
func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	c.mu.now += d
	var due []manualTimer
	keep := c.mu.timers[:0]
	for _, t := range c.mu.timers {
		if t.at <= c.mu.now {
			due = append(due, t)
		} else {
			keep = append(keep, t)
		}
	}
	clear(c.mu.timers[len(keep):])
	c.mu.timers = keep
	c.mu.Unlock()
	sort.Slice(due, func(i, j int) bool {
		if due[i].at != due[j].at {
			return due[i].at < due[j].at
		}
		return due[i].seq < due[j].seq
	})
	for _, t := range due {
		t.f()
	}
}
