package store

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store/storetest"
)

// stagingOpts is a staging file stream in dir, committed through ct.
func stagingOpts(dir string, ct uint64) Options {
	return Options{Dir: dir, Staging: true, CommitThrough: ct, Durability: Durability{Sync: SyncNever}, LogClock: true}
}

// mustStage stages message i (payload(i, size)) on subj.
func mustStage(t testing.TB, s *Stream, seq uint64, subj string, size int) Place {
	t.Helper()
	p, err := s.Stage(StageKey{}, seq, int64(seq), subj, nil, payload(seq, size))
	require.NoError(t, err)
	require.Equal(t, seq, p.Seq)
	return p
}

// smallSegments opens a staging stream in dir whose segments hold three
// records of 61 bytes (30 bytes of data on a one-letter subject).
func smallSegments(t testing.TB, dir string) *Stream {
	o := stagingOpts(dir, 0)
	o.SegmentBytes = 200
	return mustOpen(t, o)
}

// logBytes is the size of every segment file of dir together.
func logBytes(t testing.TB, dir string) int64 {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*"+logExt))
	require.NoError(t, err)
	var n int64
	for _, name := range names {
		st, err := os.Stat(name)
		require.NoError(t, err)
		n += st.Size()
	}
	return n
}

// requireMsgs checks that the stream holds exactly seqs, each with its
// payload(seq, size).
func requireMsgs(t testing.TB, s *Stream, seqs []uint64, size int) {
	t.Helper()
	require.Equal(t, seqs, liveSeqs(t, s))
	for _, q := range seqs {
		m := mustGet(t, s, q)
		require.Equal(t, payload(q, size), m.Data, "sequence %d", q)
	}
}

func TestStageThenCommit(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, stagingOpts(dir, 0))
	for q := uint64(1); q <= 3; q++ {
		mustStage(t, s, q, "a", 100)
	}
	// Staged: written, invisible.
	require.Equal(t, uint64(0), s.State().Msgs)
	require.Equal(t, uint64(0), s.State().LastSeq)
	_, err := s.Get(1)
	require.ErrorIs(t, err, ErrNotFound)
	first, last := s.Staged()
	require.Equal(t, []uint64{1, 3}, []uint64{first, last})
	require.NoError(t, s.Flush())
	written := logBytes(t, dir)
	require.Equal(t, int64(3*RecordSize("a", nil, payload(1, 100))), written)

	require.ErrorIs(t, commitStaged(s, 2, 0), ErrNotStaged, "not the first staged")
	require.NoError(t, commitStaged(s, 1, 0))
	require.NoError(t, commitStaged(s, 2, 0))
	requireMsgs(t, s, []uint64{1, 2}, 100)
	require.NoError(t, commitStaged(s, 1, 0), "committed already")
	require.NoError(t, commitStaged(s, 3, 0))
	require.ErrorIs(t, commitStaged(s, 4, 0), ErrNotStaged)
	requireMsgs(t, s, []uint64{1, 2, 3}, 100)
	require.NoError(t, s.Flush())
	require.Equal(t, written, logBytes(t, dir), "a commit writes nothing")
	first, last = s.Staged()
	require.Greater(t, first, last)
}

func TestStageOrder(t *testing.T) {
	s := mustOpen(t, stagingOpts(t.TempDir(), 0))
	mustStage(t, s, 1, "a", 10)
	require.NoError(t, commitStaged(s, 1, 0))
	mustStage(t, s, 2, "a", 10)
	mustStage(t, s, 3, "a", 10)
	for _, tc := range []struct {
		name string
		seq  uint64
		subj string
		want error
	}{
		{"committed", 1, "a", ErrNotStaged},
		{"a gap after the tail", 5, "a", ErrNotStaged},
		{"an invalid subject", 4, "a..b", ErrDiverged},
		{"after the tail", 4, "a", nil},
		{"inside the tail: cut from there", 3, "b", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.Stage(StageKey{}, tc.seq, 0, tc.subj, nil, []byte("x"))
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			} else {
				require.NoError(t, err)
			}
		})
	}
	first, last := s.Staged()
	require.Equal(t, []uint64{2, 3}, []uint64{first, last})
	require.NoError(t, commitStaged(s, 2, 0))
	require.NoError(t, commitStaged(s, 3, 0))
	m := mustGet(t, s, 3)
	require.Equal(t, "b", m.Subject, "the record staged again replaced the first")

	_, err := mustOpen(t, Options{Dir: t.TempDir()}).Stage(StageKey{}, 1, 0, "a", nil, nil)
	require.ErrorIs(t, err, ErrInvalidConfig, "a stream that does not stage")
	_, err = Open(Options{Storage: MemoryStorage, Staging: true})
	require.ErrorIs(t, err, ErrInvalidConfig, "memory storage")
}

// A record staged takes the previous record's time where that is later,
// so that timestamps never go back along the files.
func TestStageTimestamps(t *testing.T) {
	s := mustOpen(t, stagingOpts(t.TempDir(), 0))
	p, err := s.Stage(StageKey{}, 1, 100, "a", nil, nil)
	require.NoError(t, err)
	require.Equal(t, int64(100), p.TS)
	p, err = s.Stage(StageKey{}, 2, 50, "a", nil, nil)
	require.NoError(t, err)
	require.Equal(t, int64(100), p.TS)
	require.NoError(t, commitStaged(s, 1, 0))
	require.NoError(t, commitStaged(s, 2, 0))
	require.Equal(t, int64(100), mustGet(t, s, 2).Timestamp)
}

func TestUnstageCutsTheFiles(t *testing.T) {
	for _, buffered := range []int{0, 1 << 20} {
		t.Run(fmt.Sprintf("WriteBuffer=%d", buffered), func(t *testing.T) {
			dir := t.TempDir()
			o := stagingOpts(dir, 0)
			o.WriteBuffer = buffered
			o.SegmentBytes = 1000 // about six records of 150 bytes a segment
			s := mustOpen(t, o)
			var places []Place
			for q := uint64(1); q <= 20; q++ {
				places = append(places, mustStage(t, s, q, "a", 120))
				if q == 3 {
					require.NoError(t, s.Flush())
				}
			}
			for q := uint64(1); q <= 5; q++ {
				require.NoError(t, commitStaged(s, q, 0))
			}
			require.NoError(t, s.Unstage(9))
			first, last := s.Staged()
			require.Equal(t, []uint64{6, 8}, []uint64{first, last})
			require.NoError(t, s.Flush())
			require.Equal(t, int64(8*RecordSize("a", nil, payload(1, 120))), logBytes(t, dir), "the cut records are gone from the files")
			_, err := s.ReadPlace(places[12])
			require.ErrorIs(t, err, ErrNotFound, "the place of a cut record")
			m, err := s.ReadPlace(places[7])
			require.NoError(t, err)
			require.Equal(t, payload(8, 120), m.Data)

			// Staged again, with other payloads: the old places fail.
			for q := uint64(9); q <= 12; q++ {
				mustStage(t, s, q, "a", 60)
			}
			_, err = s.ReadPlace(places[8])
			require.ErrorIs(t, err, ErrNotFound, "another record at the place")
			for q := uint64(6); q <= 12; q++ {
				require.NoError(t, commitStaged(s, q, 0))
			}
			require.NoError(t, s.Close())

			s = mustOpen(t, stagingOpts(dir, 12))
			require.Equal(t, seqRange(1, 12), liveSeqs(t, s))
			for q := uint64(1); q <= 12; q++ {
				size := 120
				if q >= 9 {
					size = 60
				}
				require.Equal(t, payload(q, size), mustGet(t, s, q).Data)
			}
			require.Zero(t, s.Recovery().LostRecords())
		})
	}
}

func TestStagedRecovery(t *testing.T) {
	dir := t.TempDir()
	o := stagingOpts(dir, 0)
	o.SegmentBytes = 700
	s := mustOpen(t, o)
	for q := uint64(1); q <= 10; q++ {
		mustStage(t, s, q, fmt.Sprintf("s.%d", q%3), 100)
	}
	for q := uint64(1); q <= 6; q++ {
		require.NoError(t, commitStaged(s, q, 0))
	}
	require.NoError(t, s.Remove(2))
	require.NoError(t, s.Close())

	// Committed through 4: 5 and 6, committed since, come back staged.
	s = mustOpen(t, stagingOpts(dir, 4))
	require.Equal(t, 6, s.Recovery().Staged)
	require.Equal(t, uint64(4), s.State().LastSeq)
	require.Equal(t, []uint64{1, 3, 4}, liveSeqs(t, s))
	first, last := s.Staged()
	require.Equal(t, []uint64{5, 10}, []uint64{first, last})
	for q := uint64(5); q <= 8; q++ {
		require.NoError(t, commitStaged(s, q, 0))
	}
	require.NoError(t, s.Close())

	// Not without staging: it would take what is staged for committed.
	_, err := Open(Options{Dir: dir, Logger: quiet})
	require.ErrorIs(t, err, ErrInvalidConfig)

	// Nothing known committed: everything comes back staged.
	s = mustOpen(t, stagingOpts(dir, 0))
	require.Equal(t, 10, s.Recovery().Staged)
	require.Empty(t, liveSeqs(t, s))
	require.NoError(t, s.Unstage(4))
	for q := uint64(1); q <= 3; q++ {
		require.NoError(t, commitStaged(s, q, 0))
	}
	require.Equal(t, []uint64{1, 2, 3}, liveSeqs(t, s))
}

// A directory written by a stream that did not stage has every record
// committed, whatever CommitThrough says: its first Open with staging
// marks it, and stages only what is staged after.
func TestStagingMarker(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, Options{Dir: dir, Durability: Durability{Sync: SyncNever}})
	for i := 0; i < 5; i++ {
		mustAppend(t, s, "a", "x")
	}
	require.NoError(t, s.Close())
	s = mustOpen(t, stagingOpts(dir, 2))
	require.Equal(t, seqRange(1, 5), liveSeqs(t, s))
	require.Zero(t, s.Recovery().Staged)
	mustStage(t, s, 6, "a", 10)
	require.NoError(t, s.Close())
	s = mustOpen(t, stagingOpts(dir, 5))
	require.Equal(t, 1, s.Recovery().Staged)
	require.NoError(t, s.Close())

	// A wiped store lost its marker: what its CommitThrough says it held,
	// it no longer does.
	require.NoError(t, os.RemoveAll(dir))
	s = mustOpen(t, stagingOpts(dir, 5))
	require.Equal(t, uint64(0), s.State().LastSeq)
}

// A record torn by a crash in the middle of its write is cut at Open;
// the staged records before it stay staged.
func TestStagedTornTail(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, stagingOpts(dir, 0))
	for q := uint64(1); q <= 5; q++ {
		mustStage(t, s, q, "a", 100)
	}
	require.NoError(t, commitStaged(s, 1, 0))
	require.NoError(t, s.Close())
	name := filepath.Join(dir, segmentBase(1)+logExt)
	st, err := os.Stat(name)
	require.NoError(t, err)
	require.NoError(t, os.Truncate(name, st.Size()-40))

	s = mustOpen(t, stagingOpts(dir, 1))
	first, last := s.Staged()
	require.Equal(t, []uint64{2, 4}, []uint64{first, last})
	require.Positive(t, s.Recovery().TruncatedBytes)
	for q := uint64(2); q <= 4; q++ {
		require.NoError(t, commitStaged(s, q, 0))
	}
	requireMsgs(t, s, seqRange(1, 4), 100)
}

// Staged records that do not follow the last committed sequence (a
// segment file in between is lost) are cut at Open.
func TestStagedAfterAGapCut(t *testing.T) {
	dir := t.TempDir()
	s := smallSegments(t, dir)
	for q := uint64(1); q <= 8; q++ {
		mustStage(t, s, q, "a", 30)
	}
	require.NoError(t, commitStaged(s, 1, 0))
	require.NoError(t, s.Close())
	require.NoError(t, os.Remove(filepath.Join(dir, segmentBase(4)+logExt)))

	s = mustOpen(t, stagingOpts(dir, 2))
	first, last := s.Staged()
	require.Equal(t, []uint64{3, 3}, []uint64{first, last}, "7 and 8 after the lost 4-6: cut")
	require.Equal(t, uint64(2), s.State().LastSeq)
	require.Equal(t, int64(3*RecordSize("a", nil, payload(1, 30))), logBytes(t, dir))
	require.NoError(t, s.Unstage(3))
	mustStage(t, s, 3, "a", 30)
	require.NoError(t, commitStaged(s, 3, 0))
	requireMsgs(t, s, []uint64{1, 2, 3}, 30)
	require.NoError(t, s.Close())

	// A floor past the staged records' start: they are gone with it.
	s = mustOpen(t, stagingOpts(dir, 0))
	_, err := s.Purge(PurgeRequest{Seq: 8})
	require.NoError(t, err)
	first, last = s.Staged()
	require.Greater(t, first, last, "a purge past the last sequence cuts the staged tail")
	require.Equal(t, uint64(7), s.State().LastSeq)
}

// A staged record of a sealed segment, recovered from its index, is read
// and checked at Open: one that fails its checksum is reported damaged and
// cut with those after it.
func TestStagedDamageFound(t *testing.T) {
	dir := t.TempDir()
	s := smallSegments(t, dir)
	var places []Place
	for q := uint64(1); q <= 8; q++ {
		places = append(places, mustStage(t, s, q, "a", 30))
	}
	for q := uint64(1); q <= 8; q++ {
		require.NoError(t, commitStaged(s, q, 0))
	}
	require.NoError(t, s.SyncNow()) // the sealed segments' indexes
	require.NoError(t, s.Close())
	p := places[4] // sequence 5, in segment 4
	name := filepath.Join(dir, segmentBase(p.Segment)+logExt)
	raw, err := os.ReadFile(name)
	require.NoError(t, err)
	raw[p.Offset+p.Size-1] ^= 0xff
	require.NoError(t, os.WriteFile(name, raw, 0o644))

	s = mustOpen(t, stagingOpts(dir, 2))
	rep := s.Recovery()
	require.Len(t, rep.Damaged, 1)
	require.Equal(t, uint64(5), rep.Damaged[0].FirstLost)
	require.ErrorIs(t, rep.Damaged[0].Err, ErrCorrupt)
	require.Positive(t, rep.LostRecords())
	first, last := s.Staged()
	require.Equal(t, []uint64{3, 4}, []uint64{first, last})
}

// AppendAt of the message a staged record holds commits it; of another,
// it cuts the tail and writes the message.
func TestAppendAtOverStaged(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, stagingOpts(dir, 0))
	mustStage(t, s, 1, "a", 50)
	mustStage(t, s, 2, "a", 50)
	mustStage(t, s, 3, "a", 50)
	require.NoError(t, s.Flush())
	before := logBytes(t, dir)
	require.NoError(t, s.AppendAt(1, 1, "a", nil, payload(1, 50), 0))
	require.NoError(t, s.Flush())
	require.Equal(t, before, logBytes(t, dir), "the same message: committed, not written")
	first, last := s.Staged()
	require.Equal(t, []uint64{2, 3}, []uint64{first, last})

	// The same subject and size, other bytes: not the staged message.
	other := payload(2, 50)
	other[10] ^= 1
	require.NoError(t, s.AppendAt(2, 2, "a", nil, other, 0))
	require.Equal(t, other, mustGet(t, s, 2).Data)
	first, last = s.Staged()
	require.Greater(t, first, last, "another message cuts the tail")
	mustStage(t, s, 3, "a", 50)
	require.NoError(t, s.Close())
	s = mustOpen(t, stagingOpts(dir, 1))
	require.NoError(t, s.AppendAt(2, 2, "b", nil, []byte("other"), 0))
	first, last = s.Staged()
	require.Greater(t, first, last, "another message cuts the tail")
	m := mustGet(t, s, 2)
	require.Equal(t, "b", m.Subject)
	require.Equal(t, []byte("other"), m.Data)
	require.NoError(t, s.Close())
	s = mustOpen(t, stagingOpts(dir, 2))
	require.Equal(t, []uint64{1, 2}, liveSeqs(t, s))
	require.Equal(t, []byte("other"), mustGet(t, s, 2).Data)
	first, last = s.Staged()
	require.Greater(t, first, last)
}

// AppendStaged commits a staged record by the key that staged it, without
// checksumming the message; a zero or another key falls back to the
// checksum; the sequence, timestamp, subject and size are checked always.
func TestAppendStagedByKey(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, stagingOpts(dir, 0))
	k := func(i uint64) StageKey { return StageKey{Index: 10 + i, Term: 2} }
	stage := func(seq uint64) {
		t.Helper()
		_, err := s.Stage(k(seq), seq, int64(seq), "a", nil, payload(seq, 50))
		require.NoError(t, err)
		require.NoError(t, s.Flush())
	}
	for _, tc := range []struct {
		name    string
		key     StageKey
		ts      int64 // 0: the staged record's
		data    func(seq uint64) []byte
		written bool // the message written, not the staged record committed
	}{
		{"its key", StageKey{}, 0, nil, false},
		{"no key, the same message", StageKey{}, 0, nil, false},
		{"another key, the same message", StageKey{Index: 99, Term: 2}, 0, nil, false},
		{"another key, other bytes", StageKey{Index: 99, Term: 2}, 0, func(seq uint64) []byte {
			b := payload(seq, 50)
			b[3] ^= 1
			return b
		}, true},
		{"its key, another time", StageKey{}, 1 << 40, nil, true},
		// The key stands for the bytes: the staged record is committed.
		{"its key, other bytes", StageKey{}, 0, func(seq uint64) []byte { return payload(seq+100, 50) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seq := s.State().LastSeq + 1
			stage(seq)
			key, ts, data := tc.key, int64(seq), payload(seq, 50)
			if key == (StageKey{}) && tc.name != "no key, the same message" {
				key = k(seq)
			}
			if tc.ts != 0 {
				ts = tc.ts
			}
			if tc.data != nil {
				data = tc.data(seq)
			}
			before := logBytes(t, dir)
			require.NoError(t, s.AppendStaged(key, seq, ts, "a", nil, data, 0))
			require.NoError(t, s.Flush())
			got := mustGet(t, s, seq)
			if tc.written { // over the staged record, cut
				require.Equal(t, data, got.Data)
				require.Equal(t, ts, got.Timestamp)
			} else {
				require.Equal(t, before, logBytes(t, dir), "committed, not written")
				require.Equal(t, payload(seq, 50), got.Data)
			}
			first, last := s.Staged()
			require.Greater(t, first, last)
		})
	}
}

// A purge of every committed message keeps the staged records and their
// segment; Skip cuts them.
func TestStagedPurgeAndSkip(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, stagingOpts(dir, 0))
	for q := uint64(1); q <= 6; q++ {
		mustStage(t, s, q, "a", 20)
	}
	for q := uint64(1); q <= 3; q++ {
		require.NoError(t, commitStaged(s, q, 0))
	}
	n, err := s.Purge(PurgeRequest{Seq: 4})
	require.NoError(t, err)
	require.Equal(t, uint64(3), n)
	require.NoError(t, s.SyncNow())
	first, last := s.Staged()
	require.Equal(t, []uint64{4, 6}, []uint64{first, last})
	require.NoError(t, commitStaged(s, 4, 0))
	require.NoError(t, commitStaged(s, 5, 0))
	requireMsgs(t, s, []uint64{4, 5}, 20)
	require.NoError(t, s.Skip(9, 0))
	first, last = s.Staged()
	require.Greater(t, first, last)
	mustStage(t, s, 10, "a", 20)
	require.NoError(t, commitStaged(s, 10, 0))
	require.NoError(t, s.Close())

	s = mustOpen(t, stagingOpts(dir, 10))
	requireMsgs(t, s, []uint64{4, 5, 10}, 20)
}

// Removing every committed message of a segment that holds staged records
// keeps the segment; removing a whole older segment drops it.
func TestStagedSegmentKept(t *testing.T) {
	dir := t.TempDir()
	o := stagingOpts(dir, 0)
	o.SegmentBytes = 500 // four records of about 110 bytes
	s := mustOpen(t, o)
	for q := uint64(1); q <= 10; q++ {
		mustStage(t, s, q, "a", 80)
	}
	for q := uint64(1); q <= 6; q++ {
		require.NoError(t, commitStaged(s, q, 0))
	}
	for q := uint64(1); q <= 6; q++ {
		require.NoError(t, s.Remove(q))
	}
	require.NoError(t, s.SyncNow())
	require.NoError(t, s.SyncNow())
	for q := uint64(7); q <= 10; q++ {
		require.NoError(t, commitStaged(s, q, 0))
	}
	requireMsgs(t, s, seqRange(7, 10), 80)
	require.NoError(t, s.Close())
	s = mustOpen(t, stagingOpts(dir, 10))
	requireMsgs(t, s, seqRange(7, 10), 80)
}

// A segment whose records were all committed and removed stays until the
// caller's log no longer needs them (ReleaseThrough): a replay after a
// crash commits them again.
func TestStagedSegmentsKeptForReplay(t *testing.T) {
	dir := t.TempDir()
	s := smallSegments(t, dir)
	o := stagingOpts(dir, 0)
	for q := uint64(1); q <= 9; q++ {
		mustStage(t, s, q, "a", 30)
		require.NoError(t, commitStaged(s, q, 0))
	}
	for q := uint64(2); q <= 6; q++ {
		require.NoError(t, s.Remove(q))
	}
	require.NoError(t, s.SyncNow())
	segs := func() int {
		names, err := filepath.Glob(filepath.Join(dir, "*"+logExt))
		require.NoError(t, err)
		return len(names)
	}
	require.Equal(t, 3, segs(), "4-6 removed, kept for a replay")
	require.NoError(t, s.Close())

	// The crash: the replay commits 4-6 again, then removes them.
	s = mustOpen(t, o)
	for q := uint64(1); q <= 9; q++ {
		require.NoError(t, commitStaged(s, q, 0))
	}
	for q := uint64(2); q <= 6; q++ {
		require.NoError(t, s.Remove(q))
	}
	requireMsgs(t, s, []uint64{1, 7, 8, 9}, 30)
	s.ReleaseThrough(9)
	require.Equal(t, 2, segs(), "covered by a checkpoint: dropped")
	requireMsgs(t, s, []uint64{1, 7, 8, 9}, 30)
}

// SyncWritten fsyncs the segment files written since their last fsync,
// staged records included; a failed fsync seals the segment.
func TestSyncWritten(t *testing.T) {
	fsys := storetest.NewFaultFS(OSFS)
	fsys.Match = storetest.IsSegment
	o := stagingOpts(t.TempDir(), 0)
	o.FS, o.WriteBuffer = fsys, 1<<20
	s := mustOpen(t, o)
	mustStage(t, s, 1, "a", 10)
	before := fsys.Syncs()
	require.NoError(t, s.SyncWritten())
	require.Equal(t, before+1, fsys.Syncs(), "the segment, once")
	require.NoError(t, s.SyncWritten())
	require.Equal(t, before+1, fsys.Syncs(), "nothing written since")

	// A new segment: the directory is fsynced too, so that the file's
	// name survives a power loss with its records.
	all := storetest.NewFaultFS(OSFS) // every file, directories included
	o2 := stagingOpts(t.TempDir(), 0)
	o2.FS, o2.SegmentBytes = all, 200 // two records of 71 bytes
	s2 := mustOpen(t, o2)
	mustStage(t, s2, 1, "a", 40)
	require.NoError(t, s2.SyncWritten())
	n := all.Syncs()
	mustStage(t, s2, 2, "a", 40)
	require.NoError(t, s2.SyncWritten())
	require.Equal(t, n+1, all.Syncs(), "the same segment: its file alone")
	n = all.Syncs()
	mustStage(t, s2, 3, "a", 40) // rolls to a second segment
	require.NoError(t, s2.SyncWritten())
	require.Equal(t, n+2, all.Syncs(), "a new segment: its file and the directory")

	mustStage(t, s, 2, "a", 10)
	fsys.FailSync(errors.New("injected"))
	require.ErrorIs(t, s.SyncWritten(), ErrSync)
	fsys.FailSync(nil)
	p := mustStage(t, s, 3, "a", 10)
	require.Equal(t, uint64(3), p.Segment, "a new segment after the failed fsync")
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.SyncWritten(), ErrClosed)
}

// Holding writes holds a staging stream's removals, not its appends: its
// records after the checkpoint come back staged, so that the files need
// not be frozen for them.
func TestStagingHoldsNoAppends(t *testing.T) {
	dir := t.TempDir()
	o := stagingOpts(dir, 0)
	o.WriteBuffer = 1 << 20
	s := mustOpen(t, o)
	mustStage(t, s, 1, "a", 10)
	require.NoError(t, commitStaged(s, 1, 0))
	require.NoError(t, s.HoldWrites())
	p := mustStage(t, s, 2, "a", 10)
	require.NoError(t, s.Flush())
	require.Equal(t, int64(p.Offset+p.Size), logBytes(t, dir), "written while held")
	require.NoError(t, commitStaged(s, 2, 0))
	require.NoError(t, s.Remove(1))
	require.NoError(t, s.ReleaseWrites())
	m, err := s.ReadPlace(p)
	require.NoError(t, err, "a committed record's place")
	require.Equal(t, payload(2, 10), m.Data)
}

// The limits apply at the commit: a message they refuse stays staged and
// the commit says the replica diverged.
func TestCommitRefusedByLimits(t *testing.T) {
	o := stagingOpts(t.TempDir(), 0)
	o.MaxMsgs, o.Discard = 1, DiscardNew
	s := mustOpen(t, o)
	mustStage(t, s, 1, "a", 10)
	mustStage(t, s, 2, "a", 10)
	require.NoError(t, commitStaged(s, 1, 0))
	require.ErrorIs(t, commitStaged(s, 2, 0), ErrDiverged)
	first, last := s.Staged()
	require.Equal(t, []uint64{2, 2}, []uint64{first, last})
	require.ErrorIs(t, commitStaged(s, 2, time.Second), ErrDiverged, "a TTL the stream does not allow")
}

// TestStageRandom runs random stages, commits, cuts, removals and
// reopens (committed through a random point at or below the last commit,
// as a checkpoint is) against a model, with segments of a few records.
func TestStageRandom(t *testing.T) {
	seeds := uint64(12)
	if testing.Short() {
		seeds = 4
	}
	if n, err := strconv.ParseUint(os.Getenv("STAGE_SEEDS"), 10, 64); err == nil {
		seeds = n
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			dir := t.TempDir()
			o := stagingOpts(dir, 0)
			o.SegmentBytes = 400
			if seed%2 == 0 {
				o.WriteBuffer = 256
			}
			s, err := Open(withQuiet(o))
			require.NoError(t, err)
			defer func() { _ = s.Close() }()
			committed := map[uint64][]byte{} // live committed messages
			var last uint64                  // last committed
			var staged [][]byte              // staged[i] is last+1+i
			var checkpoint uint64
			trace := os.Getenv("STAGE_TRACE") != ""
			for step := 0; step < 400; step++ {
				if trace {
					t.Logf("step %d: last %d, staged %d, checkpoint %d, live %v", step, last, len(staged), checkpoint, slices.Sorted(maps.Keys(committed)))
				}
				switch op := rng.IntN(20); {
				case op < 8: // stage, sometimes inside the tail
					seq := last + 1 + uint64(len(staged))
					if len(staged) > 0 && rng.IntN(5) == 0 {
						seq -= uint64(rng.IntN(len(staged)))
						staged = staged[:seq-last-1]
					}
					data := []byte(fmt.Sprintf("%d-%d-%s", seq, step, make([]byte, rng.IntN(90))))
					_, err := s.Stage(StageKey{}, seq, int64(seq), "a", nil, data)
					require.NoError(t, err)
					staged = append(staged, data)
				case op < 14: // commit
					if len(staged) == 0 {
						continue
					}
					last++
					require.NoError(t, commitStaged(s, last, 0))
					committed[last] = staged[0]
					staged = staged[1:]
				case op < 15: // cut
					if len(staged) == 0 {
						continue
					}
					k := rng.IntN(len(staged))
					require.NoError(t, s.Unstage(last+1+uint64(k)))
					staged = staged[:k]
				case op < 17: // remove a committed message
					if len(committed) == 0 {
						continue
					}
					keys := slices.Sorted(maps.Keys(committed))
					q := keys[rng.IntN(len(keys))]
					require.NoError(t, s.Remove(q))
					delete(committed, q)
				case op < 18: // a checkpoint
					require.NoError(t, s.Flush())
					require.NoError(t, s.SyncNow())
					checkpoint = last
					s.ReleaseThrough(checkpoint)
				default: // a restart at the checkpoint; the log replays the rest
					require.NoError(t, s.Close())
					o.CommitThrough = checkpoint
					s, err = Open(withQuiet(o))
					require.NoError(t, err)
					// Staged from the checkpoint on, or from a floor past it
					// (removals at the front, recorded since).
					first, end := s.Staged()
					require.LessOrEqual(t, checkpoint+1, first, "step %d", step)
					require.Equal(t, last+uint64(len(staged)), end, "step %d", step)
					for q := checkpoint + 1; q <= last; q++ {
						require.NoError(t, commitStaged(s, q, 0))
						if _, ok := committed[q]; !ok { // the replayed removal
							if err := s.Remove(q); !errors.Is(err, ErrNotFound) {
								require.NoError(t, err)
							}
						}
					}
				}
				if step%50 == 49 {
					checkStaged(t, s, committed, last, staged)
				}
			}
			checkStaged(t, s, committed, last, staged)
		})
	}
}

// checkStaged compares the stream with the model of TestStageRandom.
func checkStaged(t *testing.T, s *Stream, committed map[uint64][]byte, last uint64, staged [][]byte) {
	t.Helper()
	require.Equal(t, last, s.State().LastSeq)
	require.Equal(t, uint64(len(committed)), s.State().Msgs)
	for q, data := range committed {
		m, err := s.Get(q)
		require.NoError(t, err, "sequence %d", q)
		require.Equal(t, data, m.Data, "sequence %d", q)
	}
	first, end := s.Staged()
	if len(staged) == 0 {
		require.Greater(t, first, end)
		return
	}
	require.Equal(t, []uint64{last + 1, last + uint64(len(staged))}, []uint64{first, end})
}

// commitStaged commits the staged record of seq as a replica's apply
// does: AppendAt of its message, which finds it staged and commits it.
// ErrNotStaged if seq is not the first staged.
func commitStaged(s *Stream, seq uint64, ttl time.Duration) error {
	s.mu.RLock()
	last, found := s.mu.last, false
	var p Place
	if r := s.fb.stg.first(); r != nil && r.seq == seq {
		p, found = Place{Seq: seq, Segment: r.seg.first, Offset: r.off, Size: r.size, CRC: r.crc}, true
	}
	s.mu.RUnlock()
	switch {
	case seq <= last:
		return nil
	case !found:
		return ErrNotStaged
	}
	m, err := s.ReadPlace(p)
	if err != nil {
		return err
	}
	return s.AppendAt(seq, m.Timestamp, m.Subject, m.Header, m.Data, ttl)
}

// withQuiet silences a stream's logger.
func withQuiet(o Options) Options {
	if os.Getenv("STAGE_LOG") == "" {
		o.Logger = quiet
	}
	return o
}
