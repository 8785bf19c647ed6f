package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
)

func init() {
	Register("jetstream", openJetStreamTarget)
}

// jetStreamTarget publishes into a stream with JetStream's acknowledged
// publish and receives through a consumer: Skiff with streams, or
// nats-server with JetStream. A URL looks like
//
//	jetstream://127.0.0.1:4222?storage=file&pending=4096&until=deliver
//
// storage is the stream's (file, the default, or memory); pending bounds
// each connection's unacknowledged publishes (default 4,096), past which
// Send waits. until says where a latency round trip ends: deliver (the
// default), when a consumer receives the message, or ack, when the
// publisher has the server's acknowledgement (a synchronous publish's
// latency). When a publish is acknowledged (after an fsync or not) is
// the server's policy: Skiff's and nats-server's `jetstream {
// sync_interval: always }`.
//
// Each topic gets a stream of its own, created by the first connection
// that opens the topic and deleted when the last one closes; with
// stream=NAME every topic goes to that existing stream instead (made by
// the caller, with its replicas and placement, and left as it is). A receiving
// connection reads through an ephemeral ordered consumer (pull, no acks,
// flow controlled by the client), from the messages published after Open.
type jetStreamTarget struct {
	url     string
	storage njs.StorageType
	pending int
	ack     bool   // a round trip ends at the acknowledgement
	fixed   string // stream=: the existing stream every topic goes to

	mu struct {
		sync.Mutex
		refs map[string]int // open connections per stream
	}
}

func openJetStreamTarget(u *url.URL) (Target, error) {
	t := &jetStreamTarget{storage: njs.FileStorage, pending: 4096}
	t.mu.refs = map[string]int{}
	q := u.Query()
	switch q.Get("storage") {
	case "", "file":
	case "memory":
		t.storage = njs.MemoryStorage
	default:
		return nil, fmt.Errorf("bench: jetstream: storage %q: want file or memory", q.Get("storage"))
	}
	if p := q.Get("pending"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("bench: jetstream: pending %q: want a positive number", p)
		}
		t.pending = n
	}
	switch q.Get("until") {
	case "", "deliver":
	case "ack":
		t.ack = true
	default:
		return nil, fmt.Errorf("bench: jetstream: until %q: want deliver or ack", q.Get("until"))
	}
	t.fixed = q.Get("stream")
	nu := *u
	nu.Scheme, nu.RawQuery = "nats", ""
	t.url = nu.String()
	return t, nil
}

func (t *jetStreamTarget) Name() string { return "jetstream" }

// consumeBytes bounds what a receiving connection's consumer has in
// flight.
const consumeBytes = 16 << 20

// streamName turns a topic into a stream name: names cannot hold dots.
func streamName(topic string) string {
	return "BENCH_" + strings.NewReplacer(".", "_", "*", "_", ">", "_").Replace(topic)
}

func (t *jetStreamTarget) Open(ctx context.Context, topic string, deliver func([]byte)) (Conn, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, natsWait)
		defer cancel()
	}
	nconn, err := dialNATS(t.url, topic)
	if err != nil {
		return nil, err
	}
	c := &jsConn{natsConn: nconn, t: t, stream: cmp.Or(t.fixed, streamName(topic))}
	nc := nconn.nc
	opts := []njs.JetStreamOpt{
		njs.WithPublishAsyncMaxPending(t.pending),
		njs.WithPublishAsyncErrHandler(func(_ njs.JetStream, _ *nats.Msg, err error) { c.setPubErr(err) }),
	}
	if t.ack && deliver != nil {
		// The message comes back to the harness with its acknowledgement.
		acked := deliver
		opts = append(opts, njs.WithPublishAsyncAckHandler(func(_ njs.JetStream, m *nats.Msg, _ *njs.PubAck) { acked(m.Data) }))
		deliver = nil
	}
	js, err := njs.New(nc, opts...)
	if err != nil {
		nc.Close()
		return nil, err
	}
	c.js = js
	if err := t.acquire(ctx, js, c.stream, topic); err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: stream %s: %w", c.stream, err)
	}
	if deliver != nil {
		cons, err := js.OrderedConsumer(ctx, c.stream, njs.OrderedConsumerConfig{DeliverPolicy: njs.DeliverNewPolicy})
		if err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("jetstream: consumer: %w", err)
		}
		cc, err := cons.Consume(func(m njs.Msg) { deliver(m.Data()) },
			// Bounded in bytes, not the client's default 500 messages:
			// 500 messages of 1 MB in flight would exceed a server's
			// pending limit for a client (64 MB by default for both
			// servers), and it would cut the subscriber off.
			njs.PullMaxBytes(consumeBytes),
			njs.ConsumeErrHandler(func(_ njs.ConsumeContext, err error) {
				// Heartbeats missed or the consumer reset: the ordered
				// consumer recovers by itself; only a closed connection
				// fails the subscriber.
				if errors.Is(err, nats.ErrConnectionClosed) {
					c.setErr(err)
				}
			}))
		if err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("jetstream: consume: %w", err)
		}
		c.cc = cc
		// The consumer exists on the server and its first pull is sent:
		// a flush makes sure the server has the pull before Open returns.
		if err := nc.FlushWithContext(ctx); err != nil {
			_ = c.Close()
			return nil, err
		}
	}
	return c, nil
}

// acquire creates the topic's stream if this is its first connection.
// An identical create of an existing stream succeeds on both servers.
// The stream of stream= is the caller's: it is only checked.
func (t *jetStreamTarget) acquire(ctx context.Context, js njs.JetStream, stream, topic string) error {
	if t.fixed != "" {
		_, err := js.Stream(ctx, stream)
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.mu.refs[stream] == 0 {
		cfg := njs.StreamConfig{Name: stream, Subjects: []string{topic}, Storage: t.storage}
		_, err := js.CreateStream(ctx, cfg)
		var apiErr *njs.APIError
		if errors.As(err, &apiErr) && apiErr.ErrorCode == streamCreateFailed {
			// nats-server (v2.15.2, stream.go) removes an account's
			// empty directories after it deletes the account's last
			// stream, in a goroutine that races the next create, which
			// then fails ("error creating store for stream"). A run
			// deletes its stream just before the next run creates one:
			// one retry, once that goroutine is done.
			select {
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
				return err
			}
			_, err = js.CreateStream(ctx, cfg)
		}
		if err != nil {
			return err
		}
	}
	t.mu.refs[stream]++
	return nil
}

// streamCreateFailed is the JetStream error code of a stream create the
// server could not store ("error creating store for stream").
const streamCreateFailed = 10049

// release deletes the stream when its last connection goes.
func (t *jetStreamTarget) release(js njs.JetStream, stream string) error {
	if t.fixed != "" {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.mu.refs[stream]--
	if t.mu.refs[stream] > 0 {
		return nil
	}
	delete(t.mu.refs, stream)
	ctx, cancel := context.WithTimeout(context.Background(), natsWait)
	defer cancel()
	return js.DeleteStream(ctx, stream)
}

// jsConn is a NATS connection (natsConn: its failures) publishing into,
// and perhaps consuming from, its topic's stream.
type jsConn struct {
	*natsConn
	t      *jetStreamTarget
	js     njs.JetStream
	cc     njs.ConsumeContext
	stream string
	pubErr atomic.Pointer[error] // the first publish the server refused
}

var (
	_ Failer  = (*jsConn)(nil)
	_ Flusher = (*jsConn)(nil)
)

func (c *jsConn) setPubErr(err error) { c.pubErr.CompareAndSwap(nil, &err) }

// refused returns the first refused publish's error, or nil.
func (c *jsConn) refused() error {
	if p := c.pubErr.Load(); p != nil {
		return fmt.Errorf("jetstream: publish refused: %w", *p)
	}
	return nil
}

// Send publishes without waiting for the acknowledgement. The client keeps
// the message until it is acknowledged (to publish it again if need be),
// so the payload, which the caller reuses, is copied.
func (c *jsConn) Send(p []byte) error {
	if err := c.refused(); err != nil {
		return err
	}
	// A publisher that outruns the server waits for acks; the
	// throughput run's timeout bounds the wait, not the client's 200 ms.
	_, err := c.js.PublishAsync(c.topic, append([]byte(nil), p...), njs.WithStallWait(time.Minute))
	return err
}

// Flush waits until every publish so far is acknowledged, and returns the
// first refusal.
func (c *jsConn) Flush(ctx context.Context) error {
	select {
	case <-c.js.PublishAsyncComplete():
	case <-ctx.Done():
		return fmt.Errorf("jetstream: %d publishes unacknowledged: %w", c.js.PublishAsyncPending(), ctx.Err())
	}
	return c.refused()
}

func (c *jsConn) Close() error {
	if c.cc != nil {
		c.cc.Stop()
	}
	err := c.t.release(c.js, c.stream)
	c.nc.Close()
	return err
}
