package server_test

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/server"
)

// accountsOptions are two accounts, A (users a and a2) and B (b and b2),
// and a user of the global account, g. Passwords are the names.
func accountsOptions() server.Options {
	return server.Options{
		Users: namedUsers("g"),
		Accounts: []server.AccountConfig{
			{Name: "A", Users: namedUsers("a", "a2")},
			{Name: "B", Users: namedUsers("b", "b2")},
		},
	}
}

// namedUsers are users whose passwords are their names.
func namedUsers(names ...string) []server.User {
	var us []server.User
	for _, n := range names {
		us = append(us, server.User{Name: n, Password: n})
	}
	return us
}

// connectAs connects a nats.go client as user (password = name).
func connectAs(t testing.TB, s *server.Server, user string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	return Connect(t, s, append([]nats.Option{nats.UserInfo(user, user)}, opts...)...)
}

// requireNothing requires that sub has received nothing by the time every
// connection of conns has flushed: a message the server queued for a
// subscriber before its PONG is in the subscription when Flush returns.
func requireNothing(t testing.TB, sub *nats.Subscription, conns ...*nats.Conn) {
	t.Helper()
	for _, nc := range conns {
		require.NoError(t, nc.Flush())
	}
	n, _, err := sub.Pending()
	require.NoError(t, err)
	require.Zero(t, n, "%s received a message of another account", sub.Subject)
}

// unsubscribe removes every subscription of the lists.
func unsubscribe(t testing.TB, lists ...[]*nats.Subscription) {
	t.Helper()
	for _, list := range lists {
		for _, sub := range list {
			require.NoError(t, sub.Unsubscribe())
		}
	}
}

// TestAccountIsolation: no subscription, queue group, request or reply
// crosses from one account to another, or to the global account.
func TestAccountIsolation(t *testing.T) {
	s := RunServer(t, accountsOptions())
	a, a2 := connectAs(t, s, "a"), connectAs(t, s, "a2")
	b, g := connectAs(t, s, "b"), connectAs(t, s, "g")

	t.Run("subscriptions", func(t *testing.T) {
		aSub, err := a.SubscribeSync("orders.new")
		require.NoError(t, err)
		var others []*nats.Subscription
		for _, nc := range []*nats.Conn{b, g} {
			for _, subj := range []string{"orders.new", "orders.*", ">"} {
				sub, err := nc.SubscribeSync(subj)
				require.NoError(t, err)
				others = append(others, sub)
			}
		}
		require.NoError(t, a.Flush()) // aSub reached the server before a2 publishes
		require.NoError(t, b.Flush())
		require.NoError(t, g.Flush())
		require.NoError(t, a2.Publish("orders.new", []byte("A")))
		requireNext(t, aSub, "A")
		for _, sub := range others {
			requireNothing(t, sub, a2, b, g)
		}
		unsubscribe(t, others, []*nats.Subscription{aSub})
	})

	t.Run("queue groups", func(t *testing.T) {
		var subs [2][]*nats.Subscription // A's members, B's
		for i, nc := range []*nats.Conn{a, b} {
			for range 2 {
				sub, err := nc.QueueSubscribeSync("work", "q")
				require.NoError(t, err)
				subs[i] = append(subs[i], sub)
			}
			require.NoError(t, nc.Flush())
		}
		for range 20 {
			require.NoError(t, a2.Publish("work", []byte("w")))
		}
		require.NoError(t, a2.Flush())
		require.NoError(t, a.Flush())
		got := 0
		for _, sub := range subs[0] {
			n, _, _ := sub.Pending()
			got += n
		}
		require.Equal(t, 20, got, "one of A's members gets each message")
		for _, sub := range subs[1] {
			requireNothing(t, sub, b)
		}
		unsubscribe(t, subs[0], subs[1])
	})

	t.Run("request reply and no responders", func(t *testing.T) {
		svc, err := a.Subscribe("svc", func(m *nats.Msg) { _ = m.Respond([]byte("from A")) })
		require.NoError(t, err)
		defer func() { _ = svc.Unsubscribe() }()
		require.NoError(t, a.Flush())
		bInbox, err := b.SubscribeSync("_INBOX.>")
		require.NoError(t, err)
		require.NoError(t, b.Flush())

		m, err := a2.Request("svc", []byte("q"), 5*time.Second)
		require.NoError(t, err)
		require.Equal(t, "from A", string(m.Data))
		requireNothing(t, bInbox, a2, a, b)

		_, err = b.Request("svc", []byte("q"), 5*time.Second)
		require.ErrorIs(t, err, nats.ErrNoResponders, "B has no responder; A's must not answer")
		_, err = g.Request("svc", []byte("q"), 5*time.Second)
		require.ErrorIs(t, err, nats.ErrNoResponders)
		require.NoError(t, bInbox.Unsubscribe())
	})

	t.Run("reply subject cannot escape", func(t *testing.T) {
		// A's responder answers on whatever reply subject it is given: a
		// subject of B's, or an inbox B's client is waiting on, stays in A.
		svc, err := a.Subscribe("echo", func(m *nats.Msg) { _ = m.Respond([]byte("escaped?")) })
		require.NoError(t, err)
		defer func() { _ = svc.Unsubscribe() }()
		require.NoError(t, a.Flush())
		target, err := b.SubscribeSync("b.private")
		require.NoError(t, err)
		inbox := b.NewRespInbox()
		waiting, err := b.SubscribeSync(inbox)
		require.NoError(t, err)
		require.NoError(t, b.Flush())
		for _, reply := range []string{"b.private", inbox} {
			require.NoError(t, a2.PublishRequest("echo", reply, []byte("q")))
		}
		require.NoError(t, a2.Flush())
		require.NoError(t, a.Flush()) // the responder has answered
		requireNothing(t, target, b)
		requireNothing(t, waiting, b)
	})
}

// TestAccountLimits: max_connections (per account), max_subscriptions (per
// connection, as nats-server) and max_payload, with the reference errors.
func TestAccountLimits(t *testing.T) {
	o := accountsOptions()
	o.Accounts[0].Limits = server.AccountLimits{MaxConnections: 2, MaxSubscriptions: 2, MaxPayload: 16}
	s := RunServer(t, o)

	t.Run("max connections", func(t *testing.T) {
		c1, c2 := connectAs(t, s, "a"), connectAs(t, s, "a2")
		_, err := nats.Connect(s.ClientURL(), nats.UserInfo("a", "a"), nats.MaxReconnects(0))
		require.Error(t, err)
		require.Contains(t, err.Error(), "maximum account active connections exceeded")
		connectAs(t, s, "b").Close() // other accounts are not held back
		c2.Close()
		waitAccountConns(t, s, "A", 1)
		c3 := connectAs(t, s, "a2")
		require.NoError(t, c3.Flush())
		c1.Close()
		c3.Close()
		waitAccountConns(t, s, "A", 0)
	})

	t.Run("max subscriptions per connection", func(t *testing.T) {
		errs := make(chan error, 4)
		onErr := nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err })
		c1, c2 := connectAs(t, s, "a", onErr), connectAs(t, s, "a2", onErr)
		for _, nc := range []*nats.Conn{c1, c2} {
			for _, subj := range []string{"x", "y"} {
				_, err := nc.SubscribeSync(subj)
				require.NoError(t, err)
			}
			require.NoError(t, nc.Flush())
		}
		require.Empty(t, errs, "two each: the limit is per connection, not the account's total")
		_, err := c1.SubscribeSync("z")
		require.NoError(t, err)
		require.NoError(t, c1.Flush())
		select {
		case err := <-errs:
			require.Contains(t, err.Error(), "maximum subscriptions exceeded")
		case <-time.After(5 * time.Second):
			t.Fatal("no error for the third subscription")
		}
		c1.Close()
		c2.Close()
		waitAccountConns(t, s, "A", 0) // closes are the server's to see
	})

	t.Run("max payload", func(t *testing.T) {
		nc := connectAs(t, s, "a")
		require.Eventually(t, func() bool { return nc.MaxPayload() == 16 }, 5*time.Second, 5*time.Millisecond,
			"the INFO after CONNECT carries the account's max_payload")
		require.ErrorIs(t, nc.Publish("p", make([]byte, 17)), nats.ErrMaxPayload)
		require.Equal(t, int64(server.DefaultMaxPayload), connectAs(t, s, "b").MaxPayload())
		nc.Close()

		raw := DialRaw(t, s)
		raw.Send("CONNECT {\"verbose\":false,\"user\":\"a\",\"pass\":\"a\"}\r\nPUB p 17\r\n")
		lines := raw.ExpectClosed()
		require.Contains(t, lines, "-ERR 'Maximum Payload Violation'")
	})
}

// waitAccountConns waits until the server counts n connections in account
// acc: a client's Close reaches the server a moment later.
func waitAccountConns(t *testing.T, s *server.Server, acc string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		a, _ := s.LookupAccount(acc)
		return a.NumConnections() == n
	}, 5*time.Second, 5*time.Millisecond, "account %s: %d connections", acc, n)
}

// TestAccountOptions: New refuses what nats-server refuses, with its
// messages.
func TestAccountOptions(t *testing.T) {
	acc := func(name string, users ...string) server.AccountConfig {
		a := server.AccountConfig{Name: name}
		for _, u := range users {
			a.Users = append(a.Users, server.User{Name: u, Password: "p"})
		}
		return a
	}
	for _, tc := range []struct {
		name string
		opts server.Options
		want string // "" when valid
	}{
		{"two accounts", server.Options{Accounts: []server.AccountConfig{acc("A", "a"), acc("B", "b")}}, ""},
		{"reserved", server.Options{Accounts: []server.AccountConfig{acc("$G", "a")}}, `"$G" is a Reserved Account`},
		{"twice", server.Options{Accounts: []server.AccountConfig{acc("A"), acc("A")}}, "Duplicate Account Entry: A"},
		{"no name", server.Options{Accounts: []server.AccountConfig{acc("")}}, "an account without a name"},
		{"a space", server.Options{Accounts: []server.AccountConfig{acc("A B")}}, "no white space"},
		{"a slash", server.Options{Accounts: []server.AccountConfig{acc("A/B")}}, "slash"},
		{"dot dot", server.Options{Accounts: []server.AccountConfig{acc("..")}}, "not allowed"},
		{"user in two accounts", server.Options{Accounts: []server.AccountConfig{acc("A", "u"), acc("B", "u")}},
			`Duplicate user "u" detected`},
		{"user in an account and $G", server.Options{Users: []server.User{{Name: "u"}},
			Accounts: []server.AccountConfig{acc("A", "u")}}, `Duplicate user "u" detected`},
		{"single user and accounts", server.Options{Username: "u", Password: "p",
			Accounts: []server.AccountConfig{acc("A", "a")}}, "Can not have a single user/pass and accounts"},
		{"token and accounts", server.Options{Token: "t", Accounts: []server.AccountConfig{acc("A", "a")}},
			"Can not have a token and accounts"},
		{"token and accounts without users", server.Options{Token: "t", Accounts: []server.AccountConfig{acc("A")}}, ""},
		{"negative limit", server.Options{Accounts: []server.AccountConfig{{Name: "A",
			Limits: server.AccountLimits{MaxPayload: -2}}}}, "limit max_payload -2"},
		{"no limit", server.Options{Accounts: []server.AccountConfig{{Name: "A",
			Limits: server.AccountLimits{MaxPayload: server.NoLimit}}}}, ""},
		{"bad default permissions", server.Options{Accounts: []server.AccountConfig{{Name: "A",
			DefaultPermissions: &server.Permissions{Publish: server.SubjectPermission{Allow: []string{"a..b"}}}}}},
			"default permissions"},
		{"no_auth_user", server.Options{NoAuthUser: "a", Accounts: []server.AccountConfig{acc("A", "a")}}, ""},
		{"no_auth_user unknown", server.Options{NoAuthUser: "x", Accounts: []server.AccountConfig{acc("A", "a")}},
			`no_auth_user: "x" not present as user or nkey`},
		{"no_auth_user without users", server.Options{NoAuthUser: "x"},
			`no_auth_user: "x" present, but users/nkeys are not defined`},
		{"no_auth_user the single user", server.Options{NoAuthUser: "u", Username: "u", Password: "p"},
			`no_auth_user: "u" present, but users/nkeys are not defined`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := server.New(tc.opts)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, server.ErrInvalidOptions)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// TestAccountNoAuthUser: a client without credentials connects as the
// no_auth_user, in its account; with credentials it is checked as usual.
func TestAccountNoAuthUser(t *testing.T) {
	o := accountsOptions()
	o.NoAuthUser = "b2"
	s := RunServer(t, o)
	anon := Connect(t, s)
	sub, err := anon.SubscribeSync("x")
	require.NoError(t, err)
	require.NoError(t, anon.Flush())
	require.NoError(t, connectAs(t, s, "b").Publish("x", []byte("B")))
	_, err = sub.NextMsg(5 * time.Second)
	require.NoError(t, err, "b2 is in B")
	a := connectAs(t, s, "a")
	require.NoError(t, a.Publish("x", []byte("A")))
	requireNothing(t, sub, a, anon)

	_, err = nats.Connect(s.ClientURL(), nats.UserInfo("a", "wrong"), nats.MaxReconnects(0))
	require.ErrorIs(t, err, nats.ErrAuthorization)
}

// TestAccountPrincipals: a Publisher is bound to one account; told to act
// for a principal of another, it acts for nobody, so that what it
// publishes is never Permitted (fails closed).
func TestAccountPrincipals(t *testing.T) {
	o := accountsOptions()
	o.Accounts[0].DefaultPermissions = &server.Permissions{Publish: server.SubjectPermission{Allow: []string{"a.>"}}}
	s := RunServer(t, o)
	accA, ok := s.LookupAccount("A")
	require.True(t, ok)
	accB, _ := s.LookupAccount("B")
	require.Equal(t, []*server.Account{s.GlobalAccount(), s.SystemAccount(), accA, accB}, s.Accounts())

	type seen struct {
		acc       *server.Account
		user      string
		internal  bool
		permitted bool
	}
	got := make(chan seen, 8)
	record := func(m *server.Msg) {
		got <- seen{m.Account(), m.Principal().User(), m.Internal(), m.Permitted()}
	}
	for _, acc := range []*server.Account{accA, accB, s.GlobalAccount()} {
		_, err := acc.SubscribeInternal("a.>", "", record)
		require.NoError(t, err)
	}
	alice := accA.PrincipalOf("a")
	require.Equal(t, accA, alice.Account())
	require.True(t, alice.CanPublish("a.x"))
	require.False(t, alice.CanPublish("b.x"), "A's default permissions")
	require.False(t, s.PrincipalOf("a").CanPublish("a.x"), "a is not a user of $G")
	require.False(t, accB.PrincipalOf("a").CanPublish("a.x"), "nor of B")

	pa := accA.NewPublisher()
	pa.ActFor(alice)
	pa.PublishNow("a.x", "", nil, []byte("1"))
	require.Equal(t, seen{accA, "a", true, true}, <-got, "only A's subscription, acting for a")

	pb := accB.NewPublisher()
	pb.ActFor(alice) // a principal of A for a publisher of B
	pb.PublishNow("a.x", "", nil, []byte("2"))
	require.Equal(t, seen{accB, "", true, false}, <-got, "nobody: fails closed")

	// A client's message, and an answer from AfterRead, stay in the
	// client's account.
	answered := make(chan *server.Account, 1)
	_, err := accA.SubscribeInternal("a.ask", "", func(m *server.Msg) {
		acc := m.Account() // m is the handler's only
		m.AfterRead(func(p *server.Publisher) {
			p.ActFor(server.ServerPrincipal)
			p.Publish("a.answer", "", nil, []byte("3"))
			answered <- acc
		})
	})
	require.NoError(t, err)
	_, err = s.GlobalAccount().SubscribeInternal("a.ask", "", func(m *server.Msg) { t.Error("$G got A's message") })
	require.NoError(t, err)
	nc := connectAs(t, s, "g")
	require.NoError(t, nc.Publish("a.nope", nil)) // $G's subscription to a.> only
	require.NoError(t, nc.Flush())
	require.Equal(t, seen{s.GlobalAccount(), "g", false, true}, <-got)
	require.NoError(t, connectAs(t, s, "a2").Publish("a.ask", nil))
	select {
	case acc := <-answered:
		require.Equal(t, accA, acc)
	case <-time.After(5 * time.Second):
		t.Fatal("no AfterRead")
	}
	require.Equal(t, seen{accA, "a2", false, true}, <-got, "a2's own a.ask, in A")
	require.Equal(t, seen{accA, "", true, true}, <-got, "the answer, in A")
	require.Empty(t, got)
}

// TestAccountInternalSubscriptions: an internal subscription and the
// interest queries are per account; the Server's are $G's.
func TestAccountInternalSubscriptions(t *testing.T) {
	s := RunServer(t, accountsOptions())
	accA, _ := s.LookupAccount("A")
	var mu sync.Mutex
	var gotA, gotG []string
	_, err := accA.SubscribeInternal("in", "", func(m *server.Msg) {
		mu.Lock()
		gotA = append(gotA, string(m.Data))
		mu.Unlock()
	})
	require.NoError(t, err)
	_, err = s.SubscribeInternal("in", "", func(m *server.Msg) {
		mu.Lock()
		gotG = append(gotG, string(m.Data))
		mu.Unlock()
	})
	require.NoError(t, err)
	for _, u := range []string{"a", "b", "g"} {
		nc := connectAs(t, s, u)
		require.NoError(t, nc.Publish("in", []byte(u)))
		require.NoError(t, nc.Flush())
	}
	mu.Lock()
	require.Equal(t, []string{"a"}, gotA)
	require.Equal(t, []string{"g"}, gotG)
	mu.Unlock()

	b := connectAs(t, s, "b")
	_, err = b.SubscribeSync("only.b")
	require.NoError(t, err)
	require.NoError(t, b.Flush())
	accB, _ := s.LookupAccount("B")
	require.True(t, accB.HasInterest("only.b"))
	require.False(t, accA.HasInterest("only.b"))
	require.False(t, s.HasInterest("only.b"))
	require.True(t, accA.HasSubscribers("in"))
	require.False(t, accB.HasSubscribers("in"))
	require.Equal(t, 2, accB.NumConnections())
}

// TestAccountMonitoring: /subsz and /varz count every account's
// subscriptions; /subsz?acc= reads one account's.
func TestAccountMonitoring(t *testing.T) {
	o := accountsOptions()
	o.NoSystemAccount = true // no system imports: the accounts' subscriptions are their clients'
	s := RunMonitored(t, o)
	for _, u := range []string{"a", "b", "b2"} {
		nc := connectAs(t, s, u)
		_, err := nc.SubscribeSync("mon." + u)
		require.NoError(t, err)
		require.NoError(t, nc.Flush())
	}
	require.Equal(t, 3, s.NumSubscriptions())
	require.Equal(t, uint32(3), getVarz(t, s).Subscriptions)

	var sz server.Subsz
	MonitorJSON(t, s, "/subsz?subs=1", &sz)
	require.Equal(t, uint32(3), sz.NumSubs)
	accounts := map[string]string{}
	for _, d := range sz.Subs {
		accounts[d.Subject] = d.Account
	}
	require.Equal(t, map[string]string{"mon.a": "A", "mon.b": "B", "mon.b2": "B"}, accounts)
	MonitorJSON(t, s, "/subsz?subs=1&acc=B", &sz)
	require.Equal(t, uint32(2), sz.NumSubs)
	require.Len(t, sz.Subs, 2)
	MonitorJSON(t, s, "/subsz?acc=B&test=mon.a", &sz)
	require.Zero(t, sz.Total)
	status, _, body := monitorGet(t, s, "/subsz?acc=nope")
	require.Equal(t, http.StatusBadRequest, status)
	require.True(t, strings.Contains(string(body), "no such account"), "%s", body)
}

// TestAccountConnectErrors: the reference server's texts, and a second
// CONNECT that would move the connection to another account is refused.
func TestAccountConnectErrors(t *testing.T) {
	s := RunServer(t, accountsOptions())
	raw := DialRaw(t, s)
	raw.Send("CONNECT {\"verbose\":false,\"user\":\"a\",\"pass\":\"a\"}\r\nPING\r\n")
	raw.Expect("PONG")
	raw.Send("CONNECT {\"verbose\":false,\"user\":\"a2\",\"pass\":\"a2\"}\r\nPING\r\n")
	raw.Expect("PONG") // the same account: fine
	raw.Send("CONNECT {\"verbose\":false,\"user\":\"b\",\"pass\":\"b\"}\r\n")
	require.Contains(t, raw.ExpectClosed(), "-ERR 'Authorization Violation'")

	_, err := nats.Connect(s.ClientURL(), nats.UserInfo("b", "a"), nats.MaxReconnects(0))
	require.True(t, errors.Is(err, nats.ErrAuthorization), "%v", err)
}
