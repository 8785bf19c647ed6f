package server_test

// Differential sessions driven by nats.go, for what a raw script does
// awkwardly: request/reply on the muxed inbox, no responders as the client
// sees it, headers, queue groups spread over connections (compared by
// count: which member gets a message is random in both servers). Each
// session returns an outcome, a text that must come out the same from both
// servers.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// diffOutcome records what a session observed.
type diffOutcome struct{ strings.Builder }

func (o *diffOutcome) add(format string, args ...any) {
	fmt.Fprintf(o, format+"\n", args...)
}

// diffErr renders an error for an outcome: nil as "ok".
func diffErr(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// diffClientSession is one nats.go session, run once against each server.
type diffClientSession struct {
	name string
	cfg  diffConfig
	run  func(t *testing.T, url string, o *diffOutcome)
}

// diffDial connects nats.go and closes the connection when the test ends.
func diffDial(t *testing.T, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(url, append([]nats.Option{nats.MaxReconnects(0), nats.Timeout(2 * time.Second)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// diffAsyncErrors collects what nats.go reports to its error handler.
type diffAsyncErrors struct {
	ch chan string
}

func newDiffAsyncErrors() *diffAsyncErrors { return &diffAsyncErrors{ch: make(chan string, 64)} }

func (a *diffAsyncErrors) option() nats.Option {
	return nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
		s := err.Error()
		if sub != nil {
			s += " (subscription " + sub.Subject + ")"
		}
		a.ch <- s
	})
}

// drain returns the errors reported until none came for 150ms.
func (a *diffAsyncErrors) drain() []string {
	var out []string
	for {
		select {
		case s := <-a.ch:
			out = append(out, s)
		case <-time.After(150 * time.Millisecond):
			return out
		}
	}
}

// diffNextData returns the data of the next n messages, or what went wrong.
func diffNextData(sub *nats.Subscription, n int) []string {
	var out []string
	for range n {
		m, err := sub.NextMsg(2 * time.Second)
		if err != nil {
			return append(out, "error: "+err.Error())
		}
		out = append(out, string(m.Data))
	}
	if m, err := sub.NextMsg(50 * time.Millisecond); err == nil {
		out = append(out, "unexpected: "+string(m.Data))
	}
	return out
}

// diffInboxShape describes a reply inbox without its random tokens.
func diffInboxShape(s string) string {
	return fmt.Sprintf("_INBOX prefix %v, %d tokens", strings.HasPrefix(s, nats.InboxPrefix), strings.Count(s, ".")+1)
}

// diffHeaders renders headers sorted by name; values keep their order.
func diffHeaders(h nats.Header) string {
	var keys []string
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q ", k, h[k])
	}
	return strings.TrimSpace(b.String())
}

var diffClientSessions = []diffClientSession{
	{name: "request-reply-mux-inbox", run: func(t *testing.T, url string, o *diffOutcome) {
		srv := diffDial(t, url)
		_, err := srv.Subscribe("svc.echo", func(m *nats.Msg) {
			r := nats.NewMsg(m.Reply)
			r.Data = append([]byte("echo:"), m.Data...)
			r.Header.Set("Seen-Header", m.Header.Get("X-Req"))
			_ = m.RespondMsg(r)
		})
		require.NoError(t, err)
		require.NoError(t, srv.Flush())
		nc := diffDial(t, url)
		for i := range 3 {
			resp, err := nc.Request("svc.echo", fmt.Appendf(nil, "%d", i), 2*time.Second)
			if err != nil {
				o.add("request %d: %v", i, err)
				continue
			}
			o.add("request %d: %q headers %s subject %s", i, resp.Data, diffHeaders(resp.Header), diffInboxShape(resp.Subject))
		}
		req := nats.NewMsg("svc.echo")
		req.Header.Set("X-Req", "v")
		req.Data = []byte("with headers")
		resp, err := nc.RequestMsg(req, 2*time.Second)
		o.add("request with headers: %s", diffErr(err))
		if err == nil {
			o.add("  reply %q headers %s", resp.Data, diffHeaders(resp.Header))
		}
		// Concurrent requests share the one muxed inbox subscription.
		var wg sync.WaitGroup
		var good atomic.Int64
		for i := range 20 {
			wg.Go(func() {
				resp, err := nc.Request("svc.echo", fmt.Appendf(nil, "c%d", i), 2*time.Second)
				if err == nil && string(resp.Data) == fmt.Sprintf("echo:c%d", i) {
					good.Add(1)
				}
			})
		}
		wg.Wait()
		o.add("concurrent requests answered correctly: %d", good.Load())
	}},
	{name: "request-reply-old-style", run: func(t *testing.T, url string, o *diffOutcome) {
		srv := diffDial(t, url)
		_, err := srv.Subscribe("svc.echo", func(m *nats.Msg) { _ = m.Respond(append([]byte("echo:"), m.Data...)) })
		require.NoError(t, err)
		require.NoError(t, srv.Flush())
		nc := diffDial(t, url, nats.UseOldRequestStyle())
		resp, err := nc.Request("svc.echo", []byte("x"), 2*time.Second)
		o.add("old-style request: %s", diffErr(err))
		if err == nil {
			o.add("  reply %q on %s", resp.Data, diffInboxShape(resp.Subject))
		}
		_, err = nc.Request("nobody", []byte("x"), 2*time.Second)
		o.add("old-style request to nobody: %s", diffErr(err))
	}},
	{name: "no-responders", run: func(t *testing.T, url string, o *diffOutcome) {
		nc := diffDial(t, url)
		start := time.Now()
		_, err := nc.Request("nobody.home", []byte("?"), 2*time.Second)
		o.add("request: %s (ErrNoResponders %v, fast %v)", diffErr(err), errors.Is(err, nats.ErrNoResponders), time.Since(start) < time.Second)
		req := nats.NewMsg("nobody.home")
		req.Header.Set("X", "y")
		_, err = nc.RequestMsg(req, 2*time.Second)
		o.add("request with headers: %s", diffErr(err))

		// The status message itself, as nats.go hands it to a channel
		// subscription (NextMsg would turn it into ErrNoResponders).
		inbox := nc.NewRespInbox()
		ch := make(chan *nats.Msg, 4)
		_, err = nc.ChanSubscribe(inbox, ch)
		require.NoError(t, err)
		require.NoError(t, nc.PublishRequest("nobody.home", inbox, []byte("payload")))
		select {
		case m := <-ch:
			o.add("status message on %s: headers %s, data %q", diffInboxShape(m.Subject), diffHeaders(m.Header), m.Data)
		case <-time.After(2 * time.Second):
			o.add("no status message")
		}
	}},
	{name: "headers", run: func(t *testing.T, url string, o *diffOutcome) {
		nc := diffDial(t, url)
		sub, err := nc.SubscribeSync("h.>")
		require.NoError(t, err)
		require.NoError(t, nc.Flush())
		o.add("headers supported: %v", nc.HeadersSupported())
		m := nats.NewMsg("h.1")
		m.Header.Add("X-Trace", "abc")
		m.Header.Add("X-Trace", "def")
		m.Header["lower-case"] = []string{"kept as sent"}
		m.Header.Set("Mixed-Case", "Value: with colon")
		m.Header.Set("Empty", "")
		m.Data = []byte("body")
		require.NoError(t, nc.PublishMsg(m))
		m2 := nats.NewMsg("h.2") // headers but no payload
		m2.Header.Set("Only", "headers")
		require.NoError(t, nc.PublishMsg(m2))
		m3 := nats.NewMsg("h.3") // a header map that is empty
		m3.Data = []byte("no headers")
		require.NoError(t, nc.PublishMsg(m3))
		for range 3 {
			got, err := sub.NextMsg(2 * time.Second)
			if err != nil {
				o.add("error: %v", err)
				break
			}
			o.add("%s: headers %s, data %q", got.Subject, diffHeaders(got.Header), got.Data)
		}
	}},
	{name: "queue-groups", run: func(t *testing.T, url string, o *diffOutcome) {
		const members, msgs = 3, 300
		var counts [members]atomic.Int64
		var total atomic.Int64
		var subs []*nats.Subscription
		var conns []*nats.Conn
		for i := range members {
			nc := diffDial(t, url)
			sub, err := nc.QueueSubscribe("work.*", "workers", func(*nats.Msg) {
				counts[i].Add(1)
				total.Add(1)
			})
			require.NoError(t, err)
			require.NoError(t, nc.Flush())
			subs = append(subs, sub)
			conns = append(conns, nc)
		}
		pub := diffDial(t, url)
		plain, err := pub.SubscribeSync("work.>")
		require.NoError(t, err)
		require.NoError(t, pub.Flush())
		for i := range msgs {
			require.NoError(t, pub.Publish("work.item", fmt.Appendf(nil, "%d", i)))
		}
		require.NoError(t, pub.Flush())
		diffWaitFor(func() bool { return total.Load() >= msgs })
		time.Sleep(50 * time.Millisecond) // a duplicate would arrive by now
		busy := 0
		for i := range members {
			if counts[i].Load() > 0 {
				busy++
			}
		}
		o.add("group received %d of %d, members that got some: %d", total.Load(), msgs, busy)
		o.add("plain subscription received %d", len(diffNextData(plain, msgs)))

		// One member leaves: the others get everything.
		require.NoError(t, subs[0].Unsubscribe())
		require.NoError(t, conns[0].Flush())
		before := counts[0].Load()
		total.Store(0)
		for range 100 {
			require.NoError(t, pub.Publish("work.item", nil))
		}
		require.NoError(t, pub.Flush())
		diffWaitFor(func() bool { return total.Load() >= 100 })
		time.Sleep(50 * time.Millisecond)
		o.add("after one left: group received %d of 100, the leaver %d", total.Load(), counts[0].Load()-before)
	}},
	{name: "queue-group-one-name-overlapping-patterns", run: func(t *testing.T, url string, o *diffOutcome) {
		// Members of group "q" on a.* and on a.>: for a.b, are they one
		// group (one copy) or two (two copies)?
		var total atomic.Int64
		for _, p := range []string{"a.*", "a.>", "a.b"} {
			nc := diffDial(t, url)
			_, err := nc.QueueSubscribe(p, "q", func(*nats.Msg) { total.Add(1) })
			require.NoError(t, err)
			require.NoError(t, nc.Flush())
		}
		pub := diffDial(t, url)
		for range 100 {
			require.NoError(t, pub.Publish("a.b", nil))
		}
		require.NoError(t, pub.Flush())
		diffWaitFor(func() bool { return total.Load() >= 100 })
		time.Sleep(100 * time.Millisecond)
		o.add("copies of 100 messages: %d", total.Load())
	}},
	{name: "queue-group-echo-false", run: func(t *testing.T, url string, o *diffOutcome) {
		// The publisher is a member of the group but does not take its own
		// messages: does the other member get every one?
		pub := diffDial(t, url, nats.NoEcho())
		mine, err := pub.QueueSubscribeSync("q", "g")
		require.NoError(t, err)
		require.NoError(t, pub.Flush())
		other := diffDial(t, url)
		theirs, err := other.QueueSubscribeSync("q", "g")
		require.NoError(t, err)
		require.NoError(t, other.Flush())
		for range 100 {
			require.NoError(t, pub.Publish("q", nil))
		}
		require.NoError(t, pub.Flush())
		require.NoError(t, other.Flush())
		time.Sleep(100 * time.Millisecond)
		n, _, _ := theirs.Pending()
		m, _, _ := mine.Pending()
		o.add("other member got %d of 100, the publisher %d", n, m)
	}},
	{name: "queue-group-auto-unsubscribe", run: func(t *testing.T, url string, o *diffOutcome) {
		nc := diffDial(t, url)
		sub, err := nc.QueueSubscribeSync("q", "g")
		require.NoError(t, err)
		require.NoError(t, sub.AutoUnsubscribe(2))
		require.NoError(t, nc.Flush())
		pub := diffDial(t, url)
		for i := range 5 {
			require.NoError(t, pub.Publish("q", fmt.Appendf(nil, "%d", i)))
		}
		require.NoError(t, pub.Flush())
		o.add("received %q", diffNextData(sub, 2))
	}},
	{name: "echo", run: func(t *testing.T, url string, o *diffOutcome) {
		quiet := diffDial(t, url, nats.NoEcho())
		loud := diffDial(t, url)
		mine, err := quiet.SubscribeSync("e")
		require.NoError(t, err)
		theirs, err := loud.SubscribeSync("e")
		require.NoError(t, err)
		require.NoError(t, quiet.Flush())
		require.NoError(t, loud.Flush())
		require.NoError(t, quiet.Publish("e", []byte("from quiet")))
		require.NoError(t, quiet.Flush())
		require.NoError(t, loud.Publish("e", []byte("from loud")))
		require.NoError(t, loud.Flush())
		o.add("quiet got %q", diffNextData(mine, 1))
		o.add("loud got %q", diffNextData(theirs, 2))
	}},
	{name: "auto-unsubscribe", run: func(t *testing.T, url string, o *diffOutcome) {
		nc := diffDial(t, url)
		sub, err := nc.SubscribeSync("a")
		require.NoError(t, err)
		require.NoError(t, sub.AutoUnsubscribe(3))
		require.NoError(t, nc.Flush())
		pub := diffDial(t, url)
		for i := range 10 {
			require.NoError(t, pub.Publish("a", fmt.Appendf(nil, "%d", i)))
		}
		require.NoError(t, pub.Flush())
		o.add("received %q", diffNextData(sub, 3))
		o.add("valid after the maximum: %v", sub.IsValid())
	}},
	{name: "drain", run: func(t *testing.T, url string, o *diffOutcome) {
		nc := diffDial(t, url)
		var got atomic.Int64
		_, err := nc.Subscribe("d.*", func(*nats.Msg) { got.Add(1) })
		require.NoError(t, err)
		require.NoError(t, nc.Flush())
		pub := diffDial(t, url)
		for range 50 {
			require.NoError(t, pub.Publish("d.x", nil))
		}
		require.NoError(t, pub.Flush())
		require.NoError(t, nc.Drain())
		diffWaitFor(func() bool { return nc.IsClosed() })
		o.add("drained after %d messages, closed %v", got.Load(), nc.IsClosed())
	}},
	{name: "wildcards", run: func(t *testing.T, url string, o *diffOutcome) {
		nc := diffDial(t, url)
		patterns := []string{"orders.*", "orders.>", "*.eu.*", ">", "orders.*.created"}
		subs := map[string]*nats.Subscription{}
		for _, p := range patterns {
			sub, err := nc.SubscribeSync(p)
			require.NoError(t, err)
			subs[p] = sub
		}
		require.NoError(t, nc.Flush())
		subjects := []string{"orders", "orders.eu", "orders.eu.created", "refunds.eu.x", "other"}
		for _, s := range subjects {
			require.NoError(t, nc.Publish(s, []byte(s)))
		}
		require.NoError(t, nc.Flush())
		for _, p := range patterns {
			var got []string
			for {
				m, err := subs[p].NextMsg(100 * time.Millisecond)
				if err != nil {
					break
				}
				got = append(got, m.Subject)
			}
			o.add("%s: %q", p, got)
		}
	}},
	{name: "max-payload", cfg: diffConfig{maxPayload: 1024}, run: func(t *testing.T, url string, o *diffOutcome) {
		nc := diffDial(t, url)
		o.add("max payload %d", nc.MaxPayload())
		o.add("publish 1024: %s", diffErr(nc.Publish("p", make([]byte, 1024))))
		o.add("publish 1025: %s", diffErr(nc.Publish("p", make([]byte, 1025))))
		o.add("flush: %s", diffErr(nc.Flush()))
	}},
	{name: "max-subscriptions", cfg: diffConfig{maxSubs: 2}, run: func(t *testing.T, url string, o *diffOutcome) {
		errs := newDiffAsyncErrors()
		nc := diffDial(t, url, errs.option())
		for _, s := range []string{"a", "b", "c"} {
			_, err := nc.SubscribeSync(s)
			o.add("subscribe %s: %s", s, diffErr(err))
		}
		o.add("flush: %s", diffErr(nc.Flush()))
		o.add("async errors: %q", errs.drain())
		o.add("connected: %v", nc.IsConnected())
	}},
	{name: "token-auth", cfg: diffConfig{token: "s3cret"}, run: func(t *testing.T, url string, o *diffOutcome) {
		for _, tok := range []string{"s3cret", "wrong", ""} {
			nc, err := nats.Connect(url, nats.Token(tok), nats.MaxReconnects(0))
			o.add("token %q: %s (ErrAuthorization %v)", tok, diffErr(err), errors.Is(err, nats.ErrAuthorization))
			if err == nil {
				nc.Close()
			}
		}
	}},
	{name: "user-auth", cfg: diffConfig{users: []*diffUser{{name: "alice", pass: "alicepw"}, {name: "bob", pass: "bobpw"}}},
		run: func(t *testing.T, url string, o *diffOutcome) {
			for _, up := range [][2]string{{"alice", "alicepw"}, {"bob", "bobpw"}, {"alice", "bobpw"}, {"mallory", "x"}, {"", ""}} {
				nc, err := nats.Connect(url, nats.UserInfo(up[0], up[1]), nats.MaxReconnects(0))
				o.add("user %q: %s (ErrAuthorization %v)", up[0], diffErr(err), errors.Is(err, nats.ErrAuthorization))
				if err == nil {
					nc.Close()
				}
			}
		}},
	{name: "permissions", cfg: diffConfig{users: []*diffUser{
		{name: "alice", pass: "alicepw",
			pubAllow: []string{"orders.>", "_INBOX.>"}, pubDeny: []string{"orders.secret"},
			subAllow: []string{"orders.>", "_INBOX.>"}, subDeny: []string{"orders.hidden.*"}},
		{name: "bob", pass: "bobpw"},
	}}, run: func(t *testing.T, url string, o *diffOutcome) {
		errs := newDiffAsyncErrors()
		alice := diffDial(t, url, nats.UserInfo("alice", "alicepw"), errs.option())
		bob := diffDial(t, url, nats.UserInfo("bob", "bobpw"))
		all, err := bob.SubscribeSync(">")
		require.NoError(t, err)
		require.NoError(t, bob.Flush())
		for _, s := range []string{"orders.new", "orders.secret", "payments.new"} {
			o.add("publish %s: %s", s, diffErr(alice.Publish(s, []byte(s))))
		}
		o.add("flush: %s", diffErr(alice.Flush()))
		o.add("bob got %q", diffNextData(all, 1))
		o.add("async errors: %q", errs.drain())

		denied, err := alice.SubscribeSync("payments.>")
		o.add("subscribe payments.>: %s", diffErr(err))
		o.add("flush: %s", diffErr(alice.Flush()))
		o.add("async errors: %q", errs.drain())
		o.add("denied subscription still valid: %v", denied.IsValid())
		mine, err := alice.SubscribeSync("orders.>")
		require.NoError(t, err)
		require.NoError(t, alice.Flush())
		require.NoError(t, bob.Publish("orders.hidden.x", []byte("hidden")))
		require.NoError(t, bob.Publish("orders.visible", []byte("visible")))
		require.NoError(t, bob.Flush())
		o.add("alice got %q", diffNextData(mine, 1))
		_, err = alice.Request("orders.svc", nil, 300*time.Millisecond)
		o.add("request to nobody: %s", diffErr(err))
		o.add("connected: %v", alice.IsConnected())
	}},
}

// diffWaitFor polls cond for up to diffTimeout.
func diffWaitFor(cond func() bool) {
	deadline := time.Now().Add(diffTimeout)
	for !cond() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// TestDifferentialClient runs each nats.go session against both servers
// and requires the same outcome.
func TestDifferentialClient(t *testing.T) {
	for _, cs := range diffClientSessions {
		t.Run(cs.name, func(t *testing.T) {
			var ref, got diffOutcome
			cs.run(t, "nats://"+diffStartReference(t, cs.cfg), &ref)
			cs.run(t, "nats://"+diffStartSkiff(t, cs.cfg), &got)
			t.Logf("nats-server diffOutcome:\n%s", ref.String())
			require.Equal(t, ref.String(), got.String(), "Skiff's diffOutcome differs from nats-server's")
		})
	}
}
