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
	addr := strings.TrimPrefix(url, "nats://")
	sub, err := dialRaw(addr)
	if err != nil {
		return 0, err
	}
	defer func() { _ = sub.Close() }()
	var b bytes.Buffer
	for i := range subs {
		fmt.Fprintf(&b, "SUB churn.%d.* %d\r\n", i, i+1)
	}
	if err := sub.roundTrip(b.Bytes()); err != nil {
		return 0, err
	}
	var delivered atomic.Int64
	readErr := make(chan error, 1)
	go func() { readErr <- sub.countMsgs(&delivered) }()

	churner, err := dialRaw(addr)
	if err != nil {
		return 0, err
	}
	defer func() { _ = churner.Close() }()
	pub, err := dialRaw(addr)
	if err != nil {
		return 0, err
	}
	defer func() { _ = pub.Close() }()

	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	churnErr := make(chan error, 1)
	var churned atomic.Int64
	go func() { churnErr <- churner.churn(ctx, subs, rate, &churned) }()

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
			return 0, fmt.Errorf("publisher: %w", err)
		}
	}
	if err := <-churnErr; err != nil {
		return 0, fmt.Errorf("churner: %w", err)
	}
	// Let the subscriber take what the server already accepted.
	settleAt := time.Now()
	for last := int64(-1); time.Since(settleAt) < 10*time.Second; {
		n := delivered.Load()
		if n == last {
			break
		}
		last = n
		time.Sleep(100 * time.Millisecond)
	}
	elapsed := time.Since(start)
	select {
	case err := <-readErr:
		return 0, fmt.Errorf("subscriber: %w", err)
	default:
	}
	if got, want := churned.Load(), int64(float64(rate)*d.Seconds()*0.8); got < want {
		return 0, fmt.Errorf("churner managed only %d changes in %v (want about %d)", got, d, want)
	}
	return float64(delivered.Load()) / elapsed.Seconds(), nil
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
// live subscriptions of its own, until ctx ends. Messages that reach them
// are read and dropped.
func (c *rawConn) churn(ctx context.Context, subs, rate int, churned *atomic.Int64) error {
	go func() {
		var dropped atomic.Int64
		_ = c.countMsgs(&dropped)
	}()
	rng := rand.New(rand.NewPCG(1, 2))
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
		for churned.Load() < due {
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
