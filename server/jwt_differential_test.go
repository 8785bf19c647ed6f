package server_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/jwttest"
)

// jwtDiffSteps builds a script's steps in the harness's form.
type jwtDiffSteps []diffStep

func (s *jwtDiffSteps) send(conn, data string) *jwtDiffSteps {
	*s = append(*s, diffStep{conn: conn, op: "send", data: []byte(data), src: fmt.Sprintf("%s send %.60q", conn, data)})
	return s
}

func (s *jwtDiffSteps) op(conn, op string) *jwtDiffSteps {
	*s = append(*s, diffStep{conn: conn, op: op, src: conn + " " + op})
	return s
}

// connectJWTAs is the CONNECT of u (protocol 1, not verbose), its nonce
// signature made when the connection's INFO is known, by seed (the
// user's own unless a test signs with another key).
func connectJWTAs(u *jwttest.User, seed []byte) string {
	// The mark stays raw bytes: the session replaces it when it sends.
	sig := diffSignMark + string(seed) + diffSignMark
	return `CONNECT {"verbose":false,"pedantic":false,"protocol":1,"jwt":"` + u.JWT + `","sig":"` + sig + `"}` + "\r\n"
}

// TestDifferentialJWT runs raw-protocol sessions of operator mode against
// nats-server and Skiff loaded with the same configuration file (an
// operator, resolver: MEMORY, preloaded accounts), and requires the same
// transcripts: which CONNECTs get in, the errors of those refused, the
// INFO after CONNECT (account, payload bound), limits and permissions.
func TestDifferentialJWT(t *testing.T) {
	now := time.Now()
	op := jwttest.NewOperator(t)
	acc := op.Account("A")
	ask := acc.AddSigningKey()
	scoped := acc.AddScopedSigningKey(func(s *jwt.UserScope) {
		s.Template.Pub.Allow = jwt.StringList{"user.{{name()}}.>"}
		s.Template.Sub.Allow = jwt.StringList{"_INBOX.>"}
	})
	revoked := acc.User("revoked")
	acc.Revoke(revoked.Pub, now)
	all := op.Account("ALL")
	beforeAll := all.User("before")
	all.Revoke(jwt.All, now)
	other := op.Account("B")
	limited := op.Account("L", jwttest.AccountLimits(1, 2, 64))
	none := op.Account("NONE", jwttest.AccountLimits(0, -1, -1))
	noBearer := op.Account("NB", jwttest.DisallowBearer())
	expiredAcc := op.Account("EXP", jwttest.AccountExpires(now.Add(-time.Hour)))
	futureAcc := op.Account("FUT", jwttest.AccountNotBefore(now.Add(time.Hour)))
	defaults := op.Account("DEF", jwttest.DefaultPermissions([]string{"def.>"}, nil))
	foreign := jwttest.NewOperator(t).Account("F")
	untrusted, err := nkeys.CreateOperator()
	require.NoError(t, err)
	rogue := op.Account("ROGUE", jwttest.AccountSignedBy(untrusted))
	stranger, err := nkeys.CreateAccount()
	require.NoError(t, err)

	conf := filepath.Join(t.TempDir(), "operator.conf")
	require.NoError(t, os.WriteFile(conf, []byte(op.Conf(acc, all, other, limited, none, noBearer, expiredAcc,
		futureAcc, defaults, foreign, rogue)), 0o600))

	good := acc.User("alice")
	tampered := acc.User("tampered")
	tampered.JWT = tamper(t, tampered.JWT, `"name":"tampered"`, `"name":"mallory!"`)
	refused := func(u *jwttest.User, seed []byte) jwtDiffSteps {
		var s jwtDiffSteps
		s.send("c1", connectJWTAs(u, seed)+"PING\r\n").op("c1", "expect-close")
		return s
	}
	cases := map[string]jwtDiffSteps{}
	for name, u := range map[string]*jwttest.User{
		"expired":                    acc.User("e", jwttest.Expires(now.Add(-time.Minute))),
		"not yet valid":              acc.User("nb", jwttest.NotBefore(now.Add(time.Hour))),
		"revoked":                    revoked,
		"revoked all":                beforeAll,
		"tampered":                   tampered,
		"unknown signer":             acc.User("x", jwttest.SignedWith(stranger)),
		"foreign operator":           foreign.User("f"),
		"untrusted account signer":   rogue.User("r"),
		"account expired":            expiredAcc.User("x"),
		"account not yet valid":      futureAcc.User("x"),
		"bearer disallowed":          noBearer.User("b", jwttest.Bearer()),
		"src":                        acc.User("src", jwttest.Src("10.1.2.0/24")),
		"websocket only":             acc.User("ws", jwttest.ConnectionTypes(jwt.ConnectionTypeWebsocket)),
		"unknown connection type":    acc.User("ct", jwttest.ConnectionTypes("PIGEON")),
		"no connections allowed":     none.User("x"),
		"scoped with own permission": acc.User("s", jwttest.SignedWith(scoped), jwttest.Permissions([]string{"x"}, nil)),
		"not in resolver":            op.Account("GONE").User("g"),
	} {
		cases[name] = refused(u, u.Seed)
	}
	cases["wrong nonce signature"] = refused(good, acc.User("other").Seed)

	var s jwtDiffSteps
	s.send("c1", `CONNECT {"verbose":false,"protocol":1,"jwt":"`+good.JWT+`"}`+"\r\nPING\r\n").op("c1", "expect-close")
	cases["no signature"] = s
	s = nil
	s.send("c1", "CONNECT {\"verbose\":false,\"user\":\"a\",\"pass\":\"b\"}\r\nPING\r\n").op("c1", "expect-close")
	cases["no JWT"] = s
	s = nil
	s.send("c1", "SUB x 1\r\n").op("c1", "expect-close")
	cases["before CONNECT"] = s

	// Accepted: pub/sub in the account, isolated from another account's.
	s = nil
	s.send("c1", connectJWTAs(good, good.Seed)+"SUB orders.* 1\r\n").op("c1", "sync")
	b := other.User("bob")
	s.send("c2", connectJWTAs(b, b.Seed)+"SUB orders.* 1\r\n").op("c2", "sync")
	sk := acc.User("carol", jwttest.SignedWith(ask))
	s.send("c3", connectJWTAs(sk, sk.Seed)+"PUB orders.new 2\r\nhi\r\n").op("c3", "sync")
	s.op("c1", "sync").op("c2", "sync")
	cases["accepted and isolated"] = s

	s = nil
	bearer := acc.User("bearer", jwttest.Bearer())
	s.send("c1", `CONNECT {"verbose":false,"protocol":1,"jwt":"`+bearer.JWT+`"}`+"\r\nPING\r\n").op("c1", "sync")
	cases["bearer without signature"] = s

	s = nil
	u1, u2 := limited.User("l1"), limited.User("l2")
	s.send("c1", connectJWTAs(u1, u1.Seed)+"PING\r\n").op("c1", "sync")
	s.send("c1", "SUB a 1\r\nSUB b 2\r\nSUB c 3\r\n").op("c1", "sync")
	s.send("c1", "PUB a 65\r\n"+strings.Repeat("x", 65)+"\r\n").op("c1", "expect-close").op("c1", "settle")
	s.send("c2", connectJWTAs(u2, u2.Seed)+"PING\r\n").op("c2", "sync")
	s.send("c3", connectJWTAs(u1, u1.Seed)+"PING\r\n").op("c3", "expect-close")
	cases["account limits"] = s

	s = nil
	lu := acc.User("lu", jwttest.UserLimits(1, 10))
	s.send("c1", connectJWTAs(lu, lu.Seed)+"PING\r\n").op("c1", "sync")
	s.send("c1", "SUB a 1\r\nSUB b 2\r\n").op("c1", "sync")
	cases["user limits"] = s

	s = nil
	pu := acc.User("pu", jwttest.Permissions([]string{"ok.>"}, []string{"ok.>"}))
	s.send("c1", connectJWTAs(pu, pu.Seed)+"SUB ok.x 1\r\nSUB no.x 2\r\nPUB ok.x 1\r\na\r\nPUB no.x 1\r\nb\r\n").op("c1", "sync")
	du := defaults.User("du")
	s.send("c2", connectJWTAs(du, du.Seed)+"PUB def.x 0\r\n\r\nPUB other 0\r\n\r\n").op("c2", "sync")
	su := acc.User("sam", jwttest.Scoped(), jwttest.SignedWith(scoped))
	s.send("c3", connectJWTAs(su, su.Seed)+"PUB user.sam.x 0\r\n\r\nPUB user.bob.x 0\r\n\r\n").op("c3", "sync")
	cases["permissions"] = s

	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			sc := &diffScript{name: name, pos: "TestDifferentialJWT", cfg: diffConfig{conf: conf}, steps: steps}
			ref := runDiffScript(t, sc, diffStartReference(t, sc.cfg))
			got := runDiffScript(t, sc, diffStartSkiff(t, sc.cfg))
			t.Logf("reference transcript:\n%s", ref.transcript)
			require.Equal(t, ref.transcript, got.transcript,
				"Skiff's transcript differs from nats-server's\nnats-server bytes:\n%sSkiff bytes:\n%s", ref.raw, got.raw)
		})
	}
}

// TestDifferentialJWTFailsClosed: the deliberate differences of operator
// mode. nats-server lets the users of an account whose JWT has subject
// mappings or exports with service latency tracking connect; Skiff, which
// does not implement those, refuses them rather than run the account
// without what its JWT says.
func TestDifferentialJWTFailsClosed(t *testing.T) {
	op := jwttest.NewOperator(t)
	for name, acc := range map[string]*jwttest.Account{
		"mappings": op.Account("M", jwttest.AccountClaims(func(c *jwt.AccountClaims) {
			c.Mappings = jwt.Mapping{"a": []jwt.WeightedMapping{{Subject: "b"}}}
		})),
		"latency": op.Account("L", jwttest.Exports(&jwt.Export{Subject: "svc", Type: jwt.Service,
			Latency: &jwt.ServiceLatency{Sampling: 100, Results: "lat"}})),
	} {
		t.Run(name, func(t *testing.T) {
			conf := writeConf(t, op, acc)
			u := acc.User("u")
			var s jwtDiffSteps
			s.send("c1", connectJWTAs(u, u.Seed)+"PING\r\n").op("c1", "sync")
			sc := &diffScript{name: name, pos: "TestDifferentialJWTFailsClosed", cfg: diffConfig{conf: conf}, steps: s}
			ref := runDiffScript(t, sc, diffStartReference(t, sc.cfg))
			got := runDiffScript(t, sc, diffStartSkiff(t, sc.cfg))
			const refusal = "c1 < -ERR 'Authorization Violation'\nc1 < <closed>"
			require.NotContains(t, ref.transcript, refusal, "nats-server refuses it too now:\n%s", ref.transcript)
			require.Contains(t, ref.transcript, "c1 < PONG", "nats-server lets the user in:\n%s", ref.raw)
			require.Contains(t, got.transcript, refusal)
		})
	}
}

// TestDifferentialJWTCommitted: the committed nsc set (testdata/jwt) in
// both servers: alice and carol (A) and bob (B) connect, and only A sees
// A's messages.
func TestDifferentialJWTCommitted(t *testing.T) {
	creds := func(name string) (jwtTok string, seed []byte) {
		b, err := os.ReadFile(filepath.Join(jwtSetDir, name+".creds"))
		require.NoError(t, err)
		jwtTok, err = jwt.ParseDecoratedJWT(b)
		require.NoError(t, err)
		kp, err := jwt.ParseDecoratedUserNKey(b)
		require.NoError(t, err)
		seed, err = kp.Seed()
		require.NoError(t, err)
		return jwtTok, seed
	}
	connect := func(name string) string {
		tok, seed := creds(name)
		return `CONNECT {"verbose":false,"pedantic":false,"protocol":1,"jwt":"` + tok + `","sig":"` +
			diffSignMark + string(seed) + diffSignMark + `"}` + "\r\n"
	}
	var s jwtDiffSteps
	s.send("c1", connect("alice")+"SUB a.> 1\r\n").op("c1", "sync")
	s.send("c2", connect("bob")+"SUB > 1\r\n").op("c2", "sync")
	s.send("c3", connect("carol")+"PUB a.x 2\r\nhi\r\n").op("c3", "sync")
	s.op("c1", "sync").op("c2", "sync")
	_, bobSeed := creds("bob")
	tok, _ := creds("alice")
	s.send("c4", `CONNECT {"verbose":false,"protocol":1,"jwt":"`+tok+`","sig":"`+diffSignMark+string(bobSeed)+diffSignMark+`"}`+"\r\nPING\r\n").
		op("c4", "expect-close")
	sc := &diffScript{name: "committed", pos: "TestDifferentialJWTCommitted",
		cfg: diffConfig{conf: filepath.Join(jwtSetDir, "resolver.conf")}, steps: s}
	ref := runDiffScript(t, sc, diffStartReference(t, sc.cfg))
	got := runDiffScript(t, sc, diffStartSkiff(t, sc.cfg))
	t.Logf("reference transcript:\n%s", ref.transcript)
	require.Contains(t, ref.transcript, `c1 < MSG a.x 1 2 | "hi"`)
	require.Equal(t, ref.transcript, got.transcript, "nats-server bytes:\n%sSkiff bytes:\n%s", ref.raw, got.raw)
}

// writeConf writes a configuration file of operator mode for op's
// accounts and returns its path.
func writeConf(t *testing.T, op *jwttest.Operator, accounts ...*jwttest.Account) string {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "operator.conf")
	require.NoError(t, os.WriteFile(conf, []byte(op.Conf(accounts...)), 0o600))
	return conf
}

// runJWTDiff runs steps against nats-server and Skiff loaded with conf,
// requires the same transcripts, and returns nats-server's.
func runJWTDiff(t *testing.T, name, conf string, steps jwtDiffSteps) string {
	t.Helper()
	sc := &diffScript{name: name, pos: t.Name(), cfg: diffConfig{conf: conf}, steps: steps}
	ref := runDiffScript(t, sc, diffStartReference(t, sc.cfg))
	got := runDiffScript(t, sc, diffStartSkiff(t, sc.cfg))
	t.Logf("reference transcript:\n%s", ref.transcript)
	require.Equal(t, ref.transcript, got.transcript,
		"Skiff's transcript differs from nats-server's\nnats-server bytes:\n%sSkiff bytes:\n%s", ref.raw, got.raw)
	return ref.transcript
}

// TestDifferentialJWTImportActivations: the activation tokens of
// TestJWTImportActivations in both servers: the same imports made, the
// same left out (the importer's users connect and receive nothing), the
// same accounts refused.
func TestDifferentialJWTImportActivations(t *testing.T) {
	op, e, o, cases, importers := activationSetup(t)
	conf := writeConf(t, op, append([]*jwttest.Account{e, o}, importers...)...)
	eu := e.User("e")
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := importers[i].User("u")
			var s jwtDiffSteps
			s.send("c1", connectJWTAs(eu, eu.Seed)+"PING\r\n").op("c1", "sync")
			s.send("c2", connectJWTAs(u, u.Seed)+"SUB priv.> 1\r\n").op("c2", "sync")
			s.send("c1", "PUB priv.x 2\r\nhi\r\n").op("c1", "sync").op("c2", "sync")
			ref := runJWTDiff(t, c.name, conf, s)
			// nats-server's outcome is the case's: the comparison above
			// checks the rule, not a setup both get wrong alike.
			switch c.outcome {
			case "delivered":
				require.Contains(t, ref, `c2 < MSG priv.x 1 2 | "hi"`)
			case "skipped":
				require.NotContains(t, ref, "c2 < MSG")
				require.NotContains(t, ref, "Authorization Violation")
			case "refused":
				require.Contains(t, ref, "c2 < -ERR 'Authorization Violation'")
			}
		})
	}
}

// TestDifferentialJWTImports: public exports and imports of account JWTs
// in both servers: streams under a local subject, a prefix and an account
// token position; services singleton, streamed and chunked, with share;
// no responders across a service import.
func TestDifferentialJWTImports(t *testing.T) {
	op := jwttest.NewOperator(t)
	e := op.Account("E", jwttest.Exports(
		&jwt.Export{Subject: "events.>", Type: jwt.Stream},
		&jwt.Export{Subject: "news.*", Type: jwt.Stream},
		&jwt.Export{Subject: "acct.*.ev", Type: jwt.Stream, AccountTokenPosition: 2},
		&jwt.Export{Subject: "one", Type: jwt.Service},
		&jwt.Export{Subject: "many.*", Type: jwt.Service, ResponseType: jwt.ResponseTypeStream},
		&jwt.Export{Subject: "chunks", Type: jwt.Service, ResponseType: jwt.ResponseTypeChunked},
		&jwt.Export{Subject: "nobody", Type: jwt.Service},
		&jwt.Export{Subject: "calc", Type: jwt.Service},
	))
	kp, pub := importerKey(t)
	i := op.Account("I", withKey(kp, pub), jwttest.Imports(
		&jwt.Import{Account: e.Pub, Subject: "events.>", LocalSubject: "e.>", Type: jwt.Stream},
		&jwt.Import{Account: e.Pub, Subject: "news.*", To: "pre", Type: jwt.Stream}, //nolint:staticcheck // the deprecated prefix, as older JWTs carry it
		&jwt.Import{Account: e.Pub, Subject: jwt.Subject("acct." + pub + ".ev"), Type: jwt.Stream},
		&jwt.Import{Account: e.Pub, Subject: "one", LocalSubject: "uno", Type: jwt.Service, Share: true},
		&jwt.Import{Account: e.Pub, Subject: "many.*", Type: jwt.Service},
		&jwt.Import{Account: e.Pub, Subject: "chunks", Type: jwt.Service},
		&jwt.Import{Account: e.Pub, Subject: "nobody", Type: jwt.Service},
		// The deprecated to of a service: the exporter's subject.
		&jwt.Import{Account: e.Pub, Subject: "calc.local", To: "calc", Type: jwt.Service}, //nolint:staticcheck // as older JWTs carry it
	))
	o := op.Account("O", jwttest.Imports(
		// Not O's token position: left out.
		&jwt.Import{Account: e.Pub, Subject: jwt.Subject("acct." + pub + ".ev"), Type: jwt.Stream},
	))
	conf := writeConf(t, op, e, i, o)
	eu, iu, ou := e.User("e"), i.User("i"), o.User("o")
	var s jwtDiffSteps
	s.send("c1", connectJWTAs(eu, eu.Seed)+"SUB one 1\r\nSUB many.* 2\r\nSUB chunks 3\r\nSUB calc 5\r\n").op("c1", "sync")
	s.send("c2", connectJWTAs(iu, iu.Seed)+"SUB e.> 1\r\nSUB pre.> 2\r\nSUB acct.> 3\r\nSUB _INBOX.> 4\r\n").op("c2", "sync")
	s.send("c3", connectJWTAs(ou, ou.Seed)+"SUB > 1\r\n").op("c3", "sync")
	s.send("c1", "PUB events.a.b 1\r\n1\r\nPUB news.x 1\r\n2\r\nPUB acct."+pub+".ev 1\r\n3\r\n").op("c1", "sync")
	s.op("c2", "sync").op("c3", "sync")
	s.send("c2", "PUB uno _INBOX.r1 1\r\nq\r\n").op("c2", "sync").op("c1", "sync")
	s.send("c1", "PUB "+diffReplyMark+" 1\r\na\r\nPUB "+diffReplyMark+" 1\r\nb\r\n").op("c1", "sync").op("c2", "sync")
	s.send("c2", "PUB many.x _INBOX.r2 1\r\nq\r\n").op("c2", "sync").op("c1", "sync")
	s.send("c1", "PUB "+diffReplyMark+" 1\r\na\r\nPUB "+diffReplyMark+" 1\r\nb\r\n").op("c1", "sync").op("c2", "sync")
	s.send("c2", "PUB chunks _INBOX.r3 1\r\nq\r\n").op("c2", "sync").op("c1", "sync")
	s.send("c1", "PUB "+diffReplyMark+" 1\r\na\r\nPUB "+diffReplyMark+" 0\r\n\r\nPUB "+diffReplyMark+" 1\r\nc\r\n").
		op("c1", "sync").op("c2", "sync")
	s.send("c2", "PUB calc.local _INBOX.r5 1\r\nq\r\n").op("c2", "sync").op("c1", "sync")
	s.send("c1", "PUB "+diffReplyMark+" 1\r\nz\r\n").op("c1", "sync").op("c2", "sync")
	nr := `CONNECT {"verbose":false,"protocol":1,"headers":true,"no_responders":true,"jwt":"` + iu.JWT + `","sig":"` +
		diffSignMark + string(iu.Seed) + diffSignMark + `"}` + "\r\n"
	s.send("c4", nr+"SUB _INBOX.> 1\r\nHPUB nobody _INBOX.r4 12 12\r\nNATS/1.0\r\n\r\n\r\n").op("c4", "sync")
	s.op("c3", "sync")
	ref := runJWTDiff(t, "imports", conf, s)
	require.Contains(t, ref, `c2 < MSG e.a.b 1 1 | "1"`)
	require.Contains(t, ref, `c2 < MSG pre.news.x 2 1 | "2"`)
	require.Contains(t, ref, `c2 < MSG _INBOX.r2 4 1 | "b"`)
	require.Contains(t, ref, `c4 < HMSG _INBOX.r4 1`)
	require.Contains(t, ref, `c1 < MSG calc 5 _R_.<4> 1 | "q"`)
	require.Contains(t, ref, `c2 < MSG _INBOX.r5 4 1 | "z"`)
}
