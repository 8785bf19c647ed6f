package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

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

	err     error
	sync    bool // the batch must be fsynced before done
	records int  // how many records it wrote
	removed bool // opRemove: drop the group from the map once written
	compact bool // it dropped entries: GC may free segments
}

// run is the writer goroutine.
func (l *Log) run() {
	defer close(l.exited)
	tick, stop := l.syncTicker()
	defer stop()
	for {
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

// backgroundSync is SyncInterval's periodic fsync.
func (l *Log) backgroundSync() {
	l.lastSync = time.Now()
	a := l.active()
	if !a.dirty {
		return
	}
	a.dirty = false
	l.count(func(s *Stats) { s.Fsyncs++ })
	if err := a.f.Sync(); err != nil {
		// What was written since the last good fsync may be lost in an
		// operating system crash, which SyncInterval accepts; later writes
		// go to a new file, away from pages the kernel may have dropped.
		l.log.Error("raftlog: background fsync failed; starting a new segment", "file", a.name, "err", err)
		l.degraded = true
		l.rollOrLog()
	}
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
	for _, w := range q {
		buf = l.encode(w, buf, start)
		if w.op == opSave && len(w.u.Entries) > 0 && w.err == nil {
			l.touch(w.g)
		}
		l.trimCache()
		records += int64(w.records)
		needSync = needSync || (w.sync && w.err == nil)
		compacted = compacted || w.compact
	}
	var err error
	if len(buf) > 0 {
		var n int
		n, err = a.f.Write(buf)
		if err == nil && n < len(buf) {
			err = io.ErrShortWrite
		}
		if err != nil {
			err = fmt.Errorf("%w: %s: %w", ErrWrite, a.name, err)
			l.degraded = true
			l.rewind(a, start)
		} else {
			a.size += int64(len(buf))
			a.dirty = true
		}
	}
	if err == nil && needSync {
		if serr := a.f.Sync(); serr != nil {
			err = fmt.Errorf("%w: %s: %w", ErrSync, a.name, serr)
		} else {
			a.dirty = false
		}
		l.count(func(s *Stats) { s.Fsyncs++ })
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
	if cap(buf) > 8<<20 {
		buf = nil // a huge batch: do not keep its buffer
	}
	l.buf = buf
	if compacted {
		l.gc()
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

// encode validates w against its group's state, appends its records to
// buf (whose first byte lands at offset base of the active segment) and
// applies them to the state. A write it refuses sets w.err and writes
// nothing.
func (l *Log) encode(w *write, buf []byte, base int64) []byte {
	if w.op == opSync {
		w.sync = true
		return buf
	}
	g := w.g
	g.mu.Lock()
	defer g.mu.Unlock()
	if w.err = g.usableLocked(); w.err != nil {
		return buf
	}
	st := &g.mu.st
	seg := l.active()
	always := l.opts.Durability.Sync == store.SyncAlways
	rec := func(k recKind, index, term uint64, body []byte) {
		buf = appendRecord(buf, k, g.id, index, term, body)
		w.records++
	}
	switch w.op {
	case opSave:
		if w.err = st.checkUpdate(&w.u); w.err != nil {
			// Raft asked for what its storage cannot hold: its view and
			// the log's differ, and a later update's responses could
			// acknowledge what this one did not write. (A snapshot older
			// than the log's is refused and ignored, as MemoryStorage
			// does.)
			if !errors.Is(w.err, raft.ErrSnapOutOfDate) {
				st.failed = w.err
			}
			break
		}
		u := &w.u
		if s := u.Snapshot; s != nil {
			conf, err := proto.Marshal(pb.EnsureConfState(s.GetMetadata().GetConfState()))
			if err != nil {
				w.err = fmt.Errorf("%w: conf state: %w", ErrInvalid, err)
				break
			}
			i, t := s.GetMetadata().GetIndex(), s.GetMetadata().GetTerm()
			rec(kindSnapshot, i, t, appendSnapshotBody(nil, conf, s.GetData()))
			rec(kindCompact, i, t, []byte{compactReset})
			st.setSnapshot(i, t, conf, s.GetData())
			st.compact(i, t, true, l)
			w.sync, w.compact = true, true
		}
		for _, e := range u.Entries {
			i := e.GetIndex()
			if i < st.first {
				continue // compacted already, as MemoryStorage.Append does
			}
			off := base + int64(len(buf))
			buf = appendHead(buf, kindEntry, g.id, i, e.GetTerm(), 0)
			buf = appendEntryBody(buf, e)
			b := buf[off-base:]
			binary.LittleEndian.PutUint32(b, uint32(len(b)))
			seal(b)
			w.records++
			st.appendEntry(i, entryLoc{seg: seg, off: off, size: uint32(len(b)), term: e.GetTerm()}, e, l)
			w.sync = w.sync || always
		}
		if hs := u.HardState; hs != nil {
			if hs.GetTerm() != st.term || hs.GetVote() != st.vote {
				w.sync = true // a vote or term forgotten in a crash could be cast again
			}
			var vote [8]byte
			binary.LittleEndian.PutUint64(vote[:], hs.GetVote())
			rec(kindHardState, hs.GetCommit(), hs.GetTerm(), vote[:])
			st.hasHS, st.term, st.vote, st.commit = true, hs.GetTerm(), hs.GetVote(), hs.GetCommit()
		}
	case opSnapshot:
		if n := len(w.data); n > MaxSnapshotData {
			w.err = fmt.Errorf("%w: snapshot data of %d bytes, more than %d", ErrInvalid, n, MaxSnapshotData)
			break
		}
		if w.index <= st.snapIndex {
			w.err = raft.ErrSnapOutOfDate
			break
		}
		t, err := st.termAt(w.index, "snapshot", g.id)
		if err != nil {
			w.err = err
			break
		}
		conf := w.conf
		if w.keepConf {
			conf = st.snapConf
		}
		rec(kindSnapshot, w.index, t, appendSnapshotBody(nil, conf, w.data))
		st.setSnapshot(w.index, t, conf, w.data)
		w.sync = always
	case opCompact:
		if w.index < st.first {
			w.err = raft.ErrCompacted
			break
		}
		t, err := st.termAt(w.index, "compaction", g.id)
		if err != nil {
			w.err = err
			break
		}
		rec(kindCompact, w.index, t, []byte{0})
		st.compact(w.index, t, false, l)
		w.compact = true
	case opReset:
		rec(kindSnapshot, 0, 0, appendSnapshotBody(nil, nil, nil))
		rec(kindCompact, 0, 0, []byte{compactReset})
		var vote [8]byte
		binary.LittleEndian.PutUint64(vote[:], st.vote)
		rec(kindHardState, 0, st.term, vote[:])
		st.setSnapshot(0, 0, nil, nil)
		st.compact(0, 0, true, l)
		st.commit, st.damaged = 0, nil
		w.sync, w.compact = true, true
	case opRemove:
		rec(kindRemove, 0, 0, nil)
		st.compact(0, 0, true, l)
		st.removed, w.removed = true, true
		w.sync, w.compact = always, true
	}
	return buf
}

// termAt returns the term of entry i, to snapshot or compact the log to
// it, refusing an index past the end of the log.
func (st *groupState) termAt(i uint64, what string, group uint64) (uint64, error) {
	if i > st.last {
		return 0, fmt.Errorf("%w: %s at %d past the last index %d of group %d", ErrInvalid, what, i, st.last, group)
	}
	return st.termOf(i)
}

// checkUpdate refuses an update that would leave a hole in the log or
// carries a record larger than MaxRecordSize.
func (st *groupState) checkUpdate(u *Update) error {
	first, last, snap := st.first, st.last, st.snapIndex
	if s := u.Snapshot; s != nil {
		i := s.GetMetadata().GetIndex()
		if snap != 0 && snap >= i {
			return raft.ErrSnapOutOfDate
		}
		if n := len(s.GetData()); n > MaxSnapshotData {
			return fmt.Errorf("%w: snapshot data of %d bytes, more than %d", ErrInvalid, n, MaxSnapshotData)
		}
		first, last = i+1, i
	}
	prev := uint64(0)
	for k, e := range u.Entries {
		i := e.GetIndex()
		switch {
		case k > 0 && i != prev+1:
			return fmt.Errorf("%w: entry %d after entry %d", ErrInvalid, i, prev)
		case i >= first && i > last+1:
			return fmt.Errorf("%w: entry %d after the last index %d", ErrInvalid, i, last)
		case recHeaderSize+2+len(e.GetData()) > MaxRecordSize:
			return fmt.Errorf("%w: entry %d of %d bytes", ErrInvalid, i, len(e.GetData()))
		case e.Type != nil && (*e.Type < 0 || *e.Type > 255):
			return fmt.Errorf("%w: entry %d of type %d", ErrInvalid, i, *e.Type)
		}
		if i >= first {
			last = i
		}
		prev = i
	}
	return nil
}

// appendSnapshotBody appends a snapshot record's body.
func appendSnapshotBody(dst, conf, data []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(conf)))
	return append(append(dst, conf...), data...)
}
