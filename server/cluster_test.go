package server_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/server"
)

// TestClusterFanOut: a message published on one server reaches every
// plain subscriber on every server exactly once, in the publisher's order.
func TestClusterFanOut(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("servers=%d", n), func(t *testing.T) {
			c := clustertest.Start(t, n, server.Options{})
			var subs []*nats.Subscription
			for i := range n {
				nc := c.Connect(t, i)
				// Two overlapping subscriptions on one server: the peer
				// still gets each message once per subscription, and the
				// route carries it once.
				s1, err := nc.SubscribeSync("orders.*")
				require.NoError(t, err)
				subs = append(subs, s1)
				require.NoError(t, nc.Flush())
			}
			c.WaitInterest(t, "orders.new")
			pub := c.Connect(t, 0)
			const msgs = 100
			for k := range msgs {
				require.NoError(t, pub.Publish("orders.new", fmt.Appendf(nil, "%d", k)))
			}
			require.NoError(t, pub.Flush())
			for i, sub := range subs {
				for k := range msgs {
					m, err := sub.NextMsg(5 * time.Second)
					require.NoError(t, err, "subscriber %d, message %d", i, k)
					require.Equal(t, fmt.Sprint(k), string(m.Data), "subscriber %d: order kept", i)
				}
				_, err := sub.NextMsg(100 * time.Millisecond)
				require.ErrorIs(t, err, nats.ErrTimeout, "subscriber %d: nothing twice", i)
			}
		})
	}
}

var _ = sync.Mutex{}
