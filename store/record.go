package store

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// A segment's log file is a sequence of records, one per message;
// integers are little-endian:
//
//	0        4        8                16               24     26       30
//	+--------+--------+----------------+----------------+------+--------+---------+---------+------+
//	| length | crc32c | sequence       | timestamp (ns) | subj | header | subject | headers | data |
//	| uint32 | uint32 | uint64         | int64          | len  | len    |         |         |      |
//	|        |        |                |                | u16  | u32    |         |         |      |
//	+--------+--------+----------------+----------------+------+--------+---------+---------+------+
//	|<------------------------------------ length ------------------------------------------------>|
//
// length counts the whole record. The CRC32C (Castagnoli) covers the length
// field and everything after the checksum field. Before allocating, a
// reader checks that length is at least the 30-byte framing plus a
// one-byte subject, at most MaxRecordSize (64 MiB) and within the file.
// Records of a segment hold consecutive sequences from the segment's first.
// A record's size is what a message counts against MaxBytes.
const (
	recHeaderSize = 30 // length, crc, seq, ts, subject length, header length
	maxSubjectLen = 1<<16 - 1
	// maxMsgSize is the largest subject+headers+data a record can carry.
	maxMsgSize = MaxRecordSize - recHeaderSize
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// record is a decoded log record. Its slices alias the bytes it was decoded
// from.
type record struct {
	seq  uint64
	ts   int64
	subj []byte
	hdr  []byte
	data []byte
}

// recordSize is the encoded size of a message, which is also what it
// counts against MaxBytes.
func recordSize(subj string, hdr, data []byte) int {
	return recHeaderSize + len(subj) + len(hdr) + len(data)
}

// RecordSize is what a message counts against Options.MaxBytes (and
// State.Bytes): its subject, headers and data, and the record's framing.
func RecordSize(subj string, hdr, data []byte) int { return recordSize(subj, hdr, data) }

// appendRecord appends the encoded record to dst. The caller has checked
// the subject and size bounds.
func appendRecord(dst []byte, seq uint64, ts int64, subj string, hdr, data []byte) []byte {
	return append(appendRecordHead(dst, seq, ts, subj, hdr, data), data...)
}

// appendRecordHead appends all of the encoded record but its data: the
// framing, with the checksum of the whole record, the subject and the
// headers. The data follows it in the log, written from where it is.
func appendRecordHead(dst []byte, seq uint64, ts int64, subj string, hdr, data []byte) []byte {
	n := recordSize(subj, hdr, data)
	head := n - len(data)
	off := len(dst)
	dst = grow(dst, head)
	b := dst[off : off+head]
	binary.LittleEndian.PutUint32(b[0:], uint32(n))
	binary.LittleEndian.PutUint64(b[8:], seq)
	binary.LittleEndian.PutUint64(b[16:], uint64(ts))
	binary.LittleEndian.PutUint16(b[24:], uint16(len(subj)))
	binary.LittleEndian.PutUint32(b[26:], uint32(len(hdr)))
	p := recHeaderSize
	p += copy(b[p:], subj)
	copy(b[p:], hdr)
	binary.LittleEndian.PutUint32(b[4:], crc32.Update(recordCRC(b), castagnoli, data))
	return dst
}

// recordChecksum is the checksum appendRecordHead gives the record of a
// message, computed without encoding it.
func recordChecksum(seq uint64, ts int64, subj string, hdr, data []byte) uint32 {
	var b [recHeaderSize]byte
	binary.LittleEndian.PutUint32(b[0:], uint32(recordSize(subj, hdr, data)))
	binary.LittleEndian.PutUint64(b[8:], seq)
	binary.LittleEndian.PutUint64(b[16:], uint64(ts))
	binary.LittleEndian.PutUint16(b[24:], uint16(len(subj)))
	binary.LittleEndian.PutUint32(b[26:], uint32(len(hdr)))
	c := crc32.Update(0, castagnoli, b[0:4])
	c = crc32.Update(c, castagnoli, b[8:])
	c = crc32.Update(c, castagnoli, []byte(subj))
	c = crc32.Update(c, castagnoli, hdr)
	return crc32.Update(c, castagnoli, data)
}

// recordCRC is the CRC32C of the length field and of everything after the
// checksum field.
func recordCRC(b []byte) uint32 {
	c := crc32.Update(0, castagnoli, b[0:4])
	return crc32.Update(c, castagnoli, b[8:])
}

// recordLen reads the length field from the first 4 bytes of a record and
// checks that it is plausible: at least the framing, at most MaxRecordSize
// and at most avail, the bytes left in the file. It runs before anything is
// allocated for the record.
func recordLen(b []byte, avail int64) (int, error) {
	n := int64(binary.LittleEndian.Uint32(b))
	switch {
	case n < recHeaderSize+1: // a subject has at least one byte
		return 0, fmt.Errorf("%w: record length %d below minimum", ErrCorrupt, n)
	case n > MaxRecordSize:
		return 0, fmt.Errorf("%w: record length %d above maximum %d", ErrCorrupt, n, MaxRecordSize)
	case n > avail:
		return 0, fmt.Errorf("%w: record length %d but %d bytes left", errTorn, n, avail)
	}
	return int(n), nil
}

// errTorn marks a record cut short by the end of the file, as a crash in
// the middle of a write leaves it. It wraps ErrCorrupt.
var errTorn = fmt.Errorf("%w: torn record", ErrCorrupt)

// decodeRecord decodes one whole record, which must fill b exactly, and
// verifies its checksum and framing.
func decodeRecord(b []byte) (record, error) {
	var r record
	if len(b) < recHeaderSize {
		return r, fmt.Errorf("%w: record of %d bytes shorter than its framing", ErrCorrupt, len(b))
	}
	if n := binary.LittleEndian.Uint32(b); int64(n) != int64(len(b)) {
		return r, fmt.Errorf("%w: record length field %d, record %d bytes", ErrCorrupt, n, len(b))
	}
	if got, want := recordCRC(b), binary.LittleEndian.Uint32(b[4:]); got != want {
		return r, fmt.Errorf("%w: record checksum %08x, want %08x", ErrCorrupt, got, want)
	}
	slen := int(binary.LittleEndian.Uint16(b[24:]))
	hlen := int64(binary.LittleEndian.Uint32(b[26:]))
	if slen == 0 || int64(recHeaderSize+slen)+hlen > int64(len(b)) {
		return r, fmt.Errorf("%w: record subject length %d, header length %d in %d bytes", ErrCorrupt, slen, hlen, len(b))
	}
	r.seq = binary.LittleEndian.Uint64(b[8:])
	r.ts = int64(binary.LittleEndian.Uint64(b[16:]))
	p := recHeaderSize
	r.subj = b[p : p+slen]
	p += slen
	if hlen > 0 {
		r.hdr = b[p : p+int(hlen)]
		p += int(hlen)
	}
	r.data = b[p:]
	return r, nil
}

// grow extends b by n bytes, reallocating only when it lacks capacity.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), 2*cap(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}
