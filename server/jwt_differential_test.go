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
	s.send("c1", "PUB a 65\r\n"+strings.Repeat("x", 65)+"\r\n").op("c1", "expect-close")
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

// TestDifferentialJWTFailsClosed: the one deliberate difference of
// operator mode. nats-server lets the users of an account whose JWT has
// exports (or imports, mappings, JetStream limits, auth callout) connect;
// Skiff, which does not implement those yet, refuses them rather than run
// the account without what its JWT says.
func TestDifferentialJWTFailsClosed(t *testing.T) {
	op := jwttest.NewOperator(t)
	exporting := op.Account("E", jwttest.AccountClaims(func(c *jwt.AccountClaims) {
		c.Exports = jwt.Exports{&jwt.Export{Subject: "x.>", Type: jwt.Stream}}
	}))
	conf := filepath.Join(t.TempDir(), "operator.conf")
	require.NoError(t, os.WriteFile(conf, []byte(op.Conf(exporting)), 0o600))
	u := exporting.User("u")
	var s jwtDiffSteps
	s.send("c1", connectJWTAs(u, u.Seed)+"PING\r\n").op("c1", "sync")
	sc := &diffScript{name: "exports", pos: "TestDifferentialJWTFailsClosed", cfg: diffConfig{conf: conf}, steps: s}
	ref := runDiffScript(t, sc, diffStartReference(t, sc.cfg))
	got := runDiffScript(t, sc, diffStartSkiff(t, sc.cfg))
	const refusal = "c1 < -ERR 'Authorization Violation'\nc1 < <closed>"
	require.NotContains(t, ref.transcript, refusal, "nats-server refuses it too now:\n%s", ref.transcript)
	require.Contains(t, ref.transcript, "c1 < PONG", "nats-server lets the user in:\n%s", ref.raw)
	require.Contains(t, got.transcript, refusal)
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
