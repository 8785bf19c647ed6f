package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"

	"github.com/skiffmq/skiff/internal/bufpool"
	"github.com/skiffmq/skiff/internal/logthrottle"
)

// fileBackend stores a stream in segment files; see doc.go for the layout.
// All fields are guarded by the stream's lock.
type fileBackend struct {
	fs   FS
	dir  string
	opts *Options // the stream's live options
	log  *slog.Logger

	segs     []*segment // ascending by first sequence
	active   *segment   // takes writes; nil until the next write creates one
	needRoll bool       // the active segment's fsync failed: start a new one

	// held: writes are held (writehold.go); heldFirst is the first
	// sequence appended since, 0 if none.
	held      bool
	heldFirst uint64

	floor      uint64 // every sequence below is gone
	savedFloor uint64 // the floor in the meta file
	metaGen    uint64
	meta       File
	metaDirty  bool // meta written since its last fsync

	// The high water mark (hwm.go): the last sequence written, and what
	// the meta file says of it and of the active segment.
	high, savedHigh, savedActive, hwGen uint64

	stg stagedTail // records staged and not committed (stage.go)
	// staging: the stream stages (Options.Staging). released is then the
	// last sequence no replay will need again (ReleaseThrough): a segment
	// whose records are all removed goes only at or below it (droppable).
	staging  bool
	released uint64

	ra readAhead // blocks for sequential readers; its own lock, as readers share the stream's (readahead.go)

	gone      map[uint64]uint64 // removed segments' markers on disk: first to last (gone.go)
	dirDirty  bool              // files created or removed since the directory's last fsync
	graveyard []File            // files of dropped segments, closed at the end of a sync round
	delBuf    []byte

	// The errors of sync rounds retried every round (a full disk, a
	// failing device) are logged at most once per throttle interval.
	delWarn, floorWarn, hwWarn, fsyncWarn, sealWarn logthrottle.Throttle
}

var _ backend = (*fileBackend)(nil)

// flush writes the active segment's buffered appends (the others have
// none: a segment is flushed before it is sealed).
func (fb *fileBackend) flush() error {
	if a := fb.active; a != nil {
		if err := a.log.flush(); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrWrite, segmentBase(a.first)+logExt, err)
		}
	}
	return nil
}

// segFor returns the segment holding seq, or nil.
func (fb *fileBackend) segFor(seq uint64) *segment {
	i := sort.Search(len(fb.segs), func(i int) bool { return fb.segs[i].first > seq }) - 1
	if i < 0 || seq > fb.segs[i].last {
		return nil
	}
	return fb.segs[i]
}

func (fb *fileBackend) write(seq uint64, ts int64, subj string, head, data []byte) (uint32, error) {
	off, s, err := fb.writeRecord(seq, ts, subj, head, data)
	if err != nil {
		return 0, err
	}
	if fb.holdsAppends() && fb.heldFirst == 0 {
		fb.heldFirst = seq
	}
	s.last = seq
	fb.high = max(fb.high, seq)
	s.live++
	return off, nil
}

// writeRecord appends the record of seq to the active segment, rolling to
// a new one as needed, and adds it to the segment's index: what a write
// and a stage (stage.go) share. It returns the record's offset and
// segment.
func (fb *fileBackend) writeRecord(seq uint64, ts int64, subj string, head, data []byte) (uint32, *segment, error) {
	n := len(head) + len(data)
	if err := fb.prepareActive(seq, ts, n); err != nil {
		return 0, nil, err
	}
	s := fb.active
	off := s.log.size
	if err := s.log.append(head, data); err != nil {
		return 0, nil, fmt.Errorf("%w: %s: %w", ErrWrite, segmentBase(s.first)+logExt, err)
	}
	s.cacheTail(off, head, data)
	if off == 0 {
		s.firstTS = ts
	}
	s.ents.append(idxEntry{off: uint32(off), size: uint32(n), ts: ts, subj: subj})
	s.fileSize = s.log.size
	s.dirty = true
	return uint32(off), s, nil
}

// prepareActive makes sure the active segment can take a record of n bytes
// for seq, rolling to a new segment when the current one is full, too old,
// poisoned, or misnamed for seq.
func (fb *fileBackend) prepareActive(seq uint64, ts int64, n int) error {
	a := fb.active
	if a != nil && !fb.needRoll {
		if a.log.size == 0 && a.first == seq {
			return nil
		}
		// Records of a segment are consecutive: a sequence that does not
		// follow (recovery moved the last sequence past lost records)
		// starts a new segment.
		if a.log.size > 0 && a.next() == seq && !fb.shouldRoll(a, ts, n) {
			return nil
		}
	}
	if a != nil && a.log.size == 0 {
		fb.dropSegment(a) // empty: nothing to seal, and it may hold the name we need
	}
	if a != nil && !a.dropped {
		// A sealed segment's records are all in its file, and it gives back
		// the space it reserved past them (a failure leaves that space
		// reserved, and nothing else).
		if err := a.log.flush(); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrWrite, segmentBase(a.first)+logExt, err)
		}
		if err := a.log.unreserve(); err != nil {
			fb.log.Warn("store: preallocated space of a sealed segment not given back", "file", segmentBase(a.first)+logExt, "err", err)
		}
	}
	f, err := fb.fs.Create(fb.path(seq, logExt))
	if err != nil {
		return fmt.Errorf("%w: create segment: %w", ErrWrite, err)
	}
	// Leftovers of an earlier segment with this name would describe other records.
	fb.removeFile(fb.path(seq, idxExt))
	fb.removeFile(fb.path(seq, delExt))
	if a := fb.active; a != nil {
		a.sealed, a.tail = true, nil
	}
	ns := &segment{first: seq, last: seq - 1, log: appendFile{f: f, limit: fb.opts.WriteBuffer, held: fb.holdsAppends(), reserveTo: fb.opts.SegmentBytes}}
	fb.segs = append(fb.segs, ns)
	fb.active, fb.needRoll, fb.dirDirty = ns, false, true
	return nil
}

func (fb *fileBackend) read(seq uint64, e *entry) ([]byte, error) {
	s := fb.segFor(seq)
	if s == nil {
		return nil, fmt.Errorf("%w: sequence %d in no segment", ErrNotFound, seq)
	}
	buf := bufpool.Get(int(e.size))[:e.size] // the caller owns what it reads
	if c, ok := s.cached(int64(e.off), int(e.size)); ok {
		copy(buf, c)
		return buf, nil
	}
	if err := fb.ra.read(s, buf, int64(e.off)); err != nil {
		bufpool.Put(buf)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("%w: record of sequence %d beyond end of %s", ErrCorrupt, seq, segmentBase(s.first)+logExt)
		}
		return nil, fmt.Errorf("store: read sequence %d: %w", seq, err)
	}
	return buf, nil
}

func (fb *fileBackend) removed(seq uint64, lazy bool) {
	s := fb.segFor(seq)
	if s == nil {
		return
	}
	s.live--
	if lazy {
		s.pending = append(s.pending, seq)
	}
	// The last segment carries the last sequence; a sync round retires it
	// once the floor that replaces it is on disk. One with staged records,
	// or that a replay may need, stays (droppable).
	if fb.droppable(s) && s != fb.segs[len(fb.segs)-1] {
		fb.dropSegment(s)
	}
}

func (fb *fileBackend) setFloor(first uint64) {
	if first > fb.floor {
		fb.floor = first
	}
}

func (fb *fileBackend) persistFloor(floor uint64) error {
	if err := fb.writeMeta(floor); err != nil {
		return err
	}
	if fb.opts.Durability.Sync != SyncNever {
		if err := fb.meta.Sync(); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrSync, metaName, err)
		}
		fb.metaDirty = false
	}
	return nil
}

func (fb *fileBackend) persistDeletes(seqs []uint64) (int, error) {
	done := 0
	for done < len(seqs) {
		s := fb.segFor(seqs[done])
		if s == nil {
			done++
			continue
		}
		j := done
		for j < len(seqs) && seqs[j] <= s.last {
			j++
		}
		if err := fb.writeDel(s, seqs[done:j]); err != nil {
			return done, err
		}
		done = j
		if fb.opts.Durability.Sync == SyncAlways {
			if err := s.del.f.Sync(); err != nil {
				// Written but maybe not durable: the delete stands, the error says so.
				return done, fmt.Errorf("%w: %s: %w", ErrSync, segmentBase(s.first)+delExt, err)
			}
			s.delDirty = false
		}
	}
	return done, nil
}

// persistSkip records to as deleted in the last segment's deletes:
// recovery takes the last sequence to be at least every delete's.
func (fb *fileBackend) persistSkip(to uint64) error {
	if len(fb.segs) == 0 {
		return fmt.Errorf("%w: skip to %d with no segment", ErrWrite, to) // Skip takes the floor when nothing is stored
	}
	s := fb.segs[len(fb.segs)-1]
	if err := fb.writeDel(s, []uint64{to}); err != nil {
		return err
	}
	s.skipTo = max(s.skipTo, to)
	fb.high = max(fb.high, to)
	if fb.opts.Durability.Sync == SyncAlways {
		if err := s.del.f.Sync(); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrSync, segmentBase(s.first)+delExt, err)
		}
		s.delDirty = false
	}
	return nil
}

// writeDel appends a batch of deleted sequences to s's .del file.
func (fb *fileBackend) writeDel(s *segment, seqs []uint64) error {
	if s.del.f == nil {
		f, err := fb.fs.OpenFile(fb.path(s.first, delExt), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("%w: open delete file: %w", ErrWrite, err)
		}
		s.del, fb.dirDirty = appendFile{f: f}, true
	}
	fb.delBuf = appendDelBatch(fb.delBuf[:0], seqs)
	if err := s.del.append(fb.delBuf); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrWrite, segmentBase(s.first)+delExt, err)
	}
	s.delDirty = true
	return nil
}

// openMeta opens (creating it if need be) the meta file.
func (fb *fileBackend) openMeta() error {
	if fb.meta != nil {
		return nil
	}
	f, err := fb.fs.OpenFile(filepath.Join(fb.dir, metaName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("%w: open %s: %w", ErrWrite, metaName, err)
	}
	fb.meta, fb.dirDirty = f, true
	return nil
}

// writeMeta writes the floor into the meta slot after the current one.
func (fb *fileBackend) writeMeta(floor uint64) error {
	if err := fb.openMeta(); err != nil {
		return err
	}
	gen := fb.metaGen + 1
	_, err := fb.meta.Seek(int64(gen%2)*metaSlotSize, io.SeekStart)
	if err == nil {
		_, err = fb.meta.Write(encodeMetaSlot(gen, floor))
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrWrite, metaName, err)
	}
	fb.metaGen, fb.savedFloor, fb.metaDirty = gen, floor, true
	return nil
}

func (fb *fileBackend) dropAll() {
	for _, s := range slices.Clone(fb.segs) {
		s.live = 0
		if fb.droppable(s) {
			fb.dropSegment(s)
		}
	}
}

// dropSegment removes a segment and its files. Its open files go to the
// graveyard, to be closed once no sync round can be using them.
func (fb *fileBackend) dropSegment(s *segment) {
	if s.through() >= s.first {
		fb.markGone(s) // say so before the file goes (gone.go); an empty one a Skip was recorded in too
	}
	for i, x := range fb.segs {
		if x == s {
			fb.segs = append(fb.segs[:i], fb.segs[i+1:]...)
			break
		}
	}
	if fb.active == s {
		fb.active = nil
	}
	s.dropped, s.pending, s.tail, s.log.buf = true, nil, nil, nil
	s.ents.reset()
	fb.ra.forget(s)
	fb.graveyard = append(fb.graveyard, s.log.f)
	if s.del.f != nil {
		fb.graveyard = append(fb.graveyard, s.del.f)
	}
	for _, ext := range []string{logExt, idxExt, delExt} {
		fb.removeFile(fb.path(s.first, ext))
	}
	fb.dirDirty = true
}

// removeFile removes a file that may not exist, logging other failures.
func (fb *fileBackend) removeFile(name string) {
	if err := fb.fs.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		fb.log.Warn("store: remove file", "file", name, "err", err)
	}
}

func (fb *fileBackend) close() error {
	var first error
	keep := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	keep(fb.release())
	for _, s := range fb.segs {
		keep(s.log.flush())
		keep(s.log.f.Close())
		if s.del.f != nil {
			keep(s.del.f.Close())
		}
	}
	if fb.meta != nil {
		keep(fb.meta.Close())
	}
	for _, f := range fb.graveyard {
		keep(f.Close())
	}
	fb.segs, fb.active, fb.meta, fb.graveyard = nil, nil, nil, nil
	return first
}

func (fb *fileBackend) destroy() error {
	err := fb.close()
	names, rerr := fb.fs.ReadDir(fb.dir)
	if rerr != nil {
		return errors.Join(err, rerr)
	}
	for _, n := range names {
		if rmErr := fb.fs.Remove(filepath.Join(fb.dir, n)); rmErr != nil && err == nil {
			err = rmErr
		}
	}
	if rmErr := fb.fs.Remove(fb.dir); rmErr != nil && err == nil {
		err = rmErr
	}
	return err
}
