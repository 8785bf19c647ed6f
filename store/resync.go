package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Recovery cuts off the tail of the last segment from its first bad record
// only when it is torn: its length runs past the end of the file (or it
// has no whole length field, or an impossible one) and nothing valid
// follows. That is what a crash in the middle of a write leaves. Any other
// bad record is damage to data already written, in any segment: resync
// finds the next record whose framing, checksum, sequence and timestamp
// all check out, keeps it and everything after it, and marks the
// sequences in between deleted (persisted in the segment's .del file, so
// that no sequence is ever reused and nothing unreadable is served),
// logging the loss as an error. A whole bad record with nothing valid
// after it (the last record, its length plausible and within the file,
// its checksum wrong) is damage too: its sequence stays used, as deleted.

// damagedSubject stands in the index for the subject of a sequence lost to
// corruption; those sequences are deleted, so it is never served.
const damagedSubject = "_skiff.damaged"

// resyncSpan bounds how far past the expected sequence a candidate record
// may be: a record further on is taken for random bytes.
const resyncSpan = 1 << 20

// resync continues a scan of segment s that stopped at offset valid with
// err: while a good record follows the damage, or the bad record is whole,
// it keeps going after it. It returns the entries, the end of the good
// records and the error of the last stop (nil if the scan reached the
// end), and reports each run of lost records in rep.
func (fb *fileBackend) resync(s *segment, ents []idxEntry, valid int64, err error, rep *RecoveryReport) ([]idxEntry, int64, error) {
	// A torn record (its length past the end of the file) is looked past
	// too: a flipped length field reads the same, and after a real torn
	// tail there is nothing good to find.
	for err != nil && errors.Is(err, ErrCorrupt) && valid < s.fileSize {
		want := s.first + uint64(len(ents))
		var lastTS int64
		if len(ents) > 0 {
			lastTS = ents[len(ents)-1].ts
		}
		at, seq, ok, rerr := findRecord(s.log.f, valid, s.fileSize, want, lastTS)
		if rerr != nil {
			return ents, valid, rerr
		}
		what := "store: corrupt records with good records after them; the damaged ones are lost, the rest kept"
		if !ok {
			n, whole, werr := wholeRecordAt(s.log.f, valid, s.fileSize)
			if werr != nil {
				return ents, valid, werr
			}
			if !whole {
				return ents, valid, err // a torn tail, or garbage with no length to trust
			}
			// Not a torn write: a write is torn short, this one is all
			// there. Its sequence was used, maybe acknowledged: it stays
			// used.
			at, seq = valid+n, want+1
			what = "store: corrupt record with nothing valid after it, whole (not torn); it is lost, its sequence stays used"
		}
		lost := seq - want
		d := DamagedRange{File: segmentBase(s.first) + logExt, Offset: valid, Bytes: at - valid,
			FirstLost: want, Lost: lost, Err: err}
		rep.Damaged = append(rep.Damaged, d)
		fb.log.Error(what, "file", d.File, "offset", d.Offset, "bytes", d.Bytes,
			"first_lost_seq", d.FirstLost, "lost", d.Lost, "resumed_at_seq", seq, "err", err)
		ents = appendDamaged(ents, valid, at, lost, lastTS)
		for q := want; q < seq; q++ {
			s.damaged = append(s.damaged, q)
		}
		var more []idxEntry
		more, valid, err = scanLogAt(s.log.f, at, seq, s.fileSize, lastTS)
		ents = append(ents, more...)
	}
	return ents, valid, err
}

// wholeRecordAt reports whether the record at off of a file of size bytes
// is all there: a length field that is plausible and fits in the file.
// (Its checksum failed: that is for the caller to know.) It returns the
// record's length.
func wholeRecordAt(f File, off, size int64) (int64, bool, error) {
	if size-off < recHeaderSize+1 {
		return 0, false, nil
	}
	var b [4]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		return 0, false, fmt.Errorf("store: read for resync: %w", err)
	}
	n, err := recordLen(b[:], size-off)
	if err != nil {
		return 0, false, nil
	}
	return int64(n), true, nil
}

// noteKnownDamage reports the sequences of a segment loaded from its
// index that an earlier Open found lost to damage (their entries carry
// damagedSubject), and makes sure they are recorded as deleted.
func (fb *fileBackend) noteKnownDamage(s *segment, rep *RecoveryReport) {
	var first, n uint64
	for i := range s.ents.len() {
		e := s.ents.at(i)
		if e.subj != damagedSubject {
			continue
		}
		seq := s.first + uint64(i)
		if n == 0 {
			first = seq
		}
		n++
		s.damaged = append(s.damaged, seq)
	}
	if n == 0 {
		return
	}
	d := DamagedRange{File: segmentBase(s.first) + logExt, FirstLost: first, Lost: n}
	rep.Damaged = append(rep.Damaged, d)
	fb.log.Error("store: segment holds records lost to damage found at an earlier start; they stay deleted",
		"file", d.File, "first_lost_seq", first, "lost", n)
}

// appendDamaged adds index entries for n lost sequences spanning the bytes
// [from, to): contiguous and of plausible sizes, as the index wants, and
// never read (the sequences are deleted).
func appendDamaged(ents []idxEntry, from, to int64, n uint64, ts int64) []idxEntry {
	const least = recHeaderSize + 1
	off := from
	for i := range n {
		size := int64(least)
		if i == n-1 {
			size = max(to-off, least)
		}
		ents = append(ents, idxEntry{off: uint32(off), size: uint32(size), ts: ts, subj: damagedSubject})
		off += size
	}
	return ents
}

// findRecord looks in the bytes [from, size) of f, one offset at a time
// after from, for a whole good record of a sequence at or after want (and
// within resyncSpan of it) and a timestamp not before lastTS.
func findRecord(f File, from, size int64, want uint64, lastTS int64) (at int64, seq uint64, ok bool, err error) {
	rest := make([]byte, size-from)
	if _, err := f.ReadAt(rest, from); err != nil {
		return 0, 0, false, fmt.Errorf("store: read for resync: %w", err)
	}
	for p := 1; p+recHeaderSize < len(rest); p++ {
		b := rest[p:]
		n := int(binary.LittleEndian.Uint32(b))
		if n < recHeaderSize+1 || n > len(b) || n > MaxRecordSize {
			continue
		}
		q := binary.LittleEndian.Uint64(b[8:])
		if q < want || q-want > resyncSpan || int64(binary.LittleEndian.Uint64(b[16:])) < lastTS {
			continue
		}
		if _, derr := decodeRecord(b[:n]); derr == nil {
			return from + int64(p), q, true, nil
		}
	}
	return 0, 0, false, nil
}

// recordDamage marks the sequences recovery lost to corruption deleted,
// in memory and in their segment's .del file.
func (fb *fileBackend) recordDamage(rec *recovered) error {
	var seqs []uint64
	for _, s := range fb.segs {
		seqs = append(seqs, s.damaged...)
	}
	if len(seqs) == 0 {
		return nil
	}
	slices.Sort(seqs)
	var fresh []uint64
	for _, q := range seqs {
		if _, ok := rec.dels[q]; !ok {
			fresh = append(fresh, q)
			rec.dels[q] = struct{}{}
		}
	}
	if _, err := fb.persistDeletes(fresh); err != nil {
		return fmt.Errorf("store: record lost sequences as deleted: %w", err)
	}
	return nil
}
