package raftlog

import (
	"encoding/binary"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/store"
	"github.com/skiffmq/skiff/store/storetest"
)

// fileRecord is a record found in a segment file, at off.
type fileRecord struct {
	off int
	r   record
	b   []byte
}

// recordsIn decodes the records of a well-formed segment file.
func recordsIn(t *testing.T, b []byte) []fileRecord {
	t.Helper()
	var out []fileRecord
	for off := 0; off < len(b); {
		n := int(binary.LittleEndian.Uint32(b[off:]))
		r, err := decodeRecord(b[off:off+n], seedOf(b))
		require.NoError(t, err, "record at %d", off)
		out = append(out, fileRecord{off: off, r: r, b: b[off : off+n]})
		off += n
	}
	return out
}

// segmentPaths lists the log's segment files, oldest first.
func segmentPaths(mem *storetest.MemFS) []string {
	var out []string
	for _, n := range mem.Names(walDir, segExt) {
		out = append(out, walDir+"/"+n)
	}
	return out
}

// requireLog checks that group g's log is first..last with the given terms
// (one per index from first) and each entry's data.
func requireLog(t *testing.T, l *Log, g, first uint64, terms ...uint64) {
	t.Helper()
	grp := l.Group(g)
	f, err := grp.FirstIndex()
	require.NoError(t, err)
	require.Equal(t, first, f, "group %d first index", g)
	last, err := grp.LastIndex()
	require.NoError(t, err)
	require.Equal(t, first+uint64(len(terms))-1, last, "group %d last index", g)
	if len(terms) == 0 {
		return
	}
	es, err := grp.Entries(first, last+1, 1<<40)
	require.NoError(t, err)
	require.Len(t, es, len(terms))
	for k, e := range es {
		require.Equal(t, terms[k], e.GetTerm(), "group %d entry %d", g, e.GetIndex())
		require.Equal(t, entryData(g, e.GetIndex(), e.GetTerm()), e.GetData(), "group %d entry %d", g, e.GetIndex())
	}
}

func repeat(term uint64, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = term
	}
	return out
}

// settle waits until the writer has finished what was queued before,
// segment removals (which follow a batch's callbacks) and OnPressure
// included.
func settle(t *testing.T, l *Log) {
	t.Helper()
	require.NoError(t, l.Sync())
}

// TestTornTail cuts the last segment at every byte of its last records, as
// a crash in the middle of a write leaves it: Open truncates the torn
// record, reports the bytes, marks nothing damaged, and each group keeps
// exactly the entries whose records are whole.
func TestTornTail(t *testing.T) {
	mem := storetest.NewMemFS()
	l := mustOpen(t, mem, Options{SegmentBytes: 1 << 20})
	for i := uint64(1); i <= 6; i++ {
		save(t, l.Group(1), Update{Entries: ents(1, i, i, 1)})
		save(t, l.Group(2), Update{Entries: ents(2, i, i, 1), HardState: hardState(1, 2, i-1)})
	}
	require.NoError(t, l.Close())
	segs := segmentPaths(mem)
	last := segs[len(segs)-1]
	full := mem.Contents(last)
	recs := recordsIn(t, full)
	from := recs[len(recs)-5].off

	for cut := from; cut <= len(full); cut++ {
		fs := mem.Clone()
		fs.SetContents(last, full[:cut])
		l, err := Open(withDefaults(fs, Options{SegmentBytes: 1 << 20}))
		require.NoError(t, err, "cut at %d", cut)
		rep := l.Recovery()
		require.Empty(t, rep.Damage, "cut at %d", cut)
		whole := map[uint64]uint64{} // group -> last whole entry
		end := 0
		for _, fr := range recs {
			if fr.off+len(fr.b) <= cut {
				end = fr.off + len(fr.b)
				if fr.r.kind == kindEntry {
					whole[fr.r.group] = fr.r.index
				}
			}
		}
		require.Equal(t, int64(cut-end), rep.TruncatedBytes, "cut at %d", cut)
		for g := uint64(1); g <= 2; g++ {
			requireLog(t, l, g, 1, repeat(1, int(whole[g]))...)
			require.NoError(t, l.Group(g).Damaged())
		}
		require.NoError(t, l.Close())
	}
}

// TestTornTailGarbage: zeros or garbage after the last record, with no
// good record after them, are a torn tail too.
func TestTornTailGarbage(t *testing.T) {
	for name, tail := range map[string][]byte{
		"zeros":   make([]byte, 300),
		"garbage": []byte("this is not a record, nor the start of one, it just goes on"),
		"length":  binary.LittleEndian.AppendUint32(nil, 1<<20),
	} {
		t.Run(name, func(t *testing.T) {
			mem := storetest.NewMemFS()
			l := mustOpen(t, mem, Options{})
			save(t, l.Group(1), Update{Entries: ents(1, 1, 3, 1)})
			require.NoError(t, l.Close())
			segs := segmentPaths(mem)
			last := segs[len(segs)-1]
			mem.SetContents(last, append(mem.Contents(last), tail...))
			l = mustOpen(t, mem, Options{})
			require.Equal(t, int64(len(tail)), l.Recovery().TruncatedBytes)
			require.Empty(t, l.Recovery().Damage)
			requireLog(t, l, 1, 1, 1, 1, 1)
		})
	}
}

// damagedLog writes groups 1, 2 and 3 interleaved into one segment, group
// 2 with a HardState after each append, and returns the file system, the
// segment and its records.
func damagedLog(t *testing.T) (*storetest.MemFS, string, []fileRecord) {
	mem := storetest.NewMemFS()
	l := mustOpen(t, mem, Options{SegmentBytes: 1 << 20})
	for i := uint64(1); i <= 8; i++ {
		for g := uint64(1); g <= 3; g++ {
			var hs *pb.HardState
			if g == 2 {
				hs = hardState(1, 2, i)
			}
			save(t, l.Group(g), Update{Entries: ents(g, i, i, 1), HardState: hs})
		}
	}
	require.NoError(t, l.Close())
	segs := segmentPaths(mem)
	seg := segs[len(segs)-1]
	return mem, seg, recordsIn(t, mem.Contents(seg))
}

// find returns the record of group g, kind k, index i.
func find(t *testing.T, recs []fileRecord, k recKind, g, i uint64) fileRecord {
	t.Helper()
	for _, fr := range recs {
		if fr.r.kind == k && fr.r.group == g && fr.r.index == i {
			return fr
		}
	}
	t.Fatalf("no %s record of group %d at %d", k, g, i)
	return fileRecord{}
}

// TestDamageMarksItsGroup flips a bit in the body of one of group 2's
// entries, with good records after it: that is damage, not a torn tail.
// Group 2 alone is marked damaged, keeps the entries before the bad one
// and a commit index no further; groups 1 and 3 are whole. The mark
// outlives the damaged segment, until Reset.
func TestDamageMarksItsGroup(t *testing.T) {
	mem, seg, recs := damagedLog(t)
	bad := find(t, recs, kindEntry, 2, 5)
	b := mem.Contents(seg)
	b[bad.off+len(bad.b)-1] ^= 1
	mem.SetContents(seg, b)

	l := mustOpen(t, mem, Options{SegmentBytes: 1 << 20})
	rep := l.Recovery()
	require.Len(t, rep.Damage, 1)
	require.Equal(t, []uint64{2}, rep.Damage[0].Groups)
	require.Equal(t, int64(bad.off), rep.Damage[0].Offset)
	require.Equal(t, int64(len(bad.b)), rep.Damage[0].Bytes)
	require.Equal(t, []uint64{2}, rep.DamagedGroups)
	require.Zero(t, rep.TruncatedBytes)
	require.ErrorIs(t, l.Group(2).Damaged(), ErrCorrupt)
	requireLog(t, l, 2, 1, repeat(1, 4)...)
	hs, _, err := l.Group(2).InitialState()
	require.NoError(t, err)
	require.Equal(t, uint64(4), hs.GetCommit(), "commit no further than the entries kept")
	for _, g := range []uint64{1, 3} {
		require.NoError(t, l.Group(g).Damaged())
		requireLog(t, l, g, 1, repeat(1, 8)...)
	}

	// Every group compacts its entries away: the damaged segment is
	// removed, and the mark lives on in the checkpoints.
	for _, g := range []uint64{1, 3} {
		require.NoError(t, l.Group(g).Compact(8))
	}
	require.NoError(t, l.Group(2).Compact(4))
	settle(t, l)
	require.NotContains(t, segmentPaths(mem), seg)
	require.NoError(t, l.Close())
	l = mustOpen(t, mem, Options{SegmentBytes: 1 << 20})
	require.Empty(t, l.Recovery().Damage)
	require.Equal(t, []uint64{2}, l.Recovery().DamagedGroups)
	require.ErrorIs(t, l.Group(2).Damaged(), ErrCorrupt)

	// Reset starts the group over, without the mark.
	require.NoError(t, l.Group(2).Reset())
	require.NoError(t, l.Group(2).Damaged())
	require.NoError(t, l.Close())
	l = mustOpen(t, mem, Options{SegmentBytes: 1 << 20})
	require.NoError(t, l.Group(2).Damaged())
	require.Empty(t, l.Recovery().DamagedGroups)
}

// TestDamageHardState: a lost HardState record (a vote, perhaps) marks its
// group damaged though no entry is missing.
func TestDamageHardState(t *testing.T) {
	mem, seg, recs := damagedLog(t)
	bad := find(t, recs, kindHardState, 2, 3)
	b := mem.Contents(seg)
	b[bad.off+recHeaderSize] ^= 1
	mem.SetContents(seg, b)
	l := mustOpen(t, mem, Options{SegmentBytes: 1 << 20})
	require.Equal(t, []uint64{2}, l.Recovery().DamagedGroups)
	requireLog(t, l, 2, 1, repeat(1, 8)...)
}

// TestDamageUnattributed damages a record's header, so that its group
// cannot be known: every group known then is marked damaged, and so is a
// group first seen after the damage in the same segment.
func TestDamageUnattributed(t *testing.T) {
	mem, seg, recs := damagedLog(t)
	bad := find(t, recs, kindEntry, 3, 2)
	b := mem.Contents(seg)
	b[bad.off+10] ^= 1 // the group field
	// Group 4's first records, after the damage, in the same segment.
	tail := appendRecord(nil, seedOf(b), kindEntry, 4, 1, 1, appendEntryBody(nil, ent(4, 1, 1), ent(4, 1, 1).Data, false))
	mem.SetContents(seg, append(b, tail...))

	l := mustOpen(t, mem, Options{SegmentBytes: 1 << 20})
	rep := l.Recovery()
	require.Len(t, rep.Damage, 1)
	require.Nil(t, rep.Damage[0].Groups)
	require.Equal(t, []uint64{1, 2, 3, 4}, rep.DamagedGroups)
	requireLog(t, l, 3, 1, 1) // entries after the bad one are not contiguous
	requireLog(t, l, 4, 1, 1)
}

// TestDamageEndOfOlderSegment cuts a segment that is not the last: what is
// missing there is damage, never a torn tail to truncate.
func TestDamageEndOfOlderSegment(t *testing.T) {
	mem := storetest.NewMemFS()
	l := mustOpen(t, mem, Options{SegmentBytes: 1 << 10})
	for i := uint64(1); i <= 40; i++ {
		save(t, l.Group(1), Update{Entries: ents(1, i, i, 1)})
	}
	require.NoError(t, l.Close())
	segs := segmentPaths(mem)
	require.Greater(t, len(segs), 3)
	b := mem.Contents(segs[1])
	mem.SetContents(segs[1], b[:len(b)-5])

	l = mustOpen(t, mem, Options{SegmentBytes: 1 << 10})
	rep := l.Recovery()
	require.Zero(t, rep.TruncatedBytes)
	require.Len(t, rep.Damage, 1)
	require.Equal(t, []uint64{1}, rep.DamagedGroups)
	last, err := l.Group(1).LastIndex()
	require.NoError(t, err)
	require.Less(t, last, uint64(40))
	requireLog(t, l, 1, 1, repeat(1, int(last))...)
}

// TestConflictReplay overwrites a conflicting suffix several segments
// after the entries it replaces, and twice within one batch: replay
// applies the records in file order, as the writer did.
func TestConflictReplay(t *testing.T) {
	mem := storetest.NewMemFS()
	l := mustOpen(t, mem, Options{SegmentBytes: 1 << 10})
	g := l.Group(1)
	for i := uint64(1); i <= 20; i++ {
		save(t, g, Update{Entries: ents(1, i, i, 1)})
	}
	require.Greater(t, len(segmentPaths(mem)), 3)
	save(t, g, Update{Entries: ents(1, 8, 12, 2)})
	// Two updates queued together, the second overwriting the first.
	done := make(chan error, 2)
	g.Save(Update{Entries: ents(1, 13, 16, 3)}, func(err error) { done <- err })
	g.Save(Update{Entries: ents(1, 11, 11, 4)}, func(err error) { done <- err })
	require.NoError(t, <-done)
	require.NoError(t, <-done)
	want := append(append(repeat(1, 7), repeat(2, 3)...), 4)
	requireLog(t, l, 1, 1, want...)
	require.NoError(t, l.Close())
	l = mustOpen(t, mem, Options{SegmentBytes: 1 << 10})
	requireLog(t, l, 1, 1, want...)
	require.Empty(t, l.Recovery().Damage)
}

// TestCheckpoints checks that every segment starts with a checkpoint of
// every live group, and that a group whose records were all in removed
// segments comes back from one.
func TestCheckpoints(t *testing.T) {
	mem := storetest.NewMemFS()
	l := mustOpen(t, mem, Options{SegmentBytes: 1 << 10})
	save(t, l.Group(5), Update{HardState: hardState(3, 5, 0)}) // a hard state, no entries
	snapData := []byte("descriptor")
	save(t, l.Group(6), Update{Entries: ents(6, 1, 2, 1)})
	_, err := l.Group(6).CreateSnapshot(2, &pb.ConfState{Voters: []uint64{6, 7}}, snapData)
	require.NoError(t, err)
	require.NoError(t, l.Group(6).Compact(2))
	for i := uint64(1); i <= 40; i++ {
		save(t, l.Group(1), Update{Entries: ents(1, i, i, 1)})
	}
	require.NoError(t, l.Group(1).Compact(35))
	settle(t, l)
	segs := segmentPaths(mem)
	for _, p := range segs {
		recs := recordsIn(t, mem.Contents(p))
		require.Equal(t, kindCheckpoint, recs[0].r.kind, p)
		num, _ := parseSegmentName(p[len(walDir)+1:])
		require.Equal(t, num, recs[0].r.index, p)
		imgs, err := decodeCheckpoint(recs[0].r.body)
		require.NoError(t, err)
		var ids []uint64
		for _, m := range imgs {
			ids = append(ids, m.group)
		}
		require.Subset(t, ids, []uint64{5, 6}, p)
	}
	// The records of groups 5 and 6 were in the first segment, long gone.
	require.NotContains(t, segs, walDir+"/"+segmentName(1))
	require.NoError(t, l.Close())
	l = mustOpen(t, mem, Options{SegmentBytes: 1 << 10})
	hs, _, err := l.Group(5).InitialState()
	require.NoError(t, err)
	require.Equal(t, hardState(3, 5, 0).String(), hs.String())
	snap, err := l.Group(6).Snapshot()
	require.NoError(t, err)
	require.Equal(t, uint64(2), snap.GetMetadata().GetIndex())
	require.Equal(t, []uint64{6, 7}, snap.GetMetadata().GetConfState().GetVoters())
	require.Equal(t, snapData, snap.GetData())
	requireLog(t, l, 6, 3)
	requireLog(t, l, 1, 36, repeat(1, 5)...)
}

// TestGC checks that a segment is removed once no live group has an entry
// in it, not before: an idle group with an old entry keeps every segment
// from its own, and OnPressure names it once the log is too big.
func TestGC(t *testing.T) {
	mem := storetest.NewMemFS()
	var pressured [][]uint64
	opts := Options{SegmentBytes: 1 << 10, MaxBytes: 4 << 10, OnPressure: func(gs []uint64) { pressured = append(pressured, gs) }}
	l := mustOpen(t, mem, opts)
	save(t, l.Group(2), Update{Entries: ents(2, 1, 1, 1)}) // idle from now on
	first := segmentPaths(mem)[0]
	for i := uint64(1); i <= 60; i++ {
		save(t, l.Group(1), Update{Entries: ents(1, i, i, 1)})
		if i%10 == 0 {
			require.NoError(t, l.Group(1).Compact(i-2))
		}
	}
	settle(t, l)
	require.Contains(t, segmentPaths(mem), first, "group 2's entry keeps its segment")
	require.Greater(t, l.Stats().Bytes, opts.MaxBytes)
	require.Equal(t, [][]uint64{{2}}, pressured, "once for the oldest segment")

	require.NoError(t, l.Group(2).Compact(1))
	settle(t, l)
	segs := segmentPaths(mem)
	require.NotContains(t, segs, first)
	// What is left starts at group 1's first entry.
	g1 := l.Group(1)
	g1.mu.Lock()
	oldest := g1.mu.st.locs[0].seg.name
	g1.mu.Unlock()
	require.Equal(t, walDir+"/"+oldest, segs[0])
	st := l.Stats()
	require.Equal(t, len(segs), st.Segments)
	var total int64
	for _, p := range segs {
		total += int64(len(mem.Contents(p)))
	}
	require.Equal(t, total, st.Bytes)

	// Removing a group frees its segments too.
	save(t, l.Group(3), Update{Entries: ents(3, 1, 1, 1)})
	pinned := segmentPaths(mem)
	for i := uint64(61); i <= 80; i++ {
		save(t, l.Group(1), Update{Entries: ents(1, i, i, 1)})
	}
	require.NoError(t, g1.Compact(80))
	settle(t, l)
	require.Contains(t, segmentPaths(mem), pinned[len(pinned)-1])
	require.NoError(t, l.Remove(3))
	settle(t, l)
	require.NotContains(t, segmentPaths(mem), pinned[len(pinned)-1])
	require.ErrorIs(t, g1.Compact(80), raft.ErrCompacted)
}

// TestLeftoverSegments plants segments that a GC interrupted by a crash
// left behind, before a gap: Open removes them and recovers as if they
// were gone.
func TestLeftoverSegments(t *testing.T) {
	mem := storetest.NewMemFS()
	l := mustOpen(t, mem, Options{SegmentBytes: 1 << 10})
	var saved = map[string][]byte{}
	for i := uint64(1); i <= 40; i++ {
		save(t, l.Group(1), Update{Entries: ents(1, i, i, 1)})
		for _, p := range segmentPaths(mem) {
			saved[p] = mem.Contents(p)
		}
	}
	require.NoError(t, l.Group(1).Compact(38))
	settle(t, l) // the segments go after Compact returns
	segs := segmentPaths(mem)
	require.NoError(t, l.Close())
	// Segments 1 and 2 were removed; put them back, with a gap after.
	one, two := walDir+"/"+segmentName(1), walDir+"/"+segmentName(2)
	require.NotContains(t, segs, one)
	require.NotContains(t, segs, walDir+"/"+segmentName(3))
	mem.SetContents(one, saved[one])
	mem.SetContents(two, saved[two])

	l = mustOpen(t, mem, Options{SegmentBytes: 1 << 10})
	require.Equal(t, 2, l.Recovery().Leftovers)
	require.Empty(t, l.Recovery().Damage)
	require.NotContains(t, segmentPaths(mem), one)
	requireLog(t, l, 1, 39, 1, 1)
}

// TestMissingSegment removes a segment that still held entries: the group
// whose entries are missing is damaged and keeps none, the other groups
// are whole.
func TestMissingSegment(t *testing.T) {
	mem := storetest.NewMemFS()
	l := mustOpen(t, mem, Options{SegmentBytes: 1 << 10})
	for i := uint64(1); i <= 40; i++ {
		save(t, l.Group(1), Update{Entries: ents(1, i, i, 1)})
	}
	save(t, l.Group(2), Update{Entries: ents(2, 1, 2, 1)})
	require.NoError(t, l.Close())
	segs := segmentPaths(mem)
	require.NoError(t, mem.Remove(segs[2]))

	l = mustOpen(t, mem, Options{SegmentBytes: 1 << 10})
	require.Equal(t, 2, l.Recovery().Leftovers)
	require.Equal(t, []uint64{1}, l.Recovery().DamagedGroups)
	requireLog(t, l, 1, 1)
	requireLog(t, l, 2, 1, 1, 1)
}

// TestRecoveryMemory checks that replay holds no entry data: a log of 16
// MiB, 8 MiB of it lost to zeros in the middle (damage that the scan for
// the next good record must cross), opens with a small fraction of that
// allocated, and with nothing in the entry cache.
func TestRecoveryMemory(t *testing.T) {
	mem := storetest.NewMemFS()
	opts := Options{SegmentBytes: 64 << 20}
	l := mustOpen(t, mem, opts)
	data := make([]byte, 1<<10)
	for i := uint64(1); i <= 16<<10; i += 64 {
		var es []*pb.Entry
		for k := i; k < i+64; k++ {
			es = append(es, &pb.Entry{Index: new(k), Term: new(uint64(1)), Data: data})
		}
		save(t, l.Group(1), Update{Entries: es})
	}
	require.NoError(t, l.Close())
	segs := segmentPaths(mem)
	b := mem.Contents(segs[len(segs)-1])
	require.Greater(t, len(b), 16<<20)
	clear(b[4<<20 : 12<<20])
	mem.SetContents(segs[len(segs)-1], b)
	b = nil

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	l = mustOpen(t, mem, opts)
	runtime.ReadMemStats(&after)
	require.Len(t, l.Recovery().Damage, 1)
	require.Zero(t, l.Stats().CacheBytes)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("Open allocated %d KiB", allocated>>10)
	require.Less(t, allocated, uint64(4<<20), "replay allocated more than a quarter of the log")
}

// TestOpenSyncsLastSegment: Open fsyncs the segment it recovered last
// before the new one's checkpoint can speak for it, whatever the policy.
func TestOpenSyncsLastSegment(t *testing.T) {
	mem := storetest.NewMemFS()
	l := mustOpen(t, mem, Options{Durability: store.Durability{Sync: store.SyncNever}})
	save(t, l.Group(1), Update{Entries: ents(1, 1, 3, 1)})
	require.NoError(t, l.Close())
	segs := segmentPaths(mem)
	last := segs[len(segs)-1]
	var synced []string
	fs := &hookFS{FS: mem, onSync: func(name string) { synced = append(synced, name) }}
	l = mustOpen(t, fs, Options{Durability: store.Durability{Sync: store.SyncNever}})
	require.Contains(t, synced, last)
	requireLog(t, l, 1, 1, 1, 1, 1)
}
