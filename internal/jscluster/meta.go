package jscluster

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"github.com/skiffmq/skiff/internal/multiraft"
)

// metaFSM is the meta group's state machine (multiraft.StateMachine): the
// State every server applies the meta log to. Apply, Restore and
// LeaderChanged run on the group's apply goroutine; the Cluster's readers
// take mu.
//
// The state lives in memory. Every SnapshotEntries applied entries it is
// written to a snapshot file and the log is compacted behind it, keeping
// Options.SnapshotKeep entries for followers a little behind; a restart
// restores the last snapshot and replays the log after it.
type metaFSM struct {
	c     *Cluster
	log   fileSnapLog
	every uint64
	keep  uint64

	mu struct {
		sync.RWMutex
		st      State
		applied uint64
	}
	// lastSnap is the index of the last snapshot. Apply goroutine only.
	lastSnap uint64

	waiters struct {
		sync.Mutex
		m map[PropID]chan error
	}
}

var (
	_ multiraft.StateMachine    = (*metaFSM)(nil)
	_ multiraft.FailureListener = (*metaFSM)(nil)
)

func newMetaFSM(c *Cluster, log fileSnapLog) *metaFSM {
	f := &metaFSM{c: c, log: log, every: uint64(c.opts.SnapshotEntries), keep: uint64(c.opts.SnapshotKeep)}
	f.mu.st = newState()
	f.waiters.m = map[PropID]chan error{}
	return f
}

// result is an applied proposal of this server's run and its outcome.
type result struct {
	id  PropID
	err error
}

// Apply applies committed entries: meta entries in normal entries' data
// and in conf changes' context; raft's empty entries change nothing.
func (f *metaFSM) Apply(ents []*raftpb.Entry) error {
	var results []result
	var changed []StreamKey
	f.mu.Lock()
	for _, e := range ents {
		i := e.GetIndex()
		if i <= f.mu.applied {
			continue
		}
		data, err := entryData(e)
		if err != nil {
			f.mu.Unlock()
			return fmt.Errorf("meta entry %d: %w", i, err)
		}
		if len(data) > 0 {
			ent, err := decodeEntry(data)
			if err != nil {
				f.mu.Unlock()
				return fmt.Errorf("meta entry %d: %w", i, err)
			}
			res := f.mu.st.apply(&ent, i)
			if p := ent.Prop; p != nil && p.Server == f.c.id && p.Run == f.c.run {
				results = append(results, result{*p, res})
			}
			if res == nil && ent.Stream != nil {
				changed = append(changed, ent.Stream.Key())
			}
		}
		f.mu.applied = i
	}
	applied := f.mu.applied
	f.mu.Unlock()
	if on := f.c.opts.OnStreams; on != nil && len(changed) > 0 {
		on(changed, false)
	}
	for _, r := range results {
		f.notify(r)
	}
	// The node hands a conf change over as the last entry of a batch, and
	// applies it to raft after Apply returns. The snapshot at its index,
	// with the configuration it makes, is what a server it adds is sent:
	// raft refuses a snapshot whose configuration does not name it.
	switch last := ents[len(ents)-1]; last.GetType() {
	case raftpb.EntryConfChangeV2:
		f.snapshot(last)
	case raftpb.EntryNormal:
		if applied-f.lastSnap >= f.every {
			f.snapshot(nil)
		}
	}
	f.c.wake()
	return nil
}

// entryData returns the meta entry an entry carries, if any.
func entryData(e *raftpb.Entry) ([]byte, error) {
	switch e.GetType() {
	case raftpb.EntryNormal:
		return e.GetData(), nil
	case raftpb.EntryConfChangeV2:
		cc := &raftpb.ConfChangeV2{}
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			return nil, fmt.Errorf("%w: conf change: %w", ErrBadEntry, err)
		}
		return cc.GetContext(), nil
	}
	return nil, nil // a ConfChange (v1) is never proposed here
}

// Restore replaces the state with a snapshot's.
func (f *metaFSM) Restore(snap *raftpb.Snapshot) error {
	st, err := decodeState(snap.GetData())
	if err != nil {
		return err
	}
	i := snap.GetMetadata().GetIndex()
	f.mu.Lock()
	f.mu.st, f.mu.applied = st, i
	f.mu.Unlock()
	f.lastSnap = i
	f.log.files.prune(i, false)
	if on := f.c.opts.OnStreams; on != nil {
		on(nil, true)
	}
	f.c.wake()
	return nil
}

// Checkpoint is 0: the state lives in memory, so at start it is restored
// from the log's snapshot and raft replays what follows.
func (f *metaFSM) Checkpoint() uint64 { return 0 }

// LeaderChanged wakes the cluster's loop: a new leader has members to
// add.
func (f *metaFSM) LeaderChanged(_, _ uint64) { f.c.wake() }

// snapshot writes the state as the group's snapshot and compacts the log
// behind it. cc, if not nil, is the conf change just applied to the state
// and not yet to raft. A failure is logged: the log keeps its entries, and
// a later batch tries again.
func (f *metaFSM) snapshot(cc *raftpb.Entry) {
	f.mu.RLock()
	data, err := encodeState(&f.mu.st)
	i := f.mu.applied
	f.mu.RUnlock()
	var cs *raftpb.ConfState
	if err == nil {
		cs, err = f.c.confState()
	}
	if err == nil && cc != nil {
		cs, err = withConfChange(cs, cc)
	}
	if err == nil {
		err = f.log.createSnapshot(i, cs, data)
	}
	if err != nil {
		f.c.log.Warn("meta snapshot failed", "index", i, "err", err)
		return
	}
	f.lastSnap = i
	if i > f.keep {
		// ErrCompacted: compacted that far already, nothing to do.
		_ = f.log.Compact(i - f.keep)
	}
	f.log.files.prune(i, false)
}

// withConfChange returns cs changed by the conf change entry e: one simple
// change, the only kind this package proposes.
func withConfChange(cs *raftpb.ConfState, e *raftpb.Entry) (*raftpb.ConfState, error) {
	cc := &raftpb.ConfChangeV2{}
	if err := proto.Unmarshal(e.GetData(), cc); err != nil {
		return nil, fmt.Errorf("%w: conf change: %w", ErrBadEntry, err)
	}
	if len(cc.GetChanges()) != 1 || len(cs.GetVotersOutgoing()) > 0 {
		return nil, fmt.Errorf("%w: conf change %d is not one simple change", ErrBadEntry, e.GetIndex())
	}
	ch := cc.GetChanges()[0]
	id := ch.GetNodeId()
	drop := func(ids []uint64) []uint64 {
		return slices.DeleteFunc(slices.Clone(ids), func(x uint64) bool { return x == id })
	}
	add := func(ids []uint64) []uint64 { return slices.Sorted(slices.Values(append(drop(ids), id))) }
	out := &raftpb.ConfState{Voters: drop(cs.GetVoters()), Learners: drop(cs.GetLearners()), AutoLeave: new(false)}
	switch ch.GetType() {
	case raftpb.ConfChangeAddNode:
		out.Voters = add(out.Voters)
	case raftpb.ConfChangeAddLearnerNode:
		out.Learners = add(out.Learners)
	case raftpb.ConfChangeRemoveNode:
	default:
		return nil, fmt.Errorf("%w: conf change %d of type %s", ErrBadEntry, e.GetIndex(), ch.GetType())
	}
	return out, nil
}

// confStateOf returns the conf state of a raft configuration.
func confStateOf(c tracker.Config) *raftpb.ConfState {
	return &raftpb.ConfState{
		Voters:         c.Voters[0].Slice(),
		VotersOutgoing: c.Voters[1].Slice(),
		Learners:       slices.Sorted(maps.Keys(c.Learners)),
		LearnersNext:   slices.Sorted(maps.Keys(c.LearnersNext)),
		AutoLeave:      new(c.AutoLeave),
	}
}

// await registers a waiter for proposal id's result.
func (f *metaFSM) await(id PropID) chan error {
	ch := make(chan error, 1)
	f.waiters.Lock()
	f.waiters.m[id] = ch
	f.waiters.Unlock()
	return ch
}

// forget drops a waiter that stopped waiting.
func (f *metaFSM) forget(id PropID) {
	f.waiters.Lock()
	delete(f.waiters.m, id)
	f.waiters.Unlock()
}

func (f *metaFSM) notify(r result) {
	f.waiters.Lock()
	ch := f.waiters.m[r.id]
	delete(f.waiters.m, r.id)
	f.waiters.Unlock()
	if ch != nil {
		ch <- r.err
	}
}

// state returns a copy of the state and the index it is at.
func (f *metaFSM) state() (State, uint64) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.mu.st.clone(), f.mu.applied
}

// view runs fn with the state and the index it is at, read-locked: fn
// must not keep the state.
func (f *metaFSM) view(fn func(*State, uint64)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(&f.mu.st, f.mu.applied)
}
