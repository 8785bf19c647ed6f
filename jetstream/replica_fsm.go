package jetstream

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/internal/multiraft"
	"github.com/skiffmq/skiff/store"
)

// replicaFSM is a replicated stream's state machine on one replica: it
// applies the committed ops of the stream's raft group (replica_ops.go)
// to the replica's store, in log order, on the group's apply goroutine.
// Every op names the sequences it touches, so applying one again (the
// log replayed after a restart from an older checkpoint) changes
// nothing: AppendAt skips what is stored, a removal of what is gone is
// no removal, a purge below a bound is the same purge twice.
//
// An op that cannot be applied (unreadable, or a store that cannot
// follow its leader: store.ErrDiverged) stops the group on this replica
// (multiraft holds it as damaged); a disk error does too, as the store
// would otherwise skip what the others applied.
type replicaFSM struct {
	store *store.Stream
	// applied is the last index applied; checkpoint the index this
	// replica's store was known durable at when it opened (its
	// checkpoint file, replica_checkpoint.go), which raft starts after.
	applied    atomic.Uint64
	checkpoint uint64
	// onApplied, if set, hears each op once applied (or failed), with its
	// log index: the proposer's waiters (PubAcks) and the consumers.
	onApplied func(op *replicaOp, index uint64, err error)
	// onConfig, if set, applies an opConfig's configuration, at its log
	// index (the stream's subscriptions, limits and meta.json).
	onConfig func(config []byte, index uint64) error
	// onLeader, if set, hears the group's leader and term.
	onLeader func(leader, term uint64)
	// onEmpty, if set, hears an empty entry applied, with its term: a
	// leader's first of its term, after which its store has everything
	// committed before it.
	onEmpty func(term uint64)
	// catchUp brings the store to the state of a snapshot, from a peer
	// (replica_catchup.go).
	catchUp func(d *replicaSnapshot) error
	// onMember, if set, hears a membership change applied (before raft
	// applies it).
	onMember func(e *raftpb.Entry)
	// onFailed, if set, hears that the group failed on this replica
	// (multiraft.FailureListener).
	onFailed func(err error)
	// cons is the stream's durable consumers as applied
	// (replica_consumers.go).
	cons *replicaConsumers
	// writes holds ops that write the store's files at once while a
	// checkpoint holds its writes (replica_checkpoint.go).
	writes writeGate
	// syncLog, if set (a policy that acknowledges before fsyncing),
	// fsyncs the group's raft log before an op that writes the store's
	// files at once applies: a purge or a delete removes files, at once
	// durable, and its entry must not be less so. Otherwise a power loss
	// could take the entry from every log while stores that applied it
	// keep its effect, and a replica that had not applied it would never
	// get it: it would keep what the others removed, for good
	// (TestClusterReplicatedPurgeSurvivesPowerLoss).
	syncLog func() error
	// opened, if set, is closed by start, once the replica runs: Apply
	// waits for it. A server opens its replicas before its cluster
	// listener, so a catch-up from peers inside Apply before then could
	// not reach them, and would hold up start (and the server) forever.
	opened chan struct{}
	// msgs is the room an opMsgs op's messages are decoded into, kept
	// from one op to the next (decodeOpInto); used by Apply only.
	msgs []replicaMsg

	// restore holds a snapshot installed and not yet caught up with: the
	// store is behind it, so nothing after it is applied before catchUp
	// succeeds. Restore at start (inside AddGroup) only records it; the
	// replica, once started, catches up on a goroutine of its own, or the
	// next Apply does.
	restore struct {
		sync.Mutex
		pending *replicaSnapshot
		started bool
		busy    atomic.Bool // pending is set
	}
}

var (
	_ multiraft.StateMachine    = (*replicaFSM)(nil)
	_ multiraft.FailureListener = (*replicaFSM)(nil)
)

// Failed hears that the group failed on this replica.
func (f *replicaFSM) Failed(err error) {
	if f.onFailed != nil {
		f.onFailed(err)
	}
}

// errStaleTerm: an op decided in one term and appended by raft in
// another, skipped by every replica (see replica_ops.go).
var errStaleTerm = errors.New("jetstream: replica op of an earlier term")

// errNoBound refuses a purge or remove op that does not bound what it
// removes: applied again after more messages, it would remove them too.
var errNoBound = errors.New("jetstream: replica op without a sequence bound")

// Apply applies committed entries (multiraft.StateMachine), after
// catching up with a snapshot installed, if one is pending.
func (f *replicaFSM) Apply(ents []*raftpb.Entry) error {
	if f.opened != nil {
		<-f.opened
	}
	f.restore.Lock()
	defer f.restore.Unlock()
	if err := f.restorePendingLocked(); err != nil {
		return err
	}
	for _, e := range ents {
		if e.GetType() == raftpb.EntryNormal && len(e.GetData()) == 0 && f.onEmpty != nil {
			f.onEmpty(e.GetTerm())
		}
		if t := e.GetType(); (t == raftpb.EntryConfChange || t == raftpb.EntryConfChangeV2) && f.onMember != nil {
			f.onMember(e)
		}
		if e.GetType() == raftpb.EntryNormal && len(e.GetData()) > 0 {
			op, err := decodeOpInto(e.GetData(), f.msgs)
			stale := err == nil && op.term != e.GetTerm()
			switch {
			case stale:
				err = errStaleTerm
			case err == nil:
				err = f.apply(&op, e.GetIndex())
			}
			if f.onApplied != nil {
				f.onApplied(&op, e.GetIndex(), err)
			}
			f.keepMsgs(&op, err)
			if err != nil && !stale {
				return fmt.Errorf("stream replica at index %d: %w", e.GetIndex(), err)
			}
		}
		f.applied.Store(e.GetIndex())
	}
	// The batch's appends, buffered by the store, go to its file with
	// one write (replicaWriteBuffer).
	if err := f.store.Flush(); err != nil && !errors.Is(err, store.ErrClosed) {
		return fmt.Errorf("stream replica: %w", err)
	}
	return nil
}

// maxKeptMsgs bounds the room for messages Apply keeps between ops.
const maxKeptMsgs = 8192

// keepMsgs keeps op's messages' room for the next op's, once op was
// applied: an opMsgs op's messages are read by onApplied and kept by
// nothing after it (a message's strings are its own), unlike other ops,
// which their proposers' waiters may hold. The room is cleared, so that it
// does not keep the entry its messages' bytes alias. An op that failed
// keeps its room: something may hold it still.
func (f *replicaFSM) keepMsgs(op *replicaOp, err error) {
	switch {
	case op.kind != opMsgs:
	case err != nil:
		f.msgs = nil
	case cap(op.msgs) <= maxKeptMsgs:
		clear(op.msgs)
		f.msgs = op.msgs[:0]
	}
}

// apply applies one op, at index, to the store or the consumers.
func (f *replicaFSM) apply(op *replicaOp, index uint64) error {
	if writesAtOnce(op) {
		f.writes.wait()
		if f.syncLog != nil {
			if err := f.syncLog(); err != nil {
				return fmt.Errorf("raft log sync before an op that writes the store at once: %w", err)
			}
		}
	}
	s := f.store
	switch op.kind {
	case opMsgs:
		// An op applies only in the term of its entry (Apply): what its
		// entry staged has this key.
		key := store.StageKey{Index: index, Term: op.term}
		for i := range op.msgs {
			m := &op.msgs[i]
			// Staged when the log took it (replica_payloads.go): the
			// store finds the record and commits it; else it writes it.
			if err := s.AppendStaged(key, m.seq, m.ts, m.subj, m.hdr, m.data, time.Duration(m.ttl)); err != nil {
				return fmt.Errorf("message %d: %w", m.seq, err)
			}
			if err := f.rollup(m); err != nil {
				return err
			}
			if m.flags&msgNoInterest != 0 {
				if err := s.Remove(m.seq); err != nil && !errors.Is(err, store.ErrNotFound) {
					return fmt.Errorf("message %d without interest: %w", m.seq, err)
				}
			}
		}
	case opRemove:
		for _, seq := range op.seqs {
			remove := s.Remove
			if op.persist {
				remove = s.Delete
			}
			if err := remove(seq); err != nil && !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("remove %d: %w", seq, err)
			}
		}
	case opPurge:
		if op.below == 0 {
			return errNoBound
		}
		n, err := s.Purge(store.PurgeRequest{Subject: op.subject, Seq: op.below})
		if err != nil {
			return fmt.Errorf("purge: %w", err)
		}
		op.purged = n
	case opConfig:
		if f.onConfig == nil {
			return fmt.Errorf("%w: a configuration this replica cannot apply", errBadOp)
		}
		return f.onConfig(op.config, index)
	case opTick:
		n, err := s.AdvanceTime(op.now)
		if err != nil {
			return fmt.Errorf("tick: %w", err)
		}
		op.purged = uint64(n)
	case opExpire:
		return f.expire(op)
	case opConsumer:
		if f.cons == nil {
			return fmt.Errorf("%w: a consumer op this replica cannot apply", errBadOp)
		}
		return f.cons.apply(op, index)
	default:
		// A replica does not skip what it cannot do.
		return fmt.Errorf("%w: kind %d is not applied by this version", errBadOp, op.kind)
	}
	return nil
}

// expire applies an expiry round the leader planned: its removals and
// markers (store.ApplyExpiry), then the removal of the markers no
// consumer wanted under interest retention, as a publish without
// interest is removed.
func (f *replicaFSM) expire(op *replicaOp) error {
	if len(op.replaced) != len(op.msgs) {
		return fmt.Errorf("%w: %d markers replacing %d messages", errBadOp, len(op.msgs), len(op.replaced))
	}
	plan := store.ExpiryPlan{Now: op.now, Removed: op.seqs}
	for i := range op.msgs {
		m := &op.msgs[i]
		plan.Markers = append(plan.Markers, store.Marker{Seq: m.seq, Subject: m.subj, Replaced: op.replaced[i],
			Timestamp: m.ts, TTL: time.Duration(m.ttl)})
	}
	ev, err := f.store.ApplyExpiry(plan)
	if err != nil {
		return fmt.Errorf("expire: %w", err)
	}
	op.purged = uint64(len(ev.Removed))
	for i := range op.msgs {
		if m := &op.msgs[i]; m.flags&msgNoInterest != 0 {
			if err := f.store.Remove(m.seq); err != nil && !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("marker %d without interest: %w", m.seq, err)
			}
		}
	}
	return nil
}

// rollup purges what a rollup message replaces: the subject's earlier
// messages, or the stream's, below the message's own sequence.
func (f *replicaFSM) rollup(m *replicaMsg) error {
	var req store.PurgeRequest
	switch {
	case m.flags&msgRollupAll != 0:
		req = store.PurgeRequest{Seq: m.seq}
	case m.flags&msgRollupSubject != 0:
		req = store.PurgeRequest{Subject: m.subj, Seq: m.seq}
	default:
		return nil
	}
	if _, err := f.store.Purge(req); err != nil {
		return fmt.Errorf("rollup at %d: %w", m.seq, err)
	}
	return nil
}

// Restore installs a snapshot (multiraft.StateMachine): the store is
// brought to a peer's before anything after the snapshot applies.
func (f *replicaFSM) Restore(snap *raftpb.Snapshot) error {
	d, err := decodeReplicaSnapshot(snap)
	if err != nil {
		return err
	}
	f.restore.Lock()
	defer f.restore.Unlock()
	f.restore.pending = d
	f.restore.busy.Store(true)
	if !f.restore.started {
		return nil // at start: caught up once the replica runs
	}
	return f.restorePendingLocked()
}

// start marks the replica running (its group added) and reports whether
// a snapshot is pending, to be caught up with on a goroutine of its own.
func (f *replicaFSM) start() bool {
	f.restore.Lock()
	defer f.restore.Unlock()
	if !f.restore.started && f.opened != nil {
		close(f.opened)
	}
	f.restore.started = true
	return f.restore.pending != nil
}

// restorePending catches up with a pending snapshot, if any (a
// replica's goroutine, at start).
func (f *replicaFSM) restorePending() error {
	f.restore.Lock()
	defer f.restore.Unlock()
	return f.restorePendingLocked()
}

// restorePendingLocked catches up with the pending snapshot. f.restore
// held.
func (f *replicaFSM) restorePendingLocked() error {
	d := f.restore.pending
	if d == nil {
		return nil
	}
	if f.catchUp == nil {
		return fmt.Errorf("%w: a snapshot (at index %d) this replica cannot install", errBadOp, d.Index)
	}
	if err := f.catchUp(d); err != nil {
		return fmt.Errorf("catch up with snapshot %d: %w", d.Index, err)
	}
	if f.cons != nil {
		// The consumers as the snapshot's taker had them: the entries
		// after the snapshot apply over them exactly.
		if err := f.cons.install(d.Consumers); err != nil {
			return fmt.Errorf("snapshot %d: %w", d.Index, err)
		}
	}
	f.restore.pending = nil
	f.restore.busy.Store(false)
	if d.Index > f.applied.Load() {
		f.applied.Store(d.Index)
	}
	return nil
}

// restoring reports whether a snapshot is pending: the store is behind
// the log.
func (f *replicaFSM) restoring() bool { return f.restore.busy.Load() }

// Checkpoint returns the index up to which the store had every op's
// effect on disk when the replica opened (0: none, the whole log is
// replayed; every op is idempotent either way).
func (f *replicaFSM) Checkpoint() uint64 { return f.checkpoint }

// LeaderChanged hears the group's leader (multiraft.StateMachine).
func (f *replicaFSM) LeaderChanged(leader, term uint64) {
	if f.onLeader != nil {
		f.onLeader(leader, term)
	}
}
