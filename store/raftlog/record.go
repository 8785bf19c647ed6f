package raftlog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// A segment is a sequence of records; integers are little-endian:
//
//	0        4        8      9         17        25        33     37
//	+--------+--------+------+---------+---------+---------+------+------+
//	| length | crc32c | kind | group   | index   | term    | hcrc | body |
//	| u32    | u32    | u8   | u64     | u64     | u64     | u32  |      |
//	+--------+--------+------+---------+---------+---------+------+------+
//	|<----------------------------- length ----------------------------->|
//
// length counts the whole record. crc32c (Castagnoli) covers the length
// field and everything after the checksum field, as in the store's
// segments (store/record.go); hcrc covers the header alone (length, kind,
// group, index, term), so that recovery can tell whose record went bad
// when only its body did, and mark only that group damaged. Both start
// from the segment's seed (segmentSeed) rather than from zero: a segment
// file is recycled, written over from its start (segment.go), and the
// records of its previous life that lie past the new end must fail their
// checksums, not pass for the new segment's. Segments written before
// seeds (format 1) start from zero, and are read as such (replaySegment);
// they are removed, never recycled. Before it
// allocates, a reader checks the header's checksum, and that length is at
// least the 37-byte framing, at most MaxRecordSize and within the file. What index, term and body
// mean depends on the kind:
//
//	kind 1 entry       index, term of the entry; body = flags u8 (1: type set,
//	                   2: data non-nil) [type u8] data
//	kind 2 hardstate   index = commit, term = term; body = vote u64
//	kind 3 snapshot    index, term of the snapshot; body = uvarint length and
//	                   proto of its ConfState, then its data
//	kind 4 checkpoint  group 0, index = the segment's number; body = the state
//	                   of every live group (checkpoint.go). First record of
//	                   every segment.
//	kind 5 compact     entries up to index (of term) are dropped; body = flags
//	                   u8 (1: drop the entries after index too: the log is
//	                   reset to a received snapshot)
//	kind 6 remove      the group is deleted with all its records
//
// An entry record at (g, i) discards g's entries at i and after written
// earlier: raft's "discard conflicting entries", applied in file order in
// memory and on replay, so no truncation record is needed.
const (
	recHeaderSize = 37
	hcrcOffset    = 33
	// MaxRecordSize bounds one record, framing included. Recovery rejects a
	// longer length before allocating, so a corrupt length cannot exhaust
	// memory. It is the store's bound.
	MaxRecordSize = 64 << 20
	// MaxSnapshotData bounds the data of a snapshot the log keeps: it is
	// written inline in every checkpoint, so it must be a descriptor of
	// the state kept elsewhere, not the state.
	MaxSnapshotData = 4 << 10
)

type recKind uint8

const (
	kindEntry recKind = iota + 1
	kindHardState
	kindSnapshot
	kindCheckpoint
	kindCompact
	kindRemove
	kindMax = kindRemove
)

func (k recKind) String() string {
	switch k {
	case kindEntry:
		return "entry"
	case kindHardState:
		return "hardstate"
	case kindSnapshot:
		return "snapshot"
	case kindCompact:
		return "compact"
	case kindCheckpoint:
		return "checkpoint"
	case kindRemove:
		return "remove"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Entry record flags.
const (
	entryHasType = 1 << 0
	entryHasData = 1 << 1
	// entryStripped: the data is a head a Payloads hook returned in place
	// of the entry's (payloads.go); with entryHasData.
	entryStripped = 1 << 2
)

// compactReset in a compact record drops every entry, not only those up
// to its index.
const compactReset = 1 << 0

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// record is a decoded record. body aliases the bytes it was decoded from.
type record struct {
	kind  recKind
	group uint64
	index uint64
	term  uint64
	body  []byte
}

// segmentSeed is the initial CRC32C of segment num's records' checksums;
// never zero, which marks format 1 (no seed).
func segmentSeed(num uint64) uint32 {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], num)
	if s := crc32.Update(0x534b4946, castagnoli, b[:]); s != 0 { // "SKIF"
		return s
	}
	return 1
}

// appendHead appends the framing of a record whose body is n bytes; the
// caller appends the body, then calls seal on the whole record.
func appendHead(dst []byte, k recKind, group, index, term uint64, n int) []byte {
	off := len(dst)
	dst = append(dst, make([]byte, recHeaderSize)...)
	h := dst[off:]
	binary.LittleEndian.PutUint32(h[0:], uint32(recHeaderSize+n))
	h[8] = byte(k)
	binary.LittleEndian.PutUint64(h[9:], group)
	binary.LittleEndian.PutUint64(h[17:], index)
	binary.LittleEndian.PutUint64(h[25:], term)
	return dst
}

// seal writes the checksums, from seed, of the record b, which it must
// fill exactly and whose length field must be final.
func seal(b []byte, seed uint32) {
	binary.LittleEndian.PutUint32(b[hcrcOffset:], headerChecksum(b, seed))
	binary.LittleEndian.PutUint32(b[4:], checksum(b, seed))
}

// appendRecord appends a whole record with the given body, sealed with
// seed.
func appendRecord(dst []byte, seed uint32, k recKind, group, index, term uint64, body []byte) []byte {
	off := len(dst)
	dst = append(appendHead(dst, k, group, index, term, len(body)), body...)
	seal(dst[off:], seed)
	return dst
}

// checksum is the CRC32C, from seed, of the length field and of
// everything after the checksum field.
func checksum(b []byte, seed uint32) uint32 {
	return crc32.Update(crc32.Update(seed, castagnoli, b[:4]), castagnoli, b[8:])
}

// headerChecksum is the CRC32C, from seed, of the length field and of the
// header fields after the checksum field.
func headerChecksum(b []byte, seed uint32) uint32 {
	return crc32.Update(crc32.Update(seed, castagnoli, b[:4]), castagnoli, b[8:hcrcOffset])
}

// header is what a record's framing says of it, trusted only if its
// header checksum matches: recovery uses it to name the group whose
// record failed its whole-record checksum.
type header struct {
	kind  recKind
	group uint64
	size  int
}

// decodeHeader decodes the framing at the start of b, if b holds it whole
// and its header checksum from seed matches.
func decodeHeader(b []byte, seed uint32) (header, bool) {
	if len(b) < recHeaderSize || binary.LittleEndian.Uint32(b[hcrcOffset:]) != headerChecksum(b, seed) {
		return header{}, false
	}
	n := binary.LittleEndian.Uint32(b)
	if n < recHeaderSize || n > MaxRecordSize {
		return header{}, false
	}
	return header{kind: recKind(b[8]), group: binary.LittleEndian.Uint64(b[9:]), size: int(n)}, true
}

// decodeRecord decodes one record, which must fill b exactly, and checks
// its checksums from seed, its kind and the framing of its body.
func decodeRecord(b []byte, seed uint32) (record, error) {
	switch h, ok := decodeHeader(b, seed); {
	case !ok:
		return record{}, fmt.Errorf("%w: bad record header in %d bytes", ErrCorrupt, len(b))
	case h.size != len(b):
		return record{}, fmt.Errorf("%w: record length field %d, record %d bytes", ErrCorrupt, h.size, len(b))
	}
	if got, want := checksum(b, seed), binary.LittleEndian.Uint32(b[4:]); got != want {
		return record{}, fmt.Errorf("%w: record checksum %08x, want %08x", ErrCorrupt, got, want)
	}
	r := record{
		kind:  recKind(b[8]),
		group: binary.LittleEndian.Uint64(b[9:]),
		index: binary.LittleEndian.Uint64(b[17:]),
		term:  binary.LittleEndian.Uint64(b[25:]),
		body:  b[recHeaderSize:],
	}
	if err := r.check(); err != nil {
		return record{}, err
	}
	return r, nil
}

// check verifies what the checksum cannot: that the kind is known and the
// body has the shape its kind asks for.
func (r *record) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s record: "+format, append([]any{ErrCorrupt, r.kind}, args...)...)
	}
	if r.kind == 0 || r.kind > kindMax {
		return fmt.Errorf("%w: unknown record kind %d", ErrCorrupt, uint8(r.kind))
	}
	if (r.kind == kindCheckpoint) != (r.group == 0) {
		return bad("group %d", r.group)
	}
	switch r.kind {
	case kindEntry:
		if r.index == 0 {
			return bad("index 0")
		}
		if len(r.body) < 1 || r.body[0]&^(entryHasType|entryHasData|entryStripped) != 0 ||
			(r.body[0]&entryHasType != 0 && len(r.body) < 2) ||
			(r.body[0]&entryHasData == 0 && len(r.body) != 1+int(r.body[0]&entryHasType)) ||
			(r.body[0]&entryStripped != 0 && r.body[0]&entryHasData == 0) {
			return bad("malformed body of %d bytes", len(r.body))
		}
	case kindHardState:
		if len(r.body) != 8 {
			return bad("body of %d bytes", len(r.body))
		}
	case kindSnapshot:
		n, k := binary.Uvarint(r.body)
		if k <= 0 || n > uint64(len(r.body)-k) {
			return bad("conf state length")
		}
	case kindCompact:
		if len(r.body) != 1 || r.body[0]&^compactReset != 0 {
			return bad("malformed body of %d bytes", len(r.body))
		}
	case kindRemove:
		if len(r.body) != 0 {
			return bad("body of %d bytes", len(r.body))
		}
	case kindCheckpoint:
		if _, err := decodeCheckpoint(r.body); err != nil {
			return err
		}
	}
	return nil
}

// errTorn marks a record cut short by the end of its file, as a crash in
// the middle of a write leaves it. It wraps ErrCorrupt.
var errTorn = fmt.Errorf("%w: torn record", ErrCorrupt)
