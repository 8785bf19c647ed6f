package server_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/broker"
	"github.com/skiffmq/skiff/server"
)

// jwtSetDir is the operator-mode material nsc generated
// (testdata/jwt/gen.sh).
var jwtSetDir = filepath.Join("..", "testdata", "jwt")

// readJWT returns the JWT of a file nsc wrote (decorated or bare).
func readJWT(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(jwtSetDir, name))
	require.NoError(t, err)
	tok, err := jwt.ParseDecoratedJWT(b)
	require.NoError(t, err)
	return tok
}

// TestCommittedJWTSet: the committed nsc material still decodes and
// chains: the operator signs itself, the accounts are signed by its
// identity or its signing key, each user by its account or the account's
// signing key, with seeds matching the users' keys, and nothing expires.
func TestCommittedJWTSet(t *testing.T) {
	opc, err := jwt.DecodeOperatorClaims(readJWT(t, "operator.jwt"))
	require.NoError(t, err)
	require.True(t, opc.IsSelfSigned())
	require.Zero(t, opc.Expires)
	require.Len(t, opc.SigningKeys, 1)
	operatorKeys := map[string]bool{opc.Subject: true, opc.SigningKeys[0]: true}

	accounts := map[string]*jwt.AccountClaims{}
	for _, name := range []string{"SYS", "A", "B"} {
		ac, err := jwt.DecodeAccountClaims(readJWT(t, name+".jwt"))
		require.NoError(t, err, name)
		require.Equal(t, name, ac.Name)
		require.True(t, operatorKeys[ac.Issuer], "%s is signed by %s, not by the operator", name, ac.Issuer)
		require.Zero(t, ac.Expires, name)
		accounts[name] = ac
	}
	require.Equal(t, accounts["SYS"].Subject, opc.SystemAccount)
	require.Len(t, accounts["A"].SigningKeys, 1)

	for _, tc := range []struct{ file, account string }{{"alice.creds", "A"}, {"carol.creds", "A"}, {"bob.creds", "B"}} {
		contents, err := os.ReadFile(filepath.Join(jwtSetDir, tc.file))
		require.NoError(t, err)
		tok, err := jwt.ParseDecoratedJWT(contents)
		require.NoError(t, err)
		uc, err := jwt.DecodeUserClaims(tok)
		require.NoError(t, err, tc.file)
		require.Zero(t, uc.Expires, tc.file)
		kp, err := jwt.ParseDecoratedUserNKey(contents)
		require.NoError(t, err, tc.file)
		pub, err := kp.PublicKey()
		require.NoError(t, err)
		require.Equal(t, uc.Subject, pub, "%s: the seed is not the user's", tc.file)
		require.True(t, accounts[tc.account].DidSign(uc), "%s is not signed by account %s", tc.file, tc.account)
	}

	// The MEMORY-resolver configuration nsc wrote loads into Skiff.
	cfg, err := broker.LoadConfig(filepath.Join(jwtSetDir, "resolver.conf"))
	require.NoError(t, err)
	require.Equal(t, []string{readJWT(t, "operator.jwt")}, cfg.Server.TrustedOperators)
	require.Equal(t, server.ResolverMemory, cfg.Server.Resolver.Type)
	require.Len(t, cfg.Server.Resolver.Preload, 3)
	require.Equal(t, opc.SystemAccount, cfg.Server.SystemAccount)
}

// committedServer runs Skiff with the committed set's configuration.
func committedServer(t *testing.T) *server.Server {
	t.Helper()
	cfg, err := broker.LoadConfig(filepath.Join(jwtSetDir, "resolver.conf"))
	require.NoError(t, err)
	return RunServer(t, cfg.Server)
}

// TestCommittedCredsConnect: nats.go clients connect with the committed
// .creds (nats.UserCredentials): alice and carol (one signed by A, one by
// A's signing key) share account A, bob in B sees none of it.
func TestCommittedCredsConnect(t *testing.T) {
	s := committedServer(t)
	creds := func(name string) nats.Option {
		return nats.UserCredentials(filepath.Join(jwtSetDir, name+".creds"))
	}
	alice := Connect(t, s, creds("alice"))
	carol := Connect(t, s, creds("carol"))
	bob := Connect(t, s, creds("bob"))

	bobSub, err := bob.SubscribeSync(">")
	require.NoError(t, err)
	require.NoError(t, bob.Flush())
	carolSub, err := carol.SubscribeSync("a.>")
	require.NoError(t, err)
	require.NoError(t, carol.Flush())
	require.NoError(t, alice.Publish("a.hello", []byte("from alice")))
	requireNext(t, carolSub, "from alice")
	require.NoError(t, alice.Flush())
	_, err = bobSub.NextMsg(200 * time.Millisecond)
	require.ErrorIs(t, err, nats.ErrTimeout, "bob, in B, got A's message")

	ac, err := jwt.DecodeAccountClaims(readJWT(t, "A.jwt"))
	require.NoError(t, err)
	a, ok := s.LookupAccount(ac.Subject)
	require.True(t, ok)
	require.Equal(t, 2, a.NumConnections())
}
