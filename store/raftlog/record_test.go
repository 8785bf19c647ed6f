package raftlog

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"
)

// validRecords returns one well-formed record of every kind.
func validRecords() map[string][]byte {
	vote := binary.LittleEndian.AppendUint64(nil, 3)
	e := ent(5, 10, 2)
	return map[string][]byte{
		"entry":         appendRecord(nil, testSeed, kindEntry, 5, 10, 2, appendEntryBody(nil, e, e.Data, false)),
		"entry-no-data": appendRecord(nil, testSeed, kindEntry, 5, 11, 2, appendEntryBody(nil, &pb.Entry{Index: new(uint64(11)), Term: new(uint64(2))}, nil, false)),
		"hardstate":     appendRecord(nil, testSeed, kindHardState, 5, 9, 2, vote),
		"snapshot":      appendRecord(nil, testSeed, kindSnapshot, 5, 8, 2, appendSnapshotBody(nil, []byte{8, 1}, []byte("data"))),
		"compact":       appendRecord(nil, testSeed, kindCompact, 5, 8, 2, []byte{compactReset}),
		"remove":        appendRecord(nil, testSeed, kindRemove, 5, 0, 0, nil),
		"checkpoint": appendRecord(nil, testSeed, kindCheckpoint, 0, 3, 0, appendCheckpoint(nil, []image{
			{group: 5, term: 2, vote: 3, commit: 9, first: 4, prevTerm: 1, last: 11, snapIndex: 3, snapTerm: 1, conf: []byte{8, 1}, data: []byte("d")},
			{group: 6, flags: imageDamaged, first: 1},
		})),
	}
}

func TestDecodeRecordValid(t *testing.T) {
	for name, b := range validRecords() {
		t.Run(name, func(t *testing.T) {
			r, err := decodeRecord(b, testSeed)
			require.NoError(t, err)
			require.Equal(t, b, appendRecord(nil, testSeed, r.kind, r.group, r.index, r.term, r.body), "re-encoded")
			h, ok := decodeHeader(b, testSeed)
			require.True(t, ok)
			require.Equal(t, header{kind: r.kind, group: r.group, size: len(b)}, h)
		})
	}
}

func TestEntryRoundTrip(t *testing.T) {
	for _, e := range []*pb.Entry{
		ent(1, 2, 3),
		{Index: new(uint64(4)), Term: new(uint64(5))},                                    // no type, no data
		{Index: new(uint64(4)), Term: new(uint64(5)), Data: []byte{}},                    // empty, not nil, data
		{Index: new(uint64(4)), Term: new(uint64(5)), Type: pb.EntryConfChangeV2.Enum()}, // type, no data
	} {
		r, err := decodeRecord(appendRecord(nil, testSeed, kindEntry, 1, e.GetIndex(), e.GetTerm(), appendEntryBody(nil, e, e.Data, false)), testSeed)
		require.NoError(t, err)
		got := entryOf(r)
		require.Equal(t, e.Type == nil, got.Type == nil)
		require.Equal(t, e.GetType(), got.GetType())
		require.Equal(t, e.Data == nil, got.Data == nil)
		require.Equal(t, e.GetData(), got.GetData())
		require.Equal(t, e.GetIndex(), got.GetIndex())
		require.Equal(t, e.GetTerm(), got.GetTerm())
	}
}

// TestDecodeRecordInvalid damages valid records in every way the framing
// checks, and each is refused with ErrCorrupt.
func TestDecodeRecordInvalid(t *testing.T) {
	recs := validRecords()
	resealed := func(b []byte, change func([]byte)) []byte {
		b = append([]byte(nil), b...)
		change(b)
		seal(b, testSeed)
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"short", recs["entry"][:recHeaderSize-1]},
		{"cut", recs["entry"][:len(recs["entry"])-1]},
		{"bit flip in the body", resealedFlip(recs["entry"], len(recs["entry"])-1)},
		{"bit flip in the header", resealedFlip(recs["entry"], 12)},
		{"bad header checksum", resealedFlip(recs["entry"], hcrcOffset)},
		{"length field", resealed(recs["entry"], func(b []byte) { binary.LittleEndian.PutUint32(b, uint32(len(b)+1)) })},
		{"kind 0", resealed(recs["remove"], func(b []byte) { b[8] = 0 })},
		{"kind 7", resealed(recs["remove"], func(b []byte) { b[8] = 7 })},
		{"group 0", resealed(recs["remove"], func(b []byte) { binary.LittleEndian.PutUint64(b[9:], 0) })},
		{"checkpoint of a group", resealed(recs["checkpoint"], func(b []byte) { binary.LittleEndian.PutUint64(b[9:], 1) })},
		{"entry index 0", resealed(recs["entry"], func(b []byte) { binary.LittleEndian.PutUint64(b[17:], 0) })},
		{"entry flags", resealed(recs["entry"], func(b []byte) { b[recHeaderSize] |= 8 })},
		{"entry stripped without data", appendRecord(nil, testSeed, kindEntry, 1, 1, 1, []byte{entryStripped})},
		{"entry no body", appendRecord(nil, testSeed, kindEntry, 1, 1, 1, nil)},
		{"entry type missing", appendRecord(nil, testSeed, kindEntry, 1, 1, 1, []byte{entryHasType})},
		{"entry data without flag", appendRecord(nil, testSeed, kindEntry, 1, 1, 1, []byte{0, 'x'})},
		{"hardstate body", appendRecord(nil, testSeed, kindHardState, 1, 1, 1, []byte{1, 2, 3})},
		{"snapshot conf length", appendRecord(nil, testSeed, kindSnapshot, 1, 1, 1, []byte{9, 1})},
		{"snapshot no body", appendRecord(nil, testSeed, kindSnapshot, 1, 1, 1, nil)},
		{"compact flags", appendRecord(nil, testSeed, kindCompact, 1, 1, 1, []byte{2})},
		{"compact body", appendRecord(nil, testSeed, kindCompact, 1, 1, 1, []byte{0, 0})},
		{"remove body", appendRecord(nil, testSeed, kindRemove, 1, 0, 0, []byte{0})},
		{"checkpoint version", appendRecord(nil, testSeed, kindCheckpoint, 0, 1, 0, []byte{2, 0})},
		{"checkpoint count", appendRecord(nil, testSeed, kindCheckpoint, 0, 1, 0, []byte{1, 5})},
		{"checkpoint trailing bytes", appendRecord(nil, testSeed, kindCheckpoint, 0, 1, 0, []byte{1, 0, 0})},
		{"checkpoint group 0", appendRecord(nil, testSeed, kindCheckpoint, 0, 1, 0, appendCheckpoint(nil, []image{{first: 1}}))},
		{"checkpoint first 0", appendRecord(nil, testSeed, kindCheckpoint, 0, 1, 0, appendCheckpoint(nil, []image{{group: 1}}))},
		{"checkpoint last before first", appendRecord(nil, testSeed, kindCheckpoint, 0, 1, 0, appendCheckpoint(nil, []image{{group: 1, first: 5, last: 2}}))},
		{"checkpoint flags", appendRecord(nil, testSeed, kindCheckpoint, 0, 1, 0, appendCheckpoint(nil, []image{{group: 1, first: 1, flags: 2}}))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeRecord(tc.b, testSeed)
			require.ErrorIs(t, err, ErrCorrupt)
		})
	}
}

// resealedFlip flips a bit of a copy of b without fixing its checksums.
func resealedFlip(b []byte, at int) []byte {
	b = append([]byte(nil), b...)
	b[at] ^= 0x10
	return b
}

// TestDecodeHeader checks what a header vouches for before a reader
// allocates for its record.
func TestDecodeHeader(t *testing.T) {
	good := validRecords()["entry"]
	withLen := func(n uint32) []byte {
		b := append([]byte(nil), good[:recHeaderSize]...)
		binary.LittleEndian.PutUint32(b, n)
		binary.LittleEndian.PutUint32(b[hcrcOffset:], headerChecksum(b, testSeed))
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		ok   bool
	}{
		{"good", good, true},
		{"header alone", good[:recHeaderSize], true},
		{"short", good[:recHeaderSize-1], false},
		{"checksum", resealedFlip(good[:recHeaderSize], 20), false},
		{"below the framing", withLen(recHeaderSize - 1), false},
		{"above the maximum", withLen(MaxRecordSize + 1), false},
		{"at the maximum", withLen(MaxRecordSize), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, ok := decodeHeader(tc.b, testSeed)
			require.Equal(t, tc.ok, ok)
			if ok {
				require.Equal(t, uint64(5), h.group)
				require.Equal(t, kindEntry, h.kind)
			}
		})
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	imgs := []image{
		{group: 5, term: 2, vote: 3, commit: 9, first: 4, prevTerm: 1, last: 11, snapIndex: 3, snapTerm: 1, conf: []byte{8, 1}, data: []byte("d")},
		{group: 6, flags: imageDamaged, first: 1},
		{group: 1 << 60, first: 1 << 40, last: 1<<40 + 5, conf: make([]byte, 300)},
	}
	got, err := decodeCheckpoint(appendCheckpoint(nil, imgs))
	require.NoError(t, err)
	require.Equal(t, imgs, got)
	got, err = decodeCheckpoint(appendCheckpoint(nil, nil))
	require.NoError(t, err)
	require.Empty(t, got)
}
