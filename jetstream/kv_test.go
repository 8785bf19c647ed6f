package jetstream_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// Key-value and object store buckets are streams that nats.go drives with
// rollups, per-subject limits, expected-sequence headers, direct gets and
// last-per-subject consumers. These tests run one script of bucket
// operations through nats.go against Skiff and against nats-server, and
// both must give the same record.

// record collects what a script saw, one line per step.
type record []string

func (r *record) add(step string, v ...any) {
	*r = append(*r, step+": "+fmt.Sprint(v...))
}

// outcome describes a call's result without what changes between runs.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var apiErr *njs.APIError
	if errors.As(err, &apiErr) {
		return fmt.Sprintf("api error %d %d %s", apiErr.Code, apiErr.ErrorCode, apiErr.Description)
	}
	return "error " + err.Error()
}

func entry(e njs.KeyValueEntry, err error) string {
	if err != nil {
		return outcome(err)
	}
	return fmt.Sprintf("%s=%q rev %d delta %d %s", e.Key(), e.Value(), e.Revision(), e.Delta(), e.Operation())
}

// runBoth runs script against nats-server and Skiff and compares.
func runBoth(t *testing.T, script func(t *testing.T, js njs.JetStream) record) {
	t.Helper()
	refNC, err := nats.Connect(startReference(t))
	require.NoError(t, err)
	t.Cleanup(refNC.Close)
	refJS, err := njs.New(refNC)
	require.NoError(t, err)
	want := script(t, refJS)

	b := startBroker(t, "")
	_, js := connect(t, b.srv.ClientURL())
	got := script(t, js)
	require.Equal(t, strings.Join(want, "\n"), strings.Join(got, "\n"), "Skiff differs from nats-server")
}

func kvScript(t *testing.T, js njs.JetStream) record {
	c := ctx(t)
	var r record
	kv, err := js.CreateKeyValue(c, njs.KeyValueConfig{Bucket: "CONF", History: 3})
	require.NoError(t, err)
	st, err := kv.Status(c)
	require.NoError(t, err)
	r.add("status", st.Bucket(), " history ", st.History(), " values ", st.Values())
	info, err := js.Stream(c, "KV_CONF")
	require.NoError(t, err)
	cfg := info.CachedInfo().Config
	r.add("stream", cfg.Subjects, cfg.MaxMsgsPerSubject, cfg.AllowRollup, cfg.DenyDelete, cfg.AllowDirect, cfg.Discard, cfg.Duplicates)

	// Watch everything from the start: the empty bucket's initial values
	// end at once (nil). The watcher must then see every change, in
	// order; the script waits for it after each write, because a later
	// step (a limit, a purge) removes what it wrote, and a watcher that
	// lags would rightly miss it on either server.
	w, err := kv.WatchAll(c)
	require.NoError(t, err)
	defer func() { _ = w.Stop() }()
	select {
	case e := <-w.Updates():
		r.add("watch initial", e)
	case <-time.After(5 * time.Second):
		r.add("watch initial", "none")
	}
	var watched []string
	watch := func(rev uint64) {
		for {
			select {
			case e := <-w.Updates():
				// Not the delta: it counts what was stored when the
				// server sent the update, which depends on timing.
				watched = append(watched, fmt.Sprintf("%s=%q rev %d %s", e.Key(), e.Value(), e.Revision(), e.Operation()))
				if e.Revision() >= rev {
					return
				}
			case <-time.After(5 * time.Second):
				watched = append(watched, fmt.Sprintf("nothing up to rev %d", rev))
				return
			}
		}
	}

	rev, err := kv.PutString(c, "db.host", "a")
	r.add("put", rev, " ", outcome(err))
	watch(rev)
	r.add("get", entry(kv.Get(c, "db.host")))
	rev, err = kv.Update(c, "db.host", []byte("b"), rev)
	r.add("update", rev, " ", outcome(err))
	watch(rev)
	_, err = kv.Update(c, "db.host", []byte("c"), 1)
	r.add("update stale", outcome(err), " ", errors.Is(err, njs.ErrKeyExists))
	_, err = kv.Create(c, "db.host", []byte("c"))
	r.add("create existing", errors.Is(err, njs.ErrKeyExists))
	rev, err = kv.Create(c, "db.port", []byte("5432"))
	r.add("create", rev, " ", outcome(err))
	watch(rev)
	for _, v := range []string{"c", "d", "e"} {
		rev, err = kv.PutString(c, "db.host", v)
		r.add("put "+v, rev, " ", outcome(err))
		watch(rev)
	}
	hist, err := kv.History(c, "db.host")
	r.add("history", outcome(err))
	for _, e := range hist {
		r.add("  entry", entry(e, nil))
	}
	r.add("get revision 1", entry(kv.GetRevision(c, "db.host", 1)))
	r.add("get revision 6", entry(kv.GetRevision(c, "db.host", 6)))

	r.add("delete", outcome(kv.Delete(c, "db.port")))
	watch(rev + 1)
	_, err = kv.Get(c, "db.port")
	r.add("get deleted", errors.Is(err, njs.ErrKeyNotFound))
	rev, err = kv.Create(c, "db.port", []byte("6543"))
	r.add("create after delete", rev, " ", outcome(err))
	watch(rev)
	r.add("delete with wrong revision", outcome(kv.Delete(c, "db.port", njs.LastRevision(1))))

	keys, err := kv.Keys(c)
	sort.Strings(keys)
	r.add("keys", keys, " ", outcome(err))
	lister, err := kv.ListKeysFiltered(c, "db.port", "other.*")
	require.NoError(t, err)
	var filtered []string
	for k := range lister.Keys() {
		filtered = append(filtered, k)
	}
	r.add("keys filtered", filtered)

	// A purge is a rollup: it leaves one marker for the key.
	r.add("purge", outcome(kv.Purge(c, "db.host")))
	watch(rev + 1)
	hist, err = kv.History(c, "db.host")
	r.add("history after purge", outcome(err))
	for _, e := range hist {
		r.add("  entry", entry(e, nil))
	}
	_, err = kv.Get(c, "db.host")
	r.add("get purged", errors.Is(err, njs.ErrKeyNotFound))
	info, err = js.Stream(c, "KV_CONF")
	require.NoError(t, err)
	r.add("stream state", info.CachedInfo().State.Msgs, " ", info.CachedInfo().State.FirstSeq, " ", info.CachedInfo().State.LastSeq)

	r.add("purge deletes", outcome(kv.PurgeDeletes(c, njs.DeleteMarkersOlderThan(-1))))
	info, err = js.Stream(c, "KV_CONF")
	require.NoError(t, err)
	r.add("stream state", info.CachedInfo().State.Msgs)
	st, err = kv.Status(c)
	require.NoError(t, err)
	r.add("status values", st.Values())

	for _, e := range watched {
		r.add("  watched", e)
	}

	// A second watcher starts from the latest value of each key.
	w2, err := kv.Watch(c, "db.*")
	require.NoError(t, err)
	defer func() { _ = w2.Stop() }()
	for e := range w2.Updates() {
		if e == nil {
			break
		}
		r.add("  latest", entry(e, nil))
	}
	r.add("delete bucket", outcome(js.DeleteKeyValue(c, "CONF")))
	_, err = js.KeyValue(c, "CONF")
	r.add("bucket gone", errors.Is(err, njs.ErrBucketNotFound))
	return r
}

// TestKeyValue runs nats.go's key-value API against both servers.
func TestKeyValue(t *testing.T) {
	runBoth(t, kvScript)
}

func objectScript(t *testing.T, js njs.JetStream) record {
	c := ctx(t)
	var r record
	obs, err := js.CreateObjectStore(c, njs.ObjectStoreConfig{Bucket: "FILES"})
	require.NoError(t, err)

	// 300 KB: three chunks of nats.go's default 128 KB.
	big := make([]byte, 300<<10)
	_, _ = rand.Read(big)
	info, err := obs.PutBytes(c, "big.bin", big)
	require.NoError(t, err)
	r.add("put", info.Name, " ", info.Size, " ", info.Chunks)
	got, err := obs.GetBytes(c, "big.bin")
	r.add("get", outcome(err), " ", bytes.Equal(big, got))
	info, err = obs.GetInfo(c, "big.bin")
	r.add("info", outcome(err), " ", info.Size, " ", info.Chunks, " ", info.Deleted)

	// Putting the name again replaces the metadata (a rollup) and
	// purges the old chunks.
	info, err = obs.PutString(c, "big.bin", "small now")
	require.NoError(t, err)
	r.add("replace", info.Size, " ", info.Chunks)
	s, err := obs.GetString(c, "big.bin")
	r.add("get replaced", s, " ", outcome(err))
	stream, err := js.Stream(c, "OBJ_FILES")
	require.NoError(t, err)
	r.add("stream messages", stream.CachedInfo().State.Msgs)

	_, err = obs.PutString(c, "notes.txt", "hello")
	require.NoError(t, err)
	list, err := obs.List(c)
	r.add("list", outcome(err))
	for _, o := range list {
		r.add("  object", o.Name, " ", o.Size)
	}
	r.add("update meta", outcome(obs.UpdateMeta(c, "notes.txt", njs.ObjectMeta{Name: "notes.md", Description: "renamed"})))
	info, err = obs.GetInfo(c, "notes.md")
	r.add("renamed", outcome(err), " ", info.Description)
	_, err = obs.GetInfo(c, "notes.txt")
	r.add("old name", errors.Is(err, njs.ErrObjectNotFound))

	r.add("delete", outcome(obs.Delete(c, "big.bin")))
	_, err = obs.GetInfo(c, "big.bin")
	r.add("get deleted", errors.Is(err, njs.ErrObjectNotFound))
	info, err = obs.GetInfo(c, "big.bin", njs.GetObjectInfoShowDeleted())
	r.add("deleted info", outcome(err), " ", info.Deleted)
	stream, err = js.Stream(c, "OBJ_FILES")
	require.NoError(t, err)
	r.add("stream messages", stream.CachedInfo().State.Msgs)

	r.add("seal", outcome(obs.Seal(c)))
	st, err := obs.Status(c)
	require.NoError(t, err)
	r.add("sealed", st.Sealed())
	_, err = obs.PutString(c, "late.txt", "x")
	r.add("put sealed", err != nil)
	r.add("delete store", outcome(js.DeleteObjectStore(c, "FILES")))
	return r
}

// TestObjectStore runs nats.go's object store API against both servers.
func TestObjectStore(t *testing.T) {
	runBoth(t, objectScript)
}

func kvTTLScript(t *testing.T, js njs.JetStream) record {
	c := ctx(t)
	var r record
	kv, err := js.CreateKeyValue(c, njs.KeyValueConfig{Bucket: "SESSIONS", LimitMarkerTTL: time.Second})
	require.NoError(t, err)
	info, err := js.Stream(c, "KV_SESSIONS")
	require.NoError(t, err)
	cfg := info.CachedInfo().Config
	r.add("stream", cfg.AllowMsgTTL, " ", cfg.SubjectDeleteMarkerTTL)
	w, err := kv.WatchAll(c)
	require.NoError(t, err)
	defer func() { _ = w.Stop() }()
	next := func() string {
		select {
		case e := <-w.Updates():
			if e == nil {
				return "initial values done"
			}
			return fmt.Sprintf("%s=%q rev %d %s", e.Key(), e.Value(), e.Revision(), e.Operation())
		case <-time.After(5 * time.Second):
			return "nothing"
		}
	}
	r.add("watch", next())
	rev, err := kv.Create(c, "session.1", []byte("alice"), njs.KeyTTL(time.Second))
	r.add("create with ttl", rev, " ", outcome(err))
	r.add("watch", next())
	// A second later the key is gone, and its marker says so.
	r.add("watch", next())
	_, err = kv.Get(c, "session.1")
	r.add("get expired", errors.Is(err, njs.ErrKeyNotFound))
	// The key can be created again at once: the marker is a deletion.
	rev, err = kv.Create(c, "session.1", []byte("bob"))
	r.add("create again", rev, " ", outcome(err))
	r.add("watch", next())
	r.add("purge with ttl", outcome(kv.Purge(c, "session.1", njs.PurgeTTL(time.Second))))
	r.add("watch", next())
	// The purge marker itself goes after its TTL, and leaves nothing.
	require.Eventually(t, func() bool {
		info, err := js.Stream(c, "KV_SESSIONS")
		return err == nil && info.CachedInfo().State.Msgs == 0
	}, 10*time.Second, 50*time.Millisecond)
	r.add("empty", true)
	return r
}

// TestKeyValueTTL runs nats.go's per-key TTLs (LimitMarkerTTL) against
// both servers.
func TestKeyValueTTL(t *testing.T) {
	runBoth(t, kvTTLScript)
}
