package multiraft

import (
	"fmt"
	"sync/atomic"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// HoldReason says why a replica is held: it may have lost state that it
// acknowledged or voted with, so it must not help elect anyone until it has
// caught up (design 2.5). A held replica is not ticked, so it never
// campaigns; Campaign and TransferLeadership to it are refused; its granted
// MsgVoteResp and MsgPreVoteResp are dropped before they leave the server
// (its vote is still persisted, which is harmless), except in the last
// phase of a lost replica's hold (HoldVoting). It keeps replicating.
//
// A wiped, unsynced or lost replica is released once it has applied an
// entry of the term of the leader it follows; a damaged one only by
// Release, once the layer above has rebuilt its state. A leader commits an
// entry of its own term only when everything committed before its
// election is in its log before it, so the replica then holds every entry
// it could have acknowledged before it lost state. This is the "commit
// index a current-term leader sent it" of the design, restricted to a
// commit that covers the leader's own entry: raft's heartbeats carry
// min(commit, the follower's match), which is 0 for a replica that lost
// its log.
//
// The losses an fsync policy accepts (unsynced and lost) are also lifted
// by time, so that a group whose every replica lost power elects someone
// (tickHeld): once such a replica has known no leader for
// Options.HoldTimeout it votes (HoldVoting), and after one more it may
// campaign, so that a replica that kept the group's log, not held or
// released at the same time, is elected before one that lost it.
//
// A held replica is not ticked, so raft never notices that its leader
// went silent: the node forgets the leader for it after an election
// timeout without an append or heartbeat from it.
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
	// HoldLost is a replica whose group's log, or its state machine's
	// tail, went with an unsynced tail (an unclean stop across an
	// operating system restart under a policy that does not fsync every
	// write): HoldUnsynced, for a replica that may have lost everything.
	HoldLost
	// HoldVoting is an unsynced or lost replica that went a hold timeout
	// without a leader: it grants votes, still never campaigns, and is
	// released after one more HoldTimeout without a leader.
	HoldVoting
)

// String returns "none", "wiped", "unsynced", "damaged", "lost" or
// "voting".
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
	case HoldLost:
		return "lost"
	case HoldVoting:
		return "voting"
	}
	return fmt.Sprintf("HoldReason(%d)", uint32(r))
}

// isGrantedVote reports whether m grants a vote or a pre-vote: what a held
// replica must not send.
func isGrantedVote(m *raftpb.Message) bool {
	t := m.GetType()
	return (t == raftpb.MsgVoteResp || t == raftpb.MsgPreVoteResp) && !m.GetReject()
}

// mayGrant reports whether a replica held for r sends the votes it grants.
func (r HoldReason) mayGrant() bool { return r == HoldNone || r == HoldVoting }

// byFsync reports whether r is a loss an fsync policy accepts, lifted by
// time as well as by catching up.
func (r HoldReason) byFsync() bool { return r == HoldUnsynced || r == HoldLost || r == HoldVoting }

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
	g.mu.Lock()
	g.heldTerm.Store(g.mu.rn.BasicStatus().GetTerm())
	g.heldLast.Store(g.mu.last)
	g.mu.Unlock()
	g.held.Store(uint32(reason))
	if reason.byFsync() {
		g.watch.Store(true)
	}
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

// maybeRelease releases a wiped, unsynced or lost replica once the last
// entry it applied is of the term of the leader it follows (terms only
// grow along the log, so it has applied an entry of that term), and that
// entry is not one the replica held when it was held: the leader's term is
// above the replica's term then, or the entry's index is past its log's
// last index then. An entry of the same term the replica replays from its
// own log proves nothing: within a term the leader never lowers what it
// counts as the replica's (lostlog.go), so a replica that lost a tail it
// had acknowledged takes nothing past what it kept until a new term, and
// one that takes an entry past it had kept all it acknowledged. It runs
// on the apply goroutine, after entries, a snapshot or a change of leader,
// so a replica that applied the leader's entries before it heard from the
// leader is released by the leader's first message.
// A replica that started held unsynced or lost is watched until then,
// whether or not time released it meanwhile: Options.OnCaughtUp hears of
// it once, so that the layer above stops holding it at its restarts.
func (g *group) maybeRelease() {
	r := HoldReason(g.held.Load())
	watch := g.watch.Load()
	if r == HoldDamaged || !watch && r != HoldWiped && !r.byFsync() {
		return
	}
	lead, term := g.lead.Load(), g.term.Load()
	if lead == raft.None || g.appliedTerm.Load() != term {
		return
	}
	if term <= g.heldTerm.Load() && g.appliedIndex.Load() <= g.heldLast.Load() {
		return // what it held when it was held: a replay
	}
	if lead == g.n.id && r != HoldNone {
		return // a held replica does not lead; it is handing over
	}
	// A loop: tickHeld may move unsynced or lost to voting meanwhile.
	for r != HoldNone && r != HoldDamaged && !g.held.CompareAndSwap(uint32(r), uint32(HoldNone)) {
		r = HoldReason(g.held.Load())
	}
	if watch && g.watch.CompareAndSwap(true, false) {
		if f := g.n.opts.OnCaughtUp; f != nil {
			f(g.id)
		}
	}
}

// tickHeld runs at each Tick for a held replica. It forgets a leader
// that went silent (forgetSilent). An unsynced or lost one counts the
// ticks it has gone without knowing a leader, and moves on once they
// reach the node's hold timeout (design 2.5 hold_timeout): unsynced and
// lost to voting, voting to released. Every replica of a group
// whose machines all restarted after an unclean stop is held, so none
// would ever campaign. That release is the documented loss: entries a
// quorum acknowledged within an fsync interval of the power loss may be
// gone from every log. A replica that hears of a leader starts counting
// again from zero: it catches up instead.
func (n *Node) tickHeld(g *group) {
	n.forgetSilent(g)
	n.nudge(g)
	r := HoldReason(g.held.Load())
	if !r.byFsync() || n.holdTicks <= 0 {
		return
	}
	if g.lead.Load() != raft.None {
		g.heldIdle.Store(0)
		return
	}
	if g.heldIdle.Add(1) < n.holdTicks {
		return
	}
	g.heldIdle.Store(0)
	next := HoldVoting
	if r == HoldVoting {
		next = HoldNone
	}
	if !g.held.CompareAndSwap(uint32(r), uint32(next)) {
		return
	}
	if next == HoldVoting {
		n.opts.Logger.Warningf("multiraft: group %d: held %v and without a leader for %v: "+
			"it now votes, and campaigns itself after %[3]v more", g.id, r, n.opts.HoldTimeout)
		return
	}
	n.opts.Logger.Warningf("multiraft: group %d: released from its hold after %v more without a leader; "+
		"entries acknowledged within an fsync interval of the power loss may be lost", g.id, n.opts.HoldTimeout)
}

// forgetSilent forgets the leader of a held replica that has heard no
// append, heartbeat or snapshot from it for an election timeout: raft does
// so by its ticks, which a held replica does not get. Otherwise a held
// replica whose leader stepped down or died (a partition, not a closed
// link: failover.go) would count that leader as known for good, refuse
// pre-votes as within its lease, and never time out its hold.
func (n *Node) forgetSilent(g *group) {
	lead := g.lead.Load()
	n.afterElection(g, &g.leadQuiet, lead == raft.None || lead == n.id, func(rn *raft.RawNode) {
		if st := rn.BasicStatus(); st.Lead == lead && st.RaftState == raft.StateFollower {
			_ = rn.ForgetLeader()
		}
	})
}

// afterElection counts a tick on c, or zeroes it if reset, and runs f on
// g's worker each time c reaches an election timeout.
func (n *Node) afterElection(g *group, c *atomic.Int64, reset bool, f func(*raft.RawNode)) {
	if reset {
		c.Store(0)
		return
	}
	if c.Add(1) < int64(n.opts.ElectionTicks) {
		return
	}
	c.Store(0)
	g.op(f)
}

// heardFrom notes, for a held replica, a message from the leader it
// follows that shows the leader alive (forgetSilent). Called by the
// worker, under g.mu.
func (g *group) heardFrom(rn *raft.RawNode, m *raftpb.Message) {
	switch m.GetType() {
	case raftpb.MsgApp, raftpb.MsgHeartbeat, raftpb.MsgSnap:
		if m.GetFrom() == rn.BasicStatus().Lead {
			g.leadQuiet.Store(0)
		}
	}
}

// nudge asks the leader of a held replica for an empty entry once the
// replica has gone an election timeout under it, in the term it was held
// in, without applying past what it held: in an idle group nothing else
// would release it (maybeRelease). The ask is a MsgProp of one empty
// entry, sent to the leader (raft does not forward proposals here); the
// leader steps no other proposal from a peer. The empty entry commits
// like any other, past what the replica held, and releases it if it
// holds all it acknowledged (else a rejection below its Match shows the
// leader it lost some, lostlog.go).
func (n *Node) nudge(g *group) {
	lead, term := g.lead.Load(), g.term.Load()
	past := term > g.heldTerm.Load() || g.appliedIndex.Load() > g.heldLast.Load()
	n.afterElection(g, &g.heldWait, lead == raft.None || lead == n.id || past, func(rn *raft.RawNode) {
		if rn.BasicStatus().Lead != lead {
			return
		}
		g.mu.tell = append(g.mu.tell, &raftpb.Message{Type: raftpb.MsgProp.Enum(), To: new(lead), From: new(n.id),
			Entries: []*raftpb.Entry{{Type: raftpb.EntryNormal.Enum()}}})
	})
}

// isNudge reports whether m, a MsgProp, is a held follower's nudge: one
// empty normal entry.
func isNudge(m *raftpb.Message) bool {
	es := m.GetEntries()
	return len(es) == 1 && es[0].GetType() == raftpb.EntryNormal && len(es[0].GetData()) == 0
}
