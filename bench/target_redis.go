package bench

import (
	"context"
	"fmt"
	"net/url"

	"github.com/redis/go-redis/v9"
)

func init() {
	Register("redis", func(u *url.URL) (Target, error) {
		opts, err := redis.ParseURL(u.String())
		if err != nil {
			return nil, err
		}
		return &redisTarget{opts: opts}, nil
	})
}

// redisTarget uses Redis pub/sub: a connection SUBSCRIBEs to its channel
// (a subscribed Redis connection can do nothing else) and PUBLISHes on a
// second one.
type redisTarget struct{ opts *redis.Options }

func (t *redisTarget) Name() string { return "redis" }

func (t *redisTarget) Open(ctx context.Context, topic string, deliver func([]byte)) (Conn, error) {
	opts := *t.opts
	opts.PoolSize = 1 // one publishing connection per benchmark connection
	client := redis.NewClient(&opts)
	c := &redisConn{client: client, topic: topic, done: make(chan struct{})}
	if deliver == nil {
		if err := client.Ping(ctx).Err(); err != nil {
			_ = client.Close()
			return nil, fmt.Errorf("redis: %w", err)
		}
		close(c.done)
		return c, nil
	}
	c.sub = client.Subscribe(ctx, topic)
	// Receive returns the subscription's confirmation: from then on,
	// what is published on topic reaches this connection.
	if _, err := c.sub.Receive(ctx); err != nil {
		_ = c.sub.Close()
		_ = client.Close()
		return nil, fmt.Errorf("redis: subscribe: %w", err)
	}
	c.failed = make(chan struct{})
	go func() {
		defer close(c.done)
		for {
			m, err := c.sub.ReceiveMessage(context.Background())
			if err != nil {
				// Closed, by Close or by Redis (a subscriber past
				// client-output-buffer-limit pubsub is disconnected).
				c.err = err
				close(c.failed)
				return
			}
			deliver([]byte(m.Payload))
		}
	}()
	return c, nil
}

type redisConn struct {
	client *redis.Client
	sub    *redis.PubSub
	topic  string
	done   chan struct{}
	failed chan struct{} // subscribers only: closed when receiving ends
	err    error         // why, written before failed is closed
}

var _ Failer = (*redisConn)(nil)

// Failed is closed when a subscribing connection stops receiving; it is
// nil, never ready, for a publishing one.
func (c *redisConn) Failed() <-chan struct{} { return c.failed }

func (c *redisConn) Err() error {
	select {
	case <-c.failed:
		return fmt.Errorf("redis: subscription ended: %w", c.err)
	default:
		return nil
	}
}

// Send publishes; PUBLISH is a command with a reply, so it returns once
// Redis has fanned the message out.
func (c *redisConn) Send(p []byte) error {
	return c.client.Publish(context.Background(), c.topic, p).Err()
}

func (c *redisConn) Close() error {
	if c.sub != nil {
		_ = c.sub.Close()
	}
	err := c.client.Close()
	<-c.done
	return err
}
