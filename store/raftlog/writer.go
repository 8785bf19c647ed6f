package raftlog

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/skiffmq/skiff/store"
)

// The writer goroutine takes everything queued, as one batch: it encodes
// the batch's records into one buffer, applies them to the groups' state in
// memory, writes the buffer with one write system call, fsyncs once if any
// write of the batch needs it (Options.Durability), then runs the writes'
// callbacks in order. Under load a batch carries the appends of many
// groups and many Ready rounds, and one fsync serves them all.
//
// A batch whose write or fsync fails fails every write in it: the file is
// cut back to where the batch began (after a failed fsync the writer
// starts a new segment rather than write to that file again), the
// callbacks get the error, and the groups they belong to are failed,
// because their state in memory is already ahead of the disk. From then
// on no segment is removed until the log is reopened.

type writeOp uint8

const (
	opSave writeOp = iota
	opSnapshot
	opCompact
	opRemove
	opReset
	opSync
)

type write struct {
	g     *Group
	op    writeOp
	u     Update
	index uint64 // opSnapshot, opCompact
	conf  []byte // opSnapshot
	data  []byte // opSnapshot
	// keepConf: opSnapshot keeps the previous snapshot's conf state.
	keepConf bool
	done     func(error)
	bytes    int64 // counted against QueueBytes

	err      error
	sync     bool // the batch must be fsynced before done
	records  int  // how many records it wrote
	stripped bool // its group's Payloads stripped an entry (payloads.go)
	removed  bool // opRemove: drop the group from the map once written
	compact  bool // it dropped entries: GC may free segments
}

// run is the writer goroutine.
func (l *Log) run() {
	defer close(l.exited)
	defer l.bg.close() // before exited: Close fsyncs and closes after it
	tick, stop := l.syncTicker()
	defer stop()
	for {
		if err := l.bg.takeFailure(); err != nil {
			// What was written since the last good fsync may be lost in an
			// operating system crash, which SyncInterval accepts; later
			// writes go to a new file, away from pages the kernel may have
			// dropped.
			l.log.Error("raftlog: background fsync failed; starting a new segment", "err", err)
			l.degraded = true
			l.rollOrLog()
		}
		l.mu.Lock()
		q, closed := l.mu.queue, l.mu.closed
		l.mu.queue, l.mu.queued = nil, 0
		l.mu.Unlock()
		if len(q) > 0 {
			l.writeBatch(q)
			// Under load the queue is never empty and the select below
			// never runs: SyncInterval's fsync must not wait for a pause.
			if tick != nil && time.Since(l.lastSync) >= l.opts.Durability.Interval {
				l.backgroundSync()
			}
			continue
		}
		if closed {
			return
		}
		select {
		case <-l.wake:
		case <-tick:
			l.backgroundSync()
		}
	}
}

// backgroundSync is SyncInterval's periodic fsync, handed to the
// background syncer (bgsync.go); skipped while it still runs the last.
func (l *Log) backgroundSync() {
	l.lastSync = time.Now()
	a := l.active()
	if a == nil || !a.dirty || !l.bg.idle() {
		return
	}
	a.dirty = false
	a.acquire()
	l.bg.request(a, nil, l.takeUnsynced())
}

// rollOrLog rolls, logging a failure: the batch goes on in the old segment.
func (l *Log) rollOrLog() {
	if err := l.roll(); err != nil {
		l.log.Error("raftlog: start a new segment", "dir", l.opts.Dir, "err", err)
		return
	}
	l.gc()
}

func (l *Log) writeBatch(q []*write) {
	a := l.active()
	if a.size >= l.opts.SegmentBytes {
		l.rollOrLog()
		a = l.active()
	}
	start := a.size
	buf := l.buf[:0]
	needSync, compacted, records := false, false, int64(0)
	var syncs []*write // Log.Sync's, for the background syncer
	for _, w := range q {
		buf = l.encode(w, buf, start)
		if w.op == opSave && len(w.u.Entries) > 0 && w.err == nil {
			l.touch(w.g)
		}
		l.trimCache()
		records += int64(w.records)
		if w.op == opSync && l.opts.Durability.Sync != store.SyncAlways {
			syncs = append(syncs, w)
			continue
		}
		needSync = needSync || (w.sync && w.err == nil)
		compacted = compacted || w.compact
	}
	l.flushPayloads(q) // before the records that point at them
	err := l.flush(a, buf, start, needSync)
	if err == nil && !needSync && len(syncs) > 0 {
		// No fsync of this batch's covers them: the background syncer's
		// next, which starts after this write, does.
		done := make([]func(error), 0, len(syncs))
		for _, w := range syncs {
			if w.done != nil {
				done = append(done, w.done)
				w.done = nil
			}
		}
		a.dirty = false
		a.acquire()
		l.bg.request(a, done, l.takeUnsynced())
	}
	l.count(func(s *Stats) {
		s.Batches++
		s.Records += records
		if err == nil {
			s.Bytes += int64(len(buf))
		} else {
			s.FailedWrites++
		}
	})
	if err != nil {
		l.degraded = true // GC off until reopened: see Log.degraded
		l.failBatch(q, err)
		if errors.Is(err, ErrSync) {
			l.log.Error("raftlog: fsync failed; its writes failed, starting a new segment", "file", a.name, "err", err)
			l.rollOrLog()
		} else {
			l.log.Error("raftlog: write failed; its writes failed", "file", a.name, "err", err)
		}
	}
	l.finish(q)
	if cap(buf) > 8<<20 {
		buf = nil // a huge batch: do not keep its buffer
	}
	l.buf = buf
	if compacted {
		l.gc()
	}
}

// flush writes a batch's records at the end of the active segment a, and
// fsyncs them if asked. A failed write is cut back off the file.
func (l *Log) flush(a *segment, buf []byte, start int64, sync bool) error {
	if len(buf) > 0 {
		n, err := a.f.Write(buf)
		if err == nil && n < len(buf) {
			err = io.ErrShortWrite
		}
		if err != nil {
			l.degraded = true
			l.rewind(a, start)
			return fmt.Errorf("%w: %s: %w", ErrWrite, a.name, err)
		}
		a.size += int64(len(buf))
		a.dirty = true
	}
	if !sync {
		return nil
	}
	if err := l.syncAllHooks(); err != nil {
		return err
	}
	l.count(func(s *Stats) { s.Fsyncs++ })
	if err := a.f.Sync(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrSync, a.name, err)
	}
	a.dirty = false
	return nil
}

// finish runs a batch's callbacks, in order, then OnBatch's hook.
func (l *Log) finish(q []*write) {
	for _, w := range q {
		if w.removed && w.err == nil {
			if w.g.lru.in {
				l.unlink(w.g)
			}
			l.mu.Lock()
			if l.mu.groups[w.g.id] == w.g {
				delete(l.mu.groups, w.g.id)
			}
			l.mu.Unlock()
		}
		if w.done != nil {
			w.done(w.err)
		}
	}
	l.mu.Lock()
	hook := l.mu.onBatch
	l.mu.Unlock()
	if hook != nil {
		hook()
	}
}

// rewind cuts the active segment back to size after a failed write.
func (l *Log) rewind(a *segment, size int64) {
	if err := a.f.Truncate(size); err == nil {
		if _, err = a.f.Seek(size, io.SeekStart); err == nil {
			return
		}
	}
	// The file may end in a partial batch: write no more to it. Recovery
	// cuts it off as a torn tail only if it is the last segment, so roll.
	l.rollOrLog()
}

// failBatch fails every write of a batch that wrote records, and their
// groups; then every other write of the batch from a group that failed
// (one that wrote nothing itself may carry responses that acknowledge the
// group's earlier writes, raft's msgsAfterAppend), and Log.Sync's.
func (l *Log) failBatch(q []*write, err error) {
	for _, w := range q {
		if w.records == 0 {
			continue
		}
		w.err = err
		w.g.mu.Lock()
		if w.g.mu.st.failed == nil {
			w.g.mu.st.failed = err
		}
		w.g.mu.Unlock()
	}
	for _, w := range q {
		switch {
		case w.err != nil:
		case w.op == opSync:
			w.err = err
		default:
			w.g.mu.Lock()
			if w.g.mu.st.failed != nil {
				w.err = err
			}
			w.g.mu.Unlock()
		}
	}
}
