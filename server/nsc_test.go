package server_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/broker"
	"github.com/skiffmq/skiff/internal/natscli"
	"github.com/skiffmq/skiff/server"
)

// TestNSCPush runs the pinned nsc against Skiff as an operator does: the
// server configuration from `nsc generate config --nats-resolver`, then
// `nsc push` of new accounts, an account's limits and a revocation
// changed and pushed again, `nsc pull`, and `nsc push --prune` of a
// deleted account; each takes effect on the connected users.
func TestNSCPush(t *testing.T) {
	nsc := natscli.NewNSC(t)
	nsc.Run("add", "operator", "--name", "op", "--sys", "--generate-signing-key")
	conf := filepath.Join(t.TempDir(), "server.conf")
	nsc.Run("generate", "config", "--nats-resolver", "--config-file", conf)
	text, err := os.ReadFile(conf)
	require.NoError(t, err)
	// The generated file keeps JWTs in ./jwt and refuses deletes.
	text = regexp.MustCompile(`(?m)^(\s*)dir:.*$`).ReplaceAll(text, []byte(`${1}dir: "`+t.TempDir()+`"`))
	text = regexp.MustCompile(`allow_delete: false`).ReplaceAll(text, []byte("allow_delete: true"))
	require.NoError(t, os.WriteFile(conf, text, 0o600))
	bc, err := broker.LoadConfig(conf)
	require.NoError(t, err)
	o := bc.Server
	o.Host, o.Port, o.HTTPPort = "127.0.0.1", server.RandomPort, 0
	s := RunServer(t, o)
	url := s.ClientURL()
	// The operator names the server, for push and pull (the JWT the
	// server trusts is the one from before: the same operator key).
	nsc.Run("edit", "operator", "--account-jwt-server-url", url)
	push := func(args ...string) string {
		t.Helper()
		return nsc.Run(append([]string{"push"}, args...)...)
	}
	connect := func(account, user string) (*nats.Conn, error) {
		return nats.Connect(url, nats.UserCredentials(nsc.Path(filepath.Join("creds", "op", account, user+".creds"))),
			nats.NoReconnect())
	}

	nsc.Run("add", "account", "A")
	nsc.Run("add", "user", "--account", "A", "alice")
	nsc.Run("add", "user", "--account", "A", "bob")
	_, err = connect("A", "alice")
	require.Error(t, err, "A is not on the server before the push")
	out := push("--account", "A")
	require.Contains(t, out, `pushed "A" to nats-server`)
	require.Contains(t, out, "jwt updated")
	require.Contains(t, out, "pushed to a total of 1 nats-server")
	alice, err := connect("A", "alice")
	require.NoError(t, err)
	defer alice.Close()
	sub, err := alice.SubscribeSync("orders.>")
	require.NoError(t, err)
	require.NoError(t, alice.Publish("orders.1", []byte("x")))
	_, err = sub.NextMsg(5 * time.Second)
	require.NoError(t, err)

	// One connection at most: alice stays, bob is refused.
	nsc.Run("edit", "account", "--name", "A", "--conns", "1")
	push("--account", "A")
	_, err = connect("A", "bob")
	require.ErrorContains(t, err, "maximum account active connections exceeded")
	require.True(t, alice.IsConnected())

	// Revoking alice closes her connection.
	closed := make(chan struct{})
	alice.SetClosedHandler(func(*nats.Conn) { close(closed) })
	errs := make(chan error, 4)
	alice.SetErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err })
	nsc.Run("revocations", "add-user", "--account", "A", "--name", "alice")
	push("--account", "A")
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the revoked user is still connected")
	}
	require.ErrorIs(t, <-errs, nats.ErrAuthRevoked)

	nsc.Run("add", "account", "B")
	nsc.Run("add", "user", "--account", "B", "carol")
	push("--all")
	carol, err := connect("B", "carol")
	require.NoError(t, err)
	carol.Close()
	out = nsc.Run("pull", "--all")
	require.Contains(t, out, `stored account "B"`)

	nsc.Run("delete", "account", "--name", "B")
	out = push("--all", "--prune")
	require.Contains(t, out, "deleted 1 accounts")
	_, err = connect("B", "carol")
	require.Error(t, err, "a pruned account's users are refused")
}
