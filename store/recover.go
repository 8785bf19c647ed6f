package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/skiffmq/skiff/subject"
)

// recovered is what openFileBackend found on disk, for the stream to build
// its in-memory index from. Every segment's ents are filled.
type recovered struct {
	floor uint64
	dels  map[uint64]struct{}
	// high is the last sequence of a lost end of the stream (hwm.go),
	// or 0: the stream's last sequence is at least high.
	high uint64
	// staging: the records after Options.CommitThrough, or after marked
	// if later, come back staged (stage.go): the directory is marked as a
	// staging stream's.
	staging bool
	marked  uint64
}

// openFileBackend opens or creates a stream directory and recovers its
// segments; see "Recovery" in doc.go.
func openFileBackend(o *Options, rep *RecoveryReport) (*fileBackend, *recovered, error) {
	fb := &fileBackend{fs: o.FS, dir: o.Dir, opts: o, log: o.Logger}
	_, statErr := fb.fs.Stat(o.Dir)
	if err := fb.fs.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("store: create %s: %w", o.Dir, err)
	}
	if errors.Is(statErr, os.ErrNotExist) && o.Durability.Sync != SyncNever {
		// The new directory's own entry must survive a crash too.
		if err := syncDir(fb.fs, filepath.Dir(filepath.Clean(o.Dir))); err != nil {
			return nil, nil, fmt.Errorf("store: sync the parent of %s: %w", o.Dir, err)
		}
	}
	names, err := fb.fs.ReadDir(o.Dir)
	if err != nil {
		return nil, nil, fmt.Errorf("store: read %s: %w", o.Dir, err)
	}
	rec := &recovered{dels: make(map[uint64]struct{})}
	if err := fb.loadMeta(rec); err != nil {
		return nil, nil, err
	}
	have := make(map[string]bool, len(names))
	var firsts []uint64
	for _, n := range names {
		have[n] = true

		if first, ok := parseSegmentName(n, logExt); ok {
			firsts = append(firsts, first)
		} else if strings.HasSuffix(n, ".tmp") {
			fb.removeFile(filepath.Join(o.Dir, n))
		}
	}
	rep.Segments = len(firsts)
	for i, first := range firsts {
		if err := fb.loadSegment(first, i == len(firsts)-1, have, rep); err != nil {
			_ = fb.close()
			return nil, nil, err
		}
	}
	fb.fixOverlaps()
	for _, n := range names { // sidecars whose segment is gone
		for _, ext := range []string{idxExt, delExt} {
			if first, ok := parseSegmentName(n, ext); ok && !have[segmentBase(first)+logExt] {
				fb.removeFile(filepath.Join(o.Dir, n))
			}
		}
	}
	for _, s := range fb.segs {
		if have[segmentBase(s.first)+delExt] {
			if err := fb.loadDels(s, rec.dels); err != nil {
				_ = fb.close()
				return nil, nil, err
			}
		}
	}
	for i := 0; i+1 < len(fb.segs); i++ {
		// A Skip's sequences are before the next segment's: deletes of
		// records fixOverlaps trimmed off are not one.
		if s := fb.segs[i]; s.skipTo >= fb.segs[i+1].first {
			s.skipTo = 0
		}
	}
	fb.checkGaps(names, rep) // after the deletes: a Skip's covers its gap
	fb.checkLostEnd(rec, rep)
	if err := fb.recordDamage(rec); err != nil {
		_ = fb.close()
		return nil, nil, err
	}
	if have[stagingMarker] {
		if !o.Staging {
			_ = fb.close()
			return nil, nil, fmt.Errorf("%w: %s holds a stream that stages (Options.Staging): its records after its checkpoint are not committed",
				ErrInvalidConfig, o.Dir)
		}
		if rec.marked, err = fb.readStagingMarker(); err != nil {
			_ = fb.close()
			return nil, nil, err
		}
		rec.staging = true
	}
	fb.staging = o.Staging
	return fb, rec, nil
}

// loadMeta reads the floor. A meta file with no good slot is reported and
// treated as floor 0: purged messages may reappear, which is logged.
func (fb *fileBackend) loadMeta(rec *recovered) error {
	name := filepath.Join(fb.dir, metaName)
	f, err := fb.fs.OpenFile(name, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: open %s: %w", name, err)
	}
	b := make([]byte, hwOffset+2*hwSlotSize)
	n, err := f.ReadAt(b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		_ = f.Close()
		return fmt.Errorf("store: read %s: %w", name, err)
	}
	floor, gen, ok := decodeMeta(b[:min(n, hwOffset)])
	if !ok && n > 0 {
		fb.log.Error("store: meta file has no good slot; purged messages may reappear", "file", name)
	}
	fb.meta, fb.metaGen, fb.floor, fb.savedFloor = f, gen, floor, floor
	rec.floor = floor
	if n > hwOffset {
		fb.savedHigh, fb.savedActive, fb.hwGen, _ = decodeHW(b[hwOffset:n])
	}
	return nil
}

// loadSegment recovers one segment: from its index if it is sealed and the
// index checks out, otherwise by scanning and checksumming its records.
func (fb *fileBackend) loadSegment(first uint64, last bool, have map[string]bool, rep *RecoveryReport) error {
	name := fb.path(first, logExt)
	f, err := fb.fs.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("store: open %s: %w", name, err)
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("store: size of %s: %w", name, err)
	}
	s := &segment{first: first, log: appendFile{f: f}, fileSize: size, sealed: !last}
	if last { // written on: it preallocates as a new one does
		s.log.reserveTo = fb.opts.SegmentBytes
	}
	if !last && have[segmentBase(first)+idxExt] {
		if ents, valid, err := fb.loadIndex(s, size); err == nil {
			s.ents, s.log.size, s.indexed = blockListOf(ents), valid, true
			rep.IndexesLoaded++
			fb.noteKnownDamage(s, rep)
			if valid < size { // found corrupt by an earlier Open
				fb.reportCorrupt(s, fmt.Errorf("%w: known corrupt record", ErrCorrupt), rep)
			}
		} else {
			fb.log.Warn("store: index unusable; rebuilding", "file", segmentBase(first)+idxExt, "err", err)
		}
	}
	if !s.indexed {
		if err := fb.scanSegment(s, last, rep); err != nil {
			_ = f.Close()
			return err
		}
	}
	if last {
		fb.removeFile(fb.path(first, idxExt)) // it will describe a longer log
		if _, err := f.Seek(s.log.size, io.SeekStart); err != nil {
			_ = f.Close()
			return fmt.Errorf("store: seek %s: %w", name, err)
		}
		fb.active = s
		s.log.limit = fb.opts.WriteBuffer
	}
	s.last = first + uint64(s.ents.len()) - 1
	if s.ents.len() > 0 {
		s.firstTS = s.ents.at(0).ts
	}
	fb.segs = append(fb.segs, s)
	return nil
}

// loadIndex reads and checks s's index, then spot-checks the last good
// record it describes against the log.
func (fb *fileBackend) loadIndex(s *segment, logSize int64) ([]idxEntry, int64, error) {
	name := fb.path(s.first, idxExt)
	st, err := fb.fs.Stat(name)
	if err != nil {
		return nil, 0, err
	}
	// An index holds at most 20 bytes per record of 31 or more bytes, plus
	// a subject table no larger than the log: anything bigger is garbage.
	if st.Size() > idxHeaderSize+idxTrailer+2*logSize {
		return nil, 0, fmt.Errorf("%w: index of %d bytes for a log of %d", ErrCorrupt, st.Size(), logSize)
	}
	f, err := fb.fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = f.Close() }()
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, err
	}
	ents, valid, err := decodeIndex(b, s.first, logSize)
	if err != nil || len(ents) == 0 {
		return ents, valid, err
	}
	// The last record, unless damage took it (resync.go).
	i := len(ents) - 1
	for i > 0 && ents[i].subj == damagedSubject {
		i--
	}
	e := ents[i]
	if e.subj == damagedSubject {
		return ents, valid, nil
	}
	buf := make([]byte, e.size)
	if _, err := s.log.f.ReadAt(buf, int64(e.off)); err != nil {
		return nil, 0, err
	}
	r, err := decodeRecord(buf)
	if want := s.first + uint64(i); err == nil && r.seq != want {
		err = fmt.Errorf("%w: last record has sequence %d, index says %d", ErrCorrupt, r.seq, want)
	}
	return ents, valid, err
}

// scanSegment reads every record of s. Damage with good records after it
// is stepped over, in any segment (resync.go). What is left at the end is
// a bad record with nothing good after it: in the last segment it is
// truncated away (a crash mid-write leaves exactly that); in an older one
// it is reported and left on disk, and nothing from it on is served.
func (fb *fileBackend) scanSegment(s *segment, last bool, rep *RecoveryReport) error {
	rep.SegmentsScanned++
	name := segmentBase(s.first) + logExt
	ents, valid, err := scanLog(s.log.f, s.first, s.fileSize)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return fmt.Errorf("store: scan %s: %w", name, err)
	}
	if ents, valid, err = fb.resync(s, ents, valid, err, rep); err != nil && !errors.Is(err, ErrCorrupt) {
		return fmt.Errorf("store: scan %s: %w", name, err)
	}
	s.ents, s.log.size = blockListOf(ents), valid
	switch {
	case last && valid < s.fileSize:
		lvl := slog.LevelError // garbage with no length to trust: data may be lost
		if errors.Is(err, errTorn) {
			lvl = slog.LevelWarn // what a crash in the middle of a write leaves
		}
		fb.log.Log(context.Background(), lvl, "store: truncating the tail of the last segment",
			"file", name, "offset", valid, "bytes", s.fileSize-valid, "err", err)
		if terr := s.log.f.Truncate(valid); terr != nil {
			return fmt.Errorf("store: truncate %s: %w", name, terr)
		}
		rep.TruncatedBytes += s.fileSize - valid
		s.fileSize = valid
	case !last && err != nil:
		fb.reportCorrupt(s, err, rep)
	}
	if !last {
		b := encodeIndex(s.first, s.ents.parts(), s.fileSize, valid)
		if werr := writeIndexFile(fb.fs, fb.path(s.first, idxExt), b); werr != nil {
			fb.log.Warn("store: write rebuilt index", "file", name, "err", werr)
		} else {
			s.indexed = true
			rep.IndexesRebuilt++
		}
	}
	return nil
}

// reportCorrupt reports a sealed segment whose records stop at a corrupt
// one before the end of its file, with nothing good after it. How many
// sequences that costs is known once the next segment is (checkGaps).
func (fb *fileBackend) reportCorrupt(s *segment, err error, rep *RecoveryReport) {
	cs := CorruptSegment{File: segmentBase(s.first) + logExt, Offset: s.log.size,
		FirstLost: s.first + uint64(s.ents.len()), LostBytes: s.fileSize - s.log.size, Err: err}
	rep.Corrupt = append(rep.Corrupt, cs)
	fb.log.Error("store: corrupt record in a sealed segment with nothing valid after it; the rest of the segment is not served",
		"file", cs.File, "offset", cs.Offset, "first_lost_seq", cs.FirstLost, "lost_bytes", cs.LostBytes, "err", err)
}

// scanLog reads the records of a log of size bytes that starts at first.
// It returns their index entries and the bytes they span, and stops at the
// first record that is torn, fails its checksum or framing, is out of
// sequence, or goes back in time; that error wraps ErrCorrupt. Any other
// error is an I/O failure.
func scanLog(f File, first uint64, size int64) ([]idxEntry, int64, error) {
	return scanLogAt(f, 0, first, size, 0)
}

// scanLogAt is scanLog from offset start, where the record of sequence
// first begins, after a record of timestamp lastTS.
func scanLogAt(f File, start int64, first uint64, size, lastTS int64) ([]idxEntry, int64, error) {
	r := bufio.NewReaderSize(io.NewSectionReader(f, start, size-start), 256<<10)
	var (
		ents   []idxEntry
		off    = start
		buf    []byte
		intern = make(map[string]string)
	)
	for off < size {
		if size-off < 4 || off+recHeaderSize > int64(^uint32(0)) {
			return ents, off, fmt.Errorf("%w at offset %d", errTorn, off)
		}
		buf = grow(buf[:0], 4)
		if _, err := io.ReadFull(r, buf); err != nil {
			return ents, off, err
		}
		n, err := recordLen(buf, size-off)
		if err != nil {
			return ents, off, fmt.Errorf("%w at offset %d", err, off)
		}
		buf = grow(buf, n-4)
		if _, err := io.ReadFull(r, buf[4:]); err != nil {
			return ents, off, err
		}
		rec, err := decodeRecord(buf)
		want := first + uint64(len(ents))
		switch {
		case err != nil:
		case rec.seq != want:
			err = fmt.Errorf("%w: sequence %d, want %d", ErrCorrupt, rec.seq, want)
		case rec.ts < lastTS:
			err = fmt.Errorf("%w: sequence %d goes back in time", ErrCorrupt, rec.seq)
		}
		if err != nil {
			return ents, off, fmt.Errorf("%w at offset %d", err, off)
		}
		subj, ok := intern[string(rec.subj)]
		if !ok {
			subj = string(rec.subj)
			if subject.ValidateSubject(subj) != nil {
				return ents, off, fmt.Errorf("%w: invalid subject %q at offset %d", ErrCorrupt, subj, off)
			}
			intern[subj] = subj
		}
		ents = append(ents, idxEntry{off: uint32(off), size: uint32(n), ts: rec.ts, subj: subj})
		off += int64(n)
		lastTS = rec.ts
	}
	return ents, off, nil
}

// fixOverlaps trims a segment whose records run into the next segment's
// first sequence, which only tampering or a bug can produce.
func (fb *fileBackend) fixOverlaps() {
	for i := 0; i+1 < len(fb.segs); i++ {
		s, next := fb.segs[i], fb.segs[i+1]
		if s.ents.len() > 0 && s.last >= next.first {
			fb.log.Error("store: segments overlap; ignoring the older one's tail",
				"segment", s.first, "last", s.last, "next", next.first)
			s.ents.truncate(int(next.first - s.first))
			s.last = next.first - 1
			s.damaged = slices.DeleteFunc(s.damaged, func(q uint64) bool { return q > s.last })
		}
	}
}

// loadDels reads s's .del file into dels and opens it for appending,
// truncating a torn last batch.
func (fb *fileBackend) loadDels(s *segment, dels map[uint64]struct{}) error {
	name := fb.path(s.first, delExt)
	f, err := fb.fs.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("store: open %s: %w", name, err)
	}
	size, err := f.Seek(0, io.SeekEnd)
	if err == nil && size > 8*int64(s.ents.len())*2+1<<20 {
		err = fmt.Errorf("%w: %d bytes of deletes for %d records", ErrCorrupt, size, s.ents.len())
	}
	var b []byte
	if err == nil {
		b = make([]byte, size)
		_, err = f.ReadAt(b, 0)
		if errors.Is(err, io.EOF) {
			err = nil
		}
	}
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("store: read %s: %w", name, err)
	}
	whole := s.log.size >= s.fileSize // not cut short by corruption
	good, derr := decodeDelBatches(b, func(seq uint64) {
		dels[seq] = struct{}{}
		if seq > s.last && whole {
			// A Skip's (persistSkip). Past a corrupt segment's last good
			// record, a delete is of a record lost with the rest, which
			// recovery reports as such.
			s.skipTo = max(s.skipTo, seq)
		}
	})
	if derr != nil {
		fb.log.Warn("store: truncating a bad delete batch", "file", name, "offset", good, "err", derr)
	}
	s.del = appendFile{f: f, size: int64(good)}
	if err := s.del.rewind(); err != nil {
		_ = f.Close()
		s.del = appendFile{}
		return fmt.Errorf("store: truncate %s: %w", name, err)
	}
	return nil
}
