package jetstream_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// A stream directory written by an earlier version has the sync policy in
// top-level fields of its configuration: it is read, and answered in the
// metadata.
func TestSyncPolicyOfEarlierVersionsOnDisk(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir)
	_, js := connect(t, b.srv.ClientURL())
	_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "OLD", Subjects: []string{"old"}})
	require.NoError(t, err)
	b.stop()

	path := filepath.Join(globalStreams(dir), "OLD", "meta.json")
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var meta map[string]any
	require.NoError(t, json.Unmarshal(raw, &meta))
	cfg := meta["config"].(map[string]any)
	delete(cfg, "metadata")
	cfg["sync"] = "interval"
	cfg["sync_interval"] = int64(3 * time.Second)
	raw, err = json.Marshal(meta)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, raw, 0o644))

	b = startBroker(t, dir)
	_, js = connect(t, b.srv.ClientURL())
	s, err := js.Stream(ctx(t), "OLD")
	require.NoError(t, err)
	info, err := s.Info(ctx(t))
	require.NoError(t, err)
	require.Equal(t, "interval", info.Config.Metadata["_skiff.sync"])
	require.Equal(t, "3s", info.Config.Metadata["_skiff.sync_interval"])
}
