package corebench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// churn measures delivery while the subscription index changes: a
// subscriber holds subs wildcard subscriptions churn.<i>.*; a churner
// subscribes and unsubscribes rate patterns per second each (on the same
// subject space, so that caches in front of an index are invalidated); a
// publisher publishes to churn.<k>.x with random k, in batches of 1,000
// followed by a PING (at most one batch in flight), for duration d. It
// returns delivered msgs/sec at the subscriber.
//
// The three clients speak the protocol directly rather than through a
// client library: the servers and the clients share the machine's cores,
// and lean clients leave the measurement to the servers.
func churn(ctx context.Context, url string, subs, rate, size int, d time.Duration) (float64, error) {
	r, err := churnOn(ctx, churnSetup{Pub: url, Subs: []string{url}, Churners: []string{url}}, subs, rate, size, d)
	return r.delivered, err
}

// churnSetup places a churn run's clients, for a cluster: the publisher on
// Pub, the subscriptions split in equal ranges over subscribers on Subs,
// the churn rate split over churners on Churners (each churning the whole
// subject space, so that its changes are new interest for its server).
type churnSetup struct {
	Pub      string
	Subs     []string
	Churners []string
}

// churnResult is what a churn run measured.
type churnResult struct {
	delivered float64 // messages/s the subscribers received
	changes   float64 // subscribes/s the churners made (as many unsubscribes)
}

// churnOn is churn with its clients placed by setup. Before measuring, it
// waits until a message from the publisher reaches every subscriber (in a
// cluster: until their interest reached the publisher's server).
func churnOn(ctx context.Context, setup churnSetup, subs, rate, size int, d time.Duration) (churnResult, error) {
	var res churnResult
	counts := make([]atomic.Int64, len(setup.Subs))
	readErr := make(chan error, len(setup.Subs))
	firsts := make([]int, len(setup.Subs))
	for k, url := range setup.Subs {
		sub, err := dialRaw(strings.TrimPrefix(url, "nats://"))
		if err != nil {
			return res, err
		}
		defer func() { _ = sub.Close() }()
		var b bytes.Buffer
		lo, hi := k*subs/len(setup.Subs), (k+1)*subs/len(setup.Subs)
		firsts[k] = lo
		for i := lo; i < hi; i++ {
			fmt.Fprintf(&b, "SUB churn.%d.* %d\r\n", i, i+1)
		}
		if err := sub.roundTrip(b.Bytes()); err != nil {
			return res, err
		}
		go func() { readErr <- sub.countMsgs(&counts[k]) }()
	}
	delivered := func() int64 {
		var n int64
		for k := range counts {
			n += counts[k].Load()
		}
		return n
	}

	pub, err := dialRaw(strings.TrimPrefix(setup.Pub, "nats://"))
	if err != nil {
		return res, err
	}
	defer func() { _ = pub.Close() }()
	if err := probeSubscribers(ctx, pub, firsts, counts); err != nil {
		return res, err
	}
	baseline := delivered()

	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	churnErr := make(chan error, len(setup.Churners))
	var churned atomic.Int64
	for k, url := range setup.Churners {
		churner, err := dialRaw(strings.TrimPrefix(url, "nats://"))
		if err != nil {
			return res, err
		}
		defer func() { _ = churner.Close() }()
		share := rate / len(setup.Churners)
		if k < rate%len(setup.Churners) {
			share++
		}
		go func() { churnErr <- churner.churn(ctx, subs, share, uint64(k), &churned) }()
	}

	rng := rand.New(rand.NewPCG(3, 4))
	payload := bytes.Repeat([]byte{'x'}, size)
	batch := make([]byte, 0, 1000*(size+32)+8)
	start := time.Now()
	for ctx.Err() == nil {
		batch = batch[:0]
		for range 1000 {
			batch = fmt.Appendf(batch, "PUB churn.%d.x %d\r\n", rng.IntN(subs), size)
			batch = append(batch, payload...)
			batch = append(batch, "\r\n"...)
		}
		if err := pub.roundTrip(batch); err != nil {
			return res, fmt.Errorf("publisher: %w", err)
		}
	}
	for range setup.Churners {
		if err := <-churnErr; err != nil {
			return res, fmt.Errorf("churner: %w", err)
		}
	}
	// Let the subscribers take what the servers already accepted.
	settleAt := time.Now()
	for last := int64(-1); time.Since(settleAt) < 10*time.Second; {
		n := delivered()
		if n == last {
			break
		}
		last = n
		time.Sleep(100 * time.Millisecond)
	}
	elapsed := time.Since(start)
	select {
	case err := <-readErr:
		return res, fmt.Errorf("subscriber: %w", err)
	default:
	}
	res.delivered = float64(delivered()-baseline) / elapsed.Seconds()
	res.changes = float64(churned.Load()) / d.Seconds()
	if got, want := churned.Load(), int64(float64(rate)*d.Seconds()*0.8); got < want {
		return res, fmt.Errorf("churners managed only %d changes in %v (want about %d)", got, d, want)
	}
	return res, nil
}

// probeSubscribers publishes churn.<first>.x for each subscriber's first
// pattern, every 20 ms, until each subscriber has received one (at most
// 20 s): on a cluster, the subscriptions' interest has then reached the
// publisher's server.
func probeSubscribers(ctx context.Context, pub *rawConn, firsts []int, counts []atomic.Int64) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		var b []byte
		missing := 0
		for k, i := range firsts {
			if counts[k].Load() == 0 {
				missing++
				b = fmt.Appendf(b, "PUB churn.%d.x 5\r\nprobe\r\n", i)
			}
		}
		if missing == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d subscribers got no message in 20s: interest did not reach the publisher's server", missing, len(firsts))
		}
		if err := pub.roundTrip(b); err != nil {
			return fmt.Errorf("probe: %w", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rawConn is a minimal protocol client for load generation.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func dialRaw(addr string) (*rawConn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	rc := &rawConn{Conn: c, r: bufio.NewReaderSize(c, 256<<10)}
	if _, err := rc.r.ReadString('\n'); err != nil { // INFO
		_ = c.Close()
		return nil, err
	}
	if _, err := c.Write([]byte("CONNECT {\"verbose\":false,\"pedantic\":false}\r\n")); err != nil {
		_ = c.Close()
		return nil, err
	}
	return rc, nil
}

// roundTrip writes b and a PING and waits for the PONG, skipping PINGs
// the server sends. Only for connections that receive no messages.
func (c *rawConn) roundTrip(b []byte) error {
	if _, err := c.Write(append(b, "PING\r\n"...)); err != nil {
		return err
	}
	for {
		line, err := c.r.ReadString('\n')
		if err != nil {
			return err
		}
		switch {
		case strings.HasPrefix(line, "PONG"):
			return nil
		case strings.HasPrefix(line, "PING"):
			if _, err := c.Write([]byte("PONG\r\n")); err != nil {
				return err
			}
		case strings.HasPrefix(line, "-ERR"):
			return errors.New(strings.TrimSpace(line))
		}
	}
}

// countMsgs reads MSG deliveries until the connection ends, counting them.
func (c *rawConn) countMsgs(n *atomic.Int64) error {
	for {
		line, err := c.r.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		switch {
		case bytes.HasPrefix(line, []byte("MSG ")):
			f := bytes.Fields(line)
			size, err := strconv.Atoi(string(f[len(f)-1]))
			if err != nil {
				return fmt.Errorf("bad MSG line %q", line)
			}
			if _, err := c.r.Discard(size + 2); err != nil {
				return err
			}
			n.Add(1)
		case bytes.HasPrefix(line, []byte("PING")):
			if _, err := c.Write([]byte("PONG\r\n")); err != nil {
				return err
			}
		case bytes.HasPrefix(line, []byte("-ERR")):
			return errors.New(strings.TrimSpace(string(line)))
		}
	}
}

// churn subscribes and unsubscribes, rate of each per second, keeping 512
// live subscriptions of its own, until ctx ends; seed varies its patterns
// from another churner's. Messages that reach them
// are read and dropped.
func (c *rawConn) churn(ctx context.Context, subs, rate int, seed uint64, churned *atomic.Int64) error {
	go func() {
		var dropped atomic.Int64
		_ = c.countMsgs(&dropped)
	}()
	rng := rand.New(rand.NewPCG(1, 2+seed))
	var mine int64 // this churner's changes; churned counts every churner's
	var live []int
	next := 1
	began := time.Now()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	var b []byte
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		// Catch up to the rate: a ticker drops ticks on a busy machine.
		due := int64(time.Since(began).Seconds() * float64(rate))
		b = b[:0]
		for ; mine < due; mine++ {
			b = fmt.Appendf(b, "SUB churn.%d.* %d\r\n", rng.IntN(subs), next)
			live = append(live, next)
			next++
			if len(live) > 512 {
				i := rng.IntN(len(live))
				b = fmt.Appendf(b, "UNSUB %d\r\n", live[i])
				live[i] = live[len(live)-1]
				live = live[:len(live)-1]
			}
			churned.Add(1)
		}
		if len(b) > 0 {
			if _, err := c.Write(b); err != nil {
				return err
			}
		}
	}
}
