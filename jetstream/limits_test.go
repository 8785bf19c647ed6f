package jetstream_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/jetstream"
)

// TestSyncIntervalMinimum: a sync interval below MinSyncInterval is refused
// at create and update with a configuration error, and by New; a stored
// configuration from before the bound is clamped to it on load.
func TestSyncIntervalMinimum(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir)
	nc, _ := connect(t, b.srv.ClientURL())
	request := func(subj, body string) map[string]any {
		t.Helper()
		m, err := nc.Request(subj, []byte(body), 5*time.Second)
		require.NoError(t, err)
		var r map[string]any
		require.NoError(t, json.Unmarshal(m.Data, &r))
		return r
	}
	errCode := func(r map[string]any) float64 {
		e, _ := r["error"].(map[string]any)
		if e == nil {
			return 0
		}
		require.Contains(t, e["description"], "below the minimum")
		return e["err_code"].(float64)
	}

	r := request("$JS.API.STREAM.CREATE.S", `{"name":"S","subjects":["s"],"sync":"interval","sync_interval":1}`)
	require.Equal(t, float64(10052), errCode(r))
	r = request("$JS.API.STREAM.CREATE.S", `{"name":"S","subjects":["s"],"sync":"always","sync_interval":5000000}`)
	require.Equal(t, float64(10052), errCode(r), "the store's timer runs whatever the policy")

	at := int64(jetstream.MinSyncInterval)
	r = request("$JS.API.STREAM.CREATE.S", `{"name":"S","subjects":["s"],"sync":"interval","sync_interval":`+strconv.FormatInt(at, 10)+`}`)
	require.Nil(t, r["error"])
	r = request("$JS.API.STREAM.UPDATE.S", `{"name":"S","subjects":["s"],"sync":"interval","sync_interval":1}`)
	require.Equal(t, float64(10052), errCode(r))

	// A configuration stored by an older version, with a 1 ns interval.
	b.stop()
	metaPath := filepath.Join(dir, "streams", "S", "meta.json")
	raw, err := os.ReadFile(metaPath)
	require.NoError(t, err)
	var meta map[string]any
	require.NoError(t, json.Unmarshal(raw, &meta))
	meta["config"].(map[string]any)["sync_interval"] = 1
	raw, err = json.Marshal(meta)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(metaPath, raw, 0o644))

	b = startBroker(t, dir)
	nc, _ = connect(t, b.srv.ClientURL())
	m, err := nc.Request("$JS.API.STREAM.INFO.S", nil, 5*time.Second)
	require.NoError(t, err)
	var info struct{ Config jetstream.StreamConfig }
	require.NoError(t, json.Unmarshal(m.Data, &info))
	require.Equal(t, jetstream.MinSyncInterval, info.Config.SyncInterval)

	_, err = jetstream.New(b.srv, jetstream.Options{StoreDir: t.TempDir(), SyncInterval: time.Millisecond})
	require.ErrorIs(t, err, jetstream.ErrInvalidOptions)
}
