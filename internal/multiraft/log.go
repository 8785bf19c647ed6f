package multiraft

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Log is one group's raft log: what raft reads (raft.Storage) and what the
// node writes. store/raftlog's Group is the production Log, through an
// adapter that converts Update to raftlog.Update (the same fields);
// multiraftest.MemDisk has an in-memory one for tests.
//
// raft calls the raft.Storage methods from the worker running the group,
// while a Save may be completing on the log's writer goroutine: they must
// be safe for that, and see a write no later than Save's done runs.
type Log interface {
	raft.Storage
	// Save queues u and returns at once; it must never block. Updates of
	// one group are written in the order they were saved. done runs once u
	// is as durable as the log's policy asks (and always durable when u
	// changes the term or vote, or carries a snapshot: raft.MustSync), on
	// any goroutine but one at a time for a group, with nil or the reason
	// the write failed; it must not block, and does not.
	Save(u Update, done func(error))
}

// RoomLog is a Log with a bounded write queue. When Room reports false the
// worker leaves the group's Ready with raft, which keeps it, until some
// Save completes; Save itself never blocks.
type RoomLog interface {
	Log
	Room() bool
}

// Update is what a MsgStorageAppend asks a group's log to persist, in this
// order: a received snapshot, which replaces the whole log; entries, which
// replace those at their indexes and after (raft's conflicting suffix); a
// HardState. A nil field is nothing to write.
type Update struct {
	Snapshot  *raftpb.Snapshot
	Entries   []*raftpb.Entry
	HardState *raftpb.HardState
}

// UpdateOf returns the update a MsgStorageAppend carries. raft sets the
// term, vote and commit of a MsgStorageAppend all together, or none.
func UpdateOf(m *raftpb.Message) Update {
	u := Update{Entries: m.GetEntries()}
	if m.Term != nil || m.Vote != nil || m.Commit != nil {
		u.HardState = &raftpb.HardState{Term: new(m.GetTerm()), Vote: new(m.GetVote()), Commit: new(m.GetCommit())}
	}
	if s := m.GetSnapshot(); !raft.IsEmptySnap(s) {
		u.Snapshot = s
	}
	return u
}
