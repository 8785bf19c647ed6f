package server_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/server"
)

// echoLinks is a raft layer for tests: it admits links whose Meta is
// meta, echoes every line a link sends back with the peer's name in front,
// and counts route changes.
type echoLinks struct {
	meta    string
	mu      sync.Mutex
	hellos  []server.RaftHello
	served  chan struct{} // one per Serve that returned
	changes chan struct{}
}

func newEchoLinks(meta string) *echoLinks {
	return &echoLinks{meta: meta, served: make(chan struct{}, 16), changes: make(chan struct{}, 64)}
}

func (e *echoLinks) Admit(h server.RaftHello) error {
	if h.Meta != e.meta {
		return fmt.Errorf("meta group %q is not %q", h.Meta, e.meta)
	}
	return nil
}

func (e *echoLinks) Serve(h server.RaftHello, conn net.Conn) {
	defer func() { e.served <- struct{}{} }()
	e.mu.Lock()
	e.hellos = append(e.hellos, h)
	e.mu.Unlock()
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		if _, err := io.WriteString(conn, h.Name+": "+line); err != nil {
			return
		}
	}
}

func (e *echoLinks) RoutesChanged() {
	select {
	case e.changes <- struct{}{}:
	default:
	}
}

// peerNamed returns s's route peer called name.
func peerNamed(t *testing.T, s *server.Server, name string) server.RoutePeer {
	t.Helper()
	for _, p := range s.Routes() {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("%s has no route to %s: %+v", s.Name(), name, s.Routes())
	return server.RoutePeer{}
}

// TestRaftLink: a raft link dialed to a peer's cluster listener is handed
// to the peer's raft layer after the handshake, carries bytes both ways,
// names its dialer, and leaves the routes working; Routes names every
// peer, and Shutdown closes the links it serves.
func TestRaftLink(t *testing.T) {
	c := clustertest.Start(t, 3, server.Options{})
	links := newEchoLinks("m1")
	c.Servers[1].HandleRaftLinks(links)

	p := peerNamed(t, c.Servers[0], "s2")
	require.Equal(t, []string{"s2", "s3"}, names(c.Servers[0].Routes()))
	conn, name, err := c.Servers[0].DialRaftLink(p, "m1")
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	require.Equal(t, "s2", name)

	r := bufio.NewReader(conn)
	for i := range 3 {
		_, err := fmt.Fprintf(conn, "frame %d\n", i)
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("s1: frame %d\n", i), line)
	}
	links.mu.Lock()
	require.Len(t, links.hellos, 1)
	h := links.hellos[0]
	links.mu.Unlock()
	require.Equal(t, "s1", h.Name)
	require.Equal(t, c.Servers[0].ID(), h.ServerID)
	require.Equal(t, "test", h.Cluster)

	// The routes are untouched: a message still crosses them.
	sub := c.Connect(t, 1)
	s, err := sub.SubscribeSync("after.link")
	require.NoError(t, err)
	require.NoError(t, sub.Flush())
	c.WaitInterest(t, "after.link", 1)
	pub := c.Connect(t, 0)
	require.NoError(t, pub.Publish("after.link", []byte("x")))
	_, err = s.NextMsg(5 * time.Second)
	require.NoError(t, err)

	// Shutdown closes the link: Serve returns and the dialer reads EOF.
	c.Stop(t, 1)
	select {
	case <-links.served:
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return at Shutdown")
	}
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = r.ReadString('\n')
	require.Error(t, err)
	require.False(t, errors.Is(err, net.ErrClosed), "the peer closed it, not us")
}

func names(ps []server.RoutePeer) []string {
	var n []string
	for _, p := range ps {
		n = append(n, p.Name)
	}
	return n
}

// TestRaftLinkRoutesChanged: the raft layer hears when a route goes and
// when it comes back.
func TestRaftLinkRoutesChanged(t *testing.T) {
	c := clustertest.Start(t, 2, server.Options{})
	links := newEchoLinks("m")
	c.Servers[0].HandleRaftLinks(links)
	c.Stop(t, 1)
	waitChange(t, links)
	require.Empty(t, c.Servers[0].Routes())
	c.Restart(t, 1)
	c.WaitFormed(t)
	waitChange(t, links)
	require.Equal(t, []string{"s2"}, names(c.Servers[0].Routes()))
}

func waitChange(t *testing.T, l *echoLinks) {
	t.Helper()
	select {
	case <-l.changes:
	case <-time.After(clustertest.Wait):
		t.Fatal("no RoutesChanged")
	}
}

// TestRaftLinkRefused: a link is refused, with the reason, when its
// credentials or cluster name are wrong, when the peer has no raft layer,
// or when the raft layer does not admit it; nothing is served then.
func TestRaftLinkRefused(t *testing.T) {
	secured := server.Options{}
	secured.Cluster.Username, secured.Cluster.Password = "route", "s3cret"
	tests := []struct {
		name     string
		base     server.Options
		register bool
		meta     string
		dial     func(p *server.RoutePeer) // changes the peer as dialed
		want     string
	}{
		{name: "no raft layer", meta: "m", want: "raft links not accepted"},
		{name: "not admitted", register: true, meta: "other", want: `meta group "other" is not "m"`},
		{name: "admitted", register: true, meta: "m"},
		{name: "secured cluster", base: secured, register: true, meta: "m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := clustertest.Start(t, 2, tt.base)
			links := newEchoLinks("m")
			if tt.register {
				c.Servers[1].HandleRaftLinks(links)
			}
			conn, _, err := c.Servers[0].DialRaftLink(peerNamed(t, c.Servers[0], "s2"), tt.meta)
			if tt.want == "" {
				require.NoError(t, err)
				_ = conn.Close()
				return
			}
			require.ErrorIs(t, err, server.ErrRaftLinkRefused)
			require.ErrorContains(t, err, tt.want)
			require.Nil(t, conn)
			select {
			case <-links.served:
				t.Fatal("a refused link was served")
			default:
			}
		})
	}
}

// TestRaftLinkHandshakeRaw: the listener's side of the handshake as bytes:
// wrong credentials and another cluster are refused with the route's
// errors, a link is answered +OK, a connection that says nothing gets the
// authentication timeout, and a route's first line split over many writes
// still makes a route.
func TestRaftLinkHandshakeRaw(t *testing.T) {
	o := server.Options{Host: "127.0.0.1", Port: server.RandomPort}
	o.Cluster.Host, o.Cluster.Port, o.Cluster.Name = "127.0.0.1", server.RandomPort, "c"
	o.Cluster.Username, o.Cluster.Password = "route", "pw"
	o.Cluster.AuthTimeout = 300 * time.Millisecond
	s := RunServer(t, o)
	s.HandleRaftLinks(newEchoLinks(""))
	addr := strings.TrimPrefix(s.RouteURL(), "nats-route://")

	dial := func(t *testing.T) (net.Conn, *bufio.Reader) {
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		require.NoError(t, conn.SetDeadline(time.Now().Add(5*time.Second)))
		r := bufio.NewReader(conn)
		info, err := r.ReadString('\n')
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(info, "INFO {"), info)
		return conn, r
	}
	tests := []struct {
		name, connect, want string
	}{
		{"link", `{"raft":true,"name":"x","cluster":"c","user":"route","pass":"pw"}`, "+OK\r\n"},
		{"bad password", `{"raft":true,"name":"x","cluster":"c","user":"route","pass":"no"}`, "-ERR 'Authorization Violation'\r\n"},
		{"other cluster", `{"raft":true,"name":"x","cluster":"d","user":"route","pass":"pw"}`, "-ERR 'Cluster Name Mismatch: \"d\" is not \"c\"'\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, r := dial(t)
			_, err := io.WriteString(conn, "CONNECT "+tt.connect+"\r\n")
			require.NoError(t, err)
			line, err := r.ReadString('\n')
			require.NoError(t, err)
			require.Equal(t, tt.want, line)
		})
	}
	t.Run("silent", func(t *testing.T) {
		_, r := dial(t)
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "-ERR 'Authentication Timeout'\r\n", line)
		_, err = r.ReadString('\n')
		require.ErrorIs(t, err, io.EOF)
	})
	t.Run("route line in pieces", func(t *testing.T) {
		conn, r := dial(t)
		for _, piece := range []string{"CO", "NNECT ", `{"name":"y","cluster":"c",`, `"user":"route","pass":"pw"}`, "\r",
			"\nINFO {\"server_id\":\"FAKE\",\"server_name\":\"y\",\"cluster\":\"c\",\"host\":\"127.0.0.1\",\"port\":1}\r\nPING\r\n"} {
			_, err := io.WriteString(conn, piece)
			require.NoError(t, err)
			time.Sleep(5 * time.Millisecond)
		}
		// Registered: the CONNECT read before the route started counted.
		for {
			line, err := r.ReadString('\n')
			require.NoError(t, err)
			require.False(t, strings.HasPrefix(line, "-ERR"), line)
			if line == "PONG\r\n" {
				break
			}
		}
		require.Equal(t, []string{"y"}, names(s.Routes()))
	})
}

// TestConfiguredRoutesUp: a server sees every configured route up once
// each leads to a registered route; a server configured with none sees
// them up at once; a peer gone takes its route down.
func TestConfiguredRoutesUp(t *testing.T) {
	c := clustertest.Start(t, 3, server.Options{})
	for _, s := range c.Servers {
		require.True(t, s.ConfiguredRoutesUp(), s.Name())
	}
	c.Stop(t, 0) // the seed every other server was configured with
	require.Eventually(t, func() bool { return !c.Servers[1].ConfiguredRoutesUp() },
		clustertest.Wait, 10*time.Millisecond)
	c.Restart(t, 0)
	require.Eventually(t, func() bool { return c.Servers[1].ConfiguredRoutesUp() },
		clustertest.Wait, 10*time.Millisecond)

	alone, err := server.New(server.Options{})
	require.NoError(t, err)
	require.False(t, alone.ConfiguredRoutesUp(), "a server without a cluster has no routes")
}
