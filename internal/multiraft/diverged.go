package multiraft

import (
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// A replica diverges from its group when a quorum loses entries it had
// acknowledged (power lost under a log policy that does not fsync every
// write: allowed, and documented as the policy's cost) and goes on
// without them, writing other entries at their indexes, while this
// replica kept them and applied them. Its log then disagrees with the
// leader's below its own commit index, which raft assumes never happens:
// etcd raft answers an append below the commit index with the commit
// index, unchecked, and the leader takes that as a match of its own
// different entries, counting the replica towards the commit of entries
// only the leader may hold. So the worker checks, before raft sees it,
// an append or snapshot from a leader against the replica's own log at
// and below its commit index: a term that differs there is proof of
// divergence. The replica fails (ErrDiverged, held damaged) without
// answering; its state machine applied entries the group no longer has,
// so only the layer above can repair it, by wiping it (a replica with no
// state catches up from the leader, held wiped).
//
// Only indexes where the log is known to hold what raft holds are
// checked (group.mu.settled): at or below the commit index the replica
// started with (nothing is ever written there again, short of a
// snapshot), or at or below the last index applied since (raft applies
// only what the log holds). Above them a follower may have committed entries
// still on their way to its log, which hold older, overwritten ones
// meanwhile. A term the log no longer holds (compacted below a snapshot)
// proves nothing either. A snapshot past the commit index is taken as
// raft takes it, and the state machine restores it: the layer above
// compares what it restores with the leader's (jetstream's catch-up).

// divergence returns the reason m, from the group's leader, shows this
// replica's committed log disagreeing with the group's, or nil. Called by
// the worker, under g.mu, before m is stepped.
func (g *group) divergence(rn *raft.RawNode, m *raftpb.Message) error {
	var ents []*raftpb.Entry
	prev, prevTerm := m.GetIndex(), m.GetLogTerm()
	switch m.GetType() {
	case raftpb.MsgApp:
		ents = m.GetEntries()
	case raftpb.MsgSnap:
		md := m.GetSnapshot().GetMetadata()
		prev, prevTerm = md.GetIndex(), md.GetTerm()
	default:
		return nil
	}
	bs := rn.BasicStatus()
	g.mu.settled = max(g.mu.settled, bs.Applied)
	settled := g.mu.settled
	if m.GetTerm() < bs.GetTerm() || prev > settled {
		return nil // stale (raft drops it), or nothing settled here in reach
	}
	if err := g.agrees(prev, prevTerm, settled); err != nil {
		return err
	}
	for _, e := range ents {
		if e.GetIndex() > settled {
			break
		}
		if err := g.agrees(e.GetIndex(), e.GetTerm(), settled); err != nil {
			return err
		}
	}
	return nil
}

// agrees returns ErrDiverged if this replica's log holds index, at or
// below settled, with a term other than term.
func (g *group) agrees(index, term, settled uint64) error {
	if index == 0 {
		return nil
	}
	mine, err := g.log.Term(index)
	if err != nil || mine == term {
		return nil
	}
	return fmt.Errorf("%w: the leader has index %d at term %d, this replica committed it at term %d",
		ErrDiverged, index, term, mine)
}
