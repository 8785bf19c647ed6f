package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// ThroughputOptions configure a throughput run. Zero values mean defaults.
type ThroughputOptions struct {
	Publishers  int           // default 1
	Subscribers int           // default 1; every subscriber receives every message
	Msgs        int           // per publisher (default 100,000)
	Size        int           // payload bytes (default 128)
	Timeout     time.Duration // bound on the whole run (default 2 minutes)
}

func (o *ThroughputOptions) setDefaults() {
	if o.Publishers <= 0 {
		o.Publishers = 1
	}
	if o.Subscribers < 0 {
		o.Subscribers = 0
	} else if o.Subscribers == 0 {
		o.Subscribers = 1
	}
	if o.Msgs <= 0 {
		o.Msgs = 100_000
	}
	if o.Size <= 0 {
		o.Size = 128
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
}

// ThroughputResult is the outcome of a throughput run. Rates are messages
// per second; the publishers' and the subscribers' differ, because a
// broker accepts faster than it delivers when it buffers. Its JSON form is
// what `skiff bench throughput --json` writes.
type ThroughputResult struct {
	Target      string `json:"target"`
	Publishers  int    `json:"publishers"`
	Subscribers int    `json:"subscribers"`
	Size        int    `json:"size"`
	Sent        int64  `json:"sent"`
	Received    int64  `json:"received"` // summed over subscribers
	Expected    int64  `json:"expected"` // Sent × Subscribers
	// PubRate is Sent over the time from the first send to the last
	// publisher's end (after its Flush, for acknowledging targets);
	// SubRate is Received over the time from the first send to the last
	// delivery.
	PubRate float64 `json:"pub_rate"`
	SubRate float64 `json:"sub_rate"`
	// PerPublisher and PerSubscriber are each client's own rate.
	PerPublisher  []float64 `json:"per_publisher"`
	PerSubscriber []float64 `json:"per_subscriber"`
	// Failures says which subscribers the broker dropped before they had
	// everything, and why ("subscriber 1: nats: slow consumer ...").
	Failures []string `json:"failures,omitempty"`
}

// RunThroughput publishes Msgs messages from each publisher on one topic
// and counts what each subscriber receives.
func RunThroughput(ctx context.Context, t Target, o ThroughputOptions) (*ThroughputResult, error) {
	o.setDefaults()
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	topic := fmt.Sprintf("bench.throughput.%08x", rand.Uint32())
	expected := int64(o.Publishers * o.Msgs)

	type subState struct {
		conn        Conn
		count       atomic.Int64
		first, last atomic.Int64 // unix ns
		done        chan struct{}
	}
	subs := make([]*subState, o.Subscribers)
	for i := range subs {
		s := &subState{done: make(chan struct{})}
		conn, err := t.Open(ctx, topic, func([]byte) {
			now := time.Now().UnixNano()
			s.first.CompareAndSwap(0, now)
			s.last.Store(now)
			if s.count.Add(1) == expected {
				close(s.done)
			}
		})
		if err != nil {
			return nil, fmt.Errorf("bench: %s: subscriber %d: %w", t.Name(), i, err)
		}
		defer func() { _ = conn.Close() }()
		s.conn = conn
		subs[i] = s
	}
	pubs := make([]Conn, o.Publishers)
	for i := range pubs {
		conn, err := t.Open(ctx, topic, nil)
		if err != nil {
			return nil, fmt.Errorf("bench: %s: publisher %d: %w", t.Name(), i, err)
		}
		defer func() { _ = conn.Close() }()
		pubs[i] = conn
	}

	res := &ThroughputResult{Target: t.Name(), Publishers: o.Publishers, Subscribers: o.Subscribers, Size: o.Size,
		Expected: expected * int64(o.Subscribers)}
	payload := randomPayload(o.Size)
	var wg sync.WaitGroup
	ends := make([]time.Time, o.Publishers)
	errs := make([]error, o.Publishers)
	start := time.Now()
	for i, p := range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range o.Msgs {
				if err := p.Send(payload); err != nil {
					errs[i] = err
					return
				}
			}
			if f, ok := p.(Flusher); ok {
				errs[i] = f.Flush(ctx)
			}
			ends[i] = time.Now()
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("bench: %s: publisher %d: %w", t.Name(), i, err)
		}
	}
	res.Sent = expected
	var lastEnd time.Time
	for _, e := range ends {
		res.PerPublisher = append(res.PerPublisher, float64(o.Msgs)/e.Sub(start).Seconds())
		if e.After(lastEnd) {
			lastEnd = e
		}
	}
	res.PubRate = float64(expected) / lastEnd.Sub(start).Seconds()

	var lastRecv int64
	for i, s := range subs {
		var failed <-chan struct{} // nil, never ready, for a target that cannot tell
		f, canFail := s.conn.(Failer)
		if canFail {
			failed = f.Failed()
		}
		select {
		case <-s.done:
		case <-ctx.Done():
		case <-failed:
			// What was in flight when the broker dropped it is lost.
			res.Failures = append(res.Failures, fmt.Sprintf("subscriber %d: %v", i, f.Err()))
		}
		n := s.count.Load()
		res.Received += n
		if n > 0 {
			res.PerSubscriber = append(res.PerSubscriber, float64(n)/time.Duration(s.last.Load()-start.UnixNano()).Seconds())
			lastRecv = max(lastRecv, s.last.Load())
		} else {
			res.PerSubscriber = append(res.PerSubscriber, 0)
		}
	}
	if lastRecv > 0 {
		res.SubRate = float64(res.Received) / time.Duration(lastRecv-start.UnixNano()).Seconds()
	}
	return res, nil
}
