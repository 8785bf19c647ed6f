package raftlog

import (
	"errors"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store/storetest"
)

var errEIO = &ioError{}

type ioError struct{}

func (*ioError) Error() string        { return "input/output error" }
func (*ioError) Is(target error) bool { return target == syscall.EIO }

// TestFullDisk fills the disk under a write: the write fails with
// ErrWrite wrapping ENOSPC, its group fails and serves nothing more, a
// group not in the failed batch goes on once there is space, no segment
// is removed until the log is reopened, and the reopened log holds
// exactly what succeeded, with no torn record.
func TestFullDisk(t *testing.T) {
	for name, fill := range map[string]func(*storetest.FaultFS){
		"full":    func(f *storetest.FaultFS) { f.SetFull(true) },
		"partial": func(f *storetest.FaultFS) { f.SetBudget(50) }, // the write stops in the middle of a record
	} {
		t.Run(name, func(t *testing.T) {
			mem := storetest.NewMemFS()
			ffs := storetest.NewFaultFS(mem)
			opts := Options{SegmentBytes: 1 << 10}
			l := mustOpen(t, ffs, opts)
			g1, g2 := l.Group(1), l.Group(2)
			for i := uint64(1); i <= 20; i++ {
				save(t, g1, Update{Entries: ents(1, i, i, 1)})
			}
			save(t, g2, Update{Entries: ents(2, 1, 3, 1), HardState: hardState(1, 2, 3)})
			segs := segmentPaths(mem)

			fill(ffs)
			err := g1.SaveWait(Update{Entries: ents(1, 21, 25, 1)})
			require.ErrorIs(t, err, ErrWrite)
			require.ErrorIs(t, err, syscall.ENOSPC)
			require.ErrorIs(t, g1.Err(), ErrFailed)
			_, err = g1.LastIndex()
			require.ErrorIs(t, err, ErrFailed)
			_, err = g1.Entries(1, 2, 100)
			require.ErrorIs(t, err, ErrFailed)
			require.ErrorIs(t, g1.SaveWait(Update{Entries: ents(1, 26, 26, 1)}), ErrFailed)
			require.Equal(t, int64(1), l.Stats().FailedWrites)

			ffs.SetFull(false)
			ffs.SetBudget(-1)
			require.NoError(t, g2.Err())
			save(t, g2, Update{Entries: ents(2, 4, 5, 1)})
			require.NoError(t, g2.Compact(5))
			settle(t, l)
			require.Subset(t, segmentPaths(mem), segs, "no GC after a failed write")
			require.NoError(t, l.Close())

			l = mustOpen(t, mem, opts)
			rep := l.Recovery()
			require.Zero(t, rep.TruncatedBytes, "the failed write left nothing behind")
			require.Empty(t, rep.Damage)
			requireLog(t, l, 1, 1, repeat(1, 20)...)
			requireLog(t, l, 2, 6)
			save(t, l.Group(1), Update{Entries: ents(1, 21, 21, 1)})
		})
	}
}

// TestFailedBatchFailsItsGroups queues, behind a batch held in its fsync,
// an append of group 1, then updates with nothing to write from groups 1
// and 2 (raft sends those with responses that acknowledge earlier
// appends), and fills the disk: the append fails, and so does group 1's
// empty update, which must not acknowledge it; group 2's succeeds.
func TestFailedBatchFailsItsGroups(t *testing.T) {
	gt := newGate()
	ffs := storetest.NewFaultFS(storetest.NewMemFS())
	l := mustOpen(t, &hookFS{FS: ffs, onSync: gt.wait}, Options{})
	save(t, l.Group(1), Update{Entries: ents(1, 1, 1, 1)})
	save(t, l.Group(2), Update{Entries: ents(2, 1, 1, 1)})

	gt.close()
	held := make(chan error, 1)
	l.Group(3).Save(Update{Entries: ents(3, 1, 1, 1)}, func(err error) { held <- err })
	<-gt.entered
	errs := make(chan [2]any, 3)
	for _, w := range []struct {
		g uint64
		u Update
	}{{1, Update{Entries: ents(1, 2, 2, 1)}}, {1, Update{}}, {2, Update{}}} {
		l.Group(w.g).Save(w.u, func(err error) { errs <- [2]any{w.g, err} })
	}
	ffs.SetFull(true)
	gt.open()
	require.NoError(t, <-held)
	for range 3 {
		r := <-errs
		if r[0] == uint64(1) {
			require.ErrorIs(t, r[1].(error), ErrWrite)
		} else {
			require.Nil(t, r[1])
		}
	}
	ffs.SetFull(false)
}

// TestFullDiskAtRoll: a new segment cannot be created; the writer goes on
// in the old one, and nothing is lost.
func TestFullDiskAtRoll(t *testing.T) {
	mem := storetest.NewMemFS()
	ffs := storetest.NewFaultFS(mem)
	ffs.Match = func(name string) bool { return name != walDir+"/"+segmentName(1) } // only new files fail
	l := mustOpen(t, ffs, Options{SegmentBytes: 1 << 10})
	ffs.SetFull(true)
	for i := uint64(1); i <= 30; i++ {
		save(t, l.Group(1), Update{Entries: ents(1, i, i, 1)})
	}
	require.Len(t, segmentPaths(mem), 1)
	ffs.SetFull(false)
	require.NoError(t, l.Close())
	l = mustOpen(t, mem, Options{SegmentBytes: 1 << 10})
	requireLog(t, l, 1, 1, repeat(1, 30)...)
}

// TestFsyncError fails an fsync: every write of the batch fails with
// ErrSync, their groups fail, the writer starts a new segment rather than
// write to the file again, and other groups go on.
func TestFsyncError(t *testing.T) {
	mem := storetest.NewMemFS()
	ffs := storetest.NewFaultFS(mem)
	l := mustOpen(t, ffs, Options{SegmentBytes: 1 << 20})
	g1, g2 := l.Group(1), l.Group(2)
	save(t, g1, Update{Entries: ents(1, 1, 3, 1)})
	before := segmentPaths(mem)

	ffs.FailSync(errEIO)
	ffs.OnFailedSync(func() { ffs.FailSync(nil) }) // the disk recovers after one failure
	err := g1.SaveWait(Update{Entries: ents(1, 4, 5, 1)})
	require.ErrorIs(t, err, ErrSync)
	require.ErrorIs(t, err, syscall.EIO)
	require.ErrorIs(t, g1.Err(), ErrFailed)
	require.Len(t, segmentPaths(mem), len(before)+1, "a new segment after a failed fsync")

	save(t, g2, Update{Entries: ents(2, 1, 2, 1)})
	require.NoError(t, l.Close())

	// The failed write may or may not have reached the disk; what was
	// acknowledged did, and group 2's write went to the new segment.
	l = mustOpen(t, mem.CrashClone(), Options{SegmentBytes: 1 << 20})
	last, err := l.Group(1).LastIndex()
	require.NoError(t, err)
	require.GreaterOrEqual(t, last, uint64(3))
	requireLog(t, l, 1, 1, repeat(1, int(last))...)
	requireLog(t, l, 2, 1, 1, 1)
}

// TestSyncErrorFailsSyncCallers: Log.Sync reports a failed fsync.
func TestSyncErrorFailsSyncCallers(t *testing.T) {
	ffs := storetest.NewFaultFS(storetest.NewMemFS())
	l := mustOpen(t, ffs, Options{})
	save(t, l.Group(1), Update{Entries: ents(1, 1, 1, 1)})
	ffs.FailSync(errEIO)
	require.ErrorIs(t, l.Sync(), ErrSync)
	ffs.FailSync(nil)
}

// TestReadError: reads that fail are errors from Entries, not a wrong
// answer, and Open fails rather than recover from what it cannot read.
func TestReadError(t *testing.T) {
	mem := storetest.NewMemFS()
	ffs := storetest.NewFaultFS(mem)
	l := mustOpen(t, ffs, Options{CacheBytes: 1})
	save(t, l.Group(1), Update{Entries: ents(1, 1, 5, 1)})
	ffs.FailReads(errEIO)
	_, err := l.Group(1).Entries(1, 3, 1<<20)
	require.ErrorIs(t, err, syscall.EIO)
	require.False(t, errors.Is(err, ErrCorrupt))
	require.NoError(t, l.Close())
	_, err = Open(withDefaults(ffs, Options{}))
	require.ErrorIs(t, err, syscall.EIO)
	ffs.FailReads(nil)
	l = mustOpen(t, ffs, Options{})
	requireLog(t, l, 1, 1, repeat(1, 5)...)
}
