package server

import (
	"time"
)

// Backpressure before cut-off. A subscriber whose queued output passes
// three quarters of MaxPending closes a gate (outbound.stall); a publisher
// that delivered to it, at the end of its read and after waking the
// writers, waits at the gate before reading more: until the subscriber's
// writer has brought the queue back under the mark, or at most stallWait
// (stallWaitFull once the queue is full), and never more than stallPerRead
// in all per read. A fast publisher feeding a slower subscriber so settles
// at the subscriber's pace instead of filling its queue; a subscriber that
// does not read at all still fills it and is cut off as a slow consumer,
// having held each publisher's reads up by stallPerRead at most. These are
// nats-server's bounds.
const (
	stallWait     = 2 * time.Millisecond
	stallWaitFull = 5 * time.Millisecond
	stallPerRead  = 10 * time.Millisecond
)

// stallMark is the queued bytes above which the gate closes.
func stallMark(max int) int { return max / 4 * 3 }

// gateLocked closes the gate when the queue has passed the mark. Lock held.
func (o *outbound) gateLocked() {
	if o.mu.stall == nil && o.mu.queued+o.mu.inflight > stallMark(o.max) {
		o.mu.stall = make(chan struct{})
		o.stalled.Store(true)
	}
}

// openGateLocked opens the gate once the queue is back under the mark (or
// the client is closing). Lock held.
func (o *outbound) openGateLocked() {
	if o.mu.stall != nil && (o.mu.closing || o.mu.queued+o.mu.inflight <= stallMark(o.max)) {
		close(o.mu.stall)
		o.mu.stall = nil
		o.stalled.Store(false)
	}
}

// gate returns the closed gate and whether the queue is full, or nil.
func (o *outbound) gate() (chan struct{}, bool) {
	if !o.stalled.Load() {
		return nil, false // the common case, without the lock
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.mu.stall, o.mu.queued+o.mu.inflight >= o.max
}

// stallFor waits at t's gate, if closed, within what is left of this
// read's allowance. It reports the time waited.
func (c *client) stallFor(t *client, left time.Duration) time.Duration {
	g, full := t.out.gate()
	if g == nil || left <= 0 {
		return 0
	}
	wait := stallWait
	if full {
		wait = stallWaitFull
	}
	wait = min(wait, left)
	c.srv.stats.stalls.Add(1)
	start := time.Now()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-g:
	case <-timer.C:
	}
	return time.Since(start)
}

// Stalls returns how many times a publisher's read waited at a subscriber's
// gate since the server started (skiff_publisher_stalls_total).
func (s *Server) Stalls() int64 { return s.stats.stalls.Load() }

// SlowConsumers returns how many clients were cut off as slow consumers.
func (s *Server) SlowConsumers() int64 { return s.stats.slowConsumers.Load() }
