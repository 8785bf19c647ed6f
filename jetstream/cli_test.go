package jetstream_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/natscli"
)

// TestNATSCLI drives streams with the real `nats` CLI, as a user of
// `make run` would.
func TestNATSCLI(t *testing.T) {
	bin := natscli.Path(t)
	b := startBroker(t, "")
	cli := natscli.New(t, bin, b.srv.ClientURL())

	out := cli.Run("stream", "add", "ORDERS", "--subjects", "orders.*", "--storage", "file", "--defaults")
	require.Contains(t, out, "Stream ORDERS was created")

	out = cli.Run("pub", "--jetstream", "orders.new", "order {{Count}}", "--count", "5")
	require.Contains(t, out, "Published 7 bytes to \"orders.new\"")

	var info struct {
		Config struct {
			Name     string   `json:"name"`
			Subjects []string `json:"subjects"`
		} `json:"config"`
		State struct {
			Msgs    uint64 `json:"messages"`
			LastSeq uint64 `json:"last_seq"`
		} `json:"state"`
	}
	out = cli.Run("stream", "info", "ORDERS", "--json")
	require.NoError(t, json.Unmarshal([]byte(out), &info), out)
	require.Equal(t, "ORDERS", info.Config.Name)
	require.Equal(t, []string{"orders.*"}, info.Config.Subjects)
	require.Equal(t, uint64(5), info.State.Msgs)
	require.Equal(t, uint64(5), info.State.LastSeq)
	out = cli.Run("stream", "info", "ORDERS")
	require.Contains(t, out, "Messages: 5")

	out = cli.Run("consumer", "add", "ORDERS", "WORKER", "--pull", "--ack", "explicit", "--deliver", "all", "--defaults")
	require.Contains(t, out, "Information for Consumer ORDERS > WORKER")

	out = cli.Run("consumer", "pause", "ORDERS", "WORKER", "1h", "-f")
	require.Contains(t, out, "Paused ORDERS > WORKER until")
	out = cli.Run("consumer", "info", "ORDERS", "WORKER")
	require.Contains(t, out, "Paused Until")
	out = cli.Run("consumer", "resume", "ORDERS", "WORKER", "-f")
	require.Contains(t, out, "was resumed")

	out = cli.Run("consumer", "next", "ORDERS", "WORKER", "--count", "3")
	require.Contains(t, out, "order 1")
	require.Contains(t, out, "order 3")
	require.NotContains(t, out, "order 4")

	var ci struct {
		NumPending    uint64 `json:"num_pending"`
		NumAckPending int    `json:"num_ack_pending"`
		AckFloor      struct {
			Stream uint64 `json:"stream_seq"`
		} `json:"ack_floor"`
	}
	out = cli.Run("consumer", "info", "ORDERS", "WORKER", "--json")
	require.NoError(t, json.Unmarshal([]byte(out), &ci), out)
	require.Equal(t, uint64(2), ci.NumPending)
	require.Equal(t, uint64(3), ci.AckFloor.Stream)
	require.Zero(t, ci.NumAckPending)

	out = cli.Run("stream", "ls", "--names")
	require.Contains(t, out, "ORDERS")
	out = cli.Run("stream", "get", "ORDERS", "2")
	require.Contains(t, out, "order 2")
	cli.Run("stream", "purge", "ORDERS", "-f")
	cli.Run("consumer", "rm", "ORDERS", "WORKER", "-f")
	cli.Run("stream", "rm", "ORDERS", "-f")
	out = cli.Run("stream", "ls", "--names")
	require.NotContains(t, out, "ORDERS")
}

// TestNATSCLIBuckets drives key-value and object store buckets with the
// `nats` CLI: both are streams with rollups underneath.
func TestNATSCLIBuckets(t *testing.T) {
	bin := natscli.Path(t)
	b := startBroker(t, "")
	cli := natscli.New(t, bin, b.srv.ClientURL())

	out := cli.Run("kv", "add", "CONF", "--history", "5")
	require.Contains(t, out, "History Kept: 5")
	cli.Run("kv", "put", "CONF", "db.host", "alpha")
	cli.Run("kv", "put", "CONF", "db.host", "beta")
	cli.Run("kv", "put", "CONF", "db.port", "5432")
	require.Equal(t, "beta", strings.TrimSpace(cli.Run("kv", "get", "CONF", "db.host", "--raw")))
	out = cli.Run("kv", "history", "CONF", "db.host")
	require.Contains(t, out, "alpha")
	require.Contains(t, out, "beta")
	cli.Run("kv", "del", "CONF", "db.port", "-f")
	out = cli.Run("kv", "ls", "CONF")
	require.Contains(t, out, "db.host")
	require.NotContains(t, out, "db.port")
	// A purge is a rollup: the key's history becomes one purge marker.
	cli.Run("kv", "purge", "CONF", "db.host", "-f")
	out = cli.Run("kv", "history", "CONF", "db.host")
	require.Contains(t, out, "PURGE")
	require.NotContains(t, out, "alpha")
	cli.Run("kv", "rm", "CONF", "-f")

	// Per-key TTLs: the key goes after its TTL, leaving a marker.
	out = cli.Run("kv", "add", "SESSIONS", "--marker-ttl", "1s")
	require.Contains(t, out, "Per-Key TTL Supported: true")
	cli.Run("kv", "create", "SESSIONS", "s1", "alice", "--ttl", "1s")
	require.Equal(t, "alice", strings.TrimSpace(cli.Run("kv", "get", "SESSIONS", "s1", "--raw")))
	require.Eventually(t, func() bool {
		_, code := cli.Start("kv", "get", "SESSIONS", "s1", "--raw").Exit()
		return code != 0
	}, 10*time.Second, 200*time.Millisecond, "the key outlived its TTL")
	cli.Run("kv", "rm", "SESSIONS", "-f")

	file := filepath.Join(t.TempDir(), "report.txt")
	require.NoError(t, os.WriteFile(file, []byte(strings.Repeat("report line\n", 20_000)), 0o600))
	cli.Run("object", "add", "FILES")
	out = cli.Run("object", "put", "FILES", file, "--name", "report.txt")
	require.Contains(t, out, "Size: 234 KiB")
	out = cli.Run("object", "ls", "FILES")
	require.Contains(t, out, "report.txt")
	copyPath := filepath.Join(t.TempDir(), "copy.txt")
	cli.Run("object", "get", "FILES", "report.txt", "--output", copyPath, "-f")
	got, err := os.ReadFile(copyPath)
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("report line\n", 20_000), string(got))
	cli.Run("object", "rm", "FILES", "report.txt", "-f")
	cli.Run("object", "rm", "FILES", "-f")
}
