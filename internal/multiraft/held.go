package multiraft

import (
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// HoldReason says why a replica is held: it may have lost state that it
// acknowledged or voted with, so it must not help elect anyone until it has
// caught up (design 2.5). A held replica is not ticked, so it never
// campaigns; Campaign and TransferLeadership to it are refused; its granted
// MsgVoteResp and MsgPreVoteResp are dropped before they leave the server
// (its vote is still persisted, which is harmless). It keeps replicating.
//
// A wiped or unsynced replica is released once it has applied an entry of
// the term of the leader it follows; a damaged one only by Release, once
// the layer above has rebuilt its state. An unsynced one is also released
// once it has known no leader for Options.HoldTimeout (tickHeld). A leader commits an entry of its own term only when everything
// committed before its election is in its log before it, so the replica
// then holds every entry it could have acknowledged before it lost state.
// This is the "commit index a current-term leader sent it" of the design,
// restricted to a commit that covers the leader's own entry: raft's
// heartbeats carry min(commit, the follower's match), which is 0 for a
// replica that lost its log.
type HoldReason uint32

const (
	// HoldNone is a replica that is not held.
	HoldNone HoldReason = iota
	// HoldWiped is a replica with no state at all, where its server is
	// listed as a peer.
	HoldWiped
	// HoldUnsynced is a replica whose log may miss a tail it had
	// acknowledged: an unclean stop across an operating system restart
	// under a policy that does not fsync every write.
	HoldUnsynced
	// HoldDamaged is a replica whose log or state failed its checksums, or
	// whose log or state machine failed (ErrGroupFailed). Catching up
	// does not repair its state: only Release lifts it.
	HoldDamaged
)

// String returns "none", "wiped", "unsynced" or "damaged".
func (r HoldReason) String() string {
	switch r {
	case HoldNone:
		return "none"
	case HoldWiped:
		return "wiped"
	case HoldUnsynced:
		return "unsynced"
	case HoldDamaged:
		return "damaged"
	}
	return fmt.Sprintf("HoldReason(%d)", uint32(r))
}

// isGrantedVote reports whether m grants a vote or a pre-vote: what a held
// replica must not send.
func isGrantedVote(m *raftpb.Message) bool {
	t := m.GetType()
	return (t == raftpb.MsgVoteResp || t == raftpb.MsgPreVoteResp) && !m.GetReject()
}

// Hold holds a replica of group for reason (not HoldNone), until it
// catches up or Release. A leader that is held hands its leadership to its
// most up-to-date follower.
func (n *Node) Hold(group uint64, reason HoldReason) error {
	if reason == HoldNone {
		return fmt.Errorf("%w: hold without a reason", ErrInvalidGroup)
	}
	g, err := n.lookup(group)
	if err != nil {
		return err
	}
	g.held.Store(uint32(reason))
	g.op(func(rn *raft.RawNode) { handOver(rn, n.id, nil) })
	return nil
}

// Release lifts a hold at once, whatever its reason: for an operator's
// decision, or a timeout that accepts the loss (design 2.5 hold_timeout).
func (n *Node) Release(group uint64) error {
	g, err := n.lookup(group)
	if err != nil {
		return err
	}
	if g.failure() != nil {
		return fmt.Errorf("multiraft: group %d: %w", group, ErrGroupFailed)
	}
	g.held.Store(uint32(HoldNone))
	return nil
}

// Held returns why the replica of group is held (HoldNone if it is not).
func (n *Node) Held(group uint64) (HoldReason, error) {
	g, err := n.lookup(group)
	if err != nil {
		return HoldNone, err
	}
	return HoldReason(g.held.Load()), nil
}

// maybeRelease releases a wiped or unsynced replica once the last entry
// it applied is of the term of the leader it follows: terms only grow
// along the log, so it has applied an entry of that term. It runs on the
// apply goroutine, after entries, a snapshot or a change of leader, so a
// replica that applied the leader's entries before it heard from the
// leader (a replay at start) is released by the leader's first message.
func (g *group) maybeRelease() {
	r := HoldReason(g.held.Load())
	if r != HoldWiped && r != HoldUnsynced {
		return
	}
	lead, term := g.lead.Load(), g.term.Load()
	if lead == raft.None || lead == g.n.id || g.appliedTerm.Load() != term {
		return
	}
	g.held.CompareAndSwap(uint32(r), uint32(HoldNone))
}

// tickHeld runs at each Tick for a held replica. An unsynced one counts
// the ticks it has gone without knowing a leader, and is released once
// they reach the node's hold timeout (design 2.5 hold_timeout): every
// replica of a group whose machines all restarted after an unclean stop
// is held unsynced, so none would ever campaign. That release is the
// documented loss: entries a quorum acknowledged within an fsync interval
// of the power loss may be gone from every log. A replica that hears of a
// leader starts counting again from zero: it catches up instead.
func (n *Node) tickHeld(g *group) {
	if HoldReason(g.held.Load()) != HoldUnsynced || n.holdTicks <= 0 {
		return
	}
	if g.lead.Load() != raft.None {
		g.heldIdle.Store(0)
		return
	}
	if g.heldIdle.Add(1) < n.holdTicks {
		return
	}
	if g.held.CompareAndSwap(uint32(HoldUnsynced), uint32(HoldNone)) {
		n.opts.Logger.Warningf("multiraft: group %d: released from its unsynced hold after %v without a leader; "+
			"entries acknowledged within an fsync interval of the power loss may be lost", g.id, n.opts.HoldTimeout)
	}
}
