package bufpool

import (
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// Releaser gives the memory of buffers that pools dropped back to the
// operating system. A dropped buffer is garbage: the collector frees it
// at its next cycle, which an idle process may not run for two minutes,
// and only then may the runtime's scavenger return its pages, a little at
// a time. So after a connection storm the process kept hundreds of MiB
// for minutes.
//
// Once at least MinBytes were dropped since the last release, Release
// runs debug.FreeOSMemory (a forced collection, then every free page
// returned to the operating system), but not before drops have stopped
// for Quiet (a storm still closing would leave most of its memory for the
// next release), and at most once every Every: a forced collection costs
// a full mark of the heap. A release held back by either runs by itself
// once it is due.
//
// Safe for concurrent use. Set the fields before first use.
type Releaser struct {
	// MinBytes is the least dropped since the last release that makes a
	// release worth it.
	MinBytes int64
	// Quiet is how long drops must have stopped before a release.
	Quiet time.Duration
	// Every is the least time between two releases.
	Every time.Duration

	free     func() // debug.FreeOSMemory; tests count calls
	pending  atomic.Int64
	lastDrop atomic.Int64 // Unix ns of the last Dropped
	releases atomic.Int64
	mu       struct {
		sync.Mutex
		last      time.Time
		scheduled bool // a Release waits to be due
	}
}

// Dropped records that n bytes of buffers were dropped as they were
// given back (a storm of them, maybe). It is cheap enough for a Put.
func (r *Releaser) Dropped(n int64) {
	r.pending.Add(n)
	r.lastDrop.Store(time.Now().UnixNano())
}

// Trimmed records that n bytes of idle buffers were dropped by a trim:
// counted like Dropped, but they say nothing of a storm going on.
func (r *Releaser) Trimmed(n int64) { r.pending.Add(n) }

// Release returns memory to the operating system if at least MinBytes
// were dropped since the last time and the release is due (see
// Releaser); if only the time is missing, it runs again when it is due.
// It may take as long as a garbage collection: call it off any hot path
// (the pools call it from their trim timers).
func (r *Releaser) Release() {
	n := r.pending.Load()
	if n < r.MinBytes {
		return
	}
	now := time.Now()
	r.mu.Lock()
	due := time.Unix(0, r.lastDrop.Load()).Add(r.Quiet)
	if !r.mu.last.IsZero() && r.mu.last.Add(r.Every).After(due) {
		due = r.mu.last.Add(r.Every)
	}
	if wait := due.Sub(now); wait > 0 {
		if !r.mu.scheduled {
			r.mu.scheduled = true
			time.AfterFunc(wait, func() {
				r.mu.Lock()
				r.mu.scheduled = false
				r.mu.Unlock()
				r.Release()
			})
		}
		r.mu.Unlock()
		return
	}
	r.mu.last = now
	r.mu.Unlock()
	r.pending.Add(-n) // what is dropped meanwhile counts for the next
	if r.free != nil {
		r.free()
	} else {
		debug.FreeOSMemory()
	}
	r.releases.Add(1)
}

// Releases returns how many times memory was returned to the operating
// system (counted once it was).
func (r *Releaser) Releases() int64 { return r.releases.Load() }
