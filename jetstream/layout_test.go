package jetstream_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// The store layout per account, and the one-time migration of a store
// written before accounts (StoreDir/streams) to accounts/$G/streams.

// copyPreMigration copies testdata/premigration, a store directory as the
// version before accounts wrote it, into a fresh directory.
func copyPreMigration(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS("testdata/premigration")))
	require.NoError(t, os.Remove(filepath.Join(dir, "README.md")))
	return dir
}

// startAliceBroker starts a broker on dir whose one user, alice, is the
// owner of the pre-migration store's consumers.
func startAliceBroker(t *testing.T, dir string, jsOpts jetstream.Options) *broker {
	t.Helper()
	jsOpts.StoreDir = dir
	return startBrokerConfigured(t, jsOpts, func(o *server.Options) { o.Users = []server.User{{Name: "alice", Password: "a"}} })
}

// verifyPreMigrationData checks that everything the pre-migration store
// holds is served: messages, consumers with their progress and owner,
// the memory stream's configuration and the bucket.
func verifyPreMigrationData(t *testing.T, b *broker) {
	t.Helper()
	c := ctx(t)
	nc, js := connectAs(t, b, "alice", "a")
	s, err := js.Stream(c, "ORDERS")
	require.NoError(t, err)
	require.Equal(t, uint64(5), s.CachedInfo().State.Msgs)
	w, err := js.Consumer(c, "ORDERS", "W")
	require.NoError(t, err)
	require.Equal(t, uint64(2), w.CachedInfo().AckFloor.Stream, "orders.1 and orders.2 were acknowledged")
	require.Equal(t, uint64(3), w.CachedInfo().NumPending)
	m, err := w.Next(njs.FetchMaxWait(2 * time.Second))
	require.NoError(t, err)
	require.Equal(t, "order orders.3", string(m.Data()))
	require.NoError(t, m.Ack())

	// PUSH's owner was written as a bare user name: alice of $G, who may
	// publish on its deliver subject, so it delivers.
	sub, err := nc.SubscribeSync("deliver.orders")
	require.NoError(t, err)
	m2, err := sub.NextMsg(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "order orders.1", string(m2.Data))

	mem, err := js.Stream(c, "MEM")
	require.NoError(t, err)
	require.Equal(t, njs.MemoryStorage, mem.CachedInfo().Config.Storage)
	kv, err := js.KeyValue(c, "CFG")
	require.NoError(t, err)
	for k, v := range map[string]string{"color": "blue", "size": "L"} {
		e, err := kv.Get(c, k)
		require.NoError(t, err)
		require.Equal(t, v, string(e.Value()))
	}
}

// TestPreMigrationLayoutReadAfterUpgrade: a store directory written by the
// version before accounts is migrated at the first start and served whole;
// the next start finds it migrated.
func TestPreMigrationLayoutReadAfterUpgrade(t *testing.T) {
	dir := copyPreMigration(t)
	var logs logBuffer
	b := startAliceBroker(t, dir, jetstream.Options{Logger: logs.logger()})
	require.NoDirExists(t, filepath.Join(dir, "streams"))
	require.DirExists(t, filepath.Join(globalStreams(dir), "ORDERS", "consumers", "W"))
	layout, err := os.ReadFile(filepath.Join(dir, "LAYOUT"))
	require.NoError(t, err)
	require.Equal(t, "accounts-v1\n", string(layout))
	require.Equal(t, 1, logs.count("migrated streams to accounts/$G"))
	verifyPreMigrationData(t, b)

	// A consumer written now in the global account records its owner as
	// the version before accounts did, which may run on it again once
	// moved back (TestDowngradeByHand).
	_, js := connectAs(t, b, "alice", "a")
	_, err = js.CreateOrUpdateConsumer(ctx(t), "ORDERS", njs.ConsumerConfig{Durable: "NEW"})
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(globalStreams(dir), "ORDERS", "consumers", "NEW", "meta.json"))
	require.NoError(t, err)
	var meta struct {
		Owner string `json:"owner"`
	}
	require.NoError(t, json.Unmarshal(raw, &meta))
	require.Equal(t, "alice", meta.Owner)

	b.stop()
	b = startAliceBroker(t, dir, jetstream.Options{Logger: logs.logger()})
	require.Equal(t, 1, logs.count("migrated streams to accounts/$G"), "migrated once")
	_, js = connectAs(t, b, "alice", "a")
	s, err := js.Stream(ctx(t), "ORDERS")
	require.NoError(t, err)
	require.Equal(t, uint64(5), s.CachedInfo().State.Msgs)
}

// TestMigrationRefusesBothLayouts: streams/ beside a migrated
// accounts/$G/streams means an older Skiff ran on the migrated directory;
// which streams are the right ones is for an operator to say.
func TestMigrationRefusesBothLayouts(t *testing.T) {
	dir := copyPreMigration(t)
	require.NoError(t, os.MkdirAll(globalStreams(dir), 0o755))
	s, err := server.New(server.DefaultOptions())
	require.NoError(t, err)
	_, err = jetstream.New(s, jetstream.Options{StoreDir: dir})
	require.ErrorIs(t, err, jetstream.ErrInvalidOptions)
	require.ErrorContains(t, err, filepath.Join(dir, "streams"))
	require.ErrorContains(t, err, globalStreams(dir))
	require.DirExists(t, filepath.Join(dir, "streams", "ORDERS"), "nothing moved")

	// And the lock is released: once an operator moved them, it starts.
	require.NoError(t, os.Remove(globalStreams(dir)))
	js, err := jetstream.New(s, jetstream.Options{StoreDir: dir})
	require.NoError(t, err)
	require.NoError(t, js.Close())
}

// TestDowngradeByHand: the way back docs/streams.md gives (accounts/$G/streams
// moved back to streams/, LAYOUT and accounts/ left in place) leaves a
// directory the next start migrates again, whole.
func TestDowngradeByHand(t *testing.T) {
	dir := copyPreMigration(t)
	var logs logBuffer
	b := startAliceBroker(t, dir, jetstream.Options{Logger: logs.logger()})
	b.stop()
	require.NoError(t, os.Rename(globalStreams(dir), filepath.Join(dir, "streams")))
	require.FileExists(t, filepath.Join(dir, "LAYOUT"))

	b = startAliceBroker(t, dir, jetstream.Options{Logger: logs.logger()})
	require.Equal(t, 2, logs.count("migrated streams to accounts/$G"))
	require.NoDirExists(t, filepath.Join(dir, "streams"))
	verifyPreMigrationData(t, b)
}

// TestUnknownLayoutRefused: a layout this version does not know (a newer
// one's) is not touched.
func TestUnknownLayoutRefused(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "LAYOUT"), []byte("accounts-v9\n"), 0o644))
	s, err := server.New(server.DefaultOptions())
	require.NoError(t, err)
	_, err = jetstream.New(s, jetstream.Options{StoreDir: dir})
	require.ErrorIs(t, err, jetstream.ErrInvalidOptions)
	require.ErrorContains(t, err, "accounts-v9")
}

// TestOrphanedAccountDirs: the streams of an account that loses JetStream
// (or is renamed) are kept on disk, logged and listed, never deleted, and
// served again once the account has JetStream again.
func TestOrphanedAccountDirs(t *testing.T) {
	dir := t.TempDir()
	js := &server.JetStreamLimits{}
	b := startAccountsBroker(t, jetstream.Options{StoreDir: dir}, tenant("A", js), tenant("B", js))
	for _, u := range []string{"a", "b"} {
		_, jsc := connectUser(t, b, u)
		_, err := jsc.CreateStream(ctx(t), njs.StreamConfig{Name: "S", Subjects: []string{"s"}})
		require.NoError(t, err)
		_, err = jsc.Publish(ctx(t), "s", []byte(u))
		require.NoError(t, err)
	}
	b.stop()

	var logs logBuffer
	b = startAccountsBroker(t, jetstream.Options{StoreDir: dir, Logger: logs.logger()}, tenant("A", js), tenant("B", nil))
	require.Equal(t, 1, logs.count("store directory of an account without JetStream"))
	v := getJSON(t, b, "/jsz")
	require.Equal(t, []any{"B"}, v["skiff_orphaned_accounts"])
	require.Contains(t, scrape(t, b), "skiff_jetstream_orphaned_accounts 1")
	require.DirExists(t, filepath.Join(dir, "accounts", "B", "streams", "S"))
	b.stop()

	// A server without accounts serves $G only: both are orphans.
	b = startBrokerMonitored(t, jetstream.Options{StoreDir: dir}, server.RandomPort)
	require.Equal(t, []any{"A", "B"}, getJSON(t, b, "/jsz")["skiff_orphaned_accounts"])
	require.Contains(t, scrape(t, b), "skiff_jetstream_orphaned_accounts 2")
	b.stop()

	b = startAccountsBroker(t, jetstream.Options{StoreDir: dir}, tenant("A", js), tenant("B", js))
	_, jsc := connectUser(t, b, "b")
	s, err := jsc.Stream(ctx(t), "S")
	require.NoError(t, err)
	require.Equal(t, uint64(1), s.CachedInfo().State.Msgs)
	require.Nil(t, getJSON(t, b, "/jsz")["skiff_orphaned_accounts"])
}

// TestOwnerOfAnotherAccount: a stream directory moved by hand from one
// account to another keeps its consumers, but a push consumer owned by a
// user of the first account delivers nothing in the second: its owner
// acts for nobody there.
func TestOwnerOfAnotherAccount(t *testing.T) {
	dir := t.TempDir()
	js := &server.JetStreamLimits{}
	b := startAccountsBroker(t, jetstream.Options{StoreDir: dir}, tenant("A", js), tenant("B", js))
	_, jsA := connectUser(t, b, "a")
	_, err := jsA.CreateStream(ctx(t), njs.StreamConfig{Name: "S", Subjects: []string{"s"}})
	require.NoError(t, err)
	_, err = jsA.Publish(ctx(t), "s", []byte("x"))
	require.NoError(t, err)
	_, err = jsA.CreateOrUpdateConsumer(ctx(t), "S", njs.ConsumerConfig{Durable: "P", DeliverSubject: "out"})
	require.NoError(t, err)
	b.stop()
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "accounts", "B")))
	require.NoError(t, os.Rename(filepath.Join(dir, "accounts", "A"), filepath.Join(dir, "accounts", "B")))

	var logs logBuffer
	b = startAccountsBroker(t, jetstream.Options{StoreDir: dir, Logger: logs.logger()}, tenant("A", js), tenant("B", js))
	require.Equal(t, 1, logs.count("consumer does not deliver: its owner may not publish on its deliver subject"))
	ncB, jsB := connectUser(t, b, "b")
	sub, err := ncB.SubscribeSync("out")
	require.NoError(t, err)
	_, err = sub.NextMsg(500 * time.Millisecond)
	require.Error(t, err, "A's user does not act in B")
	st, err := jsB.Stream(ctx(t), "S")
	require.NoError(t, err)
	require.Equal(t, 1, st.CachedInfo().State.Consumers, "the consumer is there")
}
