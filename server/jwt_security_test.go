package server_test

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/jwttest"
	"github.com/skiffmq/skiff/server"
)

// TestJWTSecurity: every user JWT that must not get in is refused with
// 'Authorization Violation' and closed, while the same account's good
// user gets in (so each refusal is the rule's doing, not the setup's).
func TestJWTSecurity(t *testing.T) {
	now := time.Now()
	op := jwttest.NewOperator(t)
	acc := op.Account("A")
	ask := acc.AddSigningKey()
	revoked := acc.User("revoked")
	acc.Revoke(revoked.Pub, now)

	all := op.Account("ALL")
	allBefore := all.User("before")
	all.Revoke(jwt.All, now)
	// Revoked for everything issued until two seconds ago: not for users
	// minted now.
	allEarlier := op.Account("ALL2")
	allEarlier.Revoke(jwt.All, now.Add(-2*time.Second))

	noBearer := op.Account("NB", jwttest.DisallowBearer())
	expiredAcc := op.Account("EXP", jwttest.AccountExpires(now.Add(-time.Hour)))
	futureAcc := op.Account("FUT", jwttest.AccountNotBefore(now.Add(time.Hour)))
	unlisted := op.Account("UNLISTED")

	foreign := jwttest.NewOperator(t)
	foreignAcc := foreign.Account("F")

	untrusted, err := nkeys.CreateOperator()
	require.NoError(t, err)
	rogue := op.Account("ROGUE", jwttest.AccountSignedBy(untrusted))
	// An account signed by its own key: an account JWT may be, but the
	// server trusts only operator keys.
	selfSigned := op.Account("SELF")
	selfSigned.Update(jwttest.AccountSignedBy(selfSigned.Key))

	exporting := op.Account("EXPORTS", jwttest.Exports(&jwt.Export{Subject: "x.>", Type: jwt.Stream}))
	latency := op.Account("LATENCY", jwttest.Exports(&jwt.Export{Subject: "svc", Type: jwt.Service,
		Latency: &jwt.ServiceLatency{Sampling: 100, Results: "lat"}}))
	_, calloutPub := newUserKey(t)
	callout := op.Account("CALLOUT", jwttest.AccountClaims(func(c *jwt.AccountClaims) {
		c.Authorization.AuthUsers.Add(calloutPub)
	}))
	for _, a := range []*jwttest.Account{latency, callout} {
		ac, err := jwt.DecodeAccountClaims(a.JWT)
		require.NoError(t, err)
		vr := jwt.CreateValidationResults()
		ac.Validate(vr)
		require.False(t, vr.IsBlocking(true), "account %s must be valid, refused only for what Skiff lacks: %v", a.Claims.Name, vr.Errors())
	}
	mapping := op.Account("MAPS", jwttest.AccountClaims(func(c *jwt.AccountClaims) {
		c.Mappings = jwt.Mapping{"a": []jwt.WeightedMapping{{Subject: "b"}}}
	}))
	js := op.Account("JS", jwttest.AccountClaims(func(c *jwt.AccountClaims) {
		c.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	}))

	// An account JWT preloaded under another account's key.
	misfiled := op.Account("MISFILED")
	o := operatorOptions(op, acc, all, allEarlier, selfSigned, foreignAcc, noBearer, expiredAcc, futureAcc, rogue, exporting, mapping, js, latency, callout)
	o.Resolver.Preload[misfiled.Pub] = acc.JWT
	s := RunServer(t, o)

	stranger, err := nkeys.CreateAccount()
	require.NoError(t, err)
	tampered := acc.User("tampered")
	tampered.JWT = tamper(t, tampered.JWT, `"name":"tampered"`, `"name":"admin123"`)

	wrongSig := acc.User("wrongsig")
	other := acc.User("other")
	wrongSig.Key = other.Key // signs the nonce with another user's key

	for _, tc := range []struct {
		name string
		u    *jwttest.User
	}{
		{"expired", acc.User("e", jwttest.Expires(now.Add(-time.Minute)))},
		{"not yet valid", acc.User("nb", jwttest.NotBefore(now.Add(time.Hour)))},
		{"revoked user", revoked},
		{"revoked all", allBefore},
		{"tampered payload", tampered},
		{"signed by a key the account does not know", acc.User("sk", jwttest.SignedWith(stranger))},
		{"account signed by an untrusted key", rogue.User("r")},
		{"account signed by itself", selfSigned.User("s")},
		{"account of a foreign operator", foreignAcc.User("f")},
		{"account the resolver does not have", unlisted.User("u")},
		{"account preloaded under another key", misfiled.User("m")},
		{"account expired", expiredAcc.User("x")},
		{"account not yet valid", futureAcc.User("x")},
		{"bearer refused by the account", noBearer.User("b", jwttest.Bearer())},
		{"wrong nonce signature", wrongSig},
		{"src not allowed", acc.User("src", jwttest.Src("10.9.9.0/24"))},
		{"outside connect times", acc.User("times", jwttest.Times("UTC", outsideNow(now)))},
		{"connection type not allowed", acc.User("ct", jwttest.ConnectionTypes(jwt.ConnectionTypeWebsocket))},
		{"only unknown connection types", acc.User("ct2", jwttest.ConnectionTypes("CARRIER_PIGEON"))},
		{"proxy required", acc.User("px", jwttest.UserClaims(func(c *jwt.UserClaims) { c.ProxyRequired = true }))},
		{"account with mappings (fails closed)", mapping.User("x")},
		{"account with service latency tracking (fails closed)", latency.User("x")},
		{"account with authorization callout (fails closed)", callout.User("x")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			requireRefused(t, s, tc.u)
		})
	}

	t.Run("no signature", func(t *testing.T) {
		r := DialRaw(t, s)
		u := acc.User("nosig")
		r.Send(`CONNECT {"verbose":false,"jwt":"` + u.JWT + `"}` + "\r\nPING\r\n")
		require.Equal(t, "-ERR 'Authorization Violation'", r.ReadLine())
		r.ExpectClosed()
	})
	t.Run("no JWT", func(t *testing.T) {
		r := DialRaw(t, s)
		r.Send("CONNECT {\"verbose\":false,\"user\":\"a\",\"pass\":\"b\"}\r\nPING\r\n")
		require.Equal(t, "-ERR 'Authorization Violation'", r.ReadLine())
		r.ExpectClosed()
	})
	t.Run("nothing before CONNECT", func(t *testing.T) {
		r := DialRaw(t, s)
		r.Send("SUB > 1\r\n")
		require.Equal(t, "-ERR 'Authorization Violation'", r.ReadLine())
		r.ExpectClosed()
	})

	// What must get in does.
	for _, tc := range []struct {
		name string
		u    *jwttest.User
	}{
		{"signed by the account", acc.User("ok")},
		{"signed by an account signing key", acc.User("sk", jwttest.SignedWith(ask))},
		{"issued after the revocation of all", allEarlier.User("after")},
		{"bearer where allowed", acc.User("bearer", jwttest.Bearer())},
		{"src allowed", acc.User("src", jwttest.Src("127.0.0.0/8"))},
		{"standard connection type", acc.User("ct", jwttest.ConnectionTypes(jwt.ConnectionTypeStandard, "CARRIER_PIGEON"))},
		{"account with exports", exporting.User("x")},
		{"account with JetStream limits", js.User("x")},
	} {
		t.Run("accepted/"+tc.name, func(t *testing.T) {
			requireAccepted(t, s, tc.u)
		})
	}
	t.Run("accepted/bearer without a signature", func(t *testing.T) {
		r := DialRaw(t, s)
		u := acc.User("bearer2", jwttest.Bearer())
		r.Send(`CONNECT {"verbose":false,"jwt":"` + u.JWT + `"}` + "\r\nPING\r\n")
		require.Equal(t, "PONG", r.ReadLine())
	})
}

// TestJWTStrictSigningKeys: under strict signing key usage, an account
// signed by the operator's identity is untrusted, and users must be
// signed by an account signing key, not the account's identity.
func TestJWTStrictSigningKeys(t *testing.T) {
	op := jwttest.NewOperator(t, jwttest.Strict())
	byIdentity := op.Account("ID") // minted before the operator had a signing key
	op.WithOperatorSigningKey()
	acc := op.Account("A")
	ask := acc.AddSigningKey()
	s := RunServer(t, operatorOptions(op, byIdentity, acc))

	requireRefused(t, s, byIdentity.User("u"))
	requireRefused(t, s, acc.User("by-identity"))
	requireAccepted(t, s, acc.User("by-signing-key", jwttest.SignedWith(ask)))
}

// TestJWTPinnedAccounts: with resolver_pinned_accounts, only the pinned
// accounts' users connect.
func TestJWTPinnedAccounts(t *testing.T) {
	op := jwttest.NewOperator(t)
	pinned, other := op.Account("P"), op.Account("O")
	o := operatorOptions(op, pinned, other)
	o.ResolverPinnedAccounts = []string{pinned.Pub}
	s := RunServer(t, o)
	requireAccepted(t, s, pinned.User("p"))
	requireRefused(t, s, other.User("o"))
}

// TestJWTTrustedKeys: trusted keys instead of operator JWTs.
func TestJWTTrustedKeys(t *testing.T) {
	op := jwttest.NewOperator(t)
	acc := op.Account("A")
	s := RunServer(t, server.Options{TrustedKeys: []string{op.Pub},
		Resolver: server.ResolverOptions{Type: server.ResolverMemory, Preload: op.Preload(acc)}})
	requireAccepted(t, s, acc.User("u"))
	requireRefused(t, s, jwttest.NewOperator(t).Account("F").User("f"))
}

// tamper rewrites part of a JWT's payload, keeping its signature.
func tamper(t *testing.T, token, old, replacement string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	require.Len(t, parts, 3)
	body, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	require.Contains(t, string(body), old)
	body = []byte(strings.Replace(string(body), old, replacement, 1))
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString(body) + "." + parts[2]
}

// outsideNow returns a one-minute time range (UTC) an hour after now.
func outsideNow(now time.Time) jwt.TimeRange {
	start := now.UTC().Add(time.Hour)
	return jwt.TimeRange{Start: start.Format("15:04:05"), End: start.Add(time.Minute).Format("15:04:05")}
}
