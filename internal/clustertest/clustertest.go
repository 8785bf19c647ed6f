// Package clustertest starts in-process Skiff clusters for tests: N
// servers on 127.0.0.1 with random ports, joined by routes the way an
// operator joins them (the seed pattern: the first server starts alone,
// the others get its route URL), and helpers to wait for the mesh and for
// interest to reach every server, and to stop and restart servers.
//
//	c := clustertest.Start(t, 3, server.Options{})
//	nc := c.Connect(t, 1)                     // a nats.go client on server 1
//	c.WaitInterest(t, "orders.new", 1)        // every server knows of server 1's subscriber
//
// A Cluster belongs to the test goroutine.
package clustertest

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/server"
)

// Wait bounds every wait of the helpers.
const Wait = 10 * time.Second

// Cluster is a set of servers joined by routes.
type Cluster struct {
	// Servers are the cluster's servers; a stopped one is nil.
	Servers []*server.Server
	opts    []server.Options
	setup   Setup
	// stops are the running servers' teardowns, from their Setup.
	stops []func()
}

// Setup runs for server i after it is created and before it starts, at
// Start and at every Restart: a test attaches the layers it tests (the
// raft layer, JetStream) to the server there. What it returns, if not
// nil, runs once the server has shut down (at Stop, and when the test
// ends): JetStream is closed there.
type Setup func(t testing.TB, i int, s *server.Server) (teardown func())

// Start starts n servers with base's options (ports, hosts and cluster
// listener are set here) and waits until every server has a route to
// every other. They are shut down when the test ends.
func Start(t testing.TB, n int, base server.Options) *Cluster {
	t.Helper()
	return StartWith(t, n, base, nil)
}

// StartWith is Start with setup run for every server before it starts.
func StartWith(t testing.TB, n int, base server.Options, setup Setup) *Cluster {
	t.Helper()
	return StartEach(t, n, base, nil, setup)
}

// StartEach is StartWith with each, if set, changing server i's options
// (its tags, say) before it is created; the change holds for restarts.
func StartEach(t testing.TB, n int, base server.Options, each func(i int, o *server.Options), setup Setup) *Cluster {
	t.Helper()
	c := &Cluster{Servers: make([]*server.Server, n), opts: make([]server.Options, n), setup: setup, stops: make([]func(), n)}
	for i := range n {
		o := base
		if each != nil {
			each(i, &o)
		}
		o.Host, o.Port, o.HTTPPort = "127.0.0.1", server.RandomPort, base.HTTPPort
		o.ServerName = fmt.Sprintf("s%d", i+1)
		o.Cluster.Host, o.Cluster.Port = "127.0.0.1", server.RandomPort
		if o.Cluster.Name == "" {
			o.Cluster.Name = "test"
		}
		if i > 0 {
			o.Cluster.Routes = []string{c.Servers[0].RouteURL()}
		}
		c.opts[i] = o
		c.start(t, i)
	}
	c.WaitFormed(t)
	return c
}

func (c *Cluster) start(t testing.TB, i int) {
	t.Helper()
	o := c.opts[i]
	if o.Logger == nil && os.Getenv("SKIFF_TEST_LOG") != "" {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("server", o.ServerName)
	}
	s, err := server.New(o)
	require.NoError(t, err)
	var teardown func()
	if c.setup != nil {
		teardown = c.setup(t, i, s)
	}
	stop := func() {
		shutdown(s)
		if teardown != nil {
			teardown()
		}
	}
	c.stops[i] = sync.OnceFunc(stop)
	t.Cleanup(c.stops[i])
	require.NoError(t, s.Start())
	c.Servers[i] = s
	// A restart reuses the ports: clients and peers know these.
	c.opts[i].Port = portOf(s.Addr().String())
	c.opts[i].Cluster.Port = portOf(s.RouteURL())
}

// portOf returns the port of a host:port or of a URL's.
func portOf(addr string) int {
	if u, err := url.Parse(addr); err == nil && u.Port() != "" {
		addr = u.Host
	}
	_, p, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(p)
	return n
}

func shutdown(s *server.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	_ = s.Shutdown(ctx)
}

// Live returns the servers running.
func (c *Cluster) Live() []*server.Server {
	var live []*server.Server
	for _, s := range c.Servers {
		if s != nil {
			live = append(live, s)
		}
	}
	return live
}

// WaitFormed waits until every running server has a route to every other
// running one.
func (c *Cluster) WaitFormed(t testing.TB) {
	t.Helper()
	live := c.Live()
	require.Eventually(t, func() bool {
		for _, s := range live {
			peers := s.PeerIDs()
			if len(peers) != len(live)-1 {
				return false
			}
			for _, o := range live {
				if o != s && !slices.Contains(peers, o.ID()) {
					return false
				}
			}
		}
		return true
	}, Wait, 10*time.Millisecond, "the cluster did not form a full mesh")
}

// WaitInterest waits until every running server knows that the servers
// holders (indexes) have subscribers for subject, so that a message
// published anywhere reaches them. Without holders it waits until every
// server has some interest, local or a peer's.
func (c *Cluster) WaitInterest(t testing.TB, subject string, holders ...int) {
	t.Helper()
	c.WaitAccountInterest(t, server.GlobalAccountName, subject, holders...)
}

// WaitAccountInterest is WaitInterest for a subject of the named account.
func (c *Cluster) WaitAccountInterest(t testing.TB, account, subject string, holders ...int) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, s := range c.Live() {
			acc, ok := s.LookupAccount(account)
			if !ok {
				return false
			}
			if len(holders) == 0 && !acc.HasInterest(subject) {
				return false
			}
			for _, h := range holders {
				if hs := c.Servers[h]; hs != s && !acc.PeerHasInterest(hs.ID(), subject) {
					return false
				}
			}
		}
		return true
	}, Wait, 5*time.Millisecond, "interest in %q of account %s did not reach every server", subject, account)
}

// WaitNoInterest waits until no running server has interest in subject.
func (c *Cluster) WaitNoInterest(t testing.TB, subject string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, s := range c.Live() {
			if s.HasInterest(subject) {
				return false
			}
		}
		return true
	}, Wait, 5*time.Millisecond, "interest in %q did not leave every server", subject)
}

// Stop shuts server i down.
func (c *Cluster) Stop(t testing.TB, i int) {
	t.Helper()
	require.NotNil(t, c.Servers[i], "server %d is not running", i)
	c.stops[i]()
	c.Servers[i] = nil
}

// Restart starts server i again on the same ports (a new server ID, as a
// restarted process has) and waits for the mesh.
func (c *Cluster) Restart(t testing.TB, i int) {
	t.Helper()
	require.Nil(t, c.Servers[i], "server %d is running", i)
	c.start(t, i)
	c.WaitFormed(t)
}

// RestartAll stops every running server, as a power cut stops them
// together, then starts them all again on their ports and waits for the
// mesh.
func (c *Cluster) RestartAll(t testing.TB) {
	t.Helper()
	for i, s := range c.Servers {
		if s != nil {
			c.Stop(t, i)
		}
	}
	for i := range c.Servers {
		c.start(t, i)
	}
	c.WaitFormed(t)
}

// URL returns server i's client URL.
func (c *Cluster) URL(i int) string { return c.Servers[i].ClientURL() }

// Connect connects a nats.go client to server i, closed when the test
// ends. By default it does not reconnect (a client of a cluster would move
// to another server, which discovery told it of); pass options to change
// that.
func (c *Cluster) Connect(t testing.TB, i int, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(c.URL(i), append([]nats.Option{nats.NoReconnect()}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}
