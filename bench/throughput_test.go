package bench

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fanoutTarget delivers every Send to every receiving connection, in the
// sender's goroutine; the receiver opened dropAt-th (from 1) is dropped,
// as a broker drops a slow consumer, after it has received dropAfter
// messages.
type fanoutTarget struct {
	dropAt, dropAfter int
	mu                sync.Mutex
	subs              []*fanoutConn
}

func (t *fanoutTarget) Name() string { return "fanout" }

func (t *fanoutTarget) Open(_ context.Context, _ string, deliver func([]byte)) (Conn, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := &fanoutConn{t: t, deliver: deliver, failed: make(chan struct{})}
	if deliver != nil {
		t.subs = append(t.subs, c)
		if len(t.subs) == t.dropAt {
			c.dropAfter = t.dropAfter
		}
	}
	return c, nil
}

type fanoutConn struct {
	t         *fanoutTarget
	deliver   func([]byte)
	dropAfter int // 0: never
	got       int
	failed    chan struct{}
}

var _ Failer = (*fanoutConn)(nil)

var errDropped = errors.New("dropped as a slow consumer")

func (c *fanoutConn) Send(p []byte) error {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	for _, s := range c.t.subs {
		if s.dropAfter > 0 && s.got == s.dropAfter {
			continue // gone
		}
		s.deliver(p)
		s.got++
		if s.got == s.dropAfter {
			close(s.failed)
		}
	}
	return nil
}

func (c *fanoutConn) Failed() <-chan struct{} { return c.failed }
func (c *fanoutConn) Err() error              { return errDropped }
func (c *fanoutConn) Close() error            { return nil }

func TestThroughputCounts(t *testing.T) {
	res, err := RunThroughput(context.Background(), &fanoutTarget{}, ThroughputOptions{
		Publishers: 3, Subscribers: 2, Msgs: 1000, Size: 64, Timeout: 10 * time.Second})
	require.NoError(t, err)
	require.EqualValues(t, 3000, res.Sent)
	require.EqualValues(t, 6000, res.Expected)
	require.EqualValues(t, 6000, res.Received)
	require.Empty(t, res.Failures)
	require.Len(t, res.PerPublisher, 3)
	require.Len(t, res.PerSubscriber, 2)
}

// TestThroughputDroppedSubscriber: a subscriber the broker drops ends the
// wait for it at once, with the reason, rather than at the timeout.
func TestThroughputDroppedSubscriber(t *testing.T) {
	start := time.Now()
	res, err := RunThroughput(context.Background(), &fanoutTarget{dropAt: 2, dropAfter: 100}, ThroughputOptions{
		Publishers: 2, Subscribers: 2, Msgs: 1000, Size: 64, Timeout: time.Minute})
	require.NoError(t, err)
	require.Less(t, time.Since(start), 30*time.Second, "waited out the timeout")
	require.EqualValues(t, 4000, res.Expected)
	require.EqualValues(t, 2000+100, res.Received)
	require.Equal(t, []string{"subscriber 1: " + errDropped.Error()}, res.Failures)
}
