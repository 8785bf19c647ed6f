package store

import (
	"bytes"
	"encoding/binary"
	"path"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store/storetest"
)

// FuzzRecordDecode feeds arbitrary bytes to the record decoder and to a
// segment scan. Neither may panic or allocate beyond the input's bounds
// (recordLen caps a length before anything is allocated); whatever decodes
// must re-encode to the same bytes.
func FuzzRecordDecode(f *testing.F) {
	f.Add(appendRecord(nil, 1, 1e18, "a.b", nil, []byte("hello")))
	f.Add(appendRecord(nil, 7, 5, "orders.eu", []byte("NATS/1.0\r\n\r\n"), nil))
	two := appendRecord(appendRecord(nil, 1, 1, "x", nil, []byte("1")), 2, 2, "y", nil, []byte("22"))
	f.Add(two)
	f.Add(two[:len(two)-3])
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := decodeRecord(b); err == nil {
			re := appendRecord(nil, r.seq, r.ts, string(r.subj), r.hdr, r.data)
			if !bytes.Equal(re, b) {
				t.Fatalf("re-encoding differs:\n%x\n%x", b, re)
			}
		}
		if len(b) >= 4 {
			if n, err := recordLen(b, int64(len(b))); err == nil && (n > len(b) || n > MaxRecordSize) {
				t.Fatalf("recordLen %d accepted for %d bytes", n, len(b))
			}
		}
		first := uint64(1)
		if len(b) >= 4 {
			if n := int(binary.LittleEndian.Uint32(b)); n <= len(b) {
				if r, err := decodeRecord(b[:n]); err == nil {
					first = r.seq
				}
			}
		}
		file := storetest.FileOf(b)
		ents, valid, err := scanLog(file, first, int64(len(b)))
		if err == nil && valid != int64(len(b)) {
			t.Fatalf("clean scan covered %d of %d bytes", valid, len(b))
		}
		var off int64
		for i, e := range ents {
			if int64(e.off) != off {
				t.Fatalf("entry %d at %d, want %d", i, e.off, off)
			}
			r, err := decodeRecord(b[e.off : e.off+e.size])
			if err != nil || r.seq != first+uint64(i) {
				t.Fatalf("entry %d does not decode: %v", i, err)
			}
			off += int64(e.size)
		}
		if off != valid {
			t.Fatalf("entries cover %d bytes, valid %d", off, valid)
		}
	})
}

var (
	indexFixtureOnce sync.Once
	indexFixture     *fixture
	indexFixtureIdx  []byte
)

// FuzzIndexLoad feeds arbitrary bytes to the index decoder, then installs
// them as a sealed segment's index and opens the stream: Open must never
// panic, and must serve exactly the stream's messages, whether it trusted
// the bytes (only the genuine index should pass) or detected them as bad
// and rebuilt the index from the log.
func FuzzIndexLoad(f *testing.F) {
	indexFixtureOnce.Do(func() {
		indexFixture = newFixture(f, 40, 20, 700)
		idx := path.Join(memDir, indexFixture.segments(nil)[1][:20]+idxExt)
		indexFixtureIdx = indexFixture.fs.Contents(idx)
	})
	fx := indexFixture
	good := indexFixtureIdx
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add(good[:idxHeaderSize])
	f.Add([]byte(idxMagic))
	f.Add(encodeIndex(1, nil, 0, 0))
	segs := fx.segments(nil)
	idxName := path.Join(memDir, segs[1][:20]+idxExt)
	first, _ := parseSegmentName(segs[1], logExt)
	logSize := int64(len(fx.fs.Contents(path.Join(memDir, segs[1]))))
	f.Fuzz(func(t *testing.T, b []byte) {
		ents, valid, err := decodeIndex(b, first, logSize)
		if err == nil && (valid > logSize || len(ents) > len(b)/idxEntrySize) {
			t.Fatalf("implausible index accepted: %d entries, valid %d", len(ents), valid)
		}
		fsys := fx.fs.Clone()
		fsys.SetContents(idxName, b)
		s, err := Open(Options{Dir: memDir, FS: fsys, SegmentBytes: 700, Logger: quiet})
		require.NoError(t, err)
		defer func() { _ = s.Close() }()
		if !bytes.Equal(b, good) {
			require.Equal(t, 1, s.Recovery().IndexesRebuilt, "a bad index must be rebuilt")
		}
		for seq, w := range fx.want {
			m, err := s.Get(seq)
			require.NoError(t, err, "seq %d", seq)
			require.Equal(t, w, *m)
		}
		require.Equal(t, uint64(len(fx.want)), s.State().Msgs)
		require.Equal(t, good, fsys.Contents(idxName))
	})
}

// FuzzSidecars feeds arbitrary bytes to the other parsers: delete
// batches, meta slots, consumer log records and consumer snapshots. None
// may panic; what decodes must re-encode to the same bytes.
func FuzzSidecars(f *testing.F) {
	f.Add(appendDelBatch(appendDelBatch(nil, []uint64{1, 2}), []uint64{9}))
	f.Add(append(encodeMetaSlot(1, 5), encodeMetaSlot(2, 9)...))
	f.Add(appendOp(appendOp(nil, consumerOp{lsn: 1, op: opDelivered, dseq: 1, sseq: 3, dc: 1, ts: 9}),
		consumerOp{lsn: 2, op: opAck, dseq: 1, sseq: 3}))
	f.Add(appendOp(appendOp(nil, consumerOp{lsn: 7, op: opStart, dseq: 2, sseq: 5}),
		consumerOp{lsn: 8, op: opAckAll, dseq: 3, sseq: 6}))
	f.Add(append(encodeHWSlot(1, 50, 41), encodeHWSlot(2, 60, 41)...))
	f.Add(encodeSnapshot(3, &ConsumerSnapshot{Delivered: SeqPair{4, 9},
		Pending: map[uint64]PendingEntry{9: {4, 1}}, Redelivered: map[uint64]uint64{9: 2}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var seqs []uint64
		good, err := decodeDelBatches(b, func(q uint64) { seqs = append(seqs, q) })
		if err == nil && good != len(b) {
			t.Fatalf("clean delete batches covered %d of %d", good, len(b))
		}
		if floor, gen, ok := decodeMeta(b); ok {
			slot := encodeMetaSlot(gen, floor)[:28] // the trailing pad is not checked
			if !bytes.Equal(b[:28], slot) && (len(b) < metaSlotSize+28 || !bytes.Equal(b[metaSlotSize:metaSlotSize+28], slot)) {
				t.Fatalf("meta floor %d gen %d is in neither slot", floor, gen)
			}
		}
		if high, active, gen, ok := decodeHW(b); ok {
			slot := encodeHWSlot(gen, high, active)
			if !bytes.Equal(b[:min(len(b), hwSlotSize)], slot) && (len(b) < 2*hwSlotSize || !bytes.Equal(b[hwSlotSize:2*hwSlotSize], slot)) {
				t.Fatalf("high water %d gen %d is in neither slot", high, gen)
			}
		}
		var ops []byte
		n, _ := decodeOps(b, func(o consumerOp) { ops = appendOp(ops, o) })
		if !bytes.Equal(ops, b[:n]) {
			t.Fatalf("consumer ops re-encode differently")
		}
		if lsn, st, err := decodeSnapshot(b); err == nil {
			if re := encodeSnapshot(lsn, &st); len(re) != len(b) {
				// Duplicate keys collapse in the map; anything else must round-trip.
				if len(re) > len(b) {
					t.Fatalf("snapshot re-encodes longer")
				}
			}
		}
	})
}
