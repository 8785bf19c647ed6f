package store

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sort"
)

// A file-backed ConsumerState keeps two files in its directory; integers
// are little-endian. consumer.log is an append-only log of changes, each a
// record framed like a stream's (record.go):
//
//	+--------+--------+-----------+----+-----------------------------------------+
//	| length | crc32c | lsn       | op | operands                                |
//	| u32    | u32    | u64       | u8 | Delivered: dseq, sseq, dc u64, ts i64   |
//	|        |        |           |    | Ack, AckAll: dseq, sseq u64             |
//	|        |        |           |    | Start: ack floor dseq, sseq u64         |
//	+--------+--------+-----------+----+-----------------------------------------+
//
// consumer.snap is the whole state as of an LSN, written to a temporary
// file, fsynced and renamed into place when the consumer is created and
// when the log grows past 1 MiB and four times the last snapshot; then the
// log starts over with one Start record, whose LSN is the snapshot's. Open
// loads the snapshot and replays the log records with a higher LSN,
// truncating a torn tail, stepping over damage (consumerresync.go) and
// reporting a log emptied or cut at its start (consumerlost.go).
//
//	+------------------------+-----------------------------------------+
//	| SKIFFCS2               | magic, 8 bytes (SKIFFCS1: an older      |
//	|                        | version's, whose log has no Start)      |
//	| lsn                    | u64: the last change it includes        |
//	| delivered              | u64 consumer seq, u64 stream seq        |
//	| ack floor              | u64 consumer seq, u64 stream seq        |
//	| npending, pending      | u32, then (sseq, cseq u64, ts i64) each |
//	| nredelivered, entries  | u32, then (sseq, count u64) each        |
//	| crc32c                 | u32 over everything before              |
//	+------------------------+-----------------------------------------+
const (
	consumerSnapName = "consumer.snap"
	consumerLogName  = "consumer.log"
	// snapMagic marks a snapshot whose log begins with an opStart record;
	// snapMagicV1 one written by an older version, whose log may be empty.
	snapMagic    = "SKIFFCS2"
	snapMagicV1  = "SKIFFCS1"
	opHeaderSize = 17 // length, crc, lsn, op
)

// Consumer log operations.
const (
	opDelivered byte = iota + 1 // dseq, sseq, dc, ts
	opAck                       // dseq, sseq
	opAckAll                    // dseq, sseq
	// opStart begins the log: its lsn is the snapshot's the log goes on
	// from, dseq and sseq the ack floor then. It changes nothing.
	opStart
)

// validOp reports whether op is a known operation.
func validOp(op byte) bool { return op >= opDelivered && op <= opStart }

// consumerOp is one change to a consumer's state.
type consumerOp struct {
	lsn        uint64
	op         byte
	dseq, sseq uint64
	dc         uint64 // opDelivered only
	ts         int64  // opDelivered only
}

func opSize(op byte) int {
	if op == opDelivered {
		return opHeaderSize + 32
	}
	return opHeaderSize + 16
}

// appendOp appends an encoded operation to dst.
func appendOp(dst []byte, o consumerOp) []byte {
	off := len(dst)
	n := opSize(o.op)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	dst = binary.LittleEndian.AppendUint64(dst, o.lsn)
	dst = append(dst, o.op)
	dst = binary.LittleEndian.AppendUint64(dst, o.dseq)
	dst = binary.LittleEndian.AppendUint64(dst, o.sseq)
	if o.op == opDelivered {
		dst = binary.LittleEndian.AppendUint64(dst, o.dc)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(o.ts))
	}
	b := dst[off:]
	binary.LittleEndian.PutUint32(b[4:], recordCRC(b))
	return dst
}

// decodeOps calls fn for each good operation in b and returns the bytes
// they span; it stops at the first torn or corrupt one.
func decodeOps(b []byte, fn func(consumerOp)) (int, error) {
	good := 0
	for len(b) > 0 {
		if len(b) < opHeaderSize {
			return good, fmt.Errorf("%w: consumer log record header of %d bytes", errTorn, len(b))
		}
		n := int(binary.LittleEndian.Uint32(b))
		op := b[16]
		if !validOp(op) || n != opSize(op) {
			return good, fmt.Errorf("%w: consumer log record op %d length %d", ErrCorrupt, op, n)
		}
		if n > len(b) {
			return good, fmt.Errorf("%w: consumer log record of %d bytes in %d", errTorn, n, len(b))
		}
		if recordCRC(b[:n]) != binary.LittleEndian.Uint32(b[4:]) {
			return good, fmt.Errorf("%w: consumer log record checksum", ErrCorrupt)
		}
		o := consumerOp{
			lsn:  binary.LittleEndian.Uint64(b[8:]),
			op:   op,
			dseq: binary.LittleEndian.Uint64(b[17:]),
			sseq: binary.LittleEndian.Uint64(b[25:]),
		}
		if op == opDelivered {
			o.dc = binary.LittleEndian.Uint64(b[33:])
			o.ts = int64(binary.LittleEndian.Uint64(b[41:]))
		}
		fn(o)
		good += n
		b = b[n:]
	}
	return good, nil
}

// encodeSnapshot encodes a full consumer state as of lsn. Map entries are
// sorted so that equal states encode equally.
func encodeSnapshot(lsn uint64, st *ConsumerSnapshot) []byte {
	b := make([]byte, 0, 56+24*len(st.Pending)+16*len(st.Redelivered)+8)
	b = append(b, snapMagic...)
	for _, v := range []uint64{lsn, st.Delivered.Consumer, st.Delivered.Stream, st.AckFloor.Consumer, st.AckFloor.Stream} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(st.Pending)))
	for _, sseq := range sortedKeys(st.Pending) {
		p := st.Pending[sseq]
		b = binary.LittleEndian.AppendUint64(b, sseq)
		b = binary.LittleEndian.AppendUint64(b, p.ConsumerSeq)
		b = binary.LittleEndian.AppendUint64(b, uint64(p.Timestamp))
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(st.Redelivered)))
	for _, sseq := range sortedKeys(st.Redelivered) {
		b = binary.LittleEndian.AppendUint64(b, sseq)
		b = binary.LittleEndian.AppendUint64(b, st.Redelivered[sseq])
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeSnapshot decodes a snapshot file. Allocation is bounded by len(b).
func decodeSnapshot(b []byte) (uint64, ConsumerSnapshot, error) {
	lsn, st, _, err := decodeSnapshotVersion(b)
	return lsn, st, err
}

// decodeSnapshotVersion is decodeSnapshot, also saying whether the
// snapshot is of the current version, whose log begins with opStart.
func decodeSnapshotVersion(b []byte) (uint64, ConsumerSnapshot, bool, error) {
	lsn, st, err := decodeSnapshotBody(b)
	return lsn, st, err == nil && string(b[:8]) == snapMagic, err
}

func decodeSnapshotBody(b []byte) (uint64, ConsumerSnapshot, error) {
	var st ConsumerSnapshot
	bad := func(what string) (uint64, ConsumerSnapshot, error) {
		return 0, ConsumerSnapshot{}, fmt.Errorf("%w: consumer snapshot: %s", ErrCorrupt, what)
	}
	if len(b) < 8+40+4+4+4 {
		return bad("too short")
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(body):]) {
		return bad("checksum")
	}
	if m := string(body[:8]); m != snapMagic && m != snapMagicV1 {
		return bad("magic")
	}
	u := func(off int) uint64 { return binary.LittleEndian.Uint64(body[off:]) }
	lsn := u(8)
	st.Delivered = SeqPair{Consumer: u(16), Stream: u(24)}
	st.AckFloor = SeqPair{Consumer: u(32), Stream: u(40)}
	p := body[48:]
	np := int64(binary.LittleEndian.Uint32(p))
	p = p[4:]
	if np*24+4 > int64(len(p)) {
		return bad("pending count")
	}
	st.Pending = make(map[uint64]PendingEntry, np)
	for i := int64(0); i < np; i++ {
		e := p[i*24:]
		st.Pending[binary.LittleEndian.Uint64(e)] = PendingEntry{
			ConsumerSeq: binary.LittleEndian.Uint64(e[8:]),
			Timestamp:   int64(binary.LittleEndian.Uint64(e[16:])),
		}
	}
	p = p[np*24:]
	nr := int64(binary.LittleEndian.Uint32(p))
	p = p[4:]
	if nr*16 != int64(len(p)) {
		return bad("redelivered count")
	}
	st.Redelivered = make(map[uint64]uint64, nr)
	for i := int64(0); i < nr; i++ {
		st.Redelivered[binary.LittleEndian.Uint64(p[i*16:])] = binary.LittleEndian.Uint64(p[i*16+8:])
	}
	return lsn, st, nil
}

func sortedKeys[V any](m map[uint64]V) []uint64 {
	keys := make([]uint64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
