package raftlog

import (
	"fmt"
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

const segExt = ".wal"

func segmentName(num uint64) string { return fmt.Sprintf("%020d%s", num, segExt) }

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

// retire marks s removed and closes it unless a reader holds it.
func (s *segment) retire() {
	s.refs.Lock()
	s.refs.removed = true
	closeNow := s.refs.n == 0
	s.refs.Unlock()
	if closeNow {
		_ = s.f.Close()
	}
}
