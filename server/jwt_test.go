package server_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/internal/jwttest"
	"github.com/skiffmq/skiff/server"
)

// operatorOptions are the options of operator mode for op, with the
// accounts preloaded in the MEMORY resolver.
func operatorOptions(op *jwttest.Operator, accounts ...*jwttest.Account) server.Options {
	return server.Options{
		TrustedOperators: []string{op.JWT},
		Resolver:         server.ResolverOptions{Type: server.ResolverMemory, Preload: op.Preload(accounts...)},
	}
}

// connectJWT dials s by hand and authenticates as u: the CONNECT carries
// its JWT and the INFO's nonce signed by its key. It returns the
// connection after the first PING's answer (PONG, or the refusal).
func connectJWT(t testing.TB, s *server.Server, u *jwttest.User) (*rawConn, string) {
	t.Helper()
	r := DialRaw(t, s)
	nonce, _ := r.Info["nonce"].(string)
	require.NotEmpty(t, nonce, "operator mode sends a nonce")
	r.Send("CONNECT " + u.Connect(nonce) + "\r\nPING\r\n")
	return r, r.ReadLine()
}

// requireAccepted requires u to connect (PONG) and returns the connection.
func requireAccepted(t testing.TB, s *server.Server, u *jwttest.User) *rawConn {
	t.Helper()
	r, line := connectJWT(t, s, u)
	require.Equal(t, "PONG", line)
	return r
}

// requireRefused requires u's CONNECT to be refused with Authorization
// Violation and the connection closed.
func requireRefused(t testing.TB, s *server.Server, u *jwttest.User) {
	t.Helper()
	r, line := connectJWT(t, s, u)
	require.Equal(t, "-ERR 'Authorization Violation'", line)
	r.ExpectClosed()
}

// TestJWTConnectWithCreds: a nats.go client with a .creds file connects
// into its account (the INFO after CONNECT names it), and publishes and
// receives there.
func TestJWTConnectWithCreds(t *testing.T) {
	op := jwttest.NewOperator(t)
	acc := op.Account("A")
	u := acc.User("alice")
	s := RunServer(t, operatorOptions(op, acc))

	nc := Connect(t, s, nats.UserCredentials(u.CredsFile(t)))
	sub, err := nc.SubscribeSync("greet")
	require.NoError(t, err)
	require.NoError(t, nc.Publish("greet", []byte("hi")))
	msg, err := sub.NextMsg(2 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "hi", string(msg.Data))
	got, ok := s.LookupAccount(acc.Pub)
	require.True(t, ok)
	require.Equal(t, 1, got.NumConnections())

	r2 := DialRaw(t, s)
	require.Equal(t, true, r2.Info["auth_required"])
	r2.Send("CONNECT " + u.Connect(r2.Info["nonce"].(string)) + "\r\nPING\r\n")
	require.Equal(t, "PONG", r2.ReadLine())
	line := r2.ReadLine()
	require.True(t, strings.HasPrefix(line, "INFO "), line)
	require.Contains(t, line, `"remote_account":"`+acc.Pub+`"`)
}

// TestJWTAccountIsolation: users of two accounts subscribed to the same
// subjects, _INBOX and > included, see only their own account's messages.
func TestJWTAccountIsolation(t *testing.T) {
	op := jwttest.NewOperator(t)
	a, b := op.Account("A"), op.Account("B")
	s := RunServer(t, operatorOptions(op, a, b))
	na := Connect(t, s, nats.UserCredentials(a.User("a").CredsFile(t)))
	nb := Connect(t, s, nats.UserCredentials(b.User("b").CredsFile(t)))

	var bSubs []*nats.Subscription
	for _, subj := range []string{"orders.new", ">", "_INBOX.>"} {
		sub, err := nb.SubscribeSync(subj)
		require.NoError(t, err)
		bSubs = append(bSubs, sub)
	}
	require.NoError(t, nb.Flush())
	aSub, err := na.SubscribeSync("orders.new")
	require.NoError(t, err)
	_, err = na.Subscribe("svc", func(m *nats.Msg) { _ = m.Respond([]byte("pong")) })
	require.NoError(t, err)
	require.NoError(t, na.Flush())

	require.NoError(t, na.Publish("orders.new", []byte("a's")))
	_, err = na.Request("svc", nil, 2*time.Second)
	require.NoError(t, err)
	_, err = aSub.NextMsg(2 * time.Second)
	require.NoError(t, err)
	require.NoError(t, na.Flush())
	for _, sub := range bSubs {
		m, err := sub.NextMsg(200 * time.Millisecond)
		require.ErrorIs(t, err, nats.ErrTimeout, "B received A's %v", m)
	}
	// Another B user asks for A's service: nobody answers in B.
	nb2 := Connect(t, s, nats.UserCredentials(b.User("b2").CredsFile(t)))
	unsubscribe(t, bSubs)
	require.NoError(t, nb.Flush())
	_, err = nb2.Request("svc", nil, time.Second)
	require.ErrorIs(t, err, nats.ErrNoResponders)
}

// TestJWTOptions: New refuses what operator mode cannot honour, with
// nats-server's messages where it has one.
func TestJWTOptions(t *testing.T) {
	op := jwttest.NewOperator(t)
	acc := op.Account("A")
	other := jwttest.NewOperator(t)
	expired := jwttest.NewOperator(t, jwttest.OperatorExpires(time.Now().Add(-time.Hour)))
	mem := server.ResolverOptions{Type: server.ResolverMemory, Preload: op.Preload(acc)}
	// An operator JWT signed by another operator's key.
	notSelf := jwt.NewOperatorClaims(op.Pub)
	notSelfJWT, err := notSelf.Encode(other.Key)
	require.NoError(t, err)

	for _, tc := range []struct {
		name string
		opts server.Options
		want string
	}{
		{"no resolver", server.Options{TrustedOperators: []string{op.JWT}}, "operators require an account resolver to be configured"},
		{"operators and keys", server.Options{TrustedOperators: []string{op.JWT}, TrustedKeys: []string{op.Pub}, Resolver: mem},
			"conflicting options for 'TrustedKeys' and 'TrustedOperators'"},
		{"accounts", server.Options{TrustedOperators: []string{op.JWT}, Resolver: mem, Accounts: []server.AccountConfig{{Name: "X"}}},
			"operators do not allow Accounts to be configured directly"},
		{"users", server.Options{TrustedOperators: []string{op.JWT}, Resolver: mem, Users: []server.User{{Name: "u", Password: "p"}}},
			"operators do not allow users to be configured directly"},
		{"token", server.Options{TrustedOperators: []string{op.JWT}, Resolver: mem, Token: "t"}, "operators do not allow a user or a token"},
		{"bad trusted key", server.Options{TrustedKeys: []string{acc.Pub}, Resolver: mem}, "are required to be a valid public operator nkey"},
		{"bad pinned key", server.Options{TrustedOperators: []string{op.JWT}, Resolver: mem, ResolverPinnedAccounts: []string{op.Pub}},
			"is not a valid public account nkey"},
		{"resolver alone", server.Options{Resolver: mem}, "a resolver without operators"},
		{"system account not configured", server.Options{SystemAccount: acc.Pub}, "error resolving system account"},
		{"not a JWT", server.Options{TrustedOperators: []string{"nope"}, Resolver: mem}, "operator 1"},
		{"an account JWT", server.Options{TrustedOperators: []string{acc.JWT}, Resolver: mem}, "not operator claim"},
		{"expired operator", server.Options{TrustedOperators: []string{expired.JWT}, Resolver: mem}, "claim is expired"},
		{"not self-signed", server.Options{TrustedOperators: []string{notSelfJWT}, Resolver: mem}, "not by the operator itself"},
		{"system account differs", server.Options{TrustedOperators: []string{jwttest.NewOperator(t, jwttest.SystemAccount(acc.Pub)).JWT},
			Resolver: mem, SystemAccount: op.Account("S").Pub}, "system_account in config and operator JWT must be identical"},
		{"system account missing", server.Options{TrustedOperators: []string{op.JWT}, Resolver: mem, SystemAccount: op.Account("S").Pub},
			"error resolving system account"},
		{"newer server asked", server.Options{TrustedOperators: []string{jwttest.NewOperator(t, func(c *jwt.OperatorClaims) {
			c.AssertServerVersion = "9.0.0"
		}).JWT}, Resolver: mem}, "expects server version 9.0.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := server.New(tc.opts)
			require.ErrorIs(t, err, server.ErrInvalidOptions)
			require.Contains(t, err.Error(), tc.want)
		})
	}
	// The one that is fine, and an operator naming its system account.
	sys := op.Account("SYS")
	op2 := jwttest.NewOperator(t)
	op2.Update(jwttest.SystemAccount(sys.Pub))
	_, err = server.New(server.Options{TrustedOperators: []string{op.JWT}, Resolver: mem})
	require.NoError(t, err)
	_, err = server.New(server.Options{TrustedKeys: []string{op.Pub}, Resolver: mem})
	require.NoError(t, err)
	sys2 := op2.Account("SYS")
	op2.Update(jwttest.SystemAccount(sys2.Pub))
	_, err = server.New(operatorOptions(op2, sys2))
	require.NoError(t, err)
}

// TestJWTLimits: account and user limits from the claims, the lowest
// winning, with nats-server's errors.
func TestJWTLimits(t *testing.T) {
	op := jwttest.NewOperator(t)
	acc := op.Account("A", jwttest.AccountLimits(2, 3, 100))
	s := RunServer(t, operatorOptions(op, acc))

	t.Run("payload", func(t *testing.T) {
		r := requireAccepted(t, s, acc.User("p"))
		info := r.ReadLine()
		require.Contains(t, info, `"max_payload":100`)
		u := acc.User("p50", jwttest.UserLimits(-1, 50))
		r2 := requireAccepted(t, s, u)
		require.Contains(t, r2.ReadLine(), `"max_payload":50`)
		r2.Send("PUB x 51\r\n" + strings.Repeat("a", 51) + "\r\n")
		require.Equal(t, "-ERR 'Maximum Payload Violation'", r2.ReadLine())
		r2.ExpectClosed()
		r.Send("PUB x 100\r\n" + strings.Repeat("a", 100) + "\r\nPING\r\n")
		require.Equal(t, "PONG", r.ReadLine())
	})
	t.Run("subscriptions per connection", func(t *testing.T) {
		r := requireAccepted(t, s, acc.User("s", jwttest.UserLimits(2, -1)))
		r.ReadLine() // INFO
		r.Send("SUB a 1\r\nSUB b 2\r\nSUB c 3\r\nPING\r\n")
		r.Expect("-ERR 'maximum subscriptions exceeded'", "PONG")
	})
	t.Run("connections", func(t *testing.T) {
		// The earlier subtests' connections closed with them; the server
		// sees that a moment later.
		waitAccountConns(t, s, acc.Pub, 0)
		a1 := requireAccepted(t, s, acc.User("c1"))
		a1.ReadLine()
		a2 := requireAccepted(t, s, acc.User("c2"))
		a2.ReadLine()
		r, line := connectJWT(t, s, acc.User("c3"))
		require.Equal(t, "-ERR 'maximum account active connections exceeded'", line)
		r.ExpectClosed()
	})
	t.Run("a scope's limits", func(t *testing.T) {
		op := jwttest.NewOperator(t)
		acc := op.Account("S")
		scoped := acc.AddScopedSigningKey(func(s *jwt.UserScope) { s.Template.Subs, s.Template.Payload = 1, 10 })
		s := RunServer(t, operatorOptions(op, acc))
		r := requireAccepted(t, s, acc.User("u", jwttest.Scoped(), jwttest.SignedWith(scoped)))
		require.Contains(t, r.ReadLine(), `"max_payload":10`)
		r.Send("SUB a 1\r\nSUB b 2\r\nPING\r\n")
		r.Expect("-ERR 'maximum subscriptions exceeded'", "PONG")
	})
	t.Run("zero allows nothing", func(t *testing.T) {
		op := jwttest.NewOperator(t)
		none := op.Account("N", jwttest.AccountLimits(0, -1, -1))
		s := RunServer(t, operatorOptions(op, none))
		r, line := connectJWT(t, s, none.User("u"))
		require.Equal(t, "-ERR 'maximum account active connections exceeded'", line)
		r.ExpectClosed()
	})
}

// TestJWTPermissions: a user's own permissions, the account's default
// ones for a user without, and a scoped signing key's template.
func TestJWTPermissions(t *testing.T) {
	op := jwttest.NewOperator(t)
	acc := op.Account("A", jwttest.DefaultPermissions([]string{"def.>"}, []string{"def.>", "_INBOX.>"}),
		jwttest.AccountClaims(func(c *jwt.AccountClaims) { c.Tags = jwt.TagList{"region:eu"} }))
	scoped := acc.AddScopedSigningKey(func(s *jwt.UserScope) {
		s.Template.Pub.Allow = jwt.StringList{"user.{{name()}}.>", "acct.{{account-name()}}", "r.{{account-tag(region)}}", "t.{{tag(team)}}"}
		s.Template.Sub.Allow = jwt.StringList{"_INBOX.>", "in.{{subject()}}"}
	})
	s := RunServer(t, operatorOptions(op, acc))

	check := func(t *testing.T, u *jwttest.User, pubOK, pubDenied []string) {
		t.Helper()
		r := requireAccepted(t, s, u)
		r.ReadLine() // INFO
		for _, subj := range pubOK {
			r.Send("PUB " + subj + " 0\r\n\r\nPING\r\n")
			require.Equal(t, "PONG", r.ReadLine(), "publish to %s", subj)
		}
		for _, subj := range pubDenied {
			r.Send("PUB " + subj + " 0\r\n\r\nPING\r\n")
			r.Expect(fmt.Sprintf("-ERR 'Permissions Violation for Publish to %q'", subj), "PONG")
		}
	}
	t.Run("own", func(t *testing.T) {
		check(t, acc.User("own", jwttest.Permissions([]string{"own.>"}, nil)), []string{"own.x"}, []string{"def.x", "other"})
	})
	t.Run("account default", func(t *testing.T) {
		check(t, acc.User("plain"), []string{"def.x"}, []string{"own.x"})
	})
	t.Run("scoped template", func(t *testing.T) {
		u := acc.User("bob", jwttest.Scoped(), jwttest.SignedWith(scoped), jwttest.Tags("team:red", "team:blue"))
		check(t, u, []string{"user.bob.x", "acct.A", "r.eu", "t.red", "t.blue"}, []string{"user.alice.x", "def.x", "t.green"})
	})
	t.Run("scoped user with its own permissions", func(t *testing.T) {
		requireRefused(t, s, acc.User("own", jwttest.SignedWith(scoped), jwttest.Permissions([]string{"x"}, nil)))
	})
	t.Run("queue permission", func(t *testing.T) {
		// Valid in a JWT, but Skiff's permissions have no queue groups.
		requireRefused(t, s, acc.User("q", jwttest.Permissions(nil, []string{"work.* workers"})))
	})
	t.Run("response permissions", func(t *testing.T) {
		requireRefused(t, s, acc.User("resp", jwttest.UserClaims(func(c *jwt.UserClaims) {
			c.Resp = &jwt.ResponsePermission{MaxMsgs: 1}
		})))
	})
}

// TestJWTExpiry: a connection ends when its user's or its account's JWT
// expires, with nats-server's errors.
func TestJWTExpiry(t *testing.T) {
	op := jwttest.NewOperator(t)
	acc := op.Account("A")
	soon := op.Account("S", jwttest.AccountExpires(time.Now().Add(2*time.Second)))
	s := RunServer(t, operatorOptions(op, acc, soon))

	u := requireAccepted(t, s, acc.User("u", jwttest.Expires(time.Now().Add(2*time.Second))))
	a := requireAccepted(t, s, soon.User("a"))
	require.Contains(t, u.ReadLine(), "INFO ")
	require.Contains(t, a.ReadLine(), "INFO ")
	require.Equal(t, []string{"-ERR 'User Authentication Expired'"}, u.ExpectClosed())
	require.Equal(t, []string{"-ERR 'Account Authentication Expired'"}, a.ExpectClosed())
	// The account's users are refused from now on.
	requireRefused(t, s, soon.User("b"))
}

// TestJWTCluster: operator mode on three servers joined by routes. Users
// of one account reach each other across the routes, another account's
// see nothing; an account whose JWT became valid after the servers
// started is registered from a peer's interest, so its messages cross.
func TestJWTCluster(t *testing.T) {
	op := jwttest.NewOperator(t)
	a, b := op.Account("A"), op.Account("B")
	// Valid from the next whole second on: iat and nbf are in seconds.
	later := op.Account("L", jwttest.AccountNotBefore(time.Now().Truncate(time.Second).Add(2*time.Second)))
	c := clustertest.Start(t, 3, operatorOptions(op, a, b, later))
	c.WaitFormed(t)
	as := func(i int, acc *jwttest.Account, name string) *nats.Conn {
		return c.Connect(t, i, nats.UserCredentials(acc.User(name).CredsFile(t)))
	}
	a1, b1, a3 := as(0, a, "a1"), as(0, b, "b1"), as(2, a, "a3")
	aSub, err := a1.SubscribeSync("orders.>")
	require.NoError(t, err)
	bSub, err := b1.SubscribeSync(">")
	require.NoError(t, err)
	require.NoError(t, a1.Flush())
	require.NoError(t, b1.Flush())
	c.WaitAccountInterest(t, a.Pub, "orders.new", 0)
	c.WaitAccountInterest(t, b.Pub, "orders.new", 0)
	require.NoError(t, a3.Publish("orders.new", []byte("A")))
	requireNext(t, aSub, "A")
	requireNothing(t, bSub, a3, a1)

	time.Sleep(time.Until(time.Unix(later.Claims.NotBefore, 0).Add(100 * time.Millisecond)))
	l2 := as(1, later, "l2")
	lSub, err := l2.SubscribeSync("late")
	require.NoError(t, err)
	require.NoError(t, l2.Flush())
	// Server 0 has no client of L: only the route's RS+ can register it.
	c.WaitAccountInterest(t, later.Pub, "late", 1)
	l0 := as(0, later, "l0")
	require.NoError(t, l0.Publish("late", []byte("L")))
	requireNext(t, lSub, "L")
}

// TestJWTWebSocket: a JWT user connects over WebSocket too (the nonce is
// in the WebSocket's INFO), and allowed connection types tell the two
// listeners apart.
func TestJWTWebSocket(t *testing.T) {
	op := jwttest.NewOperator(t)
	acc := op.Account("A")
	o := operatorOptions(op, acc)
	o.WebSocket = server.WebSocketOptions{Port: server.RandomPort, NoTLS: true}
	s := RunServer(t, o)
	wsURL := "ws://" + s.WebSocketAddr().String()
	wsOnly := acc.User("ws", jwttest.ConnectionTypes(jwt.ConnectionTypeWebsocket)).CredsFile(t)
	tcpOnly := acc.User("tcp", jwttest.ConnectionTypes(jwt.ConnectionTypeStandard)).CredsFile(t)

	for _, tc := range []struct {
		url, creds string
		ok         bool
	}{{wsURL, wsOnly, true}, {s.ClientURL(), wsOnly, false}, {wsURL, tcpOnly, false}, {s.ClientURL(), tcpOnly, true}} {
		nc, err := nats.Connect(tc.url, nats.UserCredentials(tc.creds), nats.MaxReconnects(0))
		if !tc.ok {
			require.ErrorIs(t, err, nats.ErrAuthorization, "%s with %s", tc.url, tc.creds)
			continue
		}
		require.NoError(t, err, "%s with %s", tc.url, tc.creds)
		nc.Close()
	}
}
