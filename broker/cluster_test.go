package broker

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/server"
)

// TestClusterBlock: the cluster block's keys land in the server's
// ClusterOptions, and what is wrong in it is refused with its line.
func TestClusterBlock(t *testing.T) {
	cfg, err := ParseConfig(`server_name: n1
cluster {
  name: c1
  listen: 127.0.0.1:6222
  routes: [ nats-route://127.0.0.1:6223, "nats://u:p@127.0.0.1:6224" ]
  no_advertise: true
  advertise: "10.0.0.7:7222"
  connect_retries: 5
  authorization { user: r, password: s, timeout: "3s" }
}`)
	require.NoError(t, err)
	require.Equal(t, "n1", cfg.Server.ServerName)
	require.Equal(t, server.ClusterOptions{
		Name: "c1", Host: "127.0.0.1", Port: 6222,
		Routes:      []string{"nats-route://127.0.0.1:6223", "nats://u:p@127.0.0.1:6224"},
		NoAdvertise: true, Advertise: "10.0.0.7:7222", ConnectRetries: 5, Username: "r", Password: "s", AuthTimeout: 3 * time.Second,
	}, cfg.Server.Cluster)

	for _, tc := range []struct{ name, text string }{
		{"no port", "cluster { name: c1 }"},
		{"bad route", "cluster { port: 6222, routes: [ \"http://x:1\" ] }"},
		{"route without port", "cluster { port: 6222, routes: [ \"nats-route://x\" ] }"},
		{"advertise without port", "cluster { port: 6222, advertise: \"10.0.0.7\" }"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig(tc.text)
			require.ErrorIs(t, err, ErrInvalidValue)
		})
	}
}

// TestClusterJetStream: a clustered broker with JetStream needs a
// server_name; with one it founds the meta group (alone here), serves R1
// streams, and refuses an R3 stream (only one server is up) with
// nats-server's 10005.
func TestClusterJetStream(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Server.Port, cfg.Server.HTTPPort = server.RandomPort, 0
	cfg.Server.Cluster.Port = server.RandomPort
	cfg.JetStream.StoreDir = t.TempDir()
	_, err := Start(cfg)
	require.ErrorContains(t, err, "server_name")

	cfg.Server.ServerName = "n1"
	b, err := Start(cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Shutdown(t.Context())) }()
	nc, err := nats.Connect(b.Server().ClientURL())
	require.NoError(t, err)
	defer nc.Close()
	js, err := nc.JetStream(nats.MaxWait(10 * time.Second))
	require.NoError(t, err)
	// The meta group is founded after the bootstrap wait: until then the
	// API answers 10008, which the client sees as an error.
	require.Eventually(t, func() bool {
		_, err := js.AddStream(&nats.StreamConfig{Name: "S", Subjects: []string{"s"}})
		return err == nil
	}, 20*time.Second, 100*time.Millisecond)
	_, err = js.Publish("s", []byte("x"))
	require.NoError(t, err)
	_, err = js.AddStream(&nats.StreamConfig{Name: "R3", Subjects: []string{"r3"}, Replicas: 3})
	var aerr nats.JetStreamError
	require.ErrorAs(t, err, &aerr)
	require.Equal(t, nats.ErrorCode(10005), aerr.APIError().ErrorCode, "R3 on a cluster of one server up: no suitable peers")
}

// TestOperatorModeJetStream: operator mode starts with JetStream; the
// committed nsc accounts have no JetStream limits (nsc gives none by
// default), so their users' API requests answer 10039, as nats-server's.
func TestOperatorModeJetStream(t *testing.T) {
	text, err := os.ReadFile("../testdata/jwt/resolver.conf")
	require.NoError(t, err)
	cfg, err := ParseConfig(strings.ReplaceAll(string(text), "operator: eyJ", "port: -1\nhttp_port: 0\noperator: eyJ"))
	require.NoError(t, err)
	cfg.JetStream.StoreDir = t.TempDir()
	require.True(t, cfg.JetStreamEnabled)
	b, err := Start(cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Shutdown(context.Background())) }()
	nc, err := nats.Connect(b.ClientURL(), nats.UserCredentials("../testdata/jwt/alice.creds"))
	require.NoError(t, err)
	defer nc.Close()
	m, err := nc.Request("$JS.API.INFO", nil, 2*time.Second)
	require.NoError(t, err)
	require.Contains(t, string(m.Data), `"err_code":10039`)
}

// TestServerTags: server_tags is a string or a list of strings, as in
// nats-server; anything else is refused with its line.
func TestServerTags(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []string
	}{
		{`server_tags: "az:1"`, []string{"az:1"}},
		{`server_tags: ["az:1", "ssd"]`, []string{"az:1", "ssd"}},
	} {
		cfg, err := ParseConfig(tc.text)
		require.NoError(t, err, tc.text)
		require.Equal(t, tc.want, cfg.Server.Tags)
	}
	_, err := ParseConfig("server_tags: { a: b }")
	require.ErrorIs(t, err, ErrInvalidValue)
}
