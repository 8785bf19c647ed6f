package bench

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// LatencyOptions configure a latency run. Zero values mean the defaults.
type LatencyOptions struct {
	// Rate is the total requests per second, spread evenly over the
	// connections (default 1000).
	Rate float64
	// Size is the payload size in bytes (default 256, at least 16: the
	// payload carries the request's sequence number).
	Size int
	// Connections is the number of connections (default 1).
	Connections int
	// Duration is how long requests are measured (default 10s), after
	// Warmup (default 2s), whose requests are sent but not recorded.
	Duration time.Duration
	Warmup   time.Duration
	// Drain bounds the wait for requests still in flight at the end
	// (default 5s); those that never come back are counted as lost.
	Drain time.Duration
	// Progress, if set, receives a live status line four times a second.
	Progress io.Writer
	// clock is real time unless a test gives a virtual one.
	clock clock
}

func (o *LatencyOptions) setDefaults() {
	if o.Rate <= 0 {
		o.Rate = 1000
	}
	if o.Size <= 0 {
		o.Size = 256
	}
	if o.Connections <= 0 {
		o.Connections = 1
	}
	if o.Duration <= 0 {
		o.Duration = 10 * time.Second
	}
	if o.Warmup < 0 {
		o.Warmup = 0
	} else if o.Warmup == 0 {
		o.Warmup = 2 * time.Second
	}
	if o.Drain <= 0 {
		o.Drain = 5 * time.Second
	}
	if o.clock == nil {
		o.clock = realClock{}
	}
}

// ErrTooSmall is returned for a payload size below headerSize.
var ErrTooSmall = errors.New("bench: payload too small to carry a sequence number")

// headerSize is the part of every payload the harness uses: the request's
// sequence number and its connection.
const headerSize = 16

// LatencyResult is the outcome of one latency run.
type LatencyResult struct {
	Target      string
	Rate        float64
	Size        int
	Connections int
	Duration    time.Duration
	// Corrected holds latencies from each request's intended send time
	// (response time); Uncorrected from its actual send (service time).
	Corrected   *Histogram
	Uncorrected *Histogram
	Sent        int64 // requests sent in the measured window
	Received    int64 // of those, how many came back
	// Behind is how far behind schedule the senders fell at worst: the
	// harness itself could not keep the rate when it is large.
	Behind time.Duration
}

// Lost returns the measured requests that never came back.
func (r *LatencyResult) Lost() int64 { return r.Sent - r.Received }

// RunLatency runs the open-loop latency benchmark against t.
func RunLatency(ctx context.Context, t Target, o LatencyOptions) (*LatencyResult, error) {
	o.setDefaults()
	if o.Size < headerSize {
		return nil, fmt.Errorf("%w: %d bytes, need %d", ErrTooSmall, o.Size, headerSize)
	}
	interval := time.Duration(float64(time.Second) * float64(o.Connections) / o.Rate)
	if interval <= 0 {
		return nil, fmt.Errorf("bench: rate %v over %d connections is too high", o.Rate, o.Connections)
	}
	perConn := int(math.Ceil(float64(o.Warmup+o.Duration) / float64(interval)))
	warm := int(o.Warmup / interval) // requests 0..warm-1 are warm-up

	runs := make([]*connRun, o.Connections)
	for i := range runs {
		runs[i] = &connRun{
			id: i, interval: interval, warm: warm, clock: o.clock,
			sent:        make([]atomic.Int64, perConn),
			corrected:   NewHistogram(),
			uncorrected: NewHistogram(),
		}
	}
	runID := rand.Uint32()
	for _, r := range runs {
		conn, err := t.Open(ctx, fmt.Sprintf("bench.latency.%08x.%d", runID, r.id), r.deliver)
		if err != nil {
			closeAll(runs)
			return nil, fmt.Errorf("bench: %s: connection %d: %w", t.Name(), r.id, err)
		}
		r.conn = conn
	}
	defer closeAll(runs)

	start := o.clock.Now().Add(10 * time.Millisecond) // let every sender reach its first mark
	for _, r := range runs {
		r.start = start
		// Stagger the connections across one interval so that their
		// requests interleave rather than arrive together.
		r.offset = time.Duration(int64(interval) * int64(r.id) / int64(o.Connections))
	}
	stopProgress := startProgress(o.Progress, o.clock, start, o.Warmup+o.Duration, runs)
	errs := make(chan error, len(runs))
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- r.send(ctx, perConn, o.Size)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			stopProgress()
			return nil, err
		}
	}
	// Wait for what is still in flight.
	deadline := o.clock.Now().Add(o.Drain)
	for o.clock.Now().Before(deadline) && !allBack(runs) {
		o.clock.Sleep(time.Millisecond)
	}
	stopProgress()

	res := &LatencyResult{
		Target: t.Name(), Rate: o.Rate, Size: o.Size, Connections: o.Connections, Duration: o.Duration,
		Corrected: NewHistogram(), Uncorrected: NewHistogram(),
	}
	for _, r := range runs {
		r.mu.Lock()
		res.Corrected.Merge(r.corrected)
		res.Uncorrected.Merge(r.uncorrected)
		res.Received += r.received
		r.mu.Unlock()
		res.Sent += int64(r.measuredSent.Load())
		res.Behind = max(res.Behind, time.Duration(r.behind.Load()))
	}
	return res, nil
}

// connRun is the state of one connection during a run.
type connRun struct {
	id       int
	conn     Conn
	clock    clock
	start    time.Time
	offset   time.Duration
	interval time.Duration
	warm     int

	sent         []atomic.Int64 // actual send time of request i, unix ns; 0 before it is sent
	measuredSent atomic.Int64
	sentTotal    atomic.Int64
	back         atomic.Int64 // requests delivered back, warm-up included
	behind       atomic.Int64 // worst lateness of a send, ns

	mu          sync.Mutex // deliver may run on a goroutine of the target's
	corrected   *Histogram
	uncorrected *Histogram
	received    int64
}

// randomPayload returns size random bytes.
func randomPayload(size int) []byte {
	b := make([]byte, size)
	_, _ = cryptorand.Read(b) // never fails
	return b
}

func (r *connRun) intended(i int) time.Time {
	return r.start.Add(r.offset + time.Duration(i)*r.interval)
}

// send issues requests 0..n-1 on schedule.
func (r *connRun) send(ctx context.Context, n, size int) error {
	payload := randomPayload(size) // random, so that no broker gains by compressing
	binary.LittleEndian.PutUint64(payload[8:], uint64(r.id))
	for i := range n {
		if err := ctx.Err(); err != nil {
			return err
		}
		at := r.intended(i)
		if now := r.clock.Now(); now.Before(at) {
			r.clock.Sleep(at.Sub(now))
		} else if late := now.Sub(at); late > time.Duration(r.behind.Load()) {
			r.behind.Store(int64(late))
		}
		binary.LittleEndian.PutUint64(payload, uint64(i))
		r.sent[i].Store(r.clock.Now().UnixNano())
		if err := r.conn.Send(payload); err != nil {
			return fmt.Errorf("bench: connection %d: send %d: %w", r.id, i, err)
		}
		r.sentTotal.Add(1)
		if i >= r.warm {
			r.measuredSent.Add(1)
		}
	}
	return nil
}

// deliver records a request that came back.
func (r *connRun) deliver(payload []byte) {
	now := r.clock.Now()
	if len(payload) < headerSize {
		return
	}
	i := int(binary.LittleEndian.Uint64(payload))
	if i < 0 || i >= len(r.sent) || binary.LittleEndian.Uint64(payload[8:]) != uint64(r.id) {
		return // not ours: a target that mixes connections up is caught by Lost
	}
	r.back.Add(1)
	if i < r.warm {
		return
	}
	sentAt := r.sent[i].Load()
	r.mu.Lock()
	r.corrected.Record(now.Sub(r.intended(i)))
	if sentAt != 0 {
		r.uncorrected.Record(time.Duration(now.UnixNano() - sentAt))
	}
	r.received++
	r.mu.Unlock()
}

func allBack(runs []*connRun) bool {
	for _, r := range runs {
		if r.back.Load() < r.sentTotal.Load() {
			return false
		}
	}
	return true
}

func closeAll(runs []*connRun) {
	for _, r := range runs {
		if r.conn != nil {
			_ = r.conn.Close()
		}
	}
}

// startProgress prints a status line until the returned function is
// called. w nil means no output.
func startProgress(w io.Writer, c clock, start time.Time, total time.Duration, runs []*connRun) func() {
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(w, "\r\033[K")
				return
			case <-t.C:
			}
			var sent, back int64
			for _, r := range runs {
				sent += r.sentTotal.Load()
				back += r.back.Load()
			}
			elapsed := min(c.Now().Sub(start), total).Round(100 * time.Millisecond)
			fmt.Fprintf(w, "\r\033[K  %v / %v  sent %d  back %d  in flight %d", elapsed, total, sent, back, sent-back)
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// clock is time as the harness sees it: real time, or a virtual clock in
// tests, which makes latencies exact.
type clock interface {
	Now() time.Time
	Sleep(d time.Duration)
}

type realClock struct{}

func (realClock) Now() time.Time        { return time.Now() }
func (realClock) Sleep(d time.Duration) { sleep(d) }
