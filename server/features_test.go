package server_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/server"
)

// collect returns a function that reads n messages from sub, or fails.
func nextN(t *testing.T, sub *nats.Subscription, n int) []*nats.Msg {
	t.Helper()
	var out []*nats.Msg
	for range n {
		m, err := sub.NextMsg(5 * time.Second)
		require.NoError(t, err, "after %d of %d messages", len(out), n)
		out = append(out, m)
	}
	return out
}

func requireNoMsg(t *testing.T, sub *nats.Subscription) {
	t.Helper()
	m, err := sub.NextMsg(100 * time.Millisecond)
	require.ErrorIs(t, err, nats.ErrTimeout, "unexpected message %v", m)
}

func TestWildcards(t *testing.T) {
	s := RunServer(t, server.Options{})
	nc := Connect(t, s)
	cases := []struct {
		pattern string
		get     []string
	}{
		{"orders.*", []string{"orders.eu"}},
		{"orders.>", []string{"orders.eu", "orders.eu.created", "orders.us.created"}},
		{"orders.#", []string{"orders", "orders.eu", "orders.eu.created", "orders.us.created"}},
		{"*.eu.#", []string{"orders.eu", "orders.eu.created"}},
		{"#.created", []string{"orders.eu.created", "orders.us.created"}},
		{"orders.*.created", []string{"orders.eu.created", "orders.us.created"}},
	}
	subs := make([]*nats.Subscription, len(cases))
	for i, c := range cases {
		var err error
		subs[i], err = nc.SubscribeSync(c.pattern)
		require.NoError(t, err)
	}
	require.NoError(t, nc.Flush())
	for _, subj := range []string{"orders", "orders.eu", "orders.eu.created", "orders.us.created", "other"} {
		require.NoError(t, nc.Publish(subj, []byte(subj)))
	}
	require.NoError(t, nc.Flush())
	for i, c := range cases {
		got := nextN(t, subs[i], len(c.get))
		var subjects []string
		for _, m := range got {
			require.Equal(t, m.Subject, string(m.Data))
			subjects = append(subjects, m.Subject)
		}
		require.Equal(t, c.get, subjects, c.pattern)
		requireNoMsg(t, subs[i])
	}
}

func TestQueueGroups(t *testing.T) {
	s := RunServer(t, server.Options{})
	nc := Connect(t, s)
	const members, msgs = 4, 2000
	var counts [members]atomic.Int64
	var total atomic.Int64
	for i := range members {
		other := Connect(t, s)
		_, err := other.QueueSubscribe("work.>", "workers", func(*nats.Msg) {
			counts[i].Add(1)
			total.Add(1)
		})
		require.NoError(t, err)
		require.NoError(t, other.Flush())
	}
	plain, err := nc.SubscribeSync("work.*")
	require.NoError(t, err)
	other, err := nc.QueueSubscribeSync("work.*", "auditors") // a second group: one copy too
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	for i := range msgs {
		require.NoError(t, nc.Publish("work.item", []byte(fmt.Sprint(i))))
	}
	require.NoError(t, nc.Flush())
	nextN(t, plain, msgs)
	nextN(t, other, msgs)
	require.Eventually(t, func() bool { return total.Load() == msgs }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	require.EqualValues(t, msgs, total.Load(), "each message to exactly one member")
	for i := range members {
		// Even spread: each member gets a fair share (expected 500).
		require.Greater(t, counts[i].Load(), int64(msgs/members/2), "member %d got %d", i, counts[i].Load())
	}
}

func TestRequestReply(t *testing.T) {
	s := RunServer(t, server.Options{})
	nc := Connect(t, s)
	_, err := nc.Subscribe("svc.echo", func(m *nats.Msg) { _ = m.Respond(append([]byte("echo:"), m.Data...)) })
	require.NoError(t, err)
	for i := range 20 {
		resp, err := nc.Request("svc.echo", []byte(fmt.Sprint(i)), 2*time.Second)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint("echo:", i), string(resp.Data))
	}
	// The old style, one inbox per request.
	old := Connect(t, s, nats.UseOldRequestStyle())
	resp, err := old.Request("svc.echo", []byte("x"), 2*time.Second)
	require.NoError(t, err)
	require.Equal(t, "echo:x", string(resp.Data))
}

func TestNoResponders(t *testing.T) {
	s := RunServer(t, server.Options{})
	nc := Connect(t, s)
	_, err := nc.Request("nobody.home", []byte("?"), 2*time.Second)
	require.ErrorIs(t, err, nats.ErrNoResponders)

	r := DialRaw(t, s)
	r.Send("CONNECT {\"verbose\":false,\"headers\":true,\"no_responders\":true}\r\nSUB _INBOX.x.* 7\r\nPUB nobody _INBOX.x.1 0\r\n\r\n")
	r.Expect("HMSG _INBOX.x.1 7 38 38", "NATS/1.0 503", "Nats-Subject: nobody", "", "")
}

func TestHeaders(t *testing.T) {
	s := RunServer(t, server.Options{})
	nc := Connect(t, s)
	sub, err := nc.SubscribeSync("h")
	require.NoError(t, err)
	raw := DialRaw(t, s) // did not ask for headers: gets the payload alone
	raw.Send("CONNECT {\"verbose\":false}\r\nSUB h 1\r\nPING\r\n")
	raw.Expect("PONG")
	m := nats.NewMsg("h")
	m.Header.Add("X-Trace", "abc")
	m.Header.Add("X-Trace", "def")
	m.Header.Set("Mixed-Case", "Value: with colon")
	m.Data = []byte("body")
	require.NoError(t, nc.PublishMsg(m))
	got := nextN(t, sub, 1)[0]
	require.Equal(t, []string{"abc", "def"}, got.Header.Values("X-Trace"))
	require.Equal(t, "Value: with colon", got.Header.Get("Mixed-Case"))
	require.Equal(t, "body", string(got.Data))
	raw.Expect("MSG h 1 4", "body")
}

func TestEcho(t *testing.T) {
	s := RunServer(t, server.Options{})
	quiet := Connect(t, s, nats.NoEcho())
	loud := Connect(t, s)
	mine, err := quiet.SubscribeSync("e")
	require.NoError(t, err)
	theirs, err := loud.SubscribeSync("e")
	require.NoError(t, err)
	require.NoError(t, quiet.Flush())
	require.NoError(t, loud.Flush())
	require.NoError(t, quiet.Publish("e", []byte("from quiet")))
	require.NoError(t, quiet.Flush())
	require.Equal(t, "from quiet", string(nextN(t, theirs, 1)[0].Data))
	requireNoMsg(t, mine)
	require.NoError(t, loud.Publish("e", []byte("from loud")))
	require.Equal(t, "from loud", string(nextN(t, mine, 1)[0].Data))
}

func TestAutoUnsubscribe(t *testing.T) {
	s := RunServer(t, server.Options{})
	nc := Connect(t, s)
	sub, err := nc.SubscribeSync("a")
	require.NoError(t, err)
	require.NoError(t, sub.AutoUnsubscribe(3))
	require.NoError(t, nc.Flush())
	for range 10 {
		require.NoError(t, nc.Publish("a", nil))
	}
	require.NoError(t, nc.Flush())
	nextN(t, sub, 3)
	_, err = sub.NextMsg(200 * time.Millisecond)
	require.Error(t, err)
	require.Eventually(t, func() bool { return clientSubs(s) == 0 }, 2*time.Second, 10*time.Millisecond)

	r := DialRaw(t, s)
	r.Send("CONNECT {\"verbose\":false}\r\nSUB x 1\r\nUNSUB 1 2\r\nPUB x 1\r\na\r\nPUB x 1\r\nb\r\nPUB x 1\r\nc\r\nPING\r\n")
	r.Expect("MSG x 1 1", "a", "MSG x 1 1", "b", "PONG")
}

func TestUnsubscribe(t *testing.T) {
	s := RunServer(t, server.Options{})
	nc := Connect(t, s)
	sub, err := nc.SubscribeSync("u.>")
	require.NoError(t, err)
	require.NoError(t, nc.Publish("u.1", nil))
	nextN(t, sub, 1)
	require.NoError(t, sub.Unsubscribe())
	require.NoError(t, nc.Publish("u.2", nil))
	require.NoError(t, nc.Flush())
	require.Equal(t, 0, clientSubs(s))
}

func TestTokenAuth(t *testing.T) {
	s := RunServer(t, server.Options{Token: "s3cret"})
	nc := Connect(t, s, nats.Token("s3cret"))
	require.NoError(t, nc.Flush())
	_, err := nats.Connect(s.ClientURL(), nats.Token("wrong"), nats.MaxReconnects(0))
	require.ErrorIs(t, err, nats.ErrAuthorization)
	_, err = nats.Connect(s.ClientURL(), nats.MaxReconnects(0))
	require.ErrorIs(t, err, nats.ErrAuthorization)
	r := DialRaw(t, s)
	require.Equal(t, true, r.Info["auth_required"])
	r.Send("SUB a 1\r\n") // before CONNECT
	r.Expect("-ERR 'Authorization Violation'")
	r.ExpectClosed()
}

func TestUserAuthAndPermissions(t *testing.T) {
	// bcrypt hash of "alicepw", cost 4.
	const aliceHash = "$2a$04$uUSy2a6aGqrCbiRBKObVA.2/GLBT/rXvI/XkcXpXQM8yZg3P11gMq"
	s := RunServer(t, server.Options{Users: []server.User{
		{Name: "alice", Password: aliceHash, Permissions: &server.Permissions{
			Publish:   server.SubjectPermission{Allow: []string{"orders.>", "_INBOX.>"}, Deny: []string{"orders.secret"}},
			Subscribe: server.SubjectPermission{Allow: []string{"orders.>", "_INBOX.>"}, Deny: []string{"orders.hidden.#"}},
		}},
		{Name: "bob", Password: "bobpw"},
	}})
	_, err := nats.Connect(s.ClientURL(), nats.UserInfo("alice", "wrong"), nats.MaxReconnects(0))
	require.ErrorIs(t, err, nats.ErrAuthorization)
	_, err = nats.Connect(s.ClientURL(), nats.UserInfo("nobody", "x"), nats.MaxReconnects(0))
	require.ErrorIs(t, err, nats.ErrAuthorization)

	errs := make(chan error, 10)
	alice := Connect(t, s, nats.UserInfo("alice", "alicepw"), nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))
	bob := Connect(t, s, nats.UserInfo("bob", "bobpw"))

	aSub, err := alice.SubscribeSync("orders.>")
	require.NoError(t, err)
	require.NoError(t, alice.Flush())
	bSub, err := bob.SubscribeSync(">")
	require.NoError(t, err)
	require.NoError(t, bob.Flush())

	require.NoError(t, alice.Publish("orders.new", []byte("ok")))
	require.NoError(t, alice.Publish("orders.secret", []byte("denied")))
	require.NoError(t, alice.Publish("payments.new", []byte("not allowed")))
	require.NoError(t, alice.Flush())
	require.Equal(t, "orders.new", nextN(t, bSub, 1)[0].Subject)
	requireNoMsg(t, bSub)
	for _, want := range []string{`Publish to "orders.secret"`, `Publish to "payments.new"`} {
		select {
		case err := <-errs:
			require.ErrorIs(t, err, nats.ErrPermissionViolation)
			require.Contains(t, err.Error(), want)
		case <-time.After(2 * time.Second):
			t.Fatal("no permissions violation reported for " + want)
		}
	}

	// A subscription to a denied subject is refused; one that only
	// overlaps a denied subject gets everything but the denied messages.
	_, err = alice.SubscribeSync("payments.>")
	require.NoError(t, err)
	require.NoError(t, alice.Flush())
	select {
	case err := <-errs:
		require.Contains(t, err.Error(), `Subscription to "payments.>"`)
	case <-time.After(2 * time.Second):
		t.Fatal("no permissions violation for the subscription")
	}
	require.NoError(t, bob.Publish("orders.hidden.x", []byte("hidden")))
	require.NoError(t, bob.Publish("orders.visible", []byte("visible")))
	require.NoError(t, bob.Flush())
	got := nextN(t, aSub, 2) // orders.new (own publish) and orders.visible
	require.Equal(t, "orders.new", got[0].Subject)
	require.Equal(t, "orders.visible", got[1].Subject)
	requireNoMsg(t, aSub)
}

func TestAuthTimeout(t *testing.T) {
	s := RunServer(t, server.Options{Token: "t", AuthTimeout: 150 * time.Millisecond})
	r := DialRaw(t, s)
	r.Expect("-ERR 'Authentication Timeout'")
	r.ExpectClosed()
}

func TestMaxConnections(t *testing.T) {
	s := RunServer(t, server.Options{MaxConnections: 2})
	Connect(t, s)
	Connect(t, s)
	_, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(0))
	require.ErrorContains(t, err, "maximum connections exceeded") // nats.go reports the -ERR text during connect
}

func TestMaxPayload(t *testing.T) {
	s := RunServer(t, server.Options{MaxPayload: 1024})
	nc := Connect(t, s)
	require.EqualValues(t, 1024, nc.MaxPayload())
	require.ErrorIs(t, nc.Publish("big", make([]byte, 1025)), nats.ErrMaxPayload)
	r := DialRaw(t, s)
	r.Send("PUB big 1025\r\n")
	r.Expect("-ERR 'Maximum Payload Violation'")
	r.ExpectClosed()
}

// TestSlowConsumer has a subscriber that never reads: once its queue
// passes MaxPending it is cut off, while the publisher is never blocked.
func TestSlowConsumer(t *testing.T) {
	s := RunServer(t, server.Options{MaxPending: 256 << 10, MaxPayload: 64 << 10})
	slow := DialRaw(t, s)
	slow.Send("CONNECT {\"verbose\":false}\r\nSUB firehose 1\r\nPING\r\n")
	slow.Expect("PONG")
	pub := Connect(t, s)
	payload := make([]byte, 32<<10)
	const n = 1000 // 32 MiB: far more than the socket buffers and MaxPending hold
	for range n {
		require.NoError(t, pub.Publish("firehose", payload))
	}
	require.NoError(t, pub.FlushTimeout(10*time.Second), "the publisher must not be blocked")
	require.Eventually(t, func() bool { return s.NumClients() == 1 }, 10*time.Second, 10*time.Millisecond,
		"the slow consumer should have been cut off")
	require.Equal(t, 0, clientSubs(s), "its subscription goes with it")
	// Reading drains what the socket held, then the connection ends.
	_ = slow.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 1<<20)
	var readErr error
	for readErr == nil {
		_, readErr = slow.conn.Read(buf)
	}
	var ne interface{ Timeout() bool }
	require.False(t, errors.As(readErr, &ne) && ne.Timeout(), "the slow consumer was not disconnected: %v", readErr)
	require.NoError(t, pub.Flush())
}

func TestStaleConnection(t *testing.T) {
	s := RunServer(t, server.Options{PingInterval: 100 * time.Millisecond, MaxPingsOut: 2})
	r := DialRaw(t, s)
	r.Send("CONNECT {\"verbose\":false}\r\n")
	r.Expect("PING", "PING", "-ERR 'Stale Connection'")
	r.ExpectClosed()

	// A client that answers stays.
	nc := Connect(t, s)
	time.Sleep(500 * time.Millisecond)
	require.NoError(t, nc.Flush())
	require.True(t, nc.IsConnected())
}

// TestGracefulShutdown queues data for a subscriber that is not reading,
// then shuts the server down: everything the server accepted is delivered
// before the connection closes.
func TestGracefulShutdown(t *testing.T) {
	s, err := server.New(server.Options{Host: "127.0.0.1", Port: server.RandomPort})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	sub := DialRaw(t, s)
	sub.Send("CONNECT {\"verbose\":false}\r\nSUB drain 1\r\nPING\r\n")
	sub.Expect("PONG")
	pub, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(0))
	require.NoError(t, err)
	defer pub.Close()
	const n = 20000
	for i := range n {
		require.NoError(t, pub.Publish("drain", fmt.Appendf(nil, "%05d", i)))
	}
	require.NoError(t, pub.Flush()) // the server has read them all

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Shutdown(ctx) }()
	for i := range n {
		require.Equal(t, "MSG drain 1 5", sub.ReadLine(), "message %d", i)
		require.Equal(t, fmt.Sprintf("%05d", i), sub.ReadLine())
	}
	sub.ExpectClosed()
	require.NoError(t, <-done)
}

func TestManySubscribersFanOut(t *testing.T) {
	s := RunServer(t, server.Options{})
	pub := Connect(t, s)
	const subs = 50
	var wg sync.WaitGroup
	var received atomic.Int64
	for range subs {
		nc := Connect(t, s)
		wg.Add(1)
		var count atomic.Int64
		_, err := nc.Subscribe("fan.*", func(*nats.Msg) {
			received.Add(1)
			if count.Add(1) == 100 {
				wg.Done()
			}
		})
		require.NoError(t, err)
		require.NoError(t, nc.Flush())
	}
	for i := range 100 {
		require.NoError(t, pub.Publish("fan."+fmt.Sprint(i%7), []byte(strings.Repeat("x", i))))
	}
	require.NoError(t, pub.Flush())
	wg.Wait()
	require.EqualValues(t, subs*100, received.Load())
}
