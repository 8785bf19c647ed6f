package store

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/skiffmq/skiff/subject"
)

// A sealed segment's index lets Open rebuild the in-memory index of the
// segment (sequence to offset, timestamp, size and subject, which the
// per-subject index and the limits need) without reading the log. It is
// dense, one entry per record, because Open needs every record's subject
// and timestamp anyway: a sparse index would force a scan of the log.
// Integers are little-endian:
//
//	+----------+-------+-------+-------+---------+------------+------------------+-----------------+--------+
//	| SKIFFIX1 | first | count | nsubj | logSize | validSize  | subject table    | entries         | crc32c |
//	| 8 bytes  | u64   | u32   | u32   | u64     | u64        | nsubj x          | count x         | u32    |
//	|          |       |       |       |         |            | (u16 len, bytes) | (u32 offset,    |        |
//	|          |       |       |       |         |            |                  |  u32 size,      |        |
//	|          |       |       |       |         |            |                  |  i64 timestamp, |        |
//	|          |       |       |       |         |            |                  |  u32 subject)   |        |
//	+----------+-------+-------+-------+---------+------------+------------------+-----------------+--------+
//
// Entry i is sequence first+i. logSize is the log file's size when the
// index was written; an index whose logSize differs from the log's is
// stale. validSize is the bytes of good records (less than logSize only for
// a segment with a corrupt record, so that it is not rescanned at every
// Open). An index is trusted only if its checksum matches, it is not stale,
// its entries tile [0, validSize) with plausible sizes and non-decreasing
// timestamps, its subjects are valid, and the last record it points at
// decodes with the right sequence; otherwise the segment is scanned and the
// index rewritten. A segment's index is written by the first sync round
// after it is sealed, once the segment is fsynced (under SyncNever, without
// waiting for one), and is not fsynced itself: a torn or lost index is
// simply rebuilt. Under SyncNever an operating system crash can leave an
// index on disk for a log whose data was not; recovery's checks then catch
// it, or Get reports the damaged records as ErrCorrupt.
const (
	idxMagic      = "SKIFFIX1"
	idxHeaderSize = 40
	idxEntrySize  = 20
	idxTrailer    = 4
)

// idxEntry describes one record of a segment: where it is, how big, when it
// was written and on which subject. The entries of a segment are
// positional: entry i is sequence first+i.
type idxEntry struct {
	off  uint32
	size uint32
	ts   int64
	subj string
}

// encodeIndex encodes a segment's index. logSize is the size of the log
// file it describes, validSize the bytes of it holding good records (less
// than logSize only when recovery stopped at a corrupt record).
func encodeIndex(first uint64, parts [][]idxEntry, logSize, validSize int64) []byte {
	ids := make(map[string]uint32)
	var subjects []string
	tableSize, n := 0, 0
	for _, ents := range parts {
		n += len(ents)
		for _, e := range ents {
			if _, ok := ids[e.subj]; !ok {
				ids[e.subj] = uint32(len(subjects))
				subjects = append(subjects, e.subj)
				tableSize += 2 + len(e.subj)
			}
		}
	}
	b := make([]byte, 0, idxHeaderSize+tableSize+n*idxEntrySize+idxTrailer)
	b = append(b, idxMagic...)
	b = binary.LittleEndian.AppendUint64(b, first)
	b = binary.LittleEndian.AppendUint32(b, uint32(n))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(subjects)))
	b = binary.LittleEndian.AppendUint64(b, uint64(logSize))
	b = binary.LittleEndian.AppendUint64(b, uint64(validSize))
	for _, s := range subjects {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(s)))
		b = append(b, s...)
	}
	for _, ents := range parts {
		for _, e := range ents {
			b = binary.LittleEndian.AppendUint32(b, e.off)
			b = binary.LittleEndian.AppendUint32(b, e.size)
			b = binary.LittleEndian.AppendUint64(b, uint64(e.ts))
			b = binary.LittleEndian.AppendUint32(b, ids[e.subj])
		}
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeIndex decodes and checks an index file for the segment that starts
// at first and whose log file is logSize bytes. Beyond the checksum it
// checks that the index describes that log exactly: records tile the valid
// bytes from offset 0 with plausible sizes, timestamps never decrease, and
// every subject is a valid literal. An index that fails is rebuilt from the
// log. Allocation is bounded by len(b).
func decodeIndex(b []byte, first uint64, logSize int64) ([]idxEntry, int64, error) {
	bad := func(format string, args ...any) ([]idxEntry, int64, error) {
		return nil, 0, fmt.Errorf("%w: index: "+format, append([]any{ErrCorrupt}, args...)...)
	}
	if len(b) < idxHeaderSize+idxTrailer {
		return bad("%d bytes, shorter than header", len(b))
	}
	body := b[:len(b)-idxTrailer]
	if got, want := crc32.Checksum(body, castagnoli), binary.LittleEndian.Uint32(b[len(body):]); got != want {
		return bad("checksum %08x, want %08x", got, want)
	}
	if string(body[:8]) != idxMagic {
		return bad("bad magic %q", body[:8])
	}
	if f := binary.LittleEndian.Uint64(body[8:]); f != first {
		return bad("first sequence %d, segment starts at %d", f, first)
	}
	count := int64(binary.LittleEndian.Uint32(body[16:]))
	nsubj := int64(binary.LittleEndian.Uint32(body[20:]))
	if ls := int64(binary.LittleEndian.Uint64(body[24:])); ls != logSize {
		return bad("stale: describes a log of %d bytes, log is %d", ls, logSize)
	}
	validSize := int64(binary.LittleEndian.Uint64(body[32:]))
	if validSize < 0 || validSize > logSize {
		return bad("valid size %d outside log of %d bytes", validSize, logSize)
	}
	p := body[idxHeaderSize:]
	if nsubj*3 > int64(len(p)) || count*idxEntrySize > int64(len(p)) || (count == 0) != (nsubj == 0) {
		return bad("%d subjects and %d entries do not fit %d bytes", nsubj, count, len(p))
	}
	subjects := make([]string, nsubj)
	for i := range subjects {
		if len(p) < 2 {
			return bad("subject table truncated")
		}
		n := int(binary.LittleEndian.Uint16(p))
		if len(p) < 2+n {
			return bad("subject table truncated")
		}
		subjects[i] = string(p[2 : 2+n])
		if err := subject.ValidateSubject(subjects[i]); err != nil || n == 0 {
			return bad("invalid subject %q", subjects[i])
		}
		p = p[2+n:]
	}
	if int64(len(p)) != count*idxEntrySize {
		return bad("%d entry bytes for %d entries", len(p), count)
	}
	ents := make([]idxEntry, count)
	var off, lastTS int64
	for i := range ents {
		e := p[i*idxEntrySize:]
		ent := idxEntry{
			off:  binary.LittleEndian.Uint32(e),
			size: binary.LittleEndian.Uint32(e[4:]),
			ts:   int64(binary.LittleEndian.Uint64(e[8:])),
		}
		sid := int64(binary.LittleEndian.Uint32(e[16:]))
		switch {
		case int64(ent.off) != off:
			return bad("entry %d at offset %d, want %d", i, ent.off, off)
		case ent.size < recHeaderSize+1 || ent.size > MaxRecordSize:
			return bad("entry %d has implausible size %d", i, ent.size)
		case sid >= nsubj:
			return bad("entry %d names subject %d of %d", i, sid, nsubj)
		case i > 0 && ent.ts < lastTS:
			return bad("entry %d timestamp goes backwards", i)
		}
		ent.subj = subjects[sid]
		off += int64(ent.size)
		lastTS = ent.ts
		ents[i] = ent
	}
	if off != validSize {
		return bad("entries cover %d bytes, valid size %d", off, validSize)
	}
	return ents, validSize, nil
}
