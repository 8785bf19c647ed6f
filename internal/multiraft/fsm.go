package multiraft

import "go.etcd.io/raft/v3/raftpb"

// StateMachine is a group's replicated state. Every method runs on the
// group's apply goroutine, one call at a time, in log order; except that
// AddGroup, before the group starts, calls Checkpoint, and Restore if the
// log's snapshot is ahead of it.
type StateMachine interface {
	// Apply applies committed entries, in index order: every entry, of
	// every type, including raft's empty entries and conf changes (which
	// the node then applies to raft itself). Entries at or below
	// Checkpoint may come again after a restart and must be applied
	// idempotently. An error stops the group (ErrGroupFailed): the
	// replica is then broken, and holds (HoldDamaged).
	Apply(ents []*raftpb.Entry) error
	// Restore replaces the state with a snapshot's: one received from the
	// leader, or the log's own when Checkpoint is behind it at start.
	Restore(snap *raftpb.Snapshot) error
	// Checkpoint returns the highest index whose effects are durable in
	// the state machine: raft hands over only entries after it at start.
	Checkpoint() uint64
	// LeaderChanged reports the group's leader (0: none known) and term as
	// this replica learns them, in order with Apply.
	LeaderChanged(leader, term uint64)
}

// FailureListener is a StateMachine that wants to hear that its group
// failed (ErrGroupFailed, wrapping why: ErrDiverged for a replica the
// layer above must wipe). Failed runs once, on a goroutine of its own.
type FailureListener interface {
	Failed(err error)
}
