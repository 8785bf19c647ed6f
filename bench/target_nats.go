package bench

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

func init() {
	Register("nats", func(u *url.URL) (Target, error) { return &natsTarget{url: u.String()}, nil })
}

// natsTarget speaks the NATS protocol with nats.go: Skiff, nats-server or
// any compatible server.
type natsTarget struct{ url string }

// natsWait bounds a wait on the server (a new connection's subscription
// confirmed, a flush) when the caller's context has no deadline.
const natsWait = 10 * time.Second

func (t *natsTarget) Name() string { return "nats" }

// dialNATS connects to url for topic, with the connection's failures
// recorded for Failer.
func dialNATS(url, topic string) (*natsConn, error) {
	c := &natsConn{topic: topic, failed: make(chan struct{})}
	nc, err := nats.Connect(url, nats.Name("skiff-bench"), nats.MaxReconnects(0),
		// The benchmark must not be throttled by the client's own limits.
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { c.setErr(err) }),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { c.setErr(err) }),
		nats.ClosedHandler(c.closed))
	if err != nil {
		return nil, err
	}
	c.nc = nc
	return c, nil
}

func (t *natsTarget) Open(ctx context.Context, topic string, deliver func([]byte)) (Conn, error) {
	c, err := dialNATS(t.url, topic)
	if err != nil {
		return nil, err
	}
	nc := c.nc
	if deliver != nil {
		sub, err := nc.Subscribe(topic, func(m *nats.Msg) { deliver(m.Data) })
		if err != nil {
			nc.Close()
			return nil, err
		}
		// A slow benchmark client must show as latency, not as drops.
		if err := sub.SetPendingLimits(-1, -1); err != nil {
			nc.Close()
			return nil, err
		}
	}
	// FlushWithContext refuses a context without a deadline, and the
	// latency benchmark's may have none.
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, natsWait)
		defer cancel()
	}
	if err := nc.FlushWithContext(ctx); err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: %w", err)
	}
	return c, nil
}

type natsConn struct {
	nc     *nats.Conn
	topic  string
	failed chan struct{} // closed when the connection closes, however
	once   sync.Once
	mu     struct {
		sync.Mutex
		err error // the first asynchronous error: why the connection went
	}
}

var _ Failer = (*natsConn)(nil)

// closed is nats.go's ClosedHandler: with reconnects off, the connection
// is gone for good, whether Close or the server ended it.
func (c *natsConn) closed(*nats.Conn) { c.once.Do(func() { close(c.failed) }) }

func (c *natsConn) Failed() <-chan struct{} { return c.failed }

func (c *natsConn) setErr(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.err == nil && err != nil {
		c.mu.err = err
	}
}

// Err returns why the connection went: the server's -ERR, or the network
// error (EOF when the server hung up, as a slow consumer is cut off).
func (c *natsConn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.err != nil {
		return fmt.Errorf("connection closed: %w", c.mu.err)
	}
	return nats.ErrConnectionClosed
}

func (c *natsConn) Send(p []byte) error { return c.nc.Publish(c.topic, p) }

// Flush waits until the server has everything published so far. A
// flooded server can take longer than nats.go's default 10 s to answer, so
// ctx bounds the wait (FlushWithContext needs a deadline; the throughput
// run's context has one).
func (c *natsConn) Flush(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, natsWait)
		defer cancel()
	}
	return c.nc.FlushWithContext(ctx)
}

func (c *natsConn) Close() error {
	c.nc.Close()
	return nil
}
