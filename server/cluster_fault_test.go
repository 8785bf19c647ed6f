package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/server"
)

// TestClusterRestartRejoins: a server shut down leaves the mesh and takes
// its interest with it; started again (a new ID, the same ports) it
// rejoins, learns the whole mesh, and interest converges both ways.
func TestClusterRestartRejoins(t *testing.T) {
	for _, which := range []int{0, 2} { // the seed, and a server that has it as seed
		t.Run(fmt.Sprintf("server=%d", which), func(t *testing.T) {
			c := clustertest.Start(t, 3, server.Options{})
			other := (which + 1) % 3
			victim := c.Connect(t, which)
			_, err := victim.SubscribeSync("r.victim")
			require.NoError(t, err)
			require.NoError(t, victim.Flush())
			c.WaitInterest(t, "r.victim", which)

			c.Stop(t, which)
			c.WaitFormed(t)
			c.WaitNoInterest(t, "r.victim")

			stay := c.Connect(t, other)
			s, err := stay.SubscribeSync("r.stay")
			require.NoError(t, err)
			require.NoError(t, stay.Flush())

			c.Restart(t, which)
			c.WaitInterest(t, "r.stay", other) // what was there before it came back
			back := c.Connect(t, which)
			s2, err := back.SubscribeSync("r.back")
			require.NoError(t, err)
			require.NoError(t, back.Flush())
			c.WaitInterest(t, "r.back", which)

			require.NoError(t, back.Publish("r.stay", []byte("to stay")))
			require.NoError(t, stay.Publish("r.back", []byte("to back")))
			requireNext(t, s, "to stay")
			requireNext(t, s2, "to back")
		})
	}
}

// TestClusterDuplicateRoutes: servers that all list each other dial each
// other at once; each pair keeps exactly one route, and a message still
// arrives once.
func TestClusterDuplicateRoutes(t *testing.T) {
	const n = 3
	// Reserve route ports first, so that every server can list all. A
	// port found free by listening on :0 and closing was taken by another
	// connection before its server bound it ("address already in use",
	// once in a clean-clone make test): portlock's are outside that range.
	ports := clustertest.FreePorts(t, n)
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	var servers []*server.Server
	for i := range n {
		servers = append(servers, RunServer(t, server.Options{ServerName: fmt.Sprint("d", i),
			Cluster: server.ClusterOptions{Name: "d", Host: "127.0.0.1", Port: ports[i], Routes: routes}}))
	}
	require.Eventually(t, func() bool {
		for _, s := range servers {
			if s.NumRoutes() != n-1 {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond)
	// Stable: no route flapping once settled.
	time.Sleep(300 * time.Millisecond)
	for _, s := range servers {
		require.Equal(t, n-1, s.NumRoutes())
	}
	sub := Connect(t, servers[2])
	s, err := sub.SubscribeSync("dup")
	require.NoError(t, err)
	require.NoError(t, sub.Flush())
	require.Eventually(t, func() bool { return servers[0].HasInterest("dup") }, 5*time.Second, 5*time.Millisecond)
	pub := Connect(t, servers[0])
	require.NoError(t, pub.Publish("dup", []byte("x")))
	_, err = s.NextMsg(2 * time.Second)
	require.NoError(t, err)
	_, err = s.NextMsg(200 * time.Millisecond)
	require.ErrorIs(t, err, nats.ErrTimeout)
}

// TestClusterClientDiscovery: a client connected to one server learns the
// others' URLs from INFO (and of a server joining later, asynchronously),
// and when its server shuts down it reconnects to another within 2s and
// its subscription works again.
func TestClusterClientDiscovery(t *testing.T) {
	c := clustertest.Start(t, 3, server.Options{})
	reconnected := make(chan struct{}, 1)
	nc, err := nats.Connect(c.URL(0), nats.ReconnectWait(50*time.Millisecond), nats.MaxReconnects(-1),
		nats.ReconnectHandler(func(*nats.Conn) { reconnected <- struct{}{} }),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { t.Logf("disconnected: %v", err) }),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) { t.Logf("reconnect error: %v", err) }))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	want := []string{c.URL(1), c.URL(2)}
	slices.Sort(want)
	require.Eventually(t, func() bool {
		got := nc.DiscoveredServers()
		slices.Sort(got)
		return slices.Equal(got, want)
	}, 5*time.Second, 10*time.Millisecond, "discovered %v", nc.DiscoveredServers())

	sub, err := nc.SubscribeSync("disc")
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	c.WaitInterest(t, "disc", 0)

	url0 := c.URL(0)
	start := time.Now()
	c.Stop(t, 0)
	t.Logf("stopped in %v", time.Since(start))
	select {
	case <-reconnected:
	case <-time.After(2 * time.Second):
		t.Fatal("no reconnect to another server within 2s")
	}
	t.Logf("reconnected in %v to %s", time.Since(start), nc.ConnectedUrl())
	require.NotEqual(t, url0, nc.ConnectedUrl())
	now := 1
	if strings.HasSuffix(nc.ConnectedUrl(), c.URL(2)[len("nats://"):]) {
		now = 2
	}
	c.WaitInterest(t, "disc", now)
	pub := c.Connect(t, 1)
	require.NoError(t, pub.Publish("disc", []byte("after")))
	requireNext(t, sub, "after")
}

// rawRoute speaks the route protocol by hand.
type rawRoute struct {
	t    testing.TB
	conn net.Conn
	br   *bufio.Reader
	info map[string]any
}

func dialRoute(t testing.TB, s *server.Server) *rawRoute {
	t.Helper()
	u, err := url.Parse(s.RouteURL())
	require.NoError(t, err)
	conn, err := net.Dial("tcp", u.Host)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	r := &rawRoute{t: t, conn: conn, br: bufio.NewReader(conn)}
	line := r.readLine()
	require.True(t, strings.HasPrefix(line, "INFO "), line)
	require.NoError(t, json.Unmarshal([]byte(line[5:]), &r.info))
	return r
}

func (r *rawRoute) send(s string) {
	r.t.Helper()
	_, err := r.conn.Write([]byte(s))
	require.NoError(r.t, err)
}

func (r *rawRoute) readLine() string {
	r.t.Helper()
	_ = r.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := r.br.ReadString('\n')
	require.NoError(r.t, err, "got %q", line)
	return strings.TrimSuffix(line, "\r\n")
}

// register makes the connection a registered route of a made-up server.
func (r *rawRoute) register(cluster, id string) {
	r.send(fmt.Sprintf("CONNECT {\"server_id\":%q,\"cluster\":%q}\r\nINFO {\"server_id\":%q,\"cluster\":%q,\"host\":\"127.0.0.1\",\"port\":1}\r\n",
		id, cluster, id, cluster))
}

// expectErrAndClose reads until the server closes, requiring want among
// the last lines.
func (r *rawRoute) expectErrAndClose(want string) {
	r.t.Helper()
	var lines []string
	_ = r.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		line, err := r.br.ReadString('\n')
		if err != nil {
			break
		}
		lines = append(lines, strings.TrimSuffix(line, "\r\n"))
	}
	require.Contains(r.t, lines, want)
}

// TestRouteGarbage: a route that sends garbage, before or after it is
// registered, or speaks out of turn, is closed with an -ERR; the server
// carries on.
func TestRouteGarbage(t *testing.T) {
	s := RunServer(t, server.Options{Cluster: server.ClusterOptions{Name: "g", Port: server.RandomPort}})
	for _, tc := range []struct{ name, send, err string }{
		{"garbage first", "HELLO\r\n", "-ERR 'Unknown Protocol Operation'"},
		{"client protocol", "SUB foo 1\r\n", "-ERR 'Unknown Protocol Operation'"},
		{"interest before CONNECT", "RS+ $G foo\r\n", "-ERR 'Authorization Violation'"},
		{"INFO before CONNECT", "INFO {\"server_id\":\"X\"}\r\n", "-ERR 'Authorization Violation'"},
		{"another cluster", "CONNECT {\"server_id\":\"X\",\"cluster\":\"other\"}\r\n", `-ERR 'Cluster Name Mismatch: "other" is not "g"'`},
		{"bad INFO", "CONNECT {\"server_id\":\"X\",\"cluster\":\"g\"}\r\nINFO nope\r\n", "-ERR 'Invalid Route INFO'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRoute(t, s)
			r.send(tc.send)
			r.expectErrAndClose(tc.err)
		})
	}
	for _, tc := range []struct{ name, send, err string }{
		{"garbage after registering", "\x00\x01\x02\r\n", "-ERR 'Unknown Protocol Operation'"},
		{"bad interest", "RS+ $G foo..bar\r\n", "-ERR 'Invalid Subject'"},
		{"short payload", "RMSG $G foo 3\r\nhello\r\n", "-ERR 'Unknown Protocol Operation'"},
		{"second CONNECT", "CONNECT {}\r\n", "-ERR 'Unexpected Route CONNECT'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := dialRoute(t, s)
			r.register("g", "NRAW"+strings.ReplaceAll(tc.name, " ", ""))
			require.Eventually(t, func() bool { return s.NumRoutes() == 1 }, 5*time.Second, 5*time.Millisecond)
			r.send(tc.send)
			r.expectErrAndClose(tc.err)
			require.Eventually(t, func() bool { return s.NumRoutes() == 0 }, 5*time.Second, 5*time.Millisecond)
		})
	}
	nc := Connect(t, s)
	require.NoError(t, nc.Flush(), "the server carries on")
}

// TestRouteAuthorization: with a cluster user, a peer must present it.
func TestRouteAuthorization(t *testing.T) {
	opts := server.ClusterOptions{Name: "a", Port: server.RandomPort, Username: "ru", Password: "rp"}
	s := RunServer(t, server.Options{Cluster: opts})
	r := dialRoute(t, s)
	require.Equal(t, true, r.info["auth_required"])
	r.send("CONNECT {\"server_id\":\"X\",\"cluster\":\"a\",\"user\":\"ru\",\"pass\":\"wrong\"}\r\n")
	r.expectErrAndClose("-ERR 'Authorization Violation'")

	// A real peer with the credentials in its route URL joins.
	u, err := url.Parse(s.RouteURL())
	require.NoError(t, err)
	peer := RunServer(t, server.Options{Cluster: server.ClusterOptions{Name: "a", Port: server.RandomPort,
		Routes: []string{"nats-route://ru:rp@" + u.Host}}})
	require.Eventually(t, func() bool { return s.NumRoutes() == 1 && peer.NumRoutes() == 1 }, 5*time.Second, 5*time.Millisecond)
	// One without them does not. The stranger registers s for the moment
	// between s's INFO and s's -ERR (the route protocol has no positive
	// answer to CONNECT, in nats-server either), so what is checked is s:
	// for the whole wait, its one route is the peer.
	stranger := RunServer(t, server.Options{Cluster: server.ClusterOptions{Name: "a", Port: server.RandomPort,
		Routes: []string{s.RouteURL()}}})
	require.Never(t, func() bool {
		ids := s.PeerIDs()
		return len(ids) != 1 || ids[0] != peer.ID()
	}, 300*time.Millisecond, 2*time.Millisecond, "s accepted the stranger %s", stranger.ID())
}

// TestRouteSlowPeer: a peer that stops reading is cut off once its
// pending bytes pass MaxPending, like a slow client: the server's memory
// stays bounded and its clients are not held up. It counts in /varz
// slow_consumer_stats.routes, not in clients.
func TestRouteSlowPeer(t *testing.T) {
	s := RunServer(t, server.Options{MaxPayload: 64 << 10, MaxPending: 256 << 10, HTTPPort: server.RandomPort,
		Cluster: server.ClusterOptions{Name: "slow", Port: server.RandomPort}})
	r := dialRoute(t, s)
	r.register("slow", "NSLOWPEER")
	r.send("RS+ $G big\r\n")
	require.Eventually(t, func() bool { return s.HasInterest("big") }, 5*time.Second, 5*time.Millisecond)
	// The peer never reads again.
	pub := Connect(t, s)
	payload := make([]byte, 32<<10)
	deadline := time.Now().Add(20 * time.Second)
	for s.NumRoutes() == 1 && time.Now().Before(deadline) {
		require.NoError(t, pub.Publish("big", payload))
	}
	require.Zero(t, s.NumRoutes(), "the slow route was cut off")
	require.False(t, s.HasInterest("big"), "its interest went with it")
	require.NoError(t, pub.Flush(), "the publisher carries on")

	require.Equal(t, int64(1), s.RouteSlowConsumers())
	vz := slowVarz(t, s)
	require.Equal(t, int64(1), vz.Slow, "slow_consumers counts every kind, as nats-server's")
	require.Equal(t, int64(1), vz.Stats.Routes)
	require.Zero(t, vz.Stats.Clients)
}

// TestClusterLameDuck: a server entering lame duck mode tells its peers,
// which stop advertising it to their clients; when it leaves, they drop
// its interest.
func TestClusterLameDuck(t *testing.T) {
	c := clustertest.Start(t, 3, server.Options{LameDuckDuration: 2 * time.Second, LameDuckGracePeriod: time.Second})
	nc := c.Connect(t, 1)
	url0 := c.URL(0)
	require.Eventually(t, func() bool { return slices.Contains(nc.DiscoveredServers(), url0) }, 5*time.Second, 10*time.Millisecond)
	leaving := c.Connect(t, 0)
	_, err := leaving.SubscribeSync("ldm")
	require.NoError(t, err)
	require.NoError(t, leaving.Flush())
	c.WaitInterest(t, "ldm", 0)

	done := make(chan error, 1)
	s0 := c.Servers[0]
	go func() { done <- s0.LameDuck(t.Context()) }()
	require.Eventually(t, func() bool { return !slices.Contains(nc.DiscoveredServers(), url0) }, 5*time.Second, 10*time.Millisecond,
		"server 1's client still lists the leaving server: %v", nc.DiscoveredServers())
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("lame duck did not finish")
	}
	c.Servers[0] = nil
	c.WaitFormed(t)
	c.WaitNoInterest(t, "ldm")
}
