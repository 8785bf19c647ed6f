package server_test

import (
	"bytes"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/server"
)

// TestClusterRouteBackpressure: a fast publisher on one server and a
// subscriber on another that reads, but slowly. The subscriber's gate
// holds its server's reads of the route, the route's gate holds the
// publisher: everything settles at the subscriber's pace, nobody is cut
// off as a slow consumer, and nothing is lost. Without the route's gate
// the route's queue filled up to MaxPending and the route was cut.
func TestClusterRouteBackpressure(t *testing.T) {
	const msgs = 40_000 // 20 MB: well past MaxPending and loopback's socket buffers
	c := clustertest.Start(t, 2, server.Options{MaxPending: 8 << 20, MaxPayload: 64 << 10, HTTPPort: server.RandomPort})
	pubSrv, subSrv := c.Servers[0], c.Servers[1]
	conn := rawSub(t, subSrv, "bp")
	c.WaitInterest(t, "bp", 1)
	counted := make(chan int, 1)
	go func() { counted <- readSlowly(conn, "MSG bp 1 ", msgs, time.Millisecond) }()

	pub := c.Connect(t, 0)
	payload := bytes.Repeat([]byte("x"), 1024)
	for range msgs {
		require.NoError(t, pub.Publish("bp", payload))
	}
	require.NoError(t, pub.Flush())
	select {
	case n := <-counted:
		require.Equal(t, msgs, n, "nothing lost")
	case <-time.After(60 * time.Second):
		t.Fatal("the slow subscriber did not get everything in 60s")
	}
	for i, s := range c.Servers {
		require.Zero(t, s.SlowConsumers(), "server %d cut someone off", i)
	}
	require.Equal(t, 1, pubSrv.NumRoutes(), "the route was not cut")
	require.Positive(t, pubSrv.Stalls(), "the publisher was held at the route's gate")
	vz := slowVarz(t, pubSrv)
	require.Zero(t, vz.Slow)
	require.Zero(t, vz.Stats.Routes)
}

// readSlowly counts the MSG lines starting with prefix that conn
// receives, sleeping pause after every read, until it has want or the
// connection is idle for 10s.
func readSlowly(conn net.Conn, prefix string, want int, pause time.Duration) int {
	return readPaced(conn, prefix, want, pause, nil, nil)
}

// TestClusterRouteNotLimitedBySubscriptions: max_subscriptions bounds a
// client, not a route (nats-server does not limit routes this way): a
// peer's clients may together have more subscriptions than one client
// may, and the route carries all of them.
func TestClusterRouteNotLimitedBySubscriptions(t *testing.T) {
	const perClient, clients = 5, 4
	c := clustertest.Start(t, 2, server.Options{MaxSubscriptions: perClient})
	var subs []*nats.Subscription
	for k := range clients {
		nc := c.Connect(t, 1)
		for j := range perClient {
			s, err := nc.SubscribeSync(fmt.Sprintf("lim.%d.%d", k, j))
			require.NoError(t, err)
			subs = append(subs, s)
		}
		require.NoError(t, nc.Flush())
	}
	for k := range clients {
		for j := range perClient {
			c.WaitInterest(t, fmt.Sprintf("lim.%d.%d", k, j), 1)
		}
	}
	require.Equal(t, 1, c.Servers[0].NumRoutes(), "the route holds %d subscriptions", perClient*clients)
	pub := c.Connect(t, 0)
	for k := range clients {
		for j := range perClient {
			require.NoError(t, pub.Publish(fmt.Sprintf("lim.%d.%d", k, j), nil))
		}
	}
	require.NoError(t, pub.Flush())
	for _, s := range subs {
		_, err := s.NextMsg(5 * time.Second)
		require.NoError(t, err, s.Subject)
	}
	// A client is still held to it.
	nc := c.Connect(t, 0)
	errs := make(chan error, 1)
	nc.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		select {
		case errs <- err:
		default:
		}
	})
	for j := range perClient + 1 {
		_, err := nc.SubscribeSync(fmt.Sprintf("own.%d", j))
		require.NoError(t, err)
	}
	_ = nc.Flush()
	select {
	case err := <-errs:
		require.ErrorContains(t, err, "maximum subscriptions exceeded")
	case <-time.After(5 * time.Second):
		t.Fatal("a client past max_subscriptions was not told")
	}
}

// TestRoutePingStale: a peer that stops answering PINGs is closed as
// stale after about (ping_max+1) × ping_interval, even while it keeps
// sending (its traffic does not show that this side's bytes reach it),
// and its interest goes with it.
func TestRoutePingStale(t *testing.T) {
	const interval, maxOut = 50 * time.Millisecond, 2
	s := RunServer(t, server.Options{Cluster: server.ClusterOptions{Name: "p", Port: server.RandomPort,
		PingInterval: interval, MaxPingsOut: maxOut}})
	r := dialRoute(t, s)
	r.register("p", "NPINGSTALE")
	r.send("RS+ $G stale.x\r\n")
	require.Eventually(t, func() bool { return s.HasInterest("stale.x") }, 5*time.Second, 5*time.Millisecond)
	start := time.Now()
	stop := make(chan struct{})
	defer close(stop)
	go func() { // busy, but deaf: RS+ lines, never a PONG
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if _, err := r.conn.Write(fmt.Appendf(nil, "RS+ $G busy.%d\r\n", i)); err != nil {
				return
			}
		}
	}()
	require.Eventually(t, func() bool { return s.NumRoutes() == 0 }, 5*time.Second, 5*time.Millisecond,
		"a route that answers no PING must be closed")
	took := time.Since(start)
	t.Logf("stale route closed after %v", took)
	require.GreaterOrEqual(t, took, time.Duration(maxOut)*interval, "not before ping_max pings went unanswered")
	require.False(t, s.HasInterest("stale.x"))
	r.expectErrAndClose("-ERR 'Stale Connection'")
}

// TestRoutePingAnswered: a peer that answers PINGs stays, however short
// the interval.
func TestRoutePingAnswered(t *testing.T) {
	c := clustertest.Start(t, 2, server.Options{Cluster: server.ClusterOptions{PingInterval: 20 * time.Millisecond, MaxPingsOut: 2}})
	time.Sleep(300 * time.Millisecond)
	require.Equal(t, 1, c.Servers[0].NumRoutes())
	require.Equal(t, 1, c.Servers[1].NumRoutes())
}
