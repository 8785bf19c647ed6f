package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/internal/jwttest"
	"github.com/skiffmq/skiff/server"
)

// syncBuffer is a log destination tests read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func bufferLogger() (*slog.Logger, *syncBuffer) {
	buf := &syncBuffer{}
	return slog.New(slog.NewTextHandler(buf, nil)), buf
}

// TestJWTImports: the exports and imports of account JWTs carry messages
// between accounts as configured ones do: a public stream under a local
// subject and under a prefix, a public service under a local subject, a
// stream and a streamed service that need activation tokens, and a stream
// restricted by account token position. A third account sees nothing.
func TestJWTImports(t *testing.T) {
	op := jwttest.NewOperator(t)
	exp := op.Account("E", jwttest.Exports(
		&jwt.Export{Subject: "events.>", Type: jwt.Stream},
		&jwt.Export{Subject: "news.>", Type: jwt.Stream},
		&jwt.Export{Subject: "time.now", Type: jwt.Service},
		&jwt.Export{Subject: "priv.>", Type: jwt.Stream, TokenReq: true},
		&jwt.Export{Subject: "psvc.*", Type: jwt.Service, TokenReq: true, ResponseType: jwt.ResponseTypeStream},
		&jwt.Export{Subject: "acct.*.events", Type: jwt.Stream, AccountTokenPosition: 2},
	))
	other := op.Account("O")
	// The importer's key is made first: its activations name it.
	ikp, ipub := importerKey(t)
	imp := op.Account("I", withKey(ikp, ipub), jwttest.Imports(
		&jwt.Import{Account: exp.Pub, Subject: "events.>", LocalSubject: "e.>", Type: jwt.Stream},
		&jwt.Import{Account: exp.Pub, Subject: "news.>", To: "pre", Type: jwt.Stream}, //nolint:staticcheck // the deprecated prefix, as older JWTs carry it
		&jwt.Import{Account: exp.Pub, Subject: "time.now", LocalSubject: "clock", Type: jwt.Service},
		&jwt.Import{Account: exp.Pub, Subject: "priv.>", Type: jwt.Stream, Token: exp.Activation(ipub, "priv.>", jwt.Stream)},
		&jwt.Import{Account: exp.Pub, Subject: "psvc.*", Type: jwt.Service, Token: exp.Activation(ipub, "psvc.*", jwt.Service)},
		&jwt.Import{Account: exp.Pub, Subject: jwt.Subject("acct." + ipub + ".events"), LocalSubject: "mine", Type: jwt.Stream},
	))

	s := RunServer(t, operatorOptions(op, exp, imp, other))
	ne := Connect(t, s, nats.UserCredentials(exp.User("e").CredsFile(t)))
	ni := Connect(t, s, nats.UserCredentials(imp.User("i").CredsFile(t)))
	no := Connect(t, s, nats.UserCredentials(other.User("o").CredsFile(t)))

	oSub, err := no.SubscribeSync(">")
	require.NoError(t, err)
	require.NoError(t, no.Flush())
	subs := map[string]*nats.Subscription{}
	for _, subj := range []string{"e.>", "pre.news.>", "priv.>", "mine"} {
		subs[subj], err = ni.SubscribeSync(subj)
		require.NoError(t, err)
	}
	require.NoError(t, ni.Flush())
	_, err = ne.Subscribe("time.now", func(m *nats.Msg) { _ = m.Respond([]byte("noon")) })
	require.NoError(t, err)
	_, err = ne.Subscribe("psvc.*", func(m *nats.Msg) {
		_ = m.Respond([]byte("part 1"))
		_ = m.Respond([]byte("part 2"))
	})
	require.NoError(t, err)
	require.NoError(t, ne.Flush())

	for subj, want := range map[string]string{
		"events.x":                  "e.x",
		"priv.y":                    "priv.y",
		"acct." + ipub + ".events":  "mine",
		"acct." + other.Pub + ".ev": "",
	} {
		require.NoError(t, ne.Publish(subj, []byte(subj)))
		if want == "" {
			continue
		}
		sub := subs[map[string]string{"e.x": "e.>", "priv.y": "priv.>", "mine": "mine"}[want]]
		m, err := sub.NextMsg(2 * time.Second)
		require.NoError(t, err, subj)
		require.Equal(t, want, m.Subject)
		require.Equal(t, subj, string(m.Data))
	}
	require.NoError(t, ne.Publish("news.x", nil))
	m, err := subs["pre.news.>"].NextMsg(2 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "pre.news.x", m.Subject)

	r, err := ni.Request("clock", nil, 2*time.Second)
	require.NoError(t, err)
	require.Equal(t, "noon", string(r.Data))

	inbox := nats.NewInbox()
	parts, err := ni.SubscribeSync(inbox)
	require.NoError(t, err)
	require.NoError(t, ni.PublishRequest("psvc.q", inbox, nil))
	for _, want := range []string{"part 1", "part 2"} {
		m, err := parts.NextMsg(2 * time.Second)
		require.NoError(t, err)
		require.Equal(t, want, string(m.Data))
	}

	// The importer cannot use what it did not import, nor the other
	// account anything.
	_, err = ni.Request("time.now", nil, 300*time.Millisecond)
	require.ErrorIs(t, err, nats.ErrNoResponders)
	require.NoError(t, no.Flush())
	requireNoMsg(t, oSub)
	require.NoError(t, oSub.Unsubscribe())
	_, err = no.Request("clock", nil, 300*time.Millisecond)
	require.ErrorIs(t, err, nats.ErrNoResponders)
}

// importerKey makes an account key pair before its account, so that
// activation tokens can name it.
func importerKey(t *testing.T) (nkeys.KeyPair, string) { return newKeyOf(t, nkeys.CreateAccount) }

// withKey gives an account option that mints the account under kp.
func withKey(kp nkeys.KeyPair, pub string) jwttest.AccountOption {
	return func(a *jwttest.Account) {
		a.Key, a.Pub = kp, pub
		a.Claims.Subject = pub
	}
}

// activationCase is an importer of the token-required export "priv.>" of
// account E, and what becomes of it.
type activationCase struct {
	name string
	// imp makes the import (the importer's public key given).
	imp func(pub string) *jwt.Import
	// revoke, if set, revokes the importer's activations in E's export
	// ("*", every importer's, is TestJWTImportRevokedForAll's: it would
	// revoke the other cases' too).
	revoke bool
	// outcome: "delivered", "skipped" (the account's users connect, the
	// import is not made) or "refused" (the account JWT does not
	// validate: its users are refused).
	outcome string
	// log is what Skiff logs for a skipped import.
	log string
}

// activationCases are the activation tokens of TestJWTImportActivations
// and TestDifferentialJWTImports: e is the exporter, esk a signing key of
// its, o another account.
func activationCases(t *testing.T, e *jwttest.Account, esk nkeys.KeyPair, o *jwttest.Account) []activationCase {
	now := time.Now()
	stream := func(token string) *jwt.Import {
		return &jwt.Import{Account: e.Pub, Subject: "priv.>", Type: jwt.Stream, Token: token}
	}
	rogue, err := nkeys.CreateAccount()
	require.NoError(t, err)
	return []activationCase{
		{name: "valid", outcome: "delivered",
			imp: func(pub string) *jwt.Import { return stream(e.Activation(pub, "priv.>", jwt.Stream)) }},
		{name: "signed by a signing key of the exporter", outcome: "delivered",
			imp: func(pub string) *jwt.Import {
				return stream(e.Activation(pub, "priv.>", jwt.Stream, jwttest.ActivationSignedWith(esk)))
			}},
		{name: "expiring later", outcome: "delivered",
			imp: func(pub string) *jwt.Import {
				return stream(e.Activation(pub, "priv.>", jwt.Stream, jwttest.ActivationExpires(now.Add(time.Hour))))
			}},
		{name: "wider than the import", outcome: "delivered",
			imp: func(pub string) *jwt.Import { return stream(e.Activation(pub, ">", jwt.Stream)) }},
		{name: "missing", outcome: "skipped", log: "requires an activation token",
			imp: func(string) *jwt.Import { return stream("") }},
		{name: "expired", outcome: "skipped", log: "activation token has expired",
			imp: func(pub string) *jwt.Import {
				return stream(e.Activation(pub, "priv.>", jwt.Stream, jwttest.ActivationExpires(now.Add(-time.Minute))))
			}},
		{name: "revoked", outcome: "skipped", log: "revoked by the export", revoke: true,
			imp: func(pub string) *jwt.Import { return stream(e.Activation(pub, "priv.>", jwt.Stream)) }},
		{name: "signed by a key not the exporter's", outcome: "skipped", log: "is not one of its signing keys",
			imp: func(pub string) *jwt.Import {
				return stream(e.Activation(pub, "priv.>", jwt.Stream, jwttest.ActivationSignedWith(rogue)))
			}},
		{name: "signed by another account", outcome: "refused",
			imp: func(pub string) *jwt.Import { return stream(o.Activation(pub, "priv.>", jwt.Stream)) }},
		{name: "forged", outcome: "refused",
			imp: func(pub string) *jwt.Import {
				return stream(tamper(t, e.Activation(pub, "priv.a", jwt.Stream), `"subject":"priv.a"`, `"subject":"priv.>"`))
			}},
		{name: "issued to another account", outcome: "refused",
			imp: func(string) *jwt.Import { return stream(e.Activation(o.Pub, "priv.>", jwt.Stream)) }},
		{name: "narrower than the import", outcome: "refused",
			imp: func(pub string) *jwt.Import { return stream(e.Activation(pub, "priv.a", jwt.Stream)) }},
		{name: "for a service", outcome: "refused",
			imp: func(pub string) *jwt.Import { return stream(e.Activation(pub, "priv.>", jwt.Service)) }},
	}
}

// activationSetup mints, for cases, an exporter E with the token-required
// stream export "priv.>", another account O, and one importer per case;
// the importers follow the cases' order.
func activationSetup(t *testing.T) (op *jwttest.Operator, e, o *jwttest.Account, cases []activationCase, importers []*jwttest.Account) {
	op = jwttest.NewOperator(t)
	e = op.Account("E", jwttest.Exports(&jwt.Export{Subject: "priv.>", Type: jwt.Stream, TokenReq: true}))
	esk := e.AddSigningKey()
	o = op.Account("O")
	cases = activationCases(t, e, esk, o)
	for i, c := range cases {
		kp, pub := importerKey(t)
		importers = append(importers, op.Account("I"+string(rune('a'+i)), withKey(kp, pub), jwttest.Imports(c.imp(pub))))
		if c.revoke {
			e.RevokeActivation("priv.>", pub, time.Now())
		}
	}
	return op, e, o, cases, importers
}

// TestJWTImportActivations: an import of an export that requires an
// activation token is made only with a token the exporting account (or a
// signing key of its) issued to the importer for that import, not expired
// and not revoked. A token that is merely not good enough leaves the
// import out, logged, and the importer's users connect; one that makes
// the account JWT itself invalid (forged, for another account or
// subject) refuses the account, as nats-server does.
func TestJWTImportActivations(t *testing.T) {
	op, e, o, cases, importers := activationSetup(t)
	log, logs := bufferLogger()
	opts := operatorOptions(op, append([]*jwttest.Account{e, o}, importers...)...)
	opts.Logger = log
	s := RunServer(t, opts)
	ne := Connect(t, s, nats.UserCredentials(e.User("e").CredsFile(t)))

	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := importers[i].User("u")
			if c.outcome == "refused" {
				requireRefused(t, s, u)
				return
			}
			ni := Connect(t, s, nats.UserCredentials(u.CredsFile(t)))
			sub, err := ni.SubscribeSync("priv.>")
			require.NoError(t, err)
			require.NoError(t, ni.Flush())
			require.NoError(t, ne.Publish("priv.x", []byte(c.name)))
			require.NoError(t, ne.Flush())
			if c.outcome == "delivered" {
				m, err := sub.NextMsg(2 * time.Second)
				require.NoError(t, err)
				require.Equal(t, c.name, string(m.Data))
				return
			}
			requireNoMsg(t, sub)
			require.Contains(t, logLineOf(logs.String(), importers[i].Pub), c.log)
		})
	}
}

// logLineOf returns the log line that names account pub's import, "" if
// there is none.
func logLineOf(logs, pub string) string {
	for line := range strings.SplitSeq(logs, "\n") {
		if strings.Contains(line, "import not made") && strings.Contains(line, "account="+pub) {
			return line
		}
	}
	return ""
}

// TestJWTImportActivationExpires: an import approved by an activation
// token stops when the token expires, as nats-server's does.
func TestJWTImportActivationExpires(t *testing.T) {
	op := jwttest.NewOperator(t)
	e := op.Account("E", jwttest.Exports(
		&jwt.Export{Subject: "priv.>", Type: jwt.Stream, TokenReq: true},
		&jwt.Export{Subject: "svc", Type: jwt.Service, TokenReq: true},
	))
	kp, pub := importerKey(t)
	// Whole seconds: a token expires at a unix second.
	until := time.Now().Truncate(time.Second).Add(2 * time.Second)
	i := op.Account("I", withKey(kp, pub), jwttest.Imports(
		&jwt.Import{Account: e.Pub, Subject: "priv.>", Type: jwt.Stream,
			Token: e.Activation(pub, "priv.>", jwt.Stream, jwttest.ActivationExpires(until))},
		&jwt.Import{Account: e.Pub, Subject: "svc", Type: jwt.Service,
			Token: e.Activation(pub, "svc", jwt.Service, jwttest.ActivationExpires(until))},
	))
	s := RunServer(t, operatorOptions(op, e, i))
	ne := Connect(t, s, nats.UserCredentials(e.User("e").CredsFile(t)))
	ni := Connect(t, s, nats.UserCredentials(i.User("i").CredsFile(t)))
	_, err := ne.Subscribe("svc", func(m *nats.Msg) { _ = m.Respond([]byte("ok")) })
	require.NoError(t, err)
	require.NoError(t, ne.Flush())
	sub, err := ni.SubscribeSync("priv.>")
	require.NoError(t, err)
	require.NoError(t, ni.Flush())

	require.NoError(t, ne.Publish("priv.a", []byte("before")))
	_, err = sub.NextMsg(2 * time.Second)
	require.NoError(t, err)
	_, err = ni.Request("svc", nil, 2*time.Second)
	require.NoError(t, err)

	time.Sleep(time.Until(until) + 200*time.Millisecond)
	require.NoError(t, ne.Publish("priv.a", []byte("after")))
	require.NoError(t, ne.Flush())
	requireNoMsg(t, sub)
	_, err = ni.Request("svc", nil, 300*time.Millisecond)
	require.ErrorIs(t, err, nats.ErrNoResponders)
}

// TestJWTImportSkipped: an import that cannot be made (its exporter not
// in the resolver, a subject not exported) is left out and logged; the
// account's users still connect and its other imports work.
func TestJWTImportSkipped(t *testing.T) {
	op := jwttest.NewOperator(t)
	e := op.Account("E", jwttest.Exports(&jwt.Export{Subject: "pub.>", Type: jwt.Stream}))
	gone := op.Account("GONE", jwttest.Exports(&jwt.Export{Subject: "x", Type: jwt.Stream}))
	maps := op.Account("MAPS", jwttest.Exports(&jwt.Export{Subject: "m", Type: jwt.Stream}),
		jwttest.AccountClaims(func(c *jwt.AccountClaims) {
			c.Mappings = jwt.Mapping{"a": []jwt.WeightedMapping{{Subject: "b"}}}
		}))
	i := op.Account("I", jwttest.Imports(
		&jwt.Import{Account: gone.Pub, Subject: "x", Type: jwt.Stream},
		&jwt.Import{Account: e.Pub, Subject: "other", Type: jwt.Stream},
		&jwt.Import{Account: maps.Pub, Subject: "m", Type: jwt.Stream},
		&jwt.Import{Account: e.Pub, Subject: "pub.>", Type: jwt.Stream},
	))
	log, logs := bufferLogger()
	opts := operatorOptions(op, e, i, maps)
	opts.Logger = log
	s := RunServer(t, opts)
	for _, want := range []string{gone.Pub, "stream import not authorized", maps.Pub} {
		require.Contains(t, logs.String(), want)
	}
	ne := Connect(t, s, nats.UserCredentials(e.User("e").CredsFile(t)))
	ni := Connect(t, s, nats.UserCredentials(i.User("i").CredsFile(t)))
	sub, err := ni.SubscribeSync(">")
	require.NoError(t, err)
	require.NoError(t, ni.Flush())
	require.NoError(t, ne.Publish("pub.a", nil))
	m, err := sub.NextMsg(2 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "pub.a", m.Subject)
}

// TestJWTImportRevokedForAll: an export revoking every activation ("*")
// issued until a time refuses those tokens, not later ones.
func TestJWTImportRevokedForAll(t *testing.T) {
	op := jwttest.NewOperator(t)
	e := op.Account("E", jwttest.Exports(&jwt.Export{Subject: "priv.>", Type: jwt.Stream, TokenReq: true}))
	before, beforePub := importerKey(t)
	after, afterPub := importerKey(t)
	// Tokens are issued at whole seconds: the late one a second after
	// the revocation.
	now := time.Now()
	early := e.Activation(beforePub, "priv.>", jwt.Stream)
	e.RevokeActivation("priv.>", jwt.All, now)
	time.Sleep(time.Until(now.Truncate(time.Second).Add(time.Second)))
	late := e.Activation(afterPub, "priv.>", jwt.Stream)
	ib := op.Account("IB", withKey(before, beforePub), jwttest.Imports(&jwt.Import{Account: e.Pub, Subject: "priv.>", Type: jwt.Stream, Token: early}))
	ia := op.Account("IA", withKey(after, afterPub), jwttest.Imports(&jwt.Import{Account: e.Pub, Subject: "priv.>", Type: jwt.Stream, Token: late}))
	s := RunServer(t, operatorOptions(op, e, ib, ia))
	ne := Connect(t, s, nats.UserCredentials(e.User("e").CredsFile(t)))
	subOf := func(a *jwttest.Account) *nats.Subscription {
		nc := Connect(t, s, nats.UserCredentials(a.User("u").CredsFile(t)))
		sub, err := nc.SubscribeSync("priv.>")
		require.NoError(t, err)
		require.NoError(t, nc.Flush())
		return sub
	}
	sb, sa := subOf(ib), subOf(ia)
	require.NoError(t, ne.Publish("priv.x", nil))
	_, err := sa.NextMsg(2 * time.Second)
	require.NoError(t, err)
	requireNoMsg(t, sb)
}

// TestJWTSystemAccountExports: a system account with the exports nsc
// gives it (its monitoring streams and services, restricted by account
// token position) lets its users connect, and a tenant importing its own
// account's subjects gets them, not another tenant's.
func TestJWTSystemAccountExports(t *testing.T) {
	committed, err := jwt.DecodeAccountClaims(readJWT(t, "SYS.jwt"))
	require.NoError(t, err)
	require.Len(t, committed.Exports, 2)
	op := jwttest.NewOperator(t)
	sys := op.Account("SYS", jwttest.Exports(committed.Exports...))
	op.Update(jwttest.SystemAccount(sys.Pub))
	b := op.Account("B")
	kp, pub := importerKey(t)
	a := op.Account("A", withKey(kp, pub), jwttest.Imports(
		&jwt.Import{Account: sys.Pub, Subject: jwt.Subject("$SYS.REQ.ACCOUNT." + pub + ".INFO"), LocalSubject: "info", Type: jwt.Service},
		&jwt.Import{Account: sys.Pub, Subject: jwt.Subject("$SYS.ACCOUNT." + pub + ".>"), LocalSubject: "events.>", Type: jwt.Stream},
		// B's: refused by the token position.
		&jwt.Import{Account: sys.Pub, Subject: jwt.Subject("$SYS.ACCOUNT." + b.Pub + ".>"), LocalSubject: "b.>", Type: jwt.Stream},
	))
	s := RunServer(t, operatorOptions(op, sys, a, b))
	ns := Connect(t, s, nats.UserCredentials(sys.User("sys").CredsFile(t)))
	na := Connect(t, s, nats.UserCredentials(a.User("a").CredsFile(t)))
	// The server answers the request the import maps to A's own subject.
	r, err := na.Request("info", nil, 2*time.Second)
	require.NoError(t, err)
	var info struct {
		Data server.AccountInfo `json:"data"`
	}
	require.NoError(t, json.Unmarshal(r.Data, &info), "%s", r.Data)
	require.Equal(t, pub, info.Data.AccountName)

	// A's own events reach it through the import: those a SYS user
	// publishes on A's subjects, and the server's (a client of A
	// connecting); B's do not.
	sub, err := na.SubscribeSync(">")
	require.NoError(t, err)
	require.NoError(t, na.Flush())
	time.Sleep(300 * time.Millisecond) // the server's events of na's connection, queued earlier, are out
	for m, err := sub.NextMsg(0); err == nil; m, err = sub.NextMsg(0) {
		require.True(t, strings.HasPrefix(m.Subject, "events."), m.Subject)
	}
	require.NoError(t, ns.Publish("$SYS.ACCOUNT."+b.Pub+".CONNECT", nil))
	require.NoError(t, ns.Publish("$SYS.ACCOUNT."+pub+".CONNECT", nil))
	m, err := sub.NextMsg(2 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "events.CONNECT", m.Subject)
	require.Empty(t, m.Data, "the SYS user's")
	Connect(t, s, nats.UserCredentials(a.User("a2").CredsFile(t)))
	for {
		m, err = sub.NextMsg(2 * time.Second)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(m.Subject, "events."), "nothing of B's: %s", m.Subject)
		if m.Subject == "events.CONNECT" {
			break
		}
	}
	var ev server.ConnectEventMsg
	require.NoError(t, json.Unmarshal(m.Data, &ev))
	require.Equal(t, pub, ev.Client.Account, "the server's event of A's new client")
}

// TestClusterJWTImports: two servers with the same account JWTs: a stream
// import (approved by an activation token) delivers each message once to
// the importer's subscriber on the other server, and a service import's
// request reaches the exporter's responder there and its response comes
// back.
func TestClusterJWTImports(t *testing.T) {
	op := jwttest.NewOperator(t)
	e := op.Account("E", jwttest.Exports(
		&jwt.Export{Subject: "priv.>", Type: jwt.Stream, TokenReq: true},
		&jwt.Export{Subject: "svc", Type: jwt.Service},
	))
	kp, pub := importerKey(t)
	i := op.Account("I", withKey(kp, pub), jwttest.Imports(
		&jwt.Import{Account: e.Pub, Subject: "priv.>", LocalSubject: "from.e.>", Type: jwt.Stream,
			Token: e.Activation(pub, "priv.>", jwt.Stream)},
		&jwt.Import{Account: e.Pub, Subject: "svc", Type: jwt.Service},
	))
	o := operatorOptions(op, e, i)
	o.Cluster = server.ClusterOptions{Name: "jwt", Port: server.RandomPort}
	c := clustertest.Start(t, 2, o)
	eu, iu := e.User("e").CredsFile(t), i.User("i").CredsFile(t)
	e1, e2 := c.Connect(t, 0, nats.UserCredentials(eu)), c.Connect(t, 1, nats.UserCredentials(eu))
	i1, i2 := c.Connect(t, 0, nats.UserCredentials(iu)), c.Connect(t, 1, nats.UserCredentials(iu))

	sub, err := i2.SubscribeSync("from.e.>")
	require.NoError(t, err)
	require.NoError(t, i2.Flush())
	c.WaitAccountInterest(t, pub, "from.e.x", 1)
	const n = 20
	for k := range n {
		require.NoError(t, e1.Publish("priv.x", []byte(fmt.Sprint(k))))
	}
	require.NoError(t, e1.Flush())
	for k := range n {
		m, err := sub.NextMsg(2 * time.Second)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(k), string(m.Data))
	}
	requireNoMsg(t, sub)

	_, err = e2.Subscribe("svc", func(m *nats.Msg) { _ = m.Respond([]byte("from s2")) })
	require.NoError(t, err)
	require.NoError(t, e2.Flush())
	c.WaitAccountInterest(t, e.Pub, "svc", 1)
	r, err := i1.Request("svc", nil, 2*time.Second)
	require.NoError(t, err)
	require.Equal(t, "from s2", string(r.Data))
}

// TestJWTLateAccount: an account JWT that becomes valid after the server
// started is registered at its first user's CONNECT, and its imports are
// resolved then, with every account's: its users receive what the
// exporter publishes.
func TestJWTLateAccount(t *testing.T) {
	op := jwttest.NewOperator(t)
	valid := time.Now().Truncate(time.Second).Add(2 * time.Second)
	e := op.Account("E", jwttest.Exports(&jwt.Export{Subject: "x", Type: jwt.Stream}))
	late := op.Account("LATE", jwttest.AccountNotBefore(valid), jwttest.Imports(&jwt.Import{Account: e.Pub, Subject: "x", Type: jwt.Stream}))
	s := RunServer(t, operatorOptions(op, e, late))
	requireRefused(t, s, late.User("u"))
	time.Sleep(time.Until(valid) + 100*time.Millisecond)
	sub, err := nats.Connect(s.ClientURL(), nats.UserCredentials(late.User("u").CredsFile(t)))
	require.NoError(t, err)
	defer sub.Close()
	got, err := sub.SubscribeSync("x")
	require.NoError(t, err)
	require.NoError(t, sub.Flush())
	pub, err := nats.Connect(s.ClientURL(), nats.UserCredentials(e.User("p").CredsFile(t)))
	require.NoError(t, err)
	defer pub.Close()
	require.NoError(t, pub.Publish("x", []byte("across")))
	m, err := got.NextMsg(5 * time.Second)
	require.NoError(t, err, "the late account's import works")
	require.Equal(t, "across", string(m.Data))
}
