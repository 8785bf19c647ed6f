package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/skiffmq/skiff/store"
)

// An encoder turns one write of a batch into records appended to the
// batch's buffer, and applies them to its group's state in memory, in the
// order the records will be replayed (see the transitions in group.go).
// It validates the write first: a write it refuses sets w.err and writes
// nothing. The writer goroutine holds the group's lock while it runs.
type encoder struct {
	l    *Log
	w    *write
	g    *Group
	st   *groupState
	buf  []byte
	base int64  // the offset of buf[0] in the active segment
	seed uint32 // the active segment's checksum seed
}

// encode encodes w at the end of buf, whose first byte lands at offset
// base of the active segment, and returns buf.
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
	e := &encoder{l: l, w: w, g: g, st: &g.mu.st, buf: buf, base: base, seed: l.active().seed}
	switch w.op {
	case opSave:
		e.save()
	case opSnapshot:
		e.snapshot()
	case opCompact:
		e.compact()
	case opReset:
		e.reset()
	case opRemove:
		e.remove()
	}
	return e.buf
}

// always reports whether the policy fsyncs every batch with entries.
func (e *encoder) always() bool { return e.l.opts.Durability.Sync == store.SyncAlways }

// rec appends one record of the group.
func (e *encoder) rec(k recKind, index, term uint64, body []byte) {
	e.buf = appendRecord(e.buf, e.seed, k, e.g.id, index, term, body)
	e.w.records++
}

// hardState appends a hard state record and applies it.
func (e *encoder) hardState(term, vote, commit uint64) {
	var v [8]byte
	binary.LittleEndian.PutUint64(v[:], vote)
	e.rec(kindHardState, commit, term, v[:])
	e.st.hasHS, e.st.term, e.st.vote, e.st.commit = true, term, vote, commit
}

// save encodes what a MsgStorageAppend asks for: a received snapshot,
// entries, a hard state, in that order.
func (e *encoder) save() {
	w, st := e.w, e.st
	if w.err = st.checkUpdate(&w.u); w.err != nil {
		// Raft asked for what its storage cannot hold: its view and the
		// log's differ, and a later update's responses could acknowledge
		// what this one did not write. (A snapshot older than the log's
		// is refused and ignored, as MemoryStorage does.)
		if !errors.Is(w.err, raft.ErrSnapOutOfDate) {
			st.failed = w.err
		}
		return
	}
	if s := w.u.Snapshot; s != nil {
		conf, err := proto.Marshal(pb.EnsureConfState(s.GetMetadata().GetConfState()))
		if err != nil {
			w.err = fmt.Errorf("%w: conf state: %w", ErrInvalid, err)
			return
		}
		i, t := s.GetMetadata().GetIndex(), s.GetMetadata().GetTerm()
		e.rec(kindSnapshot, i, t, appendSnapshotBody(nil, conf, s.GetData()))
		e.rec(kindCompact, i, t, []byte{compactReset})
		st.setSnapshot(i, t, conf, s.GetData())
		st.compact(i, t, true, e.l)
		w.sync, w.compact = true, true
	}
	seg := e.l.active()
	for _, ent := range w.u.Entries {
		i := ent.GetIndex()
		if i < st.first {
			continue // compacted already, as MemoryStorage.Append does
		}
		data, stripped := e.strip(ent)
		off := e.base + int64(len(e.buf))
		e.buf = appendEntryBody(appendHead(e.buf, kindEntry, e.g.id, i, ent.GetTerm(), 0), ent, data, stripped)
		b := e.buf[off-e.base:]
		binary.LittleEndian.PutUint32(b, uint32(len(b)))
		seal(b, e.seed)
		w.records++
		st.appendEntry(i, entryLoc{seg: seg, off: off, size: uint32(len(b)), term: ent.GetTerm()}, ent, e.l)
		w.sync = w.sync || e.always()
	}
	if hs := w.u.HardState; hs != nil {
		if hs.GetTerm() != st.term || hs.GetVote() != st.vote {
			w.sync = true // a vote or term forgotten in a crash could be cast again
		}
		e.hardState(hs.GetTerm(), hs.GetVote(), hs.GetCommit())
	}
}

// snapshot encodes CreateSnapshot.
func (e *encoder) snapshot() {
	w, st := e.w, e.st
	if n := len(w.data); n > MaxSnapshotData {
		w.err = fmt.Errorf("%w: snapshot data of %d bytes, more than %d", ErrInvalid, n, MaxSnapshotData)
		return
	}
	if w.index <= st.snapIndex {
		w.err = raft.ErrSnapOutOfDate
		return
	}
	t, err := st.termAt(w.index, "snapshot", e.g.id)
	if err != nil {
		w.err = err
		return
	}
	conf := w.conf
	if w.keepConf {
		conf = st.snapConf
	}
	e.rec(kindSnapshot, w.index, t, appendSnapshotBody(nil, conf, w.data))
	st.setSnapshot(w.index, t, conf, w.data)
	w.sync = e.always()
}

// compact encodes Compact.
func (e *encoder) compact() {
	w, st := e.w, e.st
	if w.index < st.first {
		w.err = raft.ErrCompacted
		return
	}
	t, err := st.termAt(w.index, "compaction", e.g.id)
	if err != nil {
		w.err = err
		return
	}
	e.rec(kindCompact, w.index, t, []byte{0})
	st.compact(w.index, t, false, e.l)
	w.compact = true
}

// reset encodes Reset: no snapshot, no entries, term and vote kept.
func (e *encoder) reset() {
	st := e.st
	e.rec(kindSnapshot, 0, 0, appendSnapshotBody(nil, nil, nil))
	e.rec(kindCompact, 0, 0, []byte{compactReset})
	st.setSnapshot(0, 0, nil, nil)
	st.compact(0, 0, true, e.l)
	e.hardState(st.term, st.vote, 0)
	st.damaged = nil
	e.w.sync, e.w.compact = true, true
}

// remove encodes Log.Remove.
func (e *encoder) remove() {
	e.rec(kindRemove, 0, 0, nil)
	e.st.compact(0, 0, true, e.l)
	e.st.removed, e.w.removed = true, true
	e.w.sync, e.w.compact = e.always(), true
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
