package bench

import (
	"container/heap"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// virtualClock is a discrete-event clock: Sleep runs, in time order, the
// deliveries due before it ends. With one connection the whole run is one
// goroutine's sequence of events, so latencies are exact.
type virtualClock struct {
	now    time.Time
	events eventHeap
}

type event struct {
	due time.Time
	seq int
	fn  func()
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].due.Equal(h[j].due) {
		return h[i].seq < h[j].seq
	}
	return h[i].due.Before(h[j].due)
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

func newVirtualClock() *virtualClock { return &virtualClock{now: time.Unix(1e9, 0)} }

func (v *virtualClock) Now() time.Time        { return v.now }
func (v *virtualClock) Sleep(d time.Duration) { v.advance(v.now.Add(d)) }

func (v *virtualClock) advance(to time.Time) {
	for v.events.Len() > 0 && !v.events[0].due.After(to) {
		e := heap.Pop(&v.events).(event)
		v.now = e.due
		e.fn()
	}
	if to.After(v.now) {
		v.now = to
	}
}

func (v *virtualClock) after(d time.Duration, fn func()) {
	heap.Push(&v.events, event{due: v.now.Add(d), seq: v.events.Len(), fn: fn})
}

// delayTarget delivers every payload latency after it is sent; a Send
// whose sequence number is stallAt first blocks for stall.
type delayTarget struct {
	clock   *virtualClock
	latency time.Duration
	stallAt uint64
	stall   time.Duration
	drop    map[uint64]bool
}

func (t *delayTarget) Name() string { return "delay" }

func (t *delayTarget) Open(_ context.Context, _ string, deliver func([]byte)) (Conn, error) {
	return &delayConn{t: t, deliver: deliver}, nil
}

type delayConn struct {
	t       *delayTarget
	deliver func([]byte)
}

func (c *delayConn) Send(p []byte) error {
	seq := uint64(p[0]) | uint64(p[1])<<8 | uint64(p[2])<<16 | uint64(p[3])<<24
	if c.t.stall > 0 && seq == c.t.stallAt {
		c.t.clock.Sleep(c.t.stall) // the broker stalls: this send blocks
	}
	if c.t.drop[seq] {
		return nil
	}
	b := append([]byte(nil), p...)
	c.t.clock.after(c.t.latency, func() { c.deliver(b) })
	return nil
}

func (c *delayConn) Close() error { return nil }

func within(t *testing.T, want, got time.Duration, what string) {
	t.Helper()
	tol := want / 1000 // three significant digits
	require.InDelta(t, float64(want), float64(got), float64(tol+1), "%s: want %v, got %v", what, want, got)
}

// TestConstantLatency: a target with constant latency L gives L at every
// percentile, corrected and uncorrected, within the histogram's precision.
func TestConstantLatency(t *testing.T) {
	vc := newVirtualClock()
	const L = 1234 * time.Microsecond
	res, err := RunLatency(context.Background(), &delayTarget{clock: vc, latency: L},
		LatencyOptions{Rate: 2000, Size: 64, Duration: 5 * time.Second, Warmup: time.Second, clock: vc})
	require.NoError(t, err)
	require.EqualValues(t, 10000, res.Sent)
	require.Zero(t, res.Lost())
	require.EqualValues(t, 10000, res.Corrected.Count())
	for _, p := range Percentiles {
		within(t, L, res.Corrected.Percentile(p), "corrected p"+PercentileKey(p))
		within(t, L, res.Uncorrected.Percentile(p), "uncorrected p"+PercentileKey(p))
	}
}

// TestStallIsCorrected: one send stalls for 100 ms at 1,000 requests/s.
// The 100 requests scheduled during the stall go out late; their corrected
// latencies, measured from when they should have gone, show the stall,
// while service times (from the actual send) do not, except for the one
// request that stalled.
func TestStallIsCorrected(t *testing.T) {
	vc := newVirtualClock()
	const L = 200 * time.Microsecond
	const stall = 100 * time.Millisecond
	res, err := RunLatency(context.Background(), &delayTarget{clock: vc, latency: L, stallAt: 5000, stall: stall},
		LatencyOptions{Rate: 1000, Size: 64, Duration: 10 * time.Second, Warmup: -1, clock: vc})
	require.NoError(t, err)
	require.EqualValues(t, 10000, res.Sent)
	require.Zero(t, res.Lost())
	// Request 5000 waited the whole stall; 5001 waited 99 ms, and so on.
	within(t, stall+L, res.Corrected.Percentile(100), "corrected max")
	require.Greater(t, res.Corrected.Percentile(99.9), 89*time.Millisecond, "the 10 worst corrected samples are 91..100 ms")
	require.Greater(t, res.Corrected.Percentile(99.5), 49*time.Millisecond)
	within(t, L, res.Corrected.Percentile(50), "corrected median")
	// Service time: only the stalled request itself is slow.
	within(t, L, res.Uncorrected.Percentile(99.99), "uncorrected p99.99")
	within(t, stall+L, res.Uncorrected.Percentile(100), "uncorrected max")
	// The sender resumed 100 ms after request 5000's mark, so request
	// 5001 went out 99 ms late.
	within(t, stall-time.Millisecond, res.Behind, "how far behind schedule the sender fell")
}

func TestWarmupAndLoss(t *testing.T) {
	vc := newVirtualClock()
	drop := map[uint64]bool{5: true, 2500: true, 2999: true} // 5 is in the warm-up
	res, err := RunLatency(context.Background(), &delayTarget{clock: vc, latency: time.Millisecond, drop: drop},
		LatencyOptions{Rate: 1000, Size: 16, Duration: 2 * time.Second, Warmup: time.Second, Drain: 50 * time.Millisecond, clock: vc})
	require.NoError(t, err)
	require.EqualValues(t, 2000, res.Sent, "the 1,000 warm-up requests are not counted")
	require.EqualValues(t, 2, res.Lost())
	require.EqualValues(t, 1998, res.Corrected.Count())
}

func TestTooSmall(t *testing.T) {
	_, err := RunLatency(context.Background(), &delayTarget{clock: newVirtualClock()}, LatencyOptions{Size: 8})
	require.ErrorIs(t, err, ErrTooSmall)
}
