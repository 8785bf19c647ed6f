package store

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store/storetest"
)

const memDir = "/s"

// fixture is a file stream on a storetest.MemFS whose messages are known, so that
// a reopened stream can be checked message by message.
type fixture struct {
	fs   *storetest.MemFS
	opts Options
	want map[uint64]Msg // live messages
	last uint64
}

// newFixture appends n messages of dataSize bytes on subjects f.<i%5>,
// with a header on every third, in segments of segBytes.
func newFixture(t testing.TB, n int, dataSize int, segBytes int64) *fixture {
	f := &fixture{fs: storetest.NewMemFS(), want: map[uint64]Msg{}}
	clock := newFakeClock() // deterministic files, for fuzzing across processes
	now := func() time.Time { clock.Advance(time.Millisecond); return clock.Now() }
	f.opts = Options{Dir: memDir, FS: f.fs, SegmentBytes: segBytes, Logger: quiet, Now: now}
	s, err := Open(f.opts)
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		f.append(t, s, fmt.Sprintf("f.%d", i%5), i%3 == 0, dataSize)
	}
	require.NoError(t, s.Close())
	return f
}

func (f *fixture) append(t testing.TB, s *Stream, subj string, withHdr bool, size int) uint64 {
	var hdr []byte
	if withHdr {
		hdr = []byte("NATS/1.0\r\nX: 1\r\n\r\n")
	}
	data := payload(f.last+1, size)
	seq, ts, err := s.Append(subj, hdr, data, 0)
	require.NoError(t, err)
	require.Equal(t, f.last+1, seq)
	f.last = seq
	if len(data) == 0 {
		data = nil
	}
	f.want[seq] = Msg{Seq: seq, Timestamp: ts, Subject: subj, Header: hdr, Data: data}
	return seq
}

// open opens the fixture's stream on fsys (the fixture's own if nil).
func (f *fixture) open(t *testing.T, fsys *storetest.MemFS) *Stream {
	o := f.opts
	if fsys != nil {
		o.FS = fsys
	}
	s, err := Open(o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// check verifies that s holds exactly the wanted messages with sequences
// up to upto (and none above).
func (f *fixture) check(t *testing.T, s *Stream, upto uint64) {
	t.Helper()
	var live []uint64
	for seq := uint64(1); seq <= f.last; seq++ {
		w, ok := f.want[seq]
		got, err := s.Get(seq)
		if !ok || seq > upto {
			require.ErrorIs(t, err, ErrNotFound, "seq %d should be absent", seq)
			continue
		}
		require.NoError(t, err, "seq %d", seq)
		require.Equal(t, w, *got, "seq %d", seq)
		live = append(live, seq)
	}
	require.Equal(t, live, liveSeqs(t, s))
	require.Equal(t, uint64(len(live)), s.State().Msgs)
}

// segments lists the fixture's log files in order.
func (f *fixture) segments(fsys *storetest.MemFS) []string {
	if fsys == nil {
		fsys = f.fs
	}
	return fsys.Names(memDir, logExt)
}

func TestReopenKeepsEverything(t *testing.T) {
	f := newFixture(t, 200, 50, 2048)
	require.Greater(t, len(f.segments(nil)), 3)
	s := f.open(t, nil)
	f.check(t, s, f.last)
	rep := s.Recovery()
	require.Equal(t, len(f.segments(nil)), rep.Segments)
	require.Equal(t, rep.Segments-1, rep.IndexesLoaded, "sealed segments load from their index")
	require.Equal(t, 1, rep.SegmentsScanned, "only the last segment is scanned")
	require.Zero(t, rep.IndexesRebuilt)

	// Removals of every kind survive a reopen.
	require.NoError(t, s.Delete(7))
	require.NoError(t, s.Delete(120))
	n, err := s.Purge(PurgeRequest{Subject: "f.3"})
	require.NoError(t, err)
	require.Equal(t, uint64(40), n)
	n, err = s.Purge(PurgeRequest{Seq: 31})
	require.NoError(t, err)
	require.Greater(t, n, uint64(0))
	for q := range f.want {
		if q == 7 || q == 120 || q < 31 || f.want[q].Subject == "f.3" {
			delete(f.want, q)
		}
	}
	f.append(t, s, "f.new", false, 10)
	want := s.State()
	require.NoError(t, s.Close())

	s = f.open(t, nil)
	f.check(t, s, f.last)
	require.Equal(t, want, s.State())
	next := f.last + 1
	require.Equal(t, next, f.append(t, s, "f.0", false, 1))
}

func TestReopenWithoutClose(t *testing.T) {
	f := newFixture(t, 50, 30, 1024)
	s := f.open(t, nil)
	for i := 0; i < 30; i++ {
		f.append(t, s, "g", false, 30)
	}
	require.NoError(t, s.Delete(3))
	delete(f.want, 3)
	// A process crash: everything written to the OS survives, no Close ran.
	crashed := f.fs.Clone()
	s2 := f.open(t, crashed)
	f.check(t, s2, f.last)
	next := f.last + 1
	require.Equal(t, next, f.append(t, s2, "g", false, 1))
}

func TestReopenAfterPurgeAll(t *testing.T) {
	f := newFixture(t, 30, 10, 512)
	s := f.open(t, nil)
	_, err := s.Purge(PurgeRequest{})
	require.NoError(t, err)
	require.Empty(t, f.segments(nil), "purging everything removes every segment")
	require.NoError(t, s.Close())

	s = f.open(t, nil)
	require.Equal(t, State{FirstSeq: 31, LastSeq: 30}, s.State())
	require.Equal(t, uint64(31), mustAppend(t, s, "a", "x"))

	_, err = s.Purge(PurgeRequest{Seq: 1000})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s = f.open(t, nil)
	require.Equal(t, uint64(1000), s.State().FirstSeq)
	require.Equal(t, uint64(1000), mustAppend(t, s, "a", "x"))
}

// TestTornWrite cuts the last segment at every byte offset inside its last
// record, as a crash in the middle of the write would: the torn record is
// dropped, everything before is intact, and sequences continue.
func TestTornWrite(t *testing.T) {
	f := newFixture(t, 40, 100, 2048)
	segs := f.segments(nil)
	lastSeg := path.Join(memDir, segs[len(segs)-1])
	full := f.fs.Contents(lastSeg)
	recSize := len(full) - lastRecordStart(t, full)
	start := len(full) - recSize
	for cut := start; cut < len(full); cut++ {
		fsys := f.fs.Clone()
		fsys.SetContents(lastSeg, full[:cut])
		s := f.open(t, fsys)
		f.check(t, s, f.last-1)
		require.Equal(t, int64(cut-start), s.Recovery().TruncatedBytes)
		seq, ts, err := s.Append("after", nil, []byte("x"), 0)
		require.NoError(t, err)
		require.Equal(t, f.last, seq, "cut at %d", cut)
		require.NoError(t, s.Close())
		// The new record replaced the torn one cleanly.
		s = f.open(t, fsys)
		require.Zero(t, s.Recovery().TruncatedBytes)
		m, err := s.Get(seq)
		require.NoError(t, err)
		require.Equal(t, Msg{Seq: seq, Timestamp: ts, Subject: "after", Data: []byte("x")}, *m)
		require.NoError(t, s.Close())
	}
}

// lastRecordStart returns the offset of the last record in a log.
func lastRecordStart(t *testing.T, log []byte) int {
	ents, valid, err := scanLog(storetest.FileOf(log), firstSeqOf(log), int64(len(log)))
	require.NoError(t, err)
	require.Equal(t, int64(len(log)), valid)
	return int(ents[len(ents)-1].off)
}

func firstSeqOf(log []byte) uint64 {
	r, _ := decodeRecord(log[:int(uint32(log[0])|uint32(log[1])<<8|uint32(log[2])<<16|uint32(log[3])<<24)])
	return r.seq
}

// TestCorruptTail flips bytes in a record of the second half of the last
// segment: only the damaged record is lost, the records after it are
// kept, and no sequence is used again, however the damage falls (the
// last record included, unless its length field reads as running past the
// end of the file, which is what a torn write looks like).
func TestCorruptTail(t *testing.T) {
	f := newFixture(t, 60, 80, 4096)
	segs := f.segments(nil)
	lastSeg := path.Join(memDir, segs[len(segs)-1])
	full := f.fs.Contents(lastSeg)
	ents, _, err := scanLog(storetest.FileOf(full), firstSeqOf(full), int64(len(full)))
	require.NoError(t, err)
	first := firstSeqOf(full)
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 100; trial++ {
		// Damage one or more bytes of one record in the second half.
		k := len(ents)/2 + rng.IntN(len(ents)-len(ents)/2)
		e := ents[k]
		b := append([]byte(nil), full...)
		for n := 1 + rng.IntN(3); n > 0; n-- {
			b[int(e.off)+rng.IntN(int(e.size))] ^= byte(1 + rng.IntN(255))
		}
		recLen := int64(uint32(b[e.off]) | uint32(b[e.off+1])<<8 | uint32(b[e.off+2])<<16 | uint32(b[e.off+3])<<24)
		tornLooking := recLen > int64(len(b))-int64(e.off)
		fsys := f.fs.Clone()
		fsys.SetContents(lastSeg, b)
		s := f.open(t, fsys)
		// Damage with good records after it is not a torn tail: only the
		// damaged record is lost (deleted), the later ones are kept, and
		// no sequence is used again.
		lost := first + uint64(k)
		for seq := uint64(1); seq <= f.last; seq++ {
			got, err := s.Get(seq)
			if seq == lost {
				require.ErrorIs(t, err, ErrNotFound, "trial %d: the damaged seq %d", trial, seq)
				continue
			}
			require.NoError(t, err, "trial %d: seq %d", trial, seq)
			require.Equal(t, f.want[seq], *got, "trial %d: seq %d", trial, seq)
		}
		seq, _, err := s.Append("after", nil, nil, 0)
		require.NoError(t, err)
		if lost == f.last && tornLooking {
			// Nothing follows the damage and its length runs past the end
			// of the file: that is a torn write, cut off; its sequence was
			// never acknowledged.
			require.Equal(t, lost, seq)
			require.NoError(t, s.Close())
			continue
		}
		require.Equal(t, f.last+1, seq)
		require.NoError(t, s.Close())

		// Opened again (the loss is in the .del file now), the same.
		s = f.open(t, fsys)
		_, err = s.Get(lost)
		require.ErrorIs(t, err, ErrNotFound)
		m, err := s.Get(f.last + 1)
		require.NoError(t, err)
		require.Equal(t, "after", m.Subject)
		require.NoError(t, s.Close())
	}
}

// TestDamagedLastRecord: the very last record of the stream is bad, with
// nothing after it. A record that is all there (its length plausible and
// within the file) and fails its checksum is damage, not a torn write: its
// sequence stays used. Only a record whose length runs past the end of the
// file, as a write cut short leaves it, is cut off and its sequence given
// again (it was never acknowledged).
func TestDamagedLastRecord(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(b []byte, off int) []byte
		reused bool
	}{
		{"payload flipped", func(b []byte, off int) []byte { b[len(b)-5] ^= 0x10; return b }, false},
		{"checksum flipped", func(b []byte, off int) []byte { b[off+5] ^= 0x01; return b }, false},
		{"sequence flipped", func(b []byte, off int) []byte { b[off+9] ^= 0x01; return b }, false},
		{"length shorter", func(b []byte, off int) []byte { b[off] -= 7; return b }, false},
		{"length past the end", func(b []byte, off int) []byte { b[off+2] = 0x10; return b }, true},
		{"cut short", func(b []byte, off int) []byte { return b[:len(b)-3] }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, 30, 80, 1<<20)
			segs := f.segments(nil)
			lastSeg := path.Join(memDir, segs[len(segs)-1])
			full := f.fs.Contents(lastSeg)
			off := lastRecordStart(t, full)
			f.fs.SetContents(lastSeg, tc.damage(append([]byte(nil), full...), off))
			s := f.open(t, nil)
			delete(f.want, f.last)
			f.check(t, s, f.last)
			seq, _, err := s.Append("after", nil, nil, 0)
			require.NoError(t, err)
			if tc.reused {
				require.Equal(t, f.last, seq, "a torn write's sequence was never acknowledged")
				require.Zero(t, s.Recovery().LostRecords())
				return
			}
			require.Equal(t, f.last+1, seq, "the damaged record's sequence stays used")
			require.Equal(t, uint64(1), s.Recovery().LostRecords())
			require.NoError(t, s.Close())
			s = f.open(t, nil)
			_, err = s.Get(f.last)
			require.ErrorIs(t, err, ErrNotFound)
			require.Equal(t, "after", mustGet(t, s, f.last+1).Subject)
		})
	}
}

// TestTornTailAfterDamage: damage followed by good records and then a
// torn last record: the damage is skipped, the torn tail cut off.
func TestTornTailAfterDamage(t *testing.T) {
	f := newFixture(t, 60, 80, 4096)
	segs := f.segments(nil)
	lastSeg := path.Join(memDir, segs[len(segs)-1])
	full := f.fs.Contents(lastSeg)
	first := firstSeqOf(full)
	ents, _, err := scanLog(storetest.FileOf(full), first, int64(len(full)))
	require.NoError(t, err)
	k := len(ents) / 2
	b := append([]byte(nil), full...)
	b[int(ents[k].off)+recHeaderSize] ^= 0x55
	b = b[:len(b)-3] // tear the last record
	fsys := f.fs.Clone()
	fsys.SetContents(lastSeg, b)
	s := f.open(t, fsys)
	_, err = s.Get(first + uint64(k))
	require.ErrorIs(t, err, ErrNotFound)
	_, err = s.Get(f.last)
	require.ErrorIs(t, err, ErrNotFound, "the torn record")
	m, err := s.Get(f.last - 1)
	require.NoError(t, err)
	require.Equal(t, f.want[f.last-1], *m)
	seq, _, err := s.Append("after", nil, nil, 0)
	require.NoError(t, err)
	require.Equal(t, f.last, seq, "a torn record's sequence was never acknowledged")
}

// TestCorruptOlderSegment damages a record of a sealed segment whose index
// is gone, so that Open scans it, in the middle or as the segment's last
// record (whole, its checksum wrong): the damaged record is lost (deleted,
// its sequence never reused), the records after it in the same segment
// are served, later segments are unaffected, the index rebuilt remembers
// the damage (and is trusted at the next Open), and every Open reports it.
func TestCorruptOlderSegment(t *testing.T) {
	for _, where := range []string{"middle", "last"} {
		t.Run(where, func(t *testing.T) {
			f := newFixture(t, 120, 60, 2048)
			segs := f.segments(nil)
			require.GreaterOrEqual(t, len(segs), 3)
			var off int64
			lost := f.damageRecord(t, segs[1], func(log []byte, ents []idxEntry) int {
				k := len(ents) / 2
				if where == "last" {
					k = len(ents) - 1
				}
				log[int(ents[k].off)+recHeaderSize+2] ^= 0xff
				off = int64(ents[k].off)
				return k
			})
			for round := 0; round < 2; round++ {
				s := f.open(t, nil)
				f.check(t, s, f.last)
				rep := s.Recovery()
				require.Empty(t, rep.Corrupt, "round %d: nothing cut off", round)
				require.Empty(t, rep.Missing, "round %d", round)
				require.Len(t, rep.Damaged, 1, "round %d", round)
				require.Equal(t, lost, rep.Damaged[0].FirstLost)
				require.Equal(t, uint64(1), rep.Damaged[0].Lost)
				require.Equal(t, uint64(1), rep.LostRecords())
				require.Equal(t, 1, s.State().NumDeleted)
				if round == 0 {
					require.Equal(t, 1, rep.IndexesRebuilt)
					require.Equal(t, off, rep.Damaged[0].Offset)
					require.ErrorIs(t, rep.Damaged[0].Err, ErrCorrupt)
				} else {
					require.Zero(t, rep.IndexesRebuilt, "the rebuilt index remembers the damage")
					require.Equal(t, 1, rep.SegmentsScanned, "only the last segment")
				}
				seq, _, err := s.Append("after", nil, nil, 0)
				require.NoError(t, err)
				require.Equal(t, f.last+1, seq, "no sequence used again")
				f.want[seq] = Msg{Seq: seq, Timestamp: mustGet(t, s, seq).Timestamp, Subject: "after"}
				f.last = seq
				require.NoError(t, s.Close())
			}
		})
	}
}

// damageRecord damages a record of sealed segment seg, as damage says
// (it changes the segment's bytes and returns which record it damaged),
// removes the segment's index so that Open scans it, and returns the
// damaged record's sequence, which the fixture no longer expects.
func (f *fixture) damageRecord(t *testing.T, seg string, damage func(log []byte, ents []idxEntry) int) uint64 {
	t.Helper()
	victim := path.Join(memDir, seg)
	log := f.fs.Contents(victim)
	first := firstSeqOf(log)
	ents, _, err := scanLog(storetest.FileOf(log), first, int64(len(log)))
	require.NoError(t, err)
	k := damage(log, ents)
	f.fs.SetContents(victim, log)
	require.NoError(t, f.fs.Remove(victim[:len(victim)-len(logExt)]+idxExt))
	lost := first + uint64(k)
	delete(f.want, lost)
	return lost
}

// TestCorruptOlderSegmentTail damages the last record of a sealed segment
// whose index is gone, its length field so that nothing after it can be
// trusted: the records before it are served, the rest of that segment is
// not (reported once, as Corrupt, not also as a missing segment), and
// later segments are unaffected.
func TestCorruptOlderSegmentTail(t *testing.T) {
	f := newFixture(t, 120, 60, 2048)
	segs := f.segments(nil)
	lost := f.damageRecord(t, segs[1], func(log []byte, ents []idxEntry) int {
		k := len(ents) - 1
		log[int(ents[k].off)+3] = 0x7f // a length far past the end of the file
		return k
	})
	for round := 0; round < 2; round++ {
		s := f.open(t, nil)
		f.check(t, s, f.last)
		rep := s.Recovery()
		require.Len(t, rep.Corrupt, 1, "round %d", round)
		require.Equal(t, lost, rep.Corrupt[0].FirstLost)
		require.Equal(t, uint64(1), rep.Corrupt[0].Lost)
		require.Empty(t, rep.Missing, "reported once")
		require.Equal(t, uint64(1), rep.LostRecords())
		require.NoError(t, s.Close())
	}
}

// TestCorruptRecordBehindIndex damages a record of a sealed segment whose
// index is intact: Open trusts the index, but reads check every record's
// checksum. The first read that meets it reports the damage; the record is
// then removed, counted, and reads go on past it, so a consumer never
// stops at it.
func TestCorruptRecordBehindIndex(t *testing.T) {
	for _, first := range []string{"Get", "Next"} {
		t.Run(first, func(t *testing.T) {
			f := newFixture(t, 60, 60, 2048)
			segs := f.segments(nil)
			victim := path.Join(memDir, segs[0])
			log := f.fs.Contents(victim)
			ents, _, err := scanLog(storetest.FileOf(log), 1, int64(len(log)))
			require.NoError(t, err)
			log[int(ents[2].off)+recHeaderSize] ^= 1
			f.fs.SetContents(victim, log)
			s := f.open(t, nil)
			before := s.State().Msgs
			switch first {
			case "Get":
				_, err = s.Get(3)
				require.ErrorIs(t, err, ErrCorrupt)
			case "Next":
				m, err := s.Next(3, "")
				require.NoError(t, err, "the read goes on past the damage")
				require.Equal(t, f.want[4], *m)
			}
			{
				require.Equal(t, uint64(1), s.CorruptRecords())
				require.Equal(t, before-1, s.State().Msgs, "removed, as deleted")
				_, err = s.Get(3)
				require.ErrorIs(t, err, ErrNotFound)
				m, err := s.Next(1, "")
				require.NoError(t, err)
				require.Equal(t, uint64(1), m.Seq)
				m, err = s.Next(3, "")
				require.NoError(t, err)
				require.Equal(t, f.want[4], *m)
				require.Equal(t, uint64(1), s.CorruptRecords(), "counted once")
			}
		})
	}
}

// TestCorruptRecordReported: with Options.OnCorrupt (a replica's store)
// a corrupt record behind an intact index is reported once and kept: the
// reads that meet it fail, Next does not step over it, and the stream
// still counts it.
func TestCorruptRecordReported(t *testing.T) {
	f := newFixture(t, 60, 60, 2048)
	segs := f.segments(nil)
	victim := path.Join(memDir, segs[0])
	log := f.fs.Contents(victim)
	ents, _, err := scanLog(storetest.FileOf(log), 1, int64(len(log)))
	require.NoError(t, err)
	log[int(ents[2].off)+recHeaderSize] ^= 1
	f.fs.SetContents(victim, log)
	var reported [][]uint64
	f.opts.OnCorrupt = func(seqs []uint64) { reported = append(reported, seqs) }
	s := f.open(t, nil)
	before := s.State().Msgs
	for range 2 {
		_, err = s.Get(3)
		require.ErrorIs(t, err, ErrCorrupt)
		_, err = s.Next(2, "")
		require.NoError(t, err)
		_, err = s.Next(3, "")
		require.ErrorIs(t, err, ErrCorrupt, "no read steps over it")
	}
	require.Equal(t, [][]uint64{{3}}, reported, "reported once")
	require.Equal(t, before, s.State().Msgs, "kept")
	require.Equal(t, uint64(1), s.CorruptRecords())
}

// TestIndexRebuild damages index files in every way: each is detected,
// the segment is scanned, and the index rewritten.
func TestIndexRebuild(t *testing.T) {
	cases := []struct {
		name   string
		damage func(idx []byte) []byte
	}{
		{"missing", func([]byte) []byte { return nil }},
		{"empty", func([]byte) []byte { return []byte{} }},
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }},
		{"flipped", func(b []byte) []byte { b[len(b)/3] ^= 0x10; return b }},
		{"garbage", func(b []byte) []byte { return append(b, 1, 2, 3) }},
		{"other segment's", nil}, // filled in below
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, 100, 40, 1024)
			segs := f.segments(nil)
			idx := path.Join(memDir, segs[1][:20]+idxExt)
			orig := f.fs.Contents(idx)
			require.NotEmpty(t, orig)
			switch {
			case c.damage == nil:
				f.fs.SetContents(idx, f.fs.Contents(path.Join(memDir, segs[2][:20]+idxExt)))
			case c.name == "missing":
				require.NoError(t, f.fs.Remove(idx))
			default:
				f.fs.SetContents(idx, c.damage(append([]byte(nil), orig...)))
			}
			s := f.open(t, nil)
			f.check(t, s, f.last)
			rep := s.Recovery()
			require.Equal(t, 1, rep.IndexesRebuilt)
			require.Equal(t, 2, rep.SegmentsScanned)
			require.Equal(t, orig, f.fs.Contents(idx), "the rebuilt index equals the original")
			require.NoError(t, s.Close())
			s = f.open(t, nil)
			require.Zero(t, s.Recovery().IndexesRebuilt)
		})
	}
}

// TestIndexEveryByte flips each byte of an index in turn: every flip is
// detected and the index rebuilt.
func TestIndexEveryByte(t *testing.T) {
	f := newFixture(t, 60, 20, 900)
	idx := path.Join(memDir, f.segments(nil)[1][:20]+idxExt)
	orig := f.fs.Contents(idx)
	for i := range orig {
		fsys := f.fs.Clone()
		b := append([]byte(nil), orig...)
		b[i] ^= 0x04
		fsys.SetContents(idx, b)
		s := f.open(t, fsys)
		require.Equal(t, 1, s.Recovery().IndexesRebuilt, "flip at %d", i)
		require.Equal(t, orig, fsys.Contents(idx))
		require.NoError(t, s.Close())
	}
	f.check(t, f.open(t, nil), f.last)
}

// TestIndexOfShorterLog: a sealed log longer than its index says (bytes
// appended behind the index's back) makes the index stale.
func TestIndexOfShorterLog(t *testing.T) {
	f := newFixture(t, 60, 20, 900)
	segs := f.segments(nil)
	logName := path.Join(memDir, segs[0])
	log := f.fs.Contents(logName)
	next, _ := parseSegmentName(segs[1], logExt)
	f.fs.SetContents(logName, appendRecord(log, next, 0, "extra", nil, nil))
	s := f.open(t, nil)
	require.Equal(t, 1, s.Recovery().IndexesRebuilt)
	f.check(t, s, f.last)
}

// TestStaleIndex makes an index describe a longer log than the one on
// disk (a log cut short behind the index's back).
func TestStaleIndex(t *testing.T) {
	f := newFixture(t, 100, 40, 1024)
	segs := f.segments(nil)
	logName := path.Join(memDir, segs[0])
	log := f.fs.Contents(logName)
	start := lastRecordStart(t, log)
	f.fs.SetContents(logName, log[:start])
	s := f.open(t, nil)
	require.Equal(t, 1, s.Recovery().IndexesRebuilt)
	ents, _, err := scanLog(storetest.FileOf(log), 1, int64(len(log)))
	require.NoError(t, err)
	delete(f.want, uint64(len(ents)))
	f.check(t, s, f.last)
}

// TestDeleteFileTornBatch cuts the last batch of a .del file: the deletes
// before it hold, Open succeeds, and the file is repaired.
func TestDeleteFileTornBatch(t *testing.T) {
	f := newFixture(t, 40, 10, 4096)
	s := f.open(t, nil)
	require.NoError(t, s.Delete(5))
	require.NoError(t, s.Delete(9))
	require.NoError(t, s.Close())
	del := path.Join(memDir, f.segments(nil)[0][:20]+delExt)
	b := f.fs.Contents(del)
	require.Len(t, b, 2*(delBatchHeader+8))
	f.fs.SetContents(del, b[:len(b)-3])
	delete(f.want, 5)
	s = f.open(t, nil)
	f.check(t, s, f.last)
	require.Len(t, f.fs.Contents(del), delBatchHeader+8, "torn batch truncated")
	require.NoError(t, s.Delete(9))
	require.NoError(t, s.Close())
	delete(f.want, 9)
	s = f.open(t, nil)
	f.check(t, s, f.last)
}

// TestLimitsReappliedOnRecovery: removals by limits are recorded lazily;
// after a crash that lost them, Open applies the limits again.
func TestLimitsReappliedOnRecovery(t *testing.T) {
	fsys := storetest.NewMemFS()
	o := Options{Dir: memDir, FS: fsys, MaxMsgsPerSubject: 1, MaxMsgs: 50, Logger: quiet}
	s, err := Open(o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	for i := 0; i < 300; i++ {
		mustAppend(t, s, fmt.Sprintf("kv.%d", i%80), fmt.Sprint(i))
	}
	want := liveSeqs(t, s)
	require.Len(t, want, 50)
	s2, err := Open(Options{Dir: memDir, FS: fsys.Clone(), MaxMsgsPerSubject: 1, MaxMsgs: 50, Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s2.Close() })
	require.Equal(t, want, liveSeqs(t, s2))
}

// TestRemovalsSurviveRaisedLimits: messages removed by a limit stay
// removed when the stream is reopened with the limit raised, so the removal
// itself was persisted, not just re-derived from the limit.
func TestRemovalsSurviveRaisedLimits(t *testing.T) {
	fsys := storetest.NewMemFS()
	o := Options{Dir: memDir, FS: fsys, MaxMsgsPerSubject: 1, SegmentBytes: 600, Logger: quiet}
	s, err := Open(o)
	require.NoError(t, err)
	mustAppend(t, s, "kv.cold", "0") // stays first: later removals are interior
	for i := 0; i < 60; i++ {
		mustAppend(t, s, fmt.Sprintf("kv.%d", i%7), fmt.Sprint(i))
	}
	want := liveSeqs(t, s)
	require.Len(t, want, 8)
	require.NoError(t, s.Close())
	o.MaxMsgsPerSubject = 0
	s, err = Open(o)
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	require.Equal(t, want, liveSeqs(t, s))
}

// TestSegmentsRollAndRetire checks the segment files: rolling by size and
// age, removal of segments whose messages are all gone, and retirement of
// the last segment once its removal is covered by the floor.
func TestSegmentsRollAndRetire(t *testing.T) {
	clock := newFakeClock()
	fsys := storetest.NewMemFS()
	o := Options{Dir: memDir, FS: fsys, SegmentBytes: 1000, SegmentAge: 60e9, MaxMsgs: 30, Now: clock.Now, Logger: quiet}
	s, err := Open(o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	size := recordSize("r", nil, make([]byte, 70)) // 101 bytes: 9 per segment
	require.Equal(t, 101, size)
	for i := 0; i < 27; i++ {
		mustAppend(t, s, "r", string(make([]byte, 70)))
	}
	require.Equal(t, []string{"00000000000000000001.log", "00000000000000000010.log", "00000000000000000019.log"}, fsys.Names(memDir, logExt))
	clock.Advance(61e9)
	mustAppend(t, s, "r", string(make([]byte, 70))) // 28: a new segment by age
	require.Len(t, fsys.Names(memDir, logExt), 4)
	for i := 0; i < 12; i++ { // 29..40: MaxMsgs 30 keeps 11..40
		mustAppend(t, s, "r", string(make([]byte, 70)))
	}
	require.Equal(t, []string{"00000000000000000010.log", "00000000000000000019.log", "00000000000000000028.log", "00000000000000000037.log"},
		fsys.Names(memDir, logExt))
	require.NoError(t, s.WaitDurable(40))
	require.Len(t, fsys.Names(memDir, idxExt), 3, "sealed segments get an index")

	_, err = s.Purge(PurgeRequest{Seq: 40})
	require.NoError(t, err)
	require.Equal(t, []string{"00000000000000000037.log"}, fsys.Names(memDir, logExt))
	require.NoError(t, s.Delete(40))
	require.NoError(t, s.WaitDurable(40))
	s.backgroundSync() // the round after the floor is durable retires the empty last segment
	require.Empty(t, fsys.Names(memDir, logExt))
	require.NoError(t, s.Close())
	s2, err := Open(o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s2.Close() })
	require.Equal(t, State{FirstSeq: 41, LastSeq: 40}, s2.State())
}

func TestDestroy(t *testing.T) {
	dir := path.Join(t.TempDir(), "stream")
	s, err := Open(Options{Dir: dir, SegmentBytes: 256, Logger: quiet})
	require.NoError(t, err)
	for i := 0; i < 20; i++ {
		mustAppend(t, s, "d", "0123456789")
	}
	require.NoError(t, s.Delete(3))
	require.NoError(t, s.WaitDurable(20))
	require.NoError(t, s.Destroy())
	_, err = OSFS.Stat(dir)
	require.ErrorIs(t, err, fs.ErrNotExist)
	_, _, err = s.Append("d", nil, nil, 0)
	require.ErrorIs(t, err, ErrClosed)

	m, err := Open(Options{Storage: MemoryStorage})
	require.NoError(t, err)
	require.NoError(t, m.Destroy())
}

func TestDefaultOptions(t *testing.T) {
	o := DefaultOptions("/x")
	require.Equal(t, "/x", o.Dir)
	require.Equal(t, FileStorage, o.Storage)
	require.Equal(t, SyncAlways, o.Durability.Sync)
	require.Equal(t, DefaultSyncInterval, o.Durability.Interval)
	require.Equal(t, int64(DefaultSegmentBytes), o.SegmentBytes)
	require.Equal(t, DefaultSegmentAge, o.SegmentAge)
	require.NoError(t, o.validate())
	for _, bad := range []Options{
		{Dir: "/x", SegmentBytes: MaxSegmentBytes + 1},
		{Dir: "/x", MaxMsgSize: MaxRecordSize},
		{Dir: "/x", Durability: Durability{Sync: 9}},
		{Dir: "/x", Discard: 9},
		{Storage: 7},
		{Dir: "/x", MaxAge: -1},
	} {
		_, err := Open(bad)
		require.ErrorIs(t, err, ErrInvalidConfig, "%+v", bad)
	}
}

// TestSidecarOutlivesLog: an OS crash keeps a fsynced delete record or
// floor but loses the log records it refers to. No sequence is reused,
// and the next message lands in a new segment, readable after a reopen.
func TestSidecarOutlivesLog(t *testing.T) {
	t.Run("delete", func(t *testing.T) {
		mem := storetest.NewMemFS()
		o := Options{Dir: memDir, FS: mem, Logger: quiet}
		s, err := Open(o)
		require.NoError(t, err)
		for i := 1; i <= 5; i++ {
			mustAppend(t, s, "x", fmt.Sprint(i))
		}
		require.NoError(t, s.WaitDurable(5))
		mustAppend(t, s, "x", "6") // not fsynced
		require.NoError(t, s.Delete(6))
		o.FS = mem.CrashClone()
		require.NoError(t, s.Close())
		checkNoReuse(t, o, 6)
	})
	t.Run("floor", func(t *testing.T) {
		mem := storetest.NewMemFS()
		o := Options{Dir: memDir, FS: mem, Logger: quiet}
		s, err := Open(o)
		require.NoError(t, err)
		for i := 1; i <= 5; i++ {
			mustAppend(t, s, "x", fmt.Sprint(i))
		}
		require.NoError(t, s.WaitDurable(5))
		before := mem.Clone()
		_, err = s.Purge(PurgeRequest{Seq: 100})
		require.NoError(t, err)
		// The segment's removal did not reach the disk; the floor did.
		before.SetContents(path.Join(memDir, metaName), mem.Contents(path.Join(memDir, metaName)))
		require.NoError(t, s.Close())
		o.FS = before
		checkNoReuse(t, o, 99)
	})
}

func checkNoReuse(t *testing.T, o Options, last uint64) {
	s, err := Open(o)
	require.NoError(t, err)
	require.Equal(t, last, s.State().LastSeq)
	live := liveSeqs(t, s)
	seq, _, err := s.Append("x", nil, []byte("next"), 0)
	require.NoError(t, err)
	require.Equal(t, last+1, seq)
	m, err := s.Get(seq)
	require.NoError(t, err, "readable at once, not only after a reopen")
	require.Equal(t, "next", string(m.Data))
	require.Equal(t, append(live, seq), liveSeqs(t, s))
	require.NoError(t, s.Close())
	s, err = Open(o)
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	m, err = s.Get(seq)
	require.NoError(t, err)
	require.Equal(t, "next", string(m.Data))
	require.Empty(t, s.Recovery().Corrupt)
}

// TestBackgroundExpiry: with nobody reading, the background goroutine
// expires messages on the real clock and retires their segments.
func TestBackgroundExpiry(t *testing.T) {
	mem := storetest.NewMemFS()
	s, err := Open(Options{Dir: memDir, FS: mem, MaxAge: 30 * time.Millisecond, Durability: Durability{Interval: 5 * time.Millisecond},
		SegmentBytes: 300, Logger: quiet})
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	for i := 0; i < 20; i++ {
		mustAppend(t, s, "exp", "0123456789")
	}
	require.Greater(t, len(mem.Names(memDir, logExt)), 2)
	require.Eventually(t, func() bool { return len(mem.Names(memDir, logExt)) == 0 }, 10*time.Second, 5*time.Millisecond)
	st := s.State()
	require.Equal(t, uint64(0), st.Msgs)
	require.Equal(t, uint64(21), st.FirstSeq)
}

// TestRemoveSurvivesClose: a removal recorded lazily is on disk once the
// stream closes, so a reopened stream does not bring the message back.
func TestRemoveSurvivesClose(t *testing.T) {
	for _, policy := range []SyncPolicy{SyncAlways, SyncInterval, SyncNever} {
		t.Run(policy.String(), func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(Options{Dir: dir, Durability: Durability{Sync: policy}, Logger: quiet})
			require.NoError(t, err)
			for i := range 5 {
				mustAppend(t, s, "r", fmt.Sprint(i))
			}
			require.NoError(t, s.Remove(3))
			require.NoError(t, s.Remove(1))
			require.NoError(t, s.Close())
			s = mustOpen(t, Options{Dir: dir, Durability: Durability{Sync: policy}})
			require.Equal(t, []uint64{2, 4, 5}, liveSeqs(t, s))
		})
	}
}
