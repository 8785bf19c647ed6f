package server_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/server"
)

// TestClusterHeaderlessSubscriber: a subscriber that did not ask for
// headers gets a message with headers from another server as the payload
// alone, in a MSG (not an HMSG).
func TestClusterHeaderlessSubscriber(t *testing.T) {
	c := clustertest.Start(t, 2, server.Options{})
	raw := DialRaw(t, c.Servers[1])
	raw.Send("CONNECT {\"verbose\":false,\"headers\":false}\r\nSUB hl 1\r\nPING\r\n")
	raw.Expect("PONG")
	c.WaitInterest(t, "hl", 1)
	pub := c.Connect(t, 0)
	m := nats.NewMsg("hl")
	m.Header.Set("A", "1")
	m.Data = []byte("body")
	require.NoError(t, pub.PublishMsg(m))
	require.NoError(t, pub.Flush())
	raw.Expect("MSG hl 1 4", "body")
}

// readRoute reads a raw route's lines until one starts with prefix, and
// returns it and the line after it (the payload).
func (r *rawRoute) readUntil(prefix string) (line, payload string) {
	r.t.Helper()
	for {
		l := r.readLine()
		switch {
		case strings.HasPrefix(l, prefix):
			return l, r.readLine()
		case l == "PING":
			r.send("PONG\r\n")
		}
	}
}

// TestRouteOneMessagePerPeer: a peer with plain interest and members of
// two queue groups matching one subject gets the message once, in one
// RMSG naming both groups; and an RMSG naming a group reaches the local
// plain subscriber and one member of that group only.
func TestRouteOneMessagePerPeer(t *testing.T) {
	s := RunServer(t, server.Options{Cluster: server.ClusterOptions{Name: "one", Port: server.RandomPort}})
	r := dialRoute(t, s)
	r.register("one", "NONEPERPEER")
	r.send("RS+ $G pq\r\nRS+ $G pq g1 2\r\nRS+ $G pq g3 1\r\nRS+ $G pq.> g2 1\r\nRS+ $G pq.*\r\n")
	require.Eventually(t, func() bool { return s.NumInterest("pq") == 3 && s.NumInterest("pq.x") == 2 },
		5*time.Second, 5*time.Millisecond)
	pub := Connect(t, s)
	require.NoError(t, pub.Publish("pq", []byte("hello")))
	require.NoError(t, pub.Flush())
	line, payload := r.readUntil("RMSG ")
	require.Contains(t, []string{"RMSG $G pq | g1 g3 5", "RMSG $G pq | g3 g1 5"}, line,
		"plain interest and two queue groups in one message")
	require.Equal(t, "hello", payload)
	require.NoError(t, pub.Publish("pq.x", []byte("hi")))
	line, _ = r.readUntil("RMSG ")
	require.Equal(t, "RMSG $G pq.x | g2 2", line, "pq.* and pq.> g2: one message for both")

	// The other way: the peer sends one RMSG for group a, with a reply.
	nc := Connect(t, s)
	plain, err := nc.SubscribeSync("in")
	require.NoError(t, err)
	var members []*nats.Subscription
	for range 2 {
		m, err := nc.QueueSubscribeSync("in", "a")
		require.NoError(t, err)
		members = append(members, m)
	}
	other, err := nc.QueueSubscribeSync("in", "b")
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	r.send("RMSG $G in + reply.x a 3\r\nabc\r\n")
	m, err := plain.NextMsg(2 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "reply.x", m.Reply)
	got := 0
	for _, q := range members {
		if _, err := q.NextMsg(200 * time.Millisecond); err == nil {
			got++
		}
	}
	require.Equal(t, 1, got, "one member of group a")
	_, err = other.NextMsg(100 * time.Millisecond)
	require.ErrorIs(t, err, nats.ErrTimeout, "group b was not chosen for this server")
}

// TestClusterLameDuckClientsMove: the clients of a server in lame duck
// mode reconnect to a peer (learned from connect_urls) and their
// subscriptions work there.
func TestClusterLameDuckClientsMove(t *testing.T) {
	c := clustertest.Start(t, 3, server.Options{LameDuckDuration: time.Second, LameDuckGracePeriod: 200 * time.Millisecond})
	moved := make(chan string, 1)
	nc, err := nats.Connect(c.URL(0), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			select {
			case moved <- nc.ConnectedUrl():
			default:
			}
		}))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	require.Eventually(t, func() bool { return len(nc.DiscoveredServers()) == 2 }, 5*time.Second, 10*time.Millisecond)
	sub, err := nc.SubscribeSync("ldm.move")
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	c.WaitInterest(t, "ldm.move", 0)

	s0 := c.Servers[0]
	done := make(chan error, 1)
	go func() { done <- s0.LameDuck(context.Background()) }()
	var url string
	select {
	case url = <-moved:
	case <-time.After(10 * time.Second):
		t.Fatal("the client of the lame duck server did not move")
	}
	require.NotEqual(t, c.URL(0), url)
	require.NoError(t, <-done)
	c.Servers[0] = nil
	now := 1
	if url == c.URL(2) {
		now = 2
	}
	c.WaitInterest(t, "ldm.move", now)
	pub := c.Connect(t, 3-now)
	require.NoError(t, pub.Publish("ldm.move", []byte("here")))
	requireNext(t, sub, "here")
}

// TestClusterClientLearnsLateServer: a server that joins after a client
// connected is told to the client in an asynchronous INFO, and a server
// that leaves is taken out of it.
func TestClusterClientLearnsLateServer(t *testing.T) {
	c := clustertest.Start(t, 2, server.Options{})
	nc := c.Connect(t, 0)
	require.Eventually(t, func() bool { return slices.Contains(nc.DiscoveredServers(), c.URL(1)) }, 5*time.Second, 10*time.Millisecond)
	late := RunServer(t, server.Options{Cluster: server.ClusterOptions{Name: "test", Host: "127.0.0.1", Port: server.RandomPort,
		Routes: []string{c.Servers[0].RouteURL()}}})
	require.Eventually(t, func() bool { return slices.Contains(nc.DiscoveredServers(), late.ClientURL()) }, 5*time.Second, 10*time.Millisecond,
		"the client learns the server that joined: %v", nc.DiscoveredServers())
	require.Eventually(t, func() bool { return late.NumRoutes() == 2 }, 5*time.Second, 10*time.Millisecond, "it joined the whole mesh")
	require.NoError(t, late.Shutdown(context.Background()))
	require.Eventually(t, func() bool { return !slices.Contains(nc.DiscoveredServers(), late.ClientURL()) }, 5*time.Second, 10*time.Millisecond,
		"the server that left is forgotten: %v", nc.DiscoveredServers())
}
