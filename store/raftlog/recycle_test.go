package raftlog

import (
	"path"
	"testing"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/store/storetest"
)

// freePaths lists the log's free files, oldest first.
func freePaths(mem *storetest.MemFS) []string {
	var out []string
	for _, n := range mem.Names(walDir, freeExt) {
		out = append(out, path.Join(walDir, n))
	}
	return out
}

// churn saves group 1's entries from, from+1, ... and compacts all but
// the last each time, until stop reports true; it returns the next index.
func churn(t *testing.T, l *Log, from uint64, stop func() bool) uint64 {
	t.Helper()
	i := from
	for ; !stop(); i++ {
		require.Less(t, i, from+10_000, "churn never stopped")
		save(t, l.Group(1), Update{Entries: ents(1, i, i, 1)})
		if i > 1 {
			require.NoError(t, l.Group(1).Compact(i-1))
		}
		settle(t, l)
	}
	return i
}

// TestRecycleSegments churns through segments: GC keeps the files of
// removed segments, up to RecycleSegments, and new segments are written
// over them; a clean close cuts the active one at its end, so the next
// Open finds nothing to truncate, and every entry reads back.
func TestRecycleSegments(t *testing.T) {
	for _, keep := range []int{1, 4, -1} {
		mem := storetest.NewMemFS()
		opts := Options{SegmentBytes: 1 << 10, RecycleSegments: keep}
		l := mustOpen(t, mem, opts)
		n := 0
		next := churn(t, l, 1, func() bool { n++; return n > 300 }) // about 40 segments
		st := l.Stats()
		if keep < 0 {
			require.Zero(t, st.Recycled, "RecycleSegments %d", keep)
			require.Empty(t, freePaths(mem))
		} else {
			require.Greater(t, st.Recycled, int64(20), "RecycleSegments %d", keep)
			require.LessOrEqual(t, len(freePaths(mem)), keep)
		}
		first, err := l.Group(1).FirstIndex()
		require.NoError(t, err)
		require.NoError(t, l.Close())

		l2 := mustOpen(t, mem, opts)
		rep := l2.Recovery()
		require.Zero(t, rep.TruncatedBytes, "RecycleSegments %d: Close cut the recycled segment", keep)
		require.Empty(t, rep.Damage)
		requireLog(t, l2, 1, first, repeat(1, int(next-first))...)
		require.NoError(t, l2.Close())
	}
}

// TestRecycledTornTail crashes in the middle of writing over a recycled
// segment, at every byte of its new records: the file holds the new
// records up to the cut and the old segment's bytes after it. Open must
// cut them off as a torn tail, mark nothing damaged, and keep exactly
// the whole new entries: the old segment's records, many of them whole,
// fail the new segment's checksums (its seed).
func TestRecycledTornTail(t *testing.T) {
	mem := storetest.NewMemFS()
	opts := Options{SegmentBytes: 1 << 10, RecycleSegments: 1}
	l := mustOpen(t, mem, opts)
	next := churn(t, l, 1, func() bool { return len(freePaths(mem)) == 1 })
	free := freePaths(mem)[0]
	old := mem.Contents(free)
	recycled := l.Stats().Recycled
	segs := len(segmentPaths(mem))
	// Write until the free file becomes the next segment, then a little.
	next = churn(t, l, next, func() bool { return l.Stats().Recycled > recycled })
	require.NotContains(t, freePaths(mem), free)
	for i := next; i < next+2; i++ {
		save(t, l.Group(1), Update{Entries: ents(1, i, i, 1)})
	}
	require.NoError(t, l.Close())
	require.GreaterOrEqual(t, len(segmentPaths(mem)), segs)
	paths := segmentPaths(mem)
	last := paths[len(paths)-1]
	full := mem.Contents(last)
	require.Less(t, len(full), len(old), "the old segment reaches past the new one's end")
	recs := recordsIn(t, full)
	require.Equal(t, kindCheckpoint, recs[0].r.kind)
	stale := 0
	for _, fr := range recordsIn(t, old) {
		if fr.off >= len(full) {
			stale++
		}
	}
	require.NotZero(t, stale, "whole records of the old segment lie past the new one's end")

	reopen := func(b []byte) (*Log, Report) {
		fs := mem.Clone()
		fs.SetContents(last, b)
		l, err := Open(withDefaults(fs, opts))
		require.NoError(t, err)
		return l, l.Recovery()
	}
	ckEnd := len(recs[0].b)
	l0, _ := reopen(append(full[:ckEnd:ckEnd], old[ckEnd:]...))
	base, err := l0.Group(1).LastIndex()
	require.NoError(t, err)
	first, err := l0.Group(1).FirstIndex()
	require.NoError(t, err)
	require.NoError(t, l0.Close())

	for cut := ckEnd; cut <= len(full); cut++ {
		b := append(full[:cut:cut], old[cut:]...)
		l, rep := reopen(b)
		require.Empty(t, rep.Damage, "cut at %d", cut)
		want, end := base, 0
		for _, fr := range recs {
			if fr.off+len(fr.b) <= cut {
				end = fr.off + len(fr.b)
				if fr.r.kind == kindEntry && fr.r.group == 1 {
					want = max(want, fr.r.index)
				}
			}
		}
		require.Equal(t, int64(len(b)-end), rep.TruncatedBytes, "cut at %d", cut)
		requireLog(t, l, 1, first, repeat(1, int(want-first+1))...)
		require.NoError(t, l.Group(1).Damaged())
		require.NoError(t, l.Close())
	}
}

// TestFormat1Segments reads segments written before checksum seeds
// (their records sealed from zero), and removes them when GC lets them
// go rather than recycling them: their records would pass for a new
// segment's.
func TestFormat1Segments(t *testing.T) {
	mem := storetest.NewMemFS()
	opts := Options{SegmentBytes: 1 << 10}
	l := mustOpen(t, mem, opts)
	for i := uint64(1); i <= 20; i++ {
		save(t, l.Group(1), Update{Entries: ents(1, i, i, 1)})
	}
	require.NoError(t, l.Close())
	old := segmentPaths(mem)
	require.Greater(t, len(old), 2)
	for _, p := range old {
		var b []byte
		for _, fr := range recordsIn(t, mem.Contents(p)) {
			b = appendRecord(b, 0, fr.r.kind, fr.r.group, fr.r.index, fr.r.term, fr.r.body)
		}
		mem.SetContents(p, b)
		require.Zero(t, seedOf(b))
	}

	l = mustOpen(t, mem, opts)
	require.Empty(t, l.Recovery().Damage)
	requireLog(t, l, 1, 1, repeat(1, 20)...)
	require.NoError(t, l.Group(1).Compact(20))
	settle(t, l)
	save(t, l.Group(1), Update{Entries: ents(1, 21, 21, 1)})
	settle(t, l)
	for _, p := range old {
		require.NotContains(t, segmentPaths(mem), p)
	}
	require.Empty(t, freePaths(mem), "no format-1 segment is kept to recycle")
}

// TestRecycledSegmentCut writes over a long segment's file a segment that
// ends shorter, and keeps it (a group's entry pins it) once it is no
// longer the active one: the roll must have cut it at its end, or the old
// records past it would read as damage at the next Open.
func TestRecycledSegmentCut(t *testing.T) {
	mem := storetest.NewMemFS()
	opts := Options{SegmentBytes: 1 << 10, RecycleSegments: 1}
	l := mustOpen(t, mem, opts)
	big := ent(1, 1, 1)
	big.Data = make([]byte, 8<<10)
	save(t, l.Group(1), Update{Entries: []*pb.Entry{big}})
	next := churn(t, l, 2, func() bool { return len(freePaths(mem)) == 1 })
	long := len(mem.Contents(freePaths(mem)[0]))
	require.Greater(t, long, 8<<10)
	next = churn(t, l, next, func() bool { return l.Stats().Recycled == 1 })
	save(t, l.Group(2), Update{Entries: ents(2, 1, 1, 1)}) // pins the recycled segment
	segs := l.Stats().Segments
	churn(t, l, next, func() bool { return l.Stats().Segments > segs })
	require.NoError(t, l.Close())
	paths := segmentPaths(mem)
	require.Greater(t, len(paths), 1)
	require.Less(t, len(mem.Contents(paths[0])), long, "the recycled segment was cut")

	l = mustOpen(t, mem, opts)
	require.Empty(t, l.Recovery().Damage)
	require.Empty(t, l.Recovery().DamagedGroups)
	requireLog(t, l, 2, 1, 1)
}
