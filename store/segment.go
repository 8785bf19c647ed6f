package store

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// segment is one log file of a file-backed stream and its sidecars: the
// index (written once the segment is sealed and synced) and the .del file
// of sequences deleted from its middle.
type segment struct {
	first uint64 // from the file name; the first record's sequence
	last  uint64 // the last record's sequence; first-1 when empty
	// skipTo is the highest sequence a Skip recorded in the segment's
	// deletes past its last record (0: none): the sequences up to it are
	// accounted for here, and the next segment starts after them.
	skipTo   uint64
	log      appendFile
	fileSize int64 // size on disk; above log.size only for a corrupt older segment
	firstTS  int64
	live     int                 // messages not yet removed
	staged   int                 // records after last, staged and not committed (stage.go)
	ents     blockList[idxEntry] // the index until it is written; empty afterwards
	sealed   bool                // takes no more writes
	indexed  bool                // its index file is on disk and current
	poisoned bool                // an fsync failed: the index is never written, recovery scans it
	dirty    bool                // written since the last fsync
	dropped  bool                // removed from the stream
	damaged  []uint64            // sequences lost to corruption found by recovery (resync.go)

	del      appendFile // nil f until the first delete
	delDirty bool
	pending  []uint64 // interior deletes not yet written to del

	// tail holds a copy of the active segment's last records, from file
	// offset tailOff, so that a reader close behind the writer (a consumer
	// keeping up) reads memory, not the file. Readers get copies.
	tail    []byte
	tailOff int64
}

// next is the sequence of the record that would follow s's last one,
// staged records included.
func (s *segment) next() uint64 { return s.last + 1 + uint64(s.staged) }

// through is the last sequence s accounts for: its last record's, or a
// Skip's past it.
func (s *segment) through() uint64 { return max(s.last, s.skipTo) }

// tailCap bounds each stream's tail cache (see segment.tail).
const tailCap = 256 << 10

// inlineDataMax is the largest payload Append copies into the record it
// writes; a larger one is written from the caller's buffer by a second
// write, which costs less than the copy. Such records are too large for
// the tail cache anyway.
const inlineDataMax = tailCap / 4

// cacheTail adds the record just written at off (head, then data) to the
// tail cache.
func (s *segment) cacheTail(off int64, head, data []byte) {
	n := len(head) + len(data)
	if n > tailCap/4 {
		// Large records are read from the file; the cache starts again
		// after this one, keeping its buffer.
		s.tail, s.tailOff = s.tail[:0], off+int64(n)
		return
	}
	if s.tail == nil {
		s.tail = make([]byte, 0, tailCap)
	}
	if s.tailOff+int64(len(s.tail)) != off || len(s.tail)+n > cap(s.tail) {
		s.tail, s.tailOff = s.tail[:0], off // readers copy under the stream's lock
	}
	s.tail = append(append(s.tail, head...), data...)
}

// cached returns the size bytes at off from the tail cache, if it has
// them, to be copied before the cache changes.
func (s *segment) cached(off int64, size int) ([]byte, bool) {
	if s.tail == nil || off < s.tailOff || off+int64(size) > s.tailOff+int64(len(s.tail)) {
		return nil, false
	}
	i := int(off - s.tailOff)
	return s.tail[i : i+size : i+size], true
}

const (
	logExt = ".log"
	idxExt = ".idx"
	delExt = ".del"
)

// segmentBase is the file name stem of the segment starting at first.
func segmentBase(first uint64) string { return fmt.Sprintf("%020d", first) }

// parseSegmentName returns the first sequence of a segment file name with
// the given extension.
func parseSegmentName(name, ext string) (uint64, bool) {
	stem, ok := strings.CutSuffix(name, ext)
	if !ok || len(stem) != 20 {
		return 0, false
	}
	first, err := strconv.ParseUint(stem, 10, 64)
	return first, err == nil && first > 0
}

func (fb *fileBackend) path(first uint64, ext string) string {
	return filepath.Join(fb.dir, segmentBase(first)+ext)
}

// shouldRoll reports whether a record of n bytes stamped ts must start a new
// segment rather than extend s.
func (fb *fileBackend) shouldRoll(s *segment, ts int64, n int) bool {
	if s.log.size+int64(n) > fb.opts.SegmentBytes {
		return true
	}
	return fb.opts.SegmentAge > 0 && ts-s.firstTS >= int64(fb.opts.SegmentAge)
}
