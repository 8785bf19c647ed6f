package store

import (
	"errors"
	"fmt"
	"log/slog"
)

// A sync round of file storage, run by WaitDurable (SyncAlways), by the
// background goroutine every Durability.Interval, and by Close:
//
//  1. under the stream's lock, prepareSync writes buffered delete records
//     and the floor, and collects the files written since their last fsync;
//  2. without the lock, the plan fsyncs them (unless SyncNever), then
//     writes the index of every sealed segment now safely on disk;
//  3. under the lock again, finishSync poisons segments whose fsync failed,
//     closes the files of dropped segments, and retires a last segment with
//     no messages left once the floor that replaces it is durable.
//
// Appends go on during step 2; the round covers what was written before
// step 1. Only one round runs at a time (groupCommit.mu).

type syncItem struct {
	f    File
	name string
	seg  *segment // the segment whose log this is, or nil
	del  *segment // the segment whose .del file this is, or nil
	err  error
}

type indexJob struct {
	seg   *segment
	ents  [][]idxEntry // the segment's index, in parts (blockList.parts)
	size  int64
	first uint64
	err   error
}

type filePlan struct {
	fb       *fileBackend
	fsync    bool
	poisoned error // records were added to a segment whose fsync failed
	// unflushed: buffered records could not be written before the round.
	unflushed error
	files     []*syncItem
	dir       bool
	dirOK     bool
	index     []*indexJob
}

func (fb *fileBackend) prepareSync(fsync bool) syncPlan {
	p := &filePlan{fb: fb, fsync: fsync}
	for _, s := range fb.segs {
		if len(s.pending) > 0 && !fb.held {
			if err := fb.writeDel(s, s.pending); err != nil {
				fb.delWarn.Log(fb.log, slog.LevelError, "store: write delete records; will retry", "dir", fb.dir, "err", err)
			} else {
				s.pending = s.pending[:0]
			}
		}
	}
	if fb.floor > fb.savedFloor && !fb.held {
		if err := fb.writeMeta(fb.floor); err != nil {
			fb.floorWarn.Log(fb.log, slog.LevelError, "store: write floor; will retry", "dir", fb.dir, "err", err)
		}
	}
	if !fb.held {
		fb.noteHighWater()
	}
	for _, s := range fb.segs {
		// Buffered appends (Options.WriteBuffer) go to the file before its
		// fsync; if they cannot, the round does not cover them.
		if err := s.log.flush(); err != nil {
			p.unflushed = errors.Join(p.unflushed, fmt.Errorf("%w: %s: %w", ErrWrite, segmentBase(s.first)+logExt, err))
		}
		if s.poisoned && s.dirty {
			// They follow pages the kernel may have dropped, and recovery
			// stops at the first bad record of a segment: they are no safer
			// than the records of the failed fsync.
			p.poisoned = fmt.Errorf("%w: %s: written after a failed fsync of the same file", ErrSync, segmentBase(s.first)+logExt)
			s.dirty = false
		}
		if fsync && s.dirty {
			p.files = append(p.files, &syncItem{f: s.log.f, name: segmentBase(s.first) + logExt, seg: s})
			s.dirty = false
		}
		if fsync && s.delDirty {
			p.files = append(p.files, &syncItem{f: s.del.f, name: segmentBase(s.first) + delExt, del: s})
			s.delDirty = false
		}
		if s.sealed && !s.indexed && !s.poisoned && s.staged == 0 && s.ents.len() > 0 && len(s.log.buf) == 0 {
			p.index = append(p.index, &indexJob{seg: s, ents: s.ents.parts(), size: s.log.size, first: s.first})
		}
	}
	if fsync && fb.metaDirty {
		p.files = append(p.files, &syncItem{f: fb.meta, name: metaName})
		fb.metaDirty = false
	}
	if fsync && fb.dirDirty {
		p.dir, fb.dirDirty = true, false
	}
	return p
}

// run fsyncs, then writes indexes. A sealed segment's entries no longer
// change, so the index is built from them without the lock.
func (p *filePlan) run() error {
	var errs []error
	failed := make(map[*segment]bool)
	for _, it := range p.files {
		// Only a log's fsync decides whether messages are durable; a failed
		// .del or meta fsync can bring back deleted messages, which
		// finishSync logs, but loses none.
		if it.err = it.f.Sync(); it.err != nil && it.seg != nil {
			errs = append(errs, fmt.Errorf("%s: %w", it.name, it.err))
			failed[it.seg] = true
		}
	}
	if p.dir {
		if err := syncDir(p.fb.fs, p.fb.dir); err != nil {
			errs = append(errs, fmt.Errorf("directory: %w", err))
		} else {
			p.dirOK = true
		}
	}
	for _, j := range p.index {
		if failed[j.seg] {
			continue
		}
		j.err = writeIndexFile(p.fb.fs, p.fb.path(j.first, idxExt), encodeIndex(j.first, j.ents, j.size, j.size))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrSync, errors.Join(append(errs, p.poisoned, p.unflushed)...))
	}
	if p.unflushed != nil {
		return fmt.Errorf("%w: %w", ErrSync, errors.Join(p.poisoned, p.unflushed))
	}
	return p.poisoned
}

func (fb *fileBackend) finishSync(sp syncPlan, err error) {
	p := sp.(*filePlan)
	for _, it := range p.files {
		switch {
		case it.err == nil:
		case it.seg != nil:
			// The kernel may have dropped the unsynced pages: those records
			// may be gone after a crash even though reads still see them.
			// Seal the segment so that later records land in a new file,
			// and never index it, so that recovery checks every record.
			it.seg.poisoned = true
			if it.seg == fb.active {
				fb.needRoll = true
			}
			fb.sealWarn.Log(fb.log, slog.LevelError, "store: fsync failed; segment sealed", "dir", fb.dir, "file", it.name, "err", it.err)
		default: // retried next round
			if it.del != nil {
				it.del.delDirty = true
			} else {
				fb.metaDirty = true
			}
			fb.fsyncWarn.Log(fb.log, slog.LevelError, "store: fsync failed; will retry", "dir", fb.dir, "file", it.name, "err", it.err)
		}
	}
	if p.dir && !p.dirOK {
		fb.dirDirty = true
	}
	if len(fb.gone) > 0 && ((p.fsync && !fb.metaDirty) || fb.opts.Durability.Sync == SyncNever) {
		fb.dropStaleMarkers()
	}
	for _, j := range p.index {
		switch {
		case j.err != nil:
			fb.log.Warn("store: write index; recovery will rebuild it", "dir", fb.dir, "segment", j.first, "err", j.err)
		case j.seg.dropped:
			fb.removeFile(fb.path(j.first, idxExt))
		case !j.seg.poisoned:
			j.seg.indexed = true
			j.seg.ents.reset()
		}
	}
	for _, f := range fb.graveyard {
		_ = f.Close() // removed files: nothing to flush
	}
	fb.graveyard = nil
	fb.retireLast(p.fsync)
}

// retireLast removes the last segment when none of its messages are left
// and the floor on disk already says where the sequence stands.
func (fb *fileBackend) retireLast(fsynced bool) {
	if len(fb.segs) == 0 {
		return
	}
	s := fb.segs[len(fb.segs)-1]
	if !fb.droppable(s) || fb.savedFloor <= s.last {
		return
	}
	if fb.opts.Durability.Sync != SyncNever && (!fsynced || fb.metaDirty) {
		return
	}
	fb.dropSegment(s)
}

// writeIndexFile writes an index in one go. It is not fsynced: a torn or
// lost index fails its checks and is rebuilt from the log.
func writeIndexFile(fsys FS, name string, b []byte) error {
	f, err := fsys.Create(name)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = fsys.Remove(name)
	}
	return err
}
