package jetstream_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/store"
	"github.com/skiffmq/skiff/store/storetest"
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
		return requestJSON(t, nc, subj, []byte(body), 5*time.Second)
	}
	errCode := func(r map[string]any) float64 {
		if e, _ := r["error"].(map[string]any); e != nil {
			require.Contains(t, e["description"], "below the minimum")
		}
		return errCodeOf(r)
	}

	r := request("$JS.API.STREAM.CREATE.S", `{"name":"S","subjects":["s"],"metadata":{"_skiff.sync":"interval","_skiff.sync_interval":"1ns"}}`)
	require.Equal(t, float64(10052), errCode(r))
	r = request("$JS.API.STREAM.CREATE.S", `{"name":"S","subjects":["s"],"metadata":{"_skiff.sync":"always","_skiff.sync_interval":"5ms"}}`)
	require.Equal(t, float64(10052), errCode(r), "the store's timer runs whatever the policy")

	at := jetstream.MinSyncInterval.String()
	r = request("$JS.API.STREAM.CREATE.S", `{"name":"S","subjects":["s"],"metadata":{"_skiff.sync":"interval","_skiff.sync_interval":"`+at+`"}}`)
	require.Nil(t, r["error"])
	r = request("$JS.API.STREAM.UPDATE.S", `{"name":"S","subjects":["s"],"metadata":{"_skiff.sync_interval":"1ns"}}`)
	require.Equal(t, float64(10052), errCode(r))
	r = request("$JS.API.STREAM.UPDATE.S", `{"name":"S","subjects":["s"],"metadata":{"_skiff.sync_interval":"1ms"}}`)
	require.Equal(t, float64(10052), errCode(r), "through the metadata too")

	// A configuration stored by an older version, with a 1 ns interval.
	b.stop()
	metaPath := filepath.Join(globalStreams(dir), "S", "meta.json")
	raw, err := os.ReadFile(metaPath)
	require.NoError(t, err)
	var meta map[string]any
	require.NoError(t, json.Unmarshal(raw, &meta))
	meta["config"].(map[string]any)["sync_interval"] = 1
	delete(meta["config"].(map[string]any), "metadata") // as an older version wrote it
	raw, err = json.Marshal(meta)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(metaPath, raw, 0o644))

	b = startBroker(t, dir)
	nc, _ = connect(t, b.srv.ClientURL())
	m, err := nc.Request("$JS.API.STREAM.INFO.S", nil, 5*time.Second)
	require.NoError(t, err)
	var info struct{ Config jetstream.StreamConfig }
	require.NoError(t, json.Unmarshal(m.Data, &info))
	require.Equal(t, jetstream.MinSyncInterval.String(), info.Config.Metadata["_skiff.sync_interval"])

	_, err = jetstream.New(b.srv, jetstream.Options{StoreDir: t.TempDir(), SyncInterval: time.Millisecond})
	require.ErrorIs(t, err, jetstream.ErrInvalidOptions)
}

// TestStreamSubjectsLimit: a stream may have MaxStreamSubjects subjects,
// not one more; the limit is refused with a configuration error that
// says so. Overlaps among that many subjects are still found.
func TestStreamSubjectsLimit(t *testing.T) {
	b := startBroker(t, "")
	_, js := connect(t, b.srv.ClientURL())
	subjects := make([]string, jetstream.MaxStreamSubjects+1)
	for i := range subjects {
		subjects[i] = "s." + strconv.Itoa(i)
	}
	_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "S", Subjects: subjects})
	require.Equal(t, njs.ErrorCode(10052), apiCode(err))
	require.ErrorContains(t, err, "too many subjects")

	withOverlap := append(slices.Clone(subjects[:jetstream.MaxStreamSubjects-1]), "s.*.x", "s.9.>")
	_, err = js.CreateStream(ctx(t), njs.StreamConfig{Name: "S", Subjects: withOverlap[1:]})
	require.Equal(t, njs.ErrorCode(10052), apiCode(err))
	require.ErrorContains(t, err, `subjects "s.*.x" and "s.9.>" overlap`)

	_, err = js.CreateStream(ctx(t), njs.StreamConfig{Name: "S", Subjects: subjects[:jetstream.MaxStreamSubjects]})
	require.NoError(t, err)
	_, err = js.CreateStream(ctx(t), njs.StreamConfig{Name: "T", Subjects: []string{"t", "s.*"}})
	require.Equal(t, njs.ErrorCode(10065), apiCode(err), "overlaps another stream's subjects")
	_, err = js.CreateStream(ctx(t), njs.StreamConfig{Name: "T", Subjects: []string{"t", "s.1.*"}})
	require.NoError(t, err)
	_, err = js.UpdateStream(ctx(t), njs.StreamConfig{Name: "T", Subjects: []string{"t", "s.9999"}})
	require.Equal(t, njs.ErrorCode(10065), apiCode(err))
	require.NoError(t, js.DeleteStream(ctx(t), "S"))
	_, err = js.UpdateStream(ctx(t), njs.StreamConfig{Name: "T", Subjects: []string{"t", "s.9999"}})
	require.NoError(t, err, "a deleted stream's subjects are free")
}

// TestConsumerFiltersLimit: a consumer may have MaxConsumerFilters filter
// subjects, not one more, and overlaps among that many are found through
// the index (comparing every pair held the API worker for seconds).
func TestConsumerFiltersLimit(t *testing.T) {
	b := startBroker(t, "")
	_, js := connect(t, b.srv.ClientURL())
	_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	require.NoError(t, err)
	filters := make([]string, jetstream.MaxConsumerFilters+1)
	for i := range filters {
		filters[i] = "s." + strconv.Itoa(i)
	}
	_, err = js.CreateOrUpdateConsumer(ctx(t), "S", njs.ConsumerConfig{Durable: "C", FilterSubjects: filters})
	require.ErrorContains(t, err, "too many filter subjects")

	withOverlap := append(slices.Clone(filters[:jetstream.MaxConsumerFilters-2]), "s.*.x", "s.9.>")
	_, err = js.CreateOrUpdateConsumer(ctx(t), "S", njs.ConsumerConfig{Durable: "C", FilterSubjects: withOverlap})
	require.Equal(t, njs.ErrorCode(10138), apiCode(err), "overlapping filters")
	_, err = js.CreateOrUpdateConsumer(ctx(t), "S", njs.ConsumerConfig{Durable: "C", FilterSubjects: []string{"s.1", "s.1"}})
	require.Equal(t, njs.ErrorCode(10138), apiCode(err), "a filter given twice overlaps itself")

	_, err = js.CreateOrUpdateConsumer(ctx(t), "S", njs.ConsumerConfig{Durable: "C", FilterSubjects: filters[:jetstream.MaxConsumerFilters]})
	require.NoError(t, err)
	_, err = js.Publish(ctx(t), "s.9999", []byte("x"))
	require.NoError(t, err)
	c, err := js.Consumer(ctx(t), "S", "C")
	require.NoError(t, err)
	m, err := c.Next(njs.FetchMaxWait(5 * time.Second))
	require.NoError(t, err)
	require.Equal(t, "s.9999", m.Subject())
}

// TestSlowStreamCreateDoesNotBlockAPI: while one stream create is stuck
// in its file system, other clients' API requests are still answered,
// and the stuck create completes once the file system moves.
func TestSlowStreamCreateDoesNotBlockAPI(t *testing.T) {
	// Creating the directory of the stream named SLOW waits for release.
	fs := storetest.NewFaultFS(store.OSFS)
	entered, release := fs.StallMkdir(string(filepath.Separator) + "SLOW" + string(filepath.Separator))
	b := startBrokerWith(t, jetstream.Options{FS: fs})
	defer release() // lets Close finish if the test failed early
	_, js := connect(t, b.srv.ClientURL())
	_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "FAST", Subjects: []string{"fast"}})
	require.NoError(t, err)
	// Requests about one stream wait for each other on its worker;
	// FAST's and OTHER's must not share SLOW's.
	for _, name := range []string{"FAST", "OTHER"} {
		require.NotEqual(t, jetstream.StreamWorkerOf("SLOW"), jetstream.StreamWorkerOf(name), name)
	}

	slow := make(chan error, 1)
	go func() {
		_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "SLOW", Subjects: []string{"slow"}})
		slow <- err
	}()
	<-entered

	_, other := connect(t, b.srv.ClientURL())
	c, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = other.AccountInfo(c)
	require.NoError(t, err, "account info while a create is stuck")
	s, err := other.Stream(c, "FAST")
	require.NoError(t, err, "stream info while a create is stuck")
	_, err = s.CreateOrUpdateConsumer(c, njs.ConsumerConfig{Durable: "D"})
	require.NoError(t, err, "consumer create while a create is stuck")
	_, err = other.CreateStream(c, njs.StreamConfig{Name: "OTHER", Subjects: []string{"slow"}})
	require.Equal(t, njs.ErrorCode(10065), apiCode(err), "the stuck create holds its subjects")

	release()
	require.NoError(t, <-slow)
	_, err = other.Stream(c, "SLOW")
	require.NoError(t, err)
}
