package raftlog

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/skiffmq/skiff/store/vfs"
)

// segment is one file of the log, named by its number, which increases
// from 1 and is never reused: 00000000000000000001.wal.
type segment struct {
	num  uint64
	name string // base name
	f    vfs.File
	// seed starts its records' checksums: segmentSeed(num), or 0 for a
	// segment of format 1 (record.go).
	seed uint32
	// recycled: the file was a removed segment's, written over from its
	// start, and may hold that segment's records past size until it is
	// cut there (roll, Close).
	recycled bool
	// size is the end of its whole, good records: the write offset of the
	// active segment. Written by the writer goroutine (or Open) only.
	size int64
	// dirty: written since its last fsync. Writer goroutine only.
	dirty bool

	// refs counts the readers between a group handing out this segment's
	// location and the read; a removed segment is closed by the last one.
	refs struct {
		sync.Mutex
		n       int
		removed bool
	}
}

const (
	segExt  = ".wal"
	freeExt = ".free"
)

func segmentName(num uint64) string { return fmt.Sprintf("%020d%s", num, segExt) }

// freeName is the name a removed segment's file keeps while it waits to
// be recycled.
func freeName(num uint64) string { return fmt.Sprintf("%020d%s", num, freeExt) }

// parseSegmentName returns the number of a segment file name.
func parseSegmentName(name string) (uint64, bool) {
	stem, ok := strings.CutSuffix(name, segExt)
	if !ok || len(stem) != 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(stem, 10, 64)
	return n, err == nil && n > 0
}

func (l *Log) segPath(s *segment) string { return filepath.Join(l.opts.Dir, s.name) }

// acquire pins s for a read; the caller holds the lock of the group whose
// entry location named s, which keeps s from being removed meanwhile.
func (s *segment) acquire() {
	s.refs.Lock()
	s.refs.n++
	s.refs.Unlock()
}

// release undoes acquire, closing s if it was removed meanwhile.
func (s *segment) release() {
	s.refs.Lock()
	s.refs.n--
	closeNow := s.refs.n == 0 && s.refs.removed
	s.refs.Unlock()
	if closeNow {
		_ = s.f.Close()
	}
}

// retire marks s removed and closes it unless a reader holds it; it
// reports whether it closed it. A segment retired with a reader is never
// recycled: the reader would read the next segment's records.
func (s *segment) retire() bool {
	s.refs.Lock()
	s.refs.removed = true
	closeNow := s.refs.n == 0
	s.refs.Unlock()
	if closeNow {
		_ = s.f.Close()
	}
	return closeNow
}

// newSegmentFile opens the file of a new segment s: a free file renamed
// to s's name, to be written over from its start, if there is one (the
// one freed last, whose pages are the likeliest to be cached), else a new
// file.
func (l *Log) newSegmentFile(s *segment) (vfs.File, error) {
	for len(l.free) > 0 {
		free := l.free[len(l.free)-1]
		l.free = l.free[:len(l.free)-1]
		path := filepath.Join(l.opts.Dir, free)
		if err := l.opts.FS.Rename(path, l.segPath(s)); err != nil {
			l.log.Warn("raftlog: recycle a free segment file; removing it", "file", free, "err", err)
			_ = l.opts.FS.Remove(path)
			continue
		}
		f, err := l.opts.FS.OpenFile(l.segPath(s), os.O_RDWR, 0)
		if err != nil {
			l.log.Warn("raftlog: open a recycled segment file; removing it", "file", s.name, "err", err)
			_ = l.opts.FS.Remove(l.segPath(s))
			continue
		}
		s.recycled = true
		l.count(func(st *Stats) { st.Recycled++ })
		return f, nil
	}
	return l.opts.FS.Create(l.segPath(s))
}

// discard removes the file of a segment GC let go, or keeps it as a free
// file to recycle: if it is of this format (its stale records fail the
// next segment's checksums), no reader holds it, and fewer than
// RecycleSegments wait.
func (l *Log) discard(s *segment) {
	closed := s.retire()
	if closed && s.seed != 0 && len(l.free) < l.opts.RecycleSegments {
		free := freeName(s.num)
		err := l.opts.FS.Rename(l.segPath(s), filepath.Join(l.opts.Dir, free))
		if err == nil {
			l.free = append(l.free, free)
			return
		}
		l.log.Warn("raftlog: keep a segment file to recycle; removing it", "file", s.name, "err", err)
	}
	if err := l.opts.FS.Remove(l.segPath(s)); err != nil {
		l.log.Warn("raftlog: remove segment", "file", s.name, "err", err)
	}
}

// cutRecycled cuts a recycled segment's file at the end of its records,
// before it stops being the active one or the log closes: the previous
// life's records after them would read as damage in a segment that is
// not the last (recover.go).
func (l *Log) cutRecycled(s *segment) error {
	if !s.recycled {
		return nil
	}
	if err := s.f.Truncate(s.size); err != nil {
		return fmt.Errorf("%w: cut recycled %s at %d: %w", ErrWrite, s.name, s.size, err)
	}
	s.recycled, s.dirty = false, true
	return nil
}

// detectSeed returns the seed the records of segment num, whose file is
// f of size bytes, were sealed with: its number's, or 0 if its first
// record is a checkpoint of format 1. A segment is never recycled from a
// file of format 1, so a previous life's records cannot pass for one.
func detectSeed(f io.ReaderAt, num uint64, size int64) uint32 {
	seed := segmentSeed(num)
	var head [recHeaderSize]byte
	if size < recHeaderSize {
		return seed
	}
	if _, err := f.ReadAt(head[:], 0); err != nil {
		return seed
	}
	if _, ok := decodeHeader(head[:], seed); ok {
		return seed
	}
	if h, ok := decodeHeader(head[:], 0); ok && h.kind == kindCheckpoint {
		return 0
	}
	return seed
}
