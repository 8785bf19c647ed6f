package raftlog

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Group is one raft group's log in the shared Log: a raft.Storage for its
// RawNode, and the writes that raft's MsgStorageAppend messages ask for.
// It is safe for concurrent use: raft calls the Storage methods from the
// goroutine driving the RawNode while the Log's writer updates the group.
type Group struct {
	id  uint64
	log *Log

	mu struct {
		sync.Mutex
		st groupState
	}
	// payloads, if set, keeps the entries' payloads out of their records
	// (payloads.go). Guarded by mu.
	payloads Payloads
	// lru links the groups with cached entries, least recently appended
	// first (cache.go). The writer goroutine's only.
	lru struct {
		prev, next *Group
		in         bool
	}
}

var _ raft.Storage = (*Group)(nil)

// groupState is a group's log as replayed from its records. The entries
// [first, last] are the log; locs (and cache, a suffix of them) describe a
// suffix of it, ending at last. During recovery the entries before that
// suffix may still be unknown (in a segment replayed later, or lost); once
// Open returns, locs covers [first, last] for every group not damaged.
type groupState struct {
	hasHS              bool
	term, vote, commit uint64

	snapIndex, snapTerm uint64
	snapConf            []byte // proto ConfState
	snapData            []byte

	first    uint64
	prevTerm uint64 // term of first-1
	last     uint64
	locs     []entryLoc

	cache      []*pb.Entry // the last len(cache) entries, as raft gave them
	cacheBytes int64

	damaged error // set by recovery (see Recovery in doc.go)
	failed  error // a write failed: memory may be ahead of the disk
	removed bool
}

// entryLoc is where an entry's record is.
type entryLoc struct {
	seg  *segment
	off  int64
	size uint32
	term uint64
}

func newGroupState() groupState { return groupState{first: 1} }

// ID returns the group's ID.
func (g *Group) ID() uint64 { return g.id }

// usableLocked returns why the group cannot serve, or nil.
func (g *Group) usableLocked() error {
	st := &g.mu.st
	switch {
	case st.removed:
		return fmt.Errorf("%w: group %d", ErrRemoved, g.id)
	case st.failed != nil:
		return fmt.Errorf("%w: group %d: %w", ErrFailed, g.id, st.failed)
	}
	return nil
}

// Err returns the error that failed the group (wrapping ErrFailed), or
// ErrRemoved, or nil.
func (g *Group) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.usableLocked()
}

// Damaged returns, wrapping ErrCorrupt, the damage recovery found in the
// group's records, or nil. A damaged group's log is cut to the entries it
// holds without a hole, and its commit index to them; its vote may have
// been lost. It must not vote until it has caught up from its peers (the
// held rule of issue 13's design); Reset clears the mark.
func (g *Group) Damaged() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.st.damaged
}

// InitialState implements raft.Storage.
func (g *Group) InitialState() (*pb.HardState, *pb.ConfState, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.usableLocked(); err != nil {
		return nil, nil, err
	}
	st := &g.mu.st
	cs, err := st.confState()
	if err != nil {
		return nil, nil, err
	}
	if !st.hasHS {
		return nil, cs, nil
	}
	return &pb.HardState{Term: new(st.term), Vote: new(st.vote), Commit: new(st.commit)}, cs, nil
}

func (st *groupState) confState() (*pb.ConfState, error) {
	cs := new(pb.ConfState)
	if err := proto.Unmarshal(st.snapConf, cs); err != nil {
		return nil, fmt.Errorf("%w: conf state: %w", ErrCorrupt, err)
	}
	return pb.EnsureConfState(cs), nil
}

// FirstIndex implements raft.Storage.
func (g *Group) FirstIndex() (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.st.first, g.usableLocked()
}

// LastIndex implements raft.Storage.
func (g *Group) LastIndex() (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.mu.st.last, g.usableLocked()
}

// Term implements raft.Storage.
func (g *Group) Term(i uint64) (uint64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.usableLocked(); err != nil {
		return 0, err
	}
	return g.mu.st.termOf(i)
}

func (st *groupState) termOf(i uint64) (uint64, error) {
	switch {
	case i+1 < st.first:
		return 0, raft.ErrCompacted
	case i+1 == st.first:
		return st.prevTerm, nil
	case i > st.last:
		return 0, raft.ErrUnavailable
	}
	k, ok := st.locIndex(i)
	if !ok {
		return 0, raft.ErrUnavailable
	}
	return st.locs[k].term, nil
}

// locIndex returns the position in locs of entry i, if locs has it.
func (st *groupState) locIndex(i uint64) (int, bool) {
	from := st.last + 1 - uint64(len(st.locs))
	if i < from || i > st.last {
		return 0, false
	}
	return int(i - from), true
}

// Snapshot implements raft.Storage: the last snapshot created or
// received, or an empty one.
func (g *Group) Snapshot() (*pb.Snapshot, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.usableLocked(); err != nil {
		return nil, err
	}
	st := &g.mu.st
	cs, err := st.confState()
	if err != nil {
		return nil, err
	}
	s := &pb.Snapshot{Metadata: &pb.SnapshotMetadata{ConfState: cs, Index: new(st.snapIndex), Term: new(st.snapTerm)}}
	if st.snapData != nil {
		s.Data = append([]byte(nil), st.snapData...)
	}
	return s, nil
}

// Entries implements raft.Storage. It serves entries from the group's
// cache of recent ones, and reads the others from the segments. The slice
// is the caller's; the entries must not be modified.
func (g *Group) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	g.mu.Lock()
	if err := g.usableLocked(); err != nil {
		g.mu.Unlock()
		return nil, err
	}
	st := &g.mu.st
	switch {
	case lo < st.first:
		g.mu.Unlock()
		return nil, raft.ErrCompacted
	case hi > st.last+1:
		g.mu.Unlock()
		return nil, fmt.Errorf("%w: entries [%d, %d) of group %d past its last index %d", raft.ErrUnavailable, lo, hi, g.id, st.last)
	case st.last < st.first:
		g.mu.Unlock()
		return nil, raft.ErrUnavailable
	case lo >= hi:
		g.mu.Unlock()
		return []*pb.Entry{}, nil
	}
	var (
		out   = make([]*pb.Entry, 0, min(hi-lo, 1024))
		reads []entryLoc
		est   uint64 // a lower bound of the entries' size, to stop early
	)
	cacheFrom := st.last + 1 - uint64(len(st.cache))
	for i := lo; i < hi && (i == lo || est <= maxSize); i++ {
		if i >= cacheFrom {
			e := st.cache[i-cacheFrom]
			out = append(out, e)
			est += uint64(len(e.Data))
			continue
		}
		k, ok := st.locIndex(i)
		if !ok {
			for _, r := range reads {
				r.seg.release()
			}
			g.mu.Unlock()
			return nil, raft.ErrUnavailable
		}
		loc := st.locs[k]
		loc.seg.acquire()
		reads = append(reads, loc)
		out = append(out, nil) // read below
		est += uint64(loc.size) - recHeaderSize
	}
	g.mu.Unlock()

	// The entries read from files come first: the cache is a suffix.
	var err error
	for k, loc := range reads {
		if err == nil {
			out[k], err = g.readEntry(lo+uint64(k), loc)
		}
		loc.seg.release()
	}
	if err != nil {
		return nil, err
	}
	return limitSize(out, maxSize), nil
}

// limitSize returns the longest prefix of ents, at least one entry, whose
// encoded size is at most maxSize, as raft measures it (util.go).
func limitSize(ents []*pb.Entry, maxSize uint64) []*pb.Entry {
	if maxSize == math.MaxUint64 || len(ents) == 0 {
		return ents
	}
	size := uint64(proto.Size(ents[0]))
	for n := 1; n < len(ents); n++ {
		size += uint64(proto.Size(ents[n]))
		if size > maxSize {
			return ents[:n]
		}
	}
	return ents
}

// readEntry reads entry i from the segment loc names.
func (g *Group) readEntry(i uint64, loc entryLoc) (*pb.Entry, error) {
	b := make([]byte, loc.size)
	if _, err := loc.seg.f.ReadAt(b, loc.off); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("raftlog: read entry %d of group %d in %s: %w", i, g.id, loc.seg.name, err)
	}
	r, err := decodeRecord(b, loc.seg.seed)
	if err == nil && (r.kind != kindEntry || r.group != g.id || r.index != i) {
		err = fmt.Errorf("%w: %s record of group %d index %d where entry %d of group %d was written",
			ErrCorrupt, r.kind, r.group, r.index, i, g.id)
	}
	if err != nil {
		return nil, fmt.Errorf("%s offset %d: %w", loc.seg.name, loc.off, err)
	}
	e := entryOf(r)
	if r.body[0]&entryStripped != 0 {
		if e.Data, err = g.join(i, r.term, e.Data); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// entryOf rebuilds an entry from its record; its data aliases the record
// (a stripped entry's: its head).
func entryOf(r record) *pb.Entry {
	e := &pb.Entry{Index: new(r.index), Term: new(r.term)}
	flags, p := r.body[0], 1
	if flags&entryHasType != 0 {
		e.Type = pb.EntryType(r.body[1]).Enum()
		p = 2
	}
	if flags&entryHasData != 0 {
		e.Data = r.body[p:len(r.body):len(r.body)]
	}
	return e
}

// appendEntryBody appends the body of e's record, with data in place of
// e's data: a head if stripped (payloads.go).
func appendEntryBody(dst []byte, e *pb.Entry, data []byte, stripped bool) []byte {
	var flags byte
	if e.Type != nil {
		flags |= entryHasType
	}
	if data != nil {
		flags |= entryHasData
	}
	if stripped {
		flags |= entryStripped
	}
	dst = append(dst, flags)
	if e.Type != nil {
		dst = append(dst, byte(*e.Type))
	}
	return append(dst, data...)
}

// The transitions below apply one record to the state, in memory, in file
// order: at recovery for every record replayed, and on the writer
// goroutine for every record written. The caller holds g.mu.

// appendEntry applies an entry record at loc; e is the entry, cached, or
// nil at recovery. The caller checked i <= last+1 and i >= first.
func (st *groupState) appendEntry(i uint64, loc entryLoc, e *pb.Entry, l *Log) {
	st.truncate(i-1, l)
	st.locs = append(st.locs, loc)
	st.last = i
	if e == nil { // the cache must stay a suffix of the log, with no hole
		st.dropCache(len(st.cache), l)
		return
	}
	st.cacheEntry(e, l)
}

// truncate drops the entries after i.
func (st *groupState) truncate(i uint64, l *Log) {
	if i >= st.last {
		return
	}
	cut := st.last - i
	st.locs = st.locs[:uint64(len(st.locs))-min(cut, uint64(len(st.locs)))]
	n := min(cut, uint64(len(st.cache)))
	for _, e := range st.cache[uint64(len(st.cache))-n:] {
		st.cacheBytes -= entrySize(e)
		l.cacheBytes.Add(-entrySize(e))
	}
	clear(st.cache[uint64(len(st.cache))-n:])
	st.cache = st.cache[:uint64(len(st.cache))-n]
	st.last = i
}

// compact drops the entries up to i, of term t, or all of them (reset).
func (st *groupState) compact(i, t uint64, reset bool, l *Log) {
	switch {
	case reset || i >= st.last:
		st.truncate(i, l) // when i >= last, nothing is left to keep
		st.dropCache(len(st.cache), l)
		st.locs = nil
		st.last = i
	case i+1 > st.first:
		keep := st.last - i
		if uint64(len(st.locs)) > keep {
			st.locs = append([]entryLoc(nil), st.locs[uint64(len(st.locs))-keep:]...)
		}
		if uint64(len(st.cache)) > keep {
			st.dropCache(len(st.cache)-int(keep), l)
		}
	default:
		return // compacted further already
	}
	st.first, st.prevTerm = i+1, t
}

// setSnapshot records a snapshot's metadata and data.
func (st *groupState) setSnapshot(i, t uint64, conf, data []byte) {
	st.snapIndex, st.snapTerm = i, t
	st.snapConf = append([]byte(nil), conf...)
	st.snapData = nil
	if len(data) > 0 {
		st.snapData = append([]byte(nil), data...)
	}
}

// image returns the group's state as a checkpoint holds it.
func (st *groupState) image(id uint64) image {
	m := image{group: id, term: st.term, vote: st.vote, commit: st.commit,
		first: st.first, prevTerm: st.prevTerm, last: st.last,
		snapIndex: st.snapIndex, snapTerm: st.snapTerm, conf: st.snapConf, data: st.snapData}
	if st.damaged != nil {
		m.flags |= imageDamaged
	}
	return m
}

// fromImage starts a group's state from a checkpoint: nothing of its
// entries is known until their records are replayed.
func fromImage(m *image) groupState {
	st := groupState{hasHS: m.term != 0 || m.vote != 0 || m.commit != 0,
		term: m.term, vote: m.vote, commit: m.commit,
		first: m.first, prevTerm: m.prevTerm, last: m.last}
	st.setSnapshot(m.snapIndex, m.snapTerm, m.conf, m.data)
	if m.flags&imageDamaged != 0 {
		st.damaged = fmt.Errorf("%w: group %d was found damaged before", ErrCorrupt, m.group)
	}
	return st
}
