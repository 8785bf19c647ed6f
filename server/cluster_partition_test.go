package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/internal/faultproxy"
	"github.com/skiffmq/skiff/server"
)

// Partition tests: two servers whose only route runs through a fault
// proxy (a dials b through it; b never dials, and with two servers no
// gossip leads around it).

// Route pings in these tests: a black hole is noticed in about
// (partitionPingMax+1) × partitionPing.
const (
	partitionPing    = 100 * time.Millisecond
	partitionPingMax = 2
)

// partitioned starts b, a proxy to b's route listener, and a routed to b
// through the proxy, and waits for the route.
func partitioned(t *testing.T) (a, b *server.Server, p *faultproxy.Proxy) {
	t.Helper()
	co := server.ClusterOptions{Name: "part", Host: "127.0.0.1", Port: server.RandomPort,
		PingInterval: partitionPing, MaxPingsOut: partitionPingMax}
	b = RunServer(t, server.Options{ServerName: "b", Cluster: co, HTTPPort: server.RandomPort})
	p = faultproxy.Start(t, hostOf(t, b.RouteURL()))
	co.Routes = []string{"nats-route://" + p.Addr()}
	a = RunServer(t, server.Options{ServerName: "a", Cluster: co})
	waitRouted(t, a, b)
	return a, b, p
}

func hostOf(t *testing.T, routeURL string) string {
	u, err := server.ParseRouteURL(routeURL)
	require.NoError(t, err)
	return u.Host
}

// waitRouted waits until a and b have their route.
func waitRouted(t *testing.T, a, b *server.Server) {
	t.Helper()
	require.Eventually(t, func() bool { return a.NumRoutes() == 1 && b.NumRoutes() == 1 },
		clustertest.Wait, 5*time.Millisecond, "no route between a and b")
}

// waitApart waits until neither a nor b has a route, and returns how long
// that took.
func waitApart(t *testing.T, a, b *server.Server, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	require.Eventually(t, func() bool { return a.NumRoutes() == 0 && b.NumRoutes() == 0 },
		within, 5*time.Millisecond, "the partition was not noticed in %v", within)
	return time.Since(start)
}

// waitPeerInterest waits until s has (or, with !want, has not) the peer's
// interest in subject.
func waitPeerInterest(t *testing.T, s, peer *server.Server, subject string, want bool) {
	t.Helper()
	require.Eventually(t, func() bool { return s.PeerHasInterest(peer.ID(), subject) == want },
		clustertest.Wait, 5*time.Millisecond, "%s: interest of %s in %q should be %v", s.Name(), peer.Name(), subject, want)
}

// TestClusterCutAndHeal: a cut route is noticed at once by both sides,
// each drops the other's interest, and once healed the route comes back,
// interest converges and messages flow again.
func TestClusterCutAndHeal(t *testing.T) {
	a, b, p := partitioned(t)
	subB := Connect(t, b)
	sb, err := subB.SubscribeSync("cut.b")
	require.NoError(t, err)
	require.NoError(t, subB.Flush())
	subA := Connect(t, a)
	sa, err := subA.SubscribeSync("cut.a")
	require.NoError(t, err)
	require.NoError(t, subA.Flush())
	waitPeerInterest(t, a, b, "cut.b", true)
	waitPeerInterest(t, b, a, "cut.a", true)

	p.Cut()
	took := waitApart(t, a, b, 2*time.Second)
	t.Logf("cut noticed in %v", took)
	require.False(t, a.HasInterest("cut.b"), "a dropped b's interest")
	require.False(t, b.HasInterest("cut.a"), "b dropped a's interest")

	p.Heal()
	waitRouted(t, a, b)
	waitPeerInterest(t, a, b, "cut.b", true)
	waitPeerInterest(t, b, a, "cut.a", true)
	pubA, pubB := Connect(t, a), Connect(t, b)
	require.NoError(t, pubA.Publish("cut.b", []byte("a to b")))
	require.NoError(t, pubB.Publish("cut.a", []byte("b to a")))
	requireNext(t, sb, "a to b")
	requireNext(t, sa, "b to a")
}

// TestClusterUnsubscribeDuringPartition: interest that changes while the
// route is down (cut) or silently dropping everything (black hole, where
// the RS- sent is lost) converges once healed: no stale interest, so
// nothing forwarded to a server that no longer wants it, and the interest
// that appeared during the partition is there.
func TestClusterUnsubscribeDuringPartition(t *testing.T) {
	for _, fault := range []string{"cut", "black hole"} {
		t.Run(fault, func(t *testing.T) {
			a, b, p := partitioned(t)
			nc := Connect(t, b)
			keep, err := nc.SubscribeSync("u.keep")
			require.NoError(t, err)
			gone, err := nc.SubscribeSync("u.gone")
			require.NoError(t, err)
			qgone, err := nc.QueueSubscribe("u.q", "workers", func(*nats.Msg) {})
			require.NoError(t, err)
			require.NoError(t, nc.Flush())
			for _, subj := range []string{"u.keep", "u.gone", "u.q"} {
				waitPeerInterest(t, a, b, subj, true)
			}

			if fault == "cut" {
				p.Cut()
				waitApart(t, a, b, 2*time.Second)
			} else {
				p.BlackHole()
			}
			require.NoError(t, gone.Unsubscribe())
			require.NoError(t, qgone.Unsubscribe())
			added, err := nc.SubscribeSync("u.added")
			require.NoError(t, err)
			require.NoError(t, nc.Flush())
			if fault == "black hole" {
				// The RS- went into the hole: a still forwards u.gone to b
				// until the route is found stale.
				stale := a.PeerHasInterest(b.ID(), "u.gone")
				require.True(t, stale || a.NumRoutes() == 0, "the unsubscribe cannot have crossed")
				waitApart(t, a, b, 5*time.Second)
			}

			p.Heal()
			waitRouted(t, a, b)
			waitPeerInterest(t, a, b, "u.keep", true)
			waitPeerInterest(t, a, b, "u.added", true)
			require.False(t, a.PeerHasInterest(b.ID(), "u.gone"), "no stale plain interest")
			require.False(t, a.PeerHasInterest(b.ID(), "u.q"), "no stale queue interest")

			pub := Connect(t, a)
			for _, subj := range []string{"u.gone", "u.q", "u.keep", "u.added"} {
				require.NoError(t, pub.Publish(subj, []byte(subj)))
			}
			require.NoError(t, pub.Flush())
			for _, s := range []*nats.Subscription{keep, added} {
				m, err := s.NextMsg(2 * time.Second)
				require.NoError(t, err)
				require.Equal(t, s.Subject, string(m.Data))
			}
			// Only the two wanted crossed the new route: a forwarded
			// nothing b no longer wants.
			time.Sleep(50 * time.Millisecond)
			require.Equal(t, int64(2), routeInMsgs(t, b, a), "a forwarded only what b wants")
		})
	}
}

// routeInMsgs returns the messages s received on its route from peer,
// from s's /routez.
func routeInMsgs(t *testing.T, s, peer *server.Server) int64 {
	t.Helper()
	var rz struct {
		Routes []struct {
			RemoteID string `json:"remote_id"`
			InMsgs   int64  `json:"in_msgs"`
		} `json:"routes"`
	}
	getJSON(t, "http://"+s.MonitorAddr().String()+"/routez", &rz)
	for _, r := range rz.Routes {
		if r.RemoteID == peer.ID() {
			return r.InMsgs
		}
	}
	t.Fatalf("%s has no route from %s", s.Name(), peer.Name())
	return 0
}

// TestClusterBlackHoleDetected: a route that silently drops everything
// is noticed by both sides through their pings, within a bounded time set
// by the cluster's ping_interval and ping_max, and re-established once the
// network heals.
func TestClusterBlackHoleDetected(t *testing.T) {
	a, b, p := partitioned(t)
	nc := Connect(t, b)
	sub, err := nc.SubscribeSync("bh")
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	waitPeerInterest(t, a, b, "bh", true)

	p.BlackHole()
	bound := 2 * time.Duration(partitionPingMax+2) * partitionPing // twice the expected, for a loaded machine
	took := waitApart(t, a, b, 5*time.Second)
	t.Logf("black hole noticed by both sides in %v (ping_interval %v, ping_max %d; bound %v)", took, partitionPing, partitionPingMax, bound)
	require.LessOrEqual(t, took, bound)
	require.False(t, a.HasInterest("bh"))

	p.Heal()
	start := time.Now()
	waitRouted(t, a, b)
	waitPeerInterest(t, a, b, "bh", true)
	t.Logf("route re-established %v after the heal", time.Since(start))
	pub := Connect(t, a)
	for k := range 10 {
		require.NoError(t, pub.Publish("bh", fmt.Appendf(nil, "%d", k)))
	}
	for k := range 10 {
		m, err := sub.NextMsg(2 * time.Second)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(k), string(m.Data))
	}
}

// TestClusterAdvertiseThroughProxies: a server's advertised route
// address is what its peers learn, by gossip too, and dial its raft
// links at. b advertises a proxy to its listener; c, seeded with a alone,
// learns of b from a's gossip, and knows b at the proxy whichever of them
// dialed the route kept.
func TestClusterAdvertiseThroughProxies(t *testing.T) {
	co := server.ClusterOptions{Name: "adv", Host: "127.0.0.1", Port: server.RandomPort,
		PingInterval: partitionPing, MaxPingsOut: partitionPingMax}
	bPort := clustertest.FreePorts(t, 1)[0] // known before b starts: its proxy is its advertise
	p := faultproxy.Start(t, fmt.Sprintf("127.0.0.1:%d", bPort))
	a := RunServer(t, server.Options{ServerName: "a", Cluster: co})
	bo := co
	bo.Port, bo.Advertise, bo.Routes = bPort, p.Addr(), []string{a.RouteURL()}
	b := RunServer(t, server.Options{ServerName: "b", Cluster: bo})
	waitRouted(t, a, b)
	require.Equal(t, p.Addr(), peerNamed(t, a, "b").Addr, "a knows b where b advertises")
	ao := co
	ao.Routes = []string{a.RouteURL()}
	c := RunServer(t, server.Options{ServerName: "c", Cluster: ao})
	require.Eventually(t, func() bool { return c.NumRoutes() == 2 && b.NumRoutes() == 2 },
		clustertest.Wait, 5*time.Millisecond, "c learns of b from a")
	require.Equal(t, p.Addr(), peerNamed(t, c, "b").Addr, "c knows b where b advertises")

	// x is configured with y's proxy, and y with x: both dial, and the
	// route of the server with the lower ID is kept. Where y's is, x still
	// dials y's raft link through the proxy its configuration names
	// (before, it took y's listen address, around the proxy).
	for range 20 {
		yPort := clustertest.FreePorts(t, 1)[0]
		py := faultproxy.Start(t, fmt.Sprintf("127.0.0.1:%d", yPort))
		xo := co
		xo.Routes = []string{"nats-route://" + py.Addr()}
		x := RunServer(t, server.Options{ServerName: "x", Cluster: xo})
		yo := co
		yo.Port, yo.Routes = yPort, []string{x.RouteURL()}
		y := RunServer(t, server.Options{ServerName: "y", Cluster: yo})
		waitRouted(t, x, y)
		time.Sleep(200 * time.Millisecond) // the duplicate retired
		peer := peerNamed(t, x, "y")
		_ = x.Shutdown(context.Background())
		_ = y.Shutdown(context.Background())
		py.Close()
		if !peer.Dialed {
			require.Equal(t, py.Addr(), peer.Addr, "x reaches y as configured")
			return
		}
	}
	t.Fatal("the route y dialed was never the one kept")
}
