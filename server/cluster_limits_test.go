package server_test

import (
	"bytes"
		"net"
	"testing"
	"time"

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
	var vz struct {
		Slow  int64 `json:"slow_consumers"`
		Stats struct {
			Clients int64 `json:"clients"`
			Routes  int64 `json:"routes"`
		} `json:"slow_consumer_stats"`
	}
	getJSON(t, "http://"+pubSrv.MonitorAddr().String()+"/varz", &vz)
	require.Zero(t, vz.Slow)
	require.Zero(t, vz.Stats.Routes)
}

// readSlowly counts the MSG lines starting with prefix that conn
// receives, sleeping pause after every read, until it has want or the
// connection is idle for 10s.
func readSlowly(conn net.Conn, prefix string, want int, pause time.Duration) int {
	buf := make([]byte, 64<<10)
	var tail []byte
	n := 0
	p := []byte(prefix)
	for n < want {
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		k, err := conn.Read(buf)
		if err != nil {
			break
		}
		chunk := append(tail, buf[:k]...)
		n += bytes.Count(chunk, p)
		// A prefix split between two reads is counted with the next.
		tail = append([]byte(nil), chunk[max(0, len(chunk)-len(p)+1):]...)
		n -= bytes.Count(tail, p)
		time.Sleep(pause)
	}
	return n + bytes.Count(tail, p)
}

// TestRouteSlowPeerCounted: a route cut off as a slow consumer counts in
// /varz slow_consumer_stats.routes, not in clients.
func TestRouteSlowPeerCounted(t *testing.T) {
	s := RunServer(t, server.Options{MaxPayload: 64 << 10, MaxPending: 256 << 10, HTTPPort: server.RandomPort,
		Cluster: server.ClusterOptions{Name: "slow", Port: server.RandomPort}})
	r := dialRoute(t, s)
	r.register("slow", "NSLOWCOUNTED")
	r.send("RS+ $G big\r\n")
	require.Eventually(t, func() bool { return s.HasInterest("big") }, 5*time.Second, 5*time.Millisecond)
	pub := Connect(t, s)
	payload := make([]byte, 32<<10)
	deadline := time.Now().Add(20 * time.Second)
	for s.NumRoutes() == 1 && time.Now().Before(deadline) {
		require.NoError(t, pub.Publish("big", payload))
	}
	require.Zero(t, s.NumRoutes(), "the route that does not read is cut off")
	require.Equal(t, int64(1), s.RouteSlowConsumers())
	var vz struct {
		Slow  int64 `json:"slow_consumers"`
		Stats struct {
			Clients int64 `json:"clients"`
			Routes  int64 `json:"routes"`
		} `json:"slow_consumer_stats"`
	}
	getJSON(t, "http://"+s.MonitorAddr().String()+"/varz", &vz)
	require.Equal(t, int64(1), vz.Slow, "slow_consumers counts every kind, as nats-server's")
	require.Equal(t, int64(1), vz.Stats.Routes)
	require.Zero(t, vz.Stats.Clients)
}
