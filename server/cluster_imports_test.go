package server_test

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/server"
)

// routeFrame is a line a raw route read, with its payload for a message.
type routeFrame struct {
	line    string
	payload string
}

// sync sends a PING and returns what the server sent before its PONG,
// answering its PINGs: everything the server did on what the route sent
// before is in it.
func (r *rawRoute) sync() []routeFrame {
	r.t.Helper()
	r.send("PING\r\n")
	var got []routeFrame
	for {
		l := r.readLine()
		switch {
		case l == "PONG":
			return got
		case l == "PING":
			r.send("PONG\r\n")
		case strings.HasPrefix(l, "RMSG ") || strings.HasPrefix(l, "HMSG "):
			f := strings.Fields(l)
			n, err := strconv.Atoi(f[len(f)-1])
			require.NoError(r.t, err, l)
			buf := make([]byte, n+2)
			_ = r.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err = io.ReadFull(r.br, buf)
			require.NoError(r.t, err)
			got = append(got, routeFrame{l, string(buf[:n])})
		default:
			got = append(got, routeFrame{line: l})
		}
	}
}

// lines returns the frames' lines that start with prefix.
func lines(frames []routeFrame, prefix string) []string {
	var out []string
	for _, f := range frames {
		if strings.HasPrefix(f.line, prefix) {
			out = append(out, f.line)
		}
	}
	return out
}

// TestRouteImports: the cluster rules of imports (docs/accounts.md). Only
// the response bridges' interest is told to peers; a message from a route
// crosses no stream or service import (the server it was published on
// did, and sent what it became in the importer's account), but crosses a
// response bridge (the response table is on the requester's server); and
// a response's reply from a route acts for nobody in the account it goes
// back to (no user there can be judged).
func TestRouteImports(t *testing.T) {
	o := importsOptions()
	o.Cluster = server.ClusterOptions{Name: "imp", Port: server.RandomPort}
	s := RunServer(t, o)
	r := dialRoute(t, s)
	r.register("imp", "NIMPORTSPEER")

	// The system account's interest is told; the system imports of A, B
	// and C, service bridges, are not.
	told := slices.DeleteFunc(lines(r.sync(), "RS+ "), func(l string) bool { return strings.HasPrefix(l, "RS+ $SYS ") })
	require.Len(t, told, 3, "the response bridges of A, B and C: %q", told)
	prefix := strings.TrimSuffix(strings.Fields(told[0])[2], ">")
	require.Regexp(t, `^_R_\.[0-9A-Za-z]{6}\.$`, prefix)
	want := []string{"RS+ A " + prefix + ">", "RS+ B " + prefix + ">", "RS+ C " + prefix + ">"}
	slices.Sort(told)
	require.Equal(t, want, told, "no stream or service bridge is told")

	a, b := connectAs(t, s, "a"), connectAs(t, s, "b")
	accA, _ := s.LookupAccount("A")
	accB, _ := s.LookupAccount("B")

	t.Run("a stream import is applied where the message is published", func(t *testing.T) {
		aEvents, err := a.SubscribeSync("events.>")
		require.NoError(t, err)
		bEvents, err := b.SubscribeSync("a.events.>")
		require.NoError(t, err)
		require.NoError(t, a.Flush())
		require.NoError(t, b.Flush())
		require.Equal(t, []string{"RS+ A events.>", "RS+ B a.events.>"}, sorted(lines(r.sync(), "RS+ ")))

		r.send("RMSG A events.remote 1\r\nx\r\n")
		r.sync()
		m, err := aEvents.NextMsg(5 * time.Second)
		require.NoError(t, err)
		require.Equal(t, "events.remote", m.Subject)
		requireNothing(t, bEvents, b)

		// Published here: bridged here, and what it became in B goes to
		// the peer in B.
		r.send("RS+ B a.events.>\r\n")
		r.sync()
		require.Eventually(t, func() bool { return accB.PeerHasInterest("NIMPORTSPEER", "a.events.local") },
			5*time.Second, 5*time.Millisecond)
		require.NoError(t, a.Publish("events.local", []byte("y")))
		require.NoError(t, a.Flush())
		msgs := r.sync()
		require.Equal(t, []string{"RMSG B a.events.local 1"}, lines(msgs, "RMSG "), "once, in the importer's account")
		_, err = bEvents.NextMsg(5 * time.Second)
		require.NoError(t, err)
		r.send("RS- B a.events.>\r\n")
		require.NoError(t, aEvents.Unsubscribe())
		require.NoError(t, bEvents.Unsubscribe())
		r.sync()
	})

	t.Run("a service import is applied where the request is published", func(t *testing.T) {
		svc, err := a.SubscribeSync("svc.echo")
		require.NoError(t, err)
		require.NoError(t, a.Flush())
		r.sync()
		r.send("RMSG B echo _INBOX.remote 1\r\nq\r\n")
		r.sync()
		requireNothing(t, svc, a)
		r.send("RMSG A svc.echo _INBOX.remote 1\r\nq\r\n") // the route itself works
		r.sync()
		_, err = svc.NextMsg(5 * time.Second)
		require.NoError(t, err)
		require.NoError(t, svc.Unsubscribe())
		r.sync()
	})

	t.Run("a response from a route crosses back", func(t *testing.T) {
		inbox, err := b.SubscribeSync("_INBOX.b.>")
		require.NoError(t, err)
		require.NoError(t, b.Flush())
		r.send("RS+ A svc.echo\r\n")
		r.sync()
		require.Eventually(t, func() bool { return accA.PeerHasInterest("NIMPORTSPEER", "svc.echo") },
			5*time.Second, 5*time.Millisecond)

		require.NoError(t, b.PublishRequest("echo", "_INBOX.b.1", []byte("q")))
		require.NoError(t, b.Flush())
		reqs := lines(r.sync(), "HMSG A svc.echo ")
		require.Len(t, reqs, 1, "the request goes to the responder's server in A, with Nats-Request-Info")
		reply := strings.Fields(reqs[0])[3]
		require.True(t, strings.HasPrefix(reply, prefix), "a reply of this server's table: %s", reply)

		r.send("RMSG A " + reply + " 2\r\nok\r\nRMSG A " + reply + " 5\r\nagain\r\nRMSG A " + prefix + "unknown 1\r\nx\r\n")
		r.sync()
		m, err := inbox.NextMsg(5 * time.Second)
		require.NoError(t, err)
		require.Equal(t, "_INBOX.b.1", m.Subject)
		require.Equal(t, "ok", string(m.Data))
		requireNothing(t, inbox, b) // a Singleton is answered once; an unknown reply goes nowhere

		// The responder asks back (its response has a reply): B's answer
		// returns to A on that reply, for nobody, since the user who set
		// it is on the peer.
		type seen struct{ internal, permitted bool }
		back := make(chan seen, 1)
		_, err = accA.SubscribeInternal("orders.q", "", func(m *server.Msg) { back <- seen{m.Internal(), m.Permitted()} })
		require.NoError(t, err)
		require.NoError(t, b.PublishRequest("echo", "_INBOX.b.2", []byte("q")))
		require.NoError(t, b.Flush())
		reqs = lines(r.sync(), "HMSG A svc.echo ")
		require.Len(t, reqs, 1)
		reply = strings.Fields(reqs[0])[3]
		r.send("RMSG A " + reply + " orders.q 4\r\nsure\r\n")
		r.sync()
		m, err = inbox.NextMsg(5 * time.Second)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(m.Reply, prefix), "B answers through B's table: %s", m.Reply)
		require.NoError(t, m.Respond([]byte("yes")))
		got := <-back
		require.True(t, got.internal)
		require.False(t, got.permitted, "a peer's user cannot be judged here: nobody")
	})
}

func sorted(s []string) []string {
	slices.Sort(s)
	return s
}

// TestClusterImports: two servers with the same accounts and imports. A
// stream import delivers each message once to the importer's subscribers
// wherever they and the publisher are, and a queue group of the importer
// spread over both servers gets each once; a service import's requests
// reach the exporter's responders on the other server, and Singleton and
// Streamed responses come back across the route.
func TestClusterImports(t *testing.T) {
	c := clustertest.Start(t, 2, importsOptions())
	as := func(i int, user string) *nats.Conn { return c.Connect(t, i, nats.UserInfo(user, user)) }
	a1, a2, b1, b2 := as(0, "a"), as(1, "a"), as(0, "b"), as(1, "b")

	t.Run("stream import", func(t *testing.T) {
		var mu sync.Mutex
		got := map[string]int{}
		count := func(name string) nats.MsgHandler {
			return func(m *nats.Msg) {
				mu.Lock()
				got[name+" "+m.Subject+" "+string(m.Data)]++
				mu.Unlock()
			}
		}
		for i, nc := range []*nats.Conn{b1, b2} {
			_, err := nc.Subscribe("a.events.>", count(fmt.Sprintf("b%d", i+1)))
			require.NoError(t, err)
			_, err = nc.QueueSubscribe("a.events.>", "q", count("queue"))
			require.NoError(t, err)
			require.NoError(t, nc.Flush())
		}
		_, err := a2.Subscribe("events.>", count("a2"))
		require.NoError(t, err)
		require.NoError(t, a2.Flush())
		c.WaitAccountInterest(t, "B", "a.events.x", 0, 1)
		c.WaitAccountInterest(t, "A", "events.x", 1)

		const n = 50
		for k := range n {
			require.NoError(t, a1.Publish("events.x", []byte("s1-"+strconv.Itoa(k))))
			require.NoError(t, a2.Publish("events.x", []byte("s2-"+strconv.Itoa(k))))
		}
		require.NoError(t, a1.Flush())
		require.NoError(t, a2.Flush())
		total := func() int {
			mu.Lock()
			defer mu.Unlock()
			t := 0
			for _, v := range got {
				t += v
			}
			return t
		}
		require.Eventually(t, func() bool { return total() >= 4*2*n }, clustertest.Wait, 10*time.Millisecond)
		time.Sleep(100 * time.Millisecond) // a duplicate would come now
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, got, 4*2*n, "b1, b2, the queue group and a2: each message")
		for k, v := range got {
			require.Equal(t, 1, v, "%s: exactly once", k)
			switch name := strings.Fields(k)[0]; name {
			case "a2":
				require.Contains(t, k, " events.x ")
			default:
				require.Contains(t, k, " a.events.x ", "mapped by the import")
			}
		}
	})

	t.Run("service import", func(t *testing.T) {
		echo(t, a2, "svc.echo", nil)
		_, err := a2.Subscribe("svc.stream", func(m *nats.Msg) {
			for _, d := range []string{"1", "2", "3"} {
				_ = m.Respond([]byte(d))
			}
		})
		require.NoError(t, err)
		require.NoError(t, a2.Flush())
		c.WaitAccountInterest(t, "A", "svc.echo", 1)
		c.WaitAccountInterest(t, "A", "svc.stream", 1)
		for _, nc := range []*nats.Conn{b1, b2} {
			m, err := nc.Request("echo", []byte("hi"), 5*time.Second)
			require.NoError(t, err)
			require.Equal(t, "hi", string(m.Data))
		}
		inbox, err := b1.SubscribeSync("_INBOX.stream.>")
		require.NoError(t, err)
		require.NoError(t, b1.PublishRequest("svc.stream", "_INBOX.stream.1", nil))
		for _, d := range []string{"1", "2", "3"} {
			m, err := inbox.NextMsg(5 * time.Second)
			require.NoError(t, err)
			require.Equal(t, d, string(m.Data))
		}
		_, err = b1.Request("map.x.y", nil, 5*time.Second)
		require.ErrorIs(t, err, nats.ErrNoResponders, "no responder in the cluster")
	})
}

// TestSubscribeInternalLocal: a local internal subscription's interest is
// not told to peers, and it takes what is published on its server, never
// what a peer forwards (here for a client's subscription to everything);
// a plain internal subscription's interest crosses as a client's.
func TestSubscribeInternalLocal(t *testing.T) {
	c := clustertest.Start(t, 2, server.Options{})
	s1, s2 := c.Servers[0], c.Servers[1]
	got := make(chan string, 16)
	local, err := s1.GlobalAccount().SubscribeInternalLocal("api.>", "", func(m *server.Msg) { got <- m.Subject })
	require.NoError(t, err)
	_, err = s1.GlobalAccount().SubscribeInternal("plain.>", "", func(*server.Msg) {})
	require.NoError(t, err)
	c.WaitInterest(t, "plain.x", 0)
	require.False(t, s2.PeerHasInterest(s1.ID(), "api.x"), "a local subscription's interest stays home")

	// s1 tells s2 it wants everything, for a client of its own: s2 then
	// forwards api.remote to s1, where only that client takes it.
	all := c.Connect(t, 0)
	sa, err := all.SubscribeSync(">")
	require.NoError(t, err)
	require.NoError(t, all.Flush())
	c.WaitInterest(t, "api.remote", 0)
	pub2 := c.Connect(t, 1)
	require.NoError(t, pub2.Publish("api.remote", nil))
	require.NoError(t, pub2.Flush())
	m, err := sa.NextMsg(clustertest.Wait)
	require.NoError(t, err)
	require.Equal(t, "api.remote", m.Subject)

	pub1 := c.Connect(t, 0)
	require.NoError(t, pub1.Publish("api.here", nil))
	require.NoError(t, pub1.Flush())
	select {
	case subj := <-got:
		require.Equal(t, "api.here", subj, "only what is published on s1")
	case <-time.After(clustertest.Wait):
		t.Fatal("the local subscription missed a local message")
	}
	require.Empty(t, got)
	require.NoError(t, local.Unsubscribe())
}

// TestAfterReadAnswerCrossesRoutes: an internal subscription answers, in
// AfterRead, a request that a peer's client published: the answer is this
// server's message and reaches the requester on the peer.
func TestAfterReadAnswerCrossesRoutes(t *testing.T) {
	c := clustertest.Start(t, 2, server.Options{})
	_, err := c.Servers[0].GlobalAccount().SubscribeInternal("svc.echo", "", func(m *server.Msg) {
		reply, data := m.Reply, append([]byte("echo: "), m.Data...)
		m.AfterRead(func(p *server.Publisher) { p.ActFor(server.ServerPrincipal); p.Publish(reply, "", nil, data) })
	})
	require.NoError(t, err)
	c.WaitInterest(t, "svc.echo", 0)
	nc := c.Connect(t, 1)
	m, err := nc.Request("svc.echo", []byte("hi"), clustertest.Wait)
	require.NoError(t, err)
	require.Equal(t, "echo: hi", string(m.Data))
}
