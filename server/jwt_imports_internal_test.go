package server

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"
)

// readSetJWT reads a JWT of the committed nsc set (testdata/jwt).
func readSetJWT(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "jwt", name))
	require.NoError(t, err)
	tok, err := jwt.ParseDecoratedJWT(b)
	require.NoError(t, err)
	return tok
}

// TestCommittedSystemAccountExports: nsc's system account exports its
// monitoring streams and services by account token position; the account
// is no longer refused for them, and both exports are made.
func TestCommittedSystemAccountExports(t *testing.T) {
	pre := map[string]string{}
	var sys string
	for _, name := range []string{"SYS", "A", "B"} {
		tok := readSetJWT(t, name+".jwt")
		ac, err := jwt.DecodeAccountClaims(tok)
		require.NoError(t, err)
		pre[ac.Subject] = tok
		if name == "SYS" {
			sys = ac.Subject
			require.NotEmpty(t, ac.Exports, "nsc's system account exports")
		}
	}
	s, err := New(Options{TrustedOperators: []string{readSetJWT(t, "operator.jwt")},
		Resolver: ResolverOptions{Type: ResolverMemory, Preload: pre}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Shutdown(t.Context()) })
	a := s.accounts.lookup(sys)
	require.NotNil(t, a)
	require.Empty(t, a.jwt.state().refused)
	ix := s.jwtImportIndex("")
	require.Len(t, ix.exports[sys], 2)
	for _, e := range ix.exports[sys] {
		require.Positive(t, e.TokenPosition, e.Subject)
	}
	require.NotNil(t, a.resp.Load(), "the service export has its response table")
}

// TestActivation: every rule of an activation token, one case each, on
// the checker itself (the servers' tests show the outcomes).
func TestActivation(t *testing.T) {
	now := time.Now()
	key := func(create func() (nkeys.KeyPair, error)) (nkeys.KeyPair, string) {
		kp, err := create()
		require.NoError(t, err)
		pub, err := kp.PublicKey()
		require.NoError(t, err)
		return kp, pub
	}
	expKP, exp := key(nkeys.CreateAccount)
	skKP, sk := key(nkeys.CreateAccount)
	otherKP, _ := key(nkeys.CreateAccount)
	_, imp := key(nkeys.CreateAccount)
	_, imp2 := key(nkeys.CreateAccount)
	mint := func(signer nkeys.KeyPair, f func(*jwt.ActivationClaims)) string {
		c := jwt.NewActivationClaims(imp)
		c.ImportSubject, c.ImportType = "priv.>", jwt.Stream
		if f != nil {
			f(c)
		}
		tok, err := c.Encode(signer)
		require.NoError(t, err)
		return tok
	}
	future := now.Add(time.Hour).Unix()
	// Revoked for what was issued until an hour from now: the token
	// minted below, whatever second it gets.
	x := &jwtExport{exporter: exp, signers: map[string]jwt.Scope{exp: nil, sk: nil}, tokenReq: true,
		revoked: jwt.RevocationList{imp2: future}}
	for _, tc := range []struct {
		name  string
		token string
		imp   string
		subj  string
		want  error
		until int64
	}{
		{name: "valid", token: mint(expKP, nil)},
		{name: "narrower import", token: mint(expKP, nil), subj: "priv.a"},
		{name: "expires later", token: mint(expKP, func(c *jwt.ActivationClaims) { c.Expires = future }), until: future},
		{name: "signing key", token: mint(skKP, func(c *jwt.ActivationClaims) { c.IssuerAccount = exp })},
		{name: "no token", want: errActivationMissing},
		{name: "garbage", token: "eyJ.not.a.jwt", want: errActivationInvalid},
		{name: "another account's", token: mint(otherKP, nil), want: errActivationIssuer},
		{name: "another account's, claiming the exporter", token: mint(otherKP, func(c *jwt.ActivationClaims) { c.IssuerAccount = exp }),
			want: errActivationIssuer},
		{name: "signing key, claiming another exporter", token: mint(skKP, func(c *jwt.ActivationClaims) { c.IssuerAccount = imp }),
			want: errActivationIssuer},
		{name: "another importer's", token: mint(expKP, nil), imp: imp2, want: errActivationScope},
		{name: "for a service", token: mint(expKP, func(c *jwt.ActivationClaims) { c.ImportType = jwt.Service }), want: errActivationScope},
		{name: "wider import", token: mint(expKP, nil), subj: ">", want: errActivationScope},
		{name: "expired", token: mint(expKP, func(c *jwt.ActivationClaims) { c.Expires = now.Add(-time.Second).Unix() }),
			want: errActivationExpired},
		{name: "not yet valid", token: mint(expKP, func(c *jwt.ActivationClaims) { c.NotBefore = future }), want: errActivationInvalid},
		{name: "revoked", token: func() string {
			c := jwt.NewActivationClaims(imp2)
			c.ImportSubject, c.ImportType = "priv.>", jwt.Stream
			tok, err := c.Encode(expKP)
			require.NoError(t, err)
			return tok
		}(), imp: imp2, want: errActivationRevoked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			who, subj := imp, "priv.>"
			if tc.imp != "" {
				who = tc.imp
			}
			if tc.subj != "" {
				subj = tc.subj
			}
			until, err := x.activation(who, subj, false, tc.token, now)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.until, until)
		})
	}
}

// FuzzActivation: whatever an import's token holds, the checker answers
// without panicking, and approves only a token that decodes as an
// activation for the importer.
func FuzzActivation(f *testing.F) {
	expKP, err := nkeys.CreateAccount()
	require.NoError(f, err)
	exp, err := expKP.PublicKey()
	require.NoError(f, err)
	impKP, err := nkeys.CreateAccount()
	require.NoError(f, err)
	imp, err := impKP.PublicKey()
	require.NoError(f, err)
	c := jwt.NewActivationClaims(imp)
	c.ImportSubject, c.ImportType = "priv.>", jwt.Stream
	good, err := c.Encode(expKP)
	require.NoError(f, err)
	for _, seed := range []string{"", good, "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ..", "a.b.c", good[:len(good)/2]} {
		f.Add(seed)
	}
	x := &jwtExport{exporter: exp, signers: map[string]jwt.Scope{exp: nil}, tokenReq: true}
	f.Fuzz(func(t *testing.T, token string) {
		_, err := x.activation(c.Subject, "priv.a", false, token, time.Now())
		if err == nil {
			act, derr := jwt.DecodeActivationClaims(token)
			require.NoError(t, derr)
			require.Equal(t, c.Subject, act.Subject)
		}
	})
}
