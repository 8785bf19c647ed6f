package jscluster

import (
	"strings"
	"time"

	"go.etcd.io/raft/v3"
)

// GroupState is one raft group as this server's replica of it sees it:
// what nats-server's RAFTZ reports.
type GroupState struct {
	// State is the replica's role, in nats-server's words: LEADER,
	// FOLLOWER or CANDIDATE (a pre-candidate is a candidate).
	State        string
	Size         int // voters
	QuorumNeeded int
	Committed    uint64
	Applied      uint64
	Term         uint64
	Leader       string // "" while none is known
	// LeaderSince is when this replica learned of Leader's leadership
	// (the leader: when it was elected); zero while none is known.
	LeaderSince time.Time
	Vote        string // whom this replica voted for in Term, "" for none
	// Held is why the replica is held ("" when it is not); Err why the
	// group stopped here, if it did.
	Held string
	Err  error
	// Peers are the other members (voters, and learners catching up to
	// become voters), by name.
	Peers map[string]GroupPeer
}

// GroupPeer is another member of a group.
type GroupPeer struct {
	Name string
	// Learner: it takes the log but does not vote yet (a replica being
	// added).
	Learner bool
	// Known: this server has a raft link to it up.
	Known bool
	// Match is the last index the leader knows it holds (on the leader
	// only).
	Match uint64
	// LastSeen is how long since its link last brought a frame (0 without
	// a link).
	LastSeen time.Duration
}

// links returns when each peer's link last brought a frame, and whether
// it is up, by raft ID.
func (c *Cluster) links() (last map[uint64]time.Time, up map[uint64]bool) {
	last = map[uint64]time.Time{}
	for _, ls := range c.tr.Stats() {
		last[ls.Peer] = ls.LastRecv
	}
	up = map[uint64]bool{}
	c.mu.Lock()
	for id, p := range c.mu.peers {
		up[id] = p.up
	}
	c.mu.Unlock()
	return last, up
}

// GroupState returns a group's state on this server, the meta group's
// (MetaGroup) or a stream's.
func (c *Cluster) GroupState(id uint64) (GroupState, error) {
	st, err := c.node.Status(id)
	if err != nil {
		return GroupState{}, err
	}
	gs := GroupState{
		State:     strings.ToUpper(strings.TrimPrefix(st.RaftState.String(), "State")),
		Committed: st.GetCommit(), Applied: st.Applied, Term: st.GetTerm(),
		Peers: map[string]GroupPeer{},
	}
	if gs.State == "PRECANDIDATE" {
		gs.State = "CANDIDATE"
	}
	if st.Lead != raft.None {
		gs.Leader = c.nameOf(st.Lead)
		gs.LeaderSince = st.LeaderSince
	}
	if st.GetVote() != raft.None {
		gs.Vote = c.nameOf(st.GetVote())
	}
	if st.Held != 0 {
		gs.Held = st.Held.String()
	}
	gs.Err = st.Err
	last, up := c.links()
	now := time.Now()
	members := st.Config.Voters.IDs()
	gs.Size = len(members)
	for pid := range st.Config.Learners {
		members[pid] = struct{}{}
	}
	for pid := range members {
		if pid == c.id {
			continue
		}
		_, learner := st.Config.Learners[pid]
		p := GroupPeer{Name: c.nameOf(pid), Known: up[pid], Learner: learner}
		if pr, ok := st.Progress[pid]; ok {
			p.Match = pr.Match
		}
		if t, ok := last[pid]; ok && p.Known {
			p.LastSeen = now.Sub(t)
		}
		gs.Peers[p.Name] = p
	}
	gs.QuorumNeeded = gs.Size/2 + 1
	return gs, nil
}
