package raftlog

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store"
	"github.com/skiffmq/skiff/store/storetest"
)

// TestBackgroundFsyncDoesNotStallWrites: under SyncInterval and SyncNever
// a slow fsync (the periodic one, or Log.Sync's) runs beside the writer:
// appends are written and their callbacks run while it is stuck, and
// Log.Sync returns only once an fsync that started after its call is done,
// with everything written before it durable.
func TestBackgroundFsyncDoesNotStallWrites(t *testing.T) {
	for _, policy := range []store.SyncPolicy{store.SyncInterval, store.SyncNever} {
		t.Run(policy.String(), func(t *testing.T) {
			mem := storetest.NewMemFS()
			var (
				mu      sync.Mutex
				stall   chan struct{} // while set, a segment's fsync waits for it
				entered = make(chan struct{}, 16)
			)
			fs := &hookFS{FS: mem, onSync: func(name string) {
				mu.Lock()
				ch := stall
				mu.Unlock()
				if ch != nil && strings.HasSuffix(name, segExt) {
					entered <- struct{}{}
					<-ch
				}
			}}
			l := mustOpen(t, fs, Options{SegmentBytes: 1 << 30,
				Durability: store.Durability{Sync: policy, Interval: 5 * time.Millisecond}})
			g := l.Group(1)
			save(t, g, Update{Entries: ents(1, 1, 10, 1), HardState: hardState(1, 1, 0)})

			release := make(chan struct{})
			mu.Lock()
			stall = release
			mu.Unlock()
			synced := make(chan error, 1)
			go func() { synced <- l.Sync() }()
			select {
			case <-entered:
			case <-time.After(5 * time.Second):
				t.Fatal("Log.Sync did not fsync")
			}
			// The fsync is stuck: appends go on.
			for i := uint64(11); i <= 30; i++ {
				done := make(chan error, 1)
				g.Save(Update{Entries: ents(1, i, i, 1)}, func(err error) { done <- err })
				select {
				case err := <-done:
					require.NoError(t, err)
				case <-time.After(5 * time.Second):
					t.Fatalf("append %d waited for a background fsync", i)
				}
			}
			select {
			case err := <-synced:
				t.Fatalf("Log.Sync returned (%v) before its fsync", err)
			default:
			}
			mu.Lock()
			stall = nil
			mu.Unlock()
			close(release)
			require.NoError(t, <-synced)
			last, _ := durableAt(t, mem.CrashClone(), 1)
			require.GreaterOrEqual(t, last, uint64(10), "what was written before Log.Sync is durable")
			// A Sync after the appends covers them.
			require.NoError(t, l.Sync())
			last, _ = durableAt(t, mem.CrashClone(), 1)
			require.Equal(t, uint64(30), last)
		})
	}
}

// TestBackgroundFsyncFailure: a Log.Sync whose background fsync fails
// gets the error, and the writer starts a new segment, whose writes a
// later Sync makes durable.
func TestBackgroundFsyncFailure(t *testing.T) {
	mem := storetest.NewMemFS()
	ffs := storetest.NewFaultFS(mem)
	first := segmentName(1)
	ffs.Match = func(name string) bool { return strings.HasSuffix(name, first) } // the first segment's fsyncs fail
	l := mustOpen(t, ffs, Options{SegmentBytes: 1 << 30,
		Durability: store.Durability{Sync: store.SyncInterval, Interval: time.Hour}})
	g := l.Group(1)
	save(t, g, Update{Entries: ents(1, 1, 5, 1)})
	require.Equal(t, 1, l.Stats().Segments)
	ffs.FailSync(errors.New("injected EIO"))
	require.ErrorIs(t, l.Sync(), ErrSync)
	require.Eventually(t, func() bool { return l.Stats().Segments == 2 }, 5*time.Second, 5*time.Millisecond,
		"the writer started a new segment after the failed fsync")
	save(t, g, Update{Entries: ents(1, 6, 8, 1)})
	require.NoError(t, l.Sync())
}
