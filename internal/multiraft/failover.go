package multiraft

import (
	"maps"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
)

// Fast failover (design 1.4). When the link to server X goes down and is
// not back within Options.FailoverGrace, every local follower of a group
// led by X forgets its leader, and the follower first in rank among the
// group's other voters (by raft ID) campaigns at once, the k-th after
// k×CampaignStagger if no leader has shown up by then. With PreVote and
// CheckQuorum, followers that forgot their leader grant pre-votes at once,
// so a new leader is elected in a few round trips instead of an election
// timeout; and a wrong suspicion (X is alive, only this link is down)
// disrupts nothing, because X's other followers still hear from it and
// refuse to pre-vote.

// LinkUp records that the link to peer is up (Handler).
func (n *Node) LinkUp(peer uint64) {
	n.links.Lock()
	delete(n.links.down, peer)
	n.links.Unlock()
}

// LinkDown records that the link to peer is down and starts fast failover
// (Handler). The groups this server leads report peer unreachable at once,
// so raft probes it instead of streaming appends into the void.
func (n *Node) LinkDown(peer uint64) {
	if n.isClosed() {
		return
	}
	n.links.Lock()
	n.links.gen++
	gen := n.links.gen
	n.links.down[peer] = gen
	n.links.Unlock()
	for _, g := range n.groups() {
		if g.lead.Load() == n.id {
			g.op(func(rn *raft.RawNode) { rn.ReportUnreachable(peer) })
		}
	}
	n.after(n.opts.FailoverGrace, func() {
		n.links.Lock()
		still := n.links.down[peer] == gen
		n.links.Unlock()
		if still {
			n.failover(peer)
		}
	})
}

// failover forgets dead as the leader of every group it leads here.
func (n *Node) failover(dead uint64) {
	for _, g := range n.groups() {
		if g.lead.Load() == dead {
			g.op(func(rn *raft.RawNode) { n.forgetDead(g, rn, dead) })
		}
	}
}

func (n *Node) forgetDead(g *group, rn *raft.RawNode, dead uint64) {
	st := rn.Status()
	if st.Lead != dead || st.RaftState != raft.StateFollower {
		return
	}
	_ = rn.ForgetLeader()
	if g.held.Load() != uint32(HoldNone) {
		return
	}
	rank := failoverRank(n.id, dead, slices.Collect(maps.Keys(st.Config.Voters.IDs())))
	if rank < 0 {
		return // a learner, or not a member
	}
	if rank == 0 {
		_ = rn.Campaign()
		return
	}
	// The others' turns. The first's pre-vote may have reached a follower
	// before that one forgot the leader, and been refused: the next in
	// rank, a stagger later, finds every follower leaderless, the first
	// one included (a pre-candidate), and wins.
	n.after(time.Duration(rank)*n.opts.CampaignStagger, func() {
		g.op(func(rn *raft.RawNode) {
			bs := rn.BasicStatus()
			leaderless := bs.RaftState == raft.StateFollower || bs.RaftState == raft.StatePreCandidate
			if bs.Lead == raft.None && leaderless && g.held.Load() == uint32(HoldNone) {
				_ = rn.Campaign()
			}
		})
	})
}

// failoverRank returns self's rank among voters other than dead, lowest
// ID first, or -1 if self is not one of them.
func failoverRank(self, dead uint64, voters []uint64) int {
	slices.Sort(voters)
	rank := 0
	for _, id := range voters {
		switch id {
		case dead:
		case self:
			return rank
		default:
			rank++
		}
	}
	return -1
}

// A new group's first election. A group bootstrapped on every replica at
// once (a stream just made) would wait an election timeout, 10 to 20
// ticks, before any replica campaigns, and its stream take no message
// meanwhile: a client that publishes as soon as the stream is made gets
// no responders and retries later (nats.go: after 250 ms). So the voter
// first by raft ID campaigns at once, and again every half tick while no
// leader has shown up (its pre-votes are lost until the other replicas
// have added the group), freshTries times at most; the election timeout
// stays the fallback.

const freshTries = 20

// campaignFresh campaigns for g, a group this server bootstrapped, if it
// is still leaderless and not held, tries times at most.
func (n *Node) campaignFresh(g *group, tries int) {
	g.op(func(rn *raft.RawNode) {
		bs := rn.BasicStatus()
		leaderless := bs.RaftState == raft.StateFollower || bs.RaftState == raft.StatePreCandidate
		if bs.Lead != raft.None || !leaderless || g.held.Load() != uint32(HoldNone) {
			return
		}
		_ = rn.Campaign()
		if tries > 1 {
			n.after(n.opts.Tick/2, func() { n.campaignFresh(g, tries-1) })
		}
	})
}
