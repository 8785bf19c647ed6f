package store

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store/storetest"
)

// TestHoldWrites: while writes are held, the stream goes on (appends,
// lazy removals, segment rolls, reads), but a sync round fsyncs the files
// as they were when the hold began; after ReleaseWrites the next round
// covers everything.
func TestHoldWrites(t *testing.T) {
	mem := storetest.NewMemFS()
	o := Options{Dir: memDir, FS: mem, WriteBuffer: 4096, SegmentBytes: 1024,
		Durability: Durability{Sync: SyncInterval}}
	s := mustOpen(t, o)
	for i := range 10 {
		mustAppend(t, s, "h", fmt.Sprintf("before-%d", i))
	}
	require.NoError(t, s.Remove(3)) // lazy: written by HoldWrites
	require.NoError(t, s.HoldWrites())
	for i := range 40 { // several segments roll meanwhile
		mustAppend(t, s, "h", fmt.Sprintf("during-%d-%s", i, payload(uint64(i), 60)))
	}
	require.NoError(t, s.Remove(5))
	require.Equal(t, uint64(50), s.State().LastSeq)
	require.Equal(t, "before-9", string(mustGet(t, s, 10).Data))
	require.Contains(t, string(mustGet(t, s, 50).Data), "during-39")

	require.NoError(t, s.SyncNow())
	held := mustOpen(t, Options{Dir: memDir, FS: mem.CrashClone(), SegmentBytes: 1024})
	st := held.State()
	require.Equal(t, uint64(10), st.LastSeq, "an OS crash keeps the files as the hold began")
	require.Equal(t, uint64(9), st.Msgs, "with the removal made before it, not the one during it")
	_, err := held.Get(3)
	require.ErrorIs(t, err, ErrNotFound)
	require.Equal(t, "before-4", string(mustGet(t, held, 5).Data))
	require.ErrorContains(t, s.Sync(50), "has not been appended", "a held sequence is not reported durable")

	require.NoError(t, s.ReleaseWrites())
	require.NoError(t, s.Sync(50))
	after := mustOpen(t, Options{Dir: memDir, FS: mem.CrashClone(), SegmentBytes: 1024})
	st = after.State()
	require.Equal(t, uint64(50), st.LastSeq)
	require.Equal(t, uint64(48), st.Msgs)
}

// TestHoldWritesNeedsBuffer: a stream without a write buffer cannot hold
// its writes, and a memory stream has none to hold.
func TestHoldWritesNeedsBuffer(t *testing.T) {
	s := mustOpen(t, Options{Dir: t.TempDir()})
	require.ErrorIs(t, s.HoldWrites(), ErrInvalidConfig)
	m := mustOpen(t, Options{Storage: MemoryStorage, WriteBuffer: 1024})
	require.NoError(t, m.HoldWrites())
	require.NoError(t, m.ReleaseWrites())
}
