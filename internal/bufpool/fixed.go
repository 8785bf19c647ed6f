package bufpool

import (
	"sync"
	"sync/atomic"
	"time"
)

// Fixed lends buffers of one size and gives memory back when idle, where a
// sync.Pool keeps whatever it was given until two garbage collections,
// which an idle process may not run for minutes: after 5,000 clients
// closed, their output buffers (64 KiB each) stayed in the pool.
//
// It keeps at most MaxRetained bytes of free buffers; a Put past that
// drops the buffer for the garbage collector. And every Idle, it drops the
// free buffers that were not needed during the last period: the fewest
// free buffers it held at any moment of the period, which no Get took.
//
// With a Releaser (WithReleaser), the buffers it drops are given back to
// the operating system too, not only to the garbage collector.
//
// Safe for concurrent use. The zero value is not usable; call NewFixed.
type Fixed struct {
	size        int
	maxRetained int // in buffers
	idle        time.Duration
	rel         *Releaser // nil: none

	mu struct {
		sync.Mutex
		free  []*[]byte
		low   int  // the fewest free buffers since the last trim
		armed bool // a trim is scheduled
	}
	retained atomic.Int64 // bytes of free buffers, for monitoring
}

// NewFixed returns a pool of buffers of size bytes that keeps at most
// maxRetained bytes of free buffers, and drops unused ones after idle.
func NewFixed(size, maxRetained int, idle time.Duration) *Fixed {
	return &Fixed{size: size, maxRetained: max(maxRetained/size, 1), idle: idle}
}

// WithReleaser makes the pool report the buffers it drops to r, and ask
// r to release memory after each trim; call it before the pool is used.
// It returns p.
func (p *Fixed) WithReleaser(r *Releaser) *Fixed {
	p.rel = r
	return p
}

// Get returns an empty buffer with capacity Size.
func (p *Fixed) Get() []byte {
	p.mu.Lock()
	n := len(p.mu.free)
	if n == 0 {
		p.mu.Unlock()
		return make([]byte, 0, p.size)
	}
	b := p.mu.free[n-1]
	p.mu.free[n-1] = nil
	p.mu.free = p.mu.free[:n-1]
	p.mu.low = min(p.mu.low, n-1)
	p.mu.Unlock()
	p.retained.Add(-int64(p.size))
	return (*b)[:0]
}

// Put gives back a buffer from Get; its holder must not touch it
// afterwards. A buffer of another capacity is ignored.
func (p *Fixed) Put(b []byte) {
	if cap(b) != p.size {
		return
	}
	p.mu.Lock()
	if len(p.mu.free) >= p.maxRetained {
		p.mu.Unlock()
		if p.rel != nil {
			p.rel.Dropped(int64(p.size))
		}
		return
	}
	b = b[:0]
	p.mu.free = append(p.mu.free, &b)
	if !p.mu.armed {
		// The first free buffer since the pool was empty: nothing was
		// idle before it.
		p.mu.armed, p.mu.low = true, len(p.mu.free)
		time.AfterFunc(p.idle, p.trim)
	}
	p.mu.Unlock()
	p.retained.Add(int64(p.size))
}

// trim drops the buffers no Get needed during the last period, and runs
// again after the next while any are left.
func (p *Fixed) trim() {
	p.mu.Lock()
	drop := p.mu.low
	n := len(p.mu.free)
	for i := n - drop; i < n; i++ {
		p.mu.free[i] = nil
	}
	p.mu.free = p.mu.free[:n-drop]
	if len(p.mu.free) == 0 {
		p.mu.free = nil // the slice's array too
		p.mu.armed = false
	} else {
		p.mu.low = len(p.mu.free)
		time.AfterFunc(p.idle, p.trim)
	}
	p.mu.Unlock()
	p.retained.Add(-int64(drop * p.size))
	if p.rel != nil {
		p.rel.Trimmed(int64(drop * p.size))
		p.rel.Release()
	}
}

// Retained returns the bytes of free buffers the pool holds.
func (p *Fixed) Retained() int64 { return p.retained.Load() }
