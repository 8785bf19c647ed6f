package jscluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Membership of a stream's group (design 3.8). The meta state says which
// servers hold a stream (StreamAssignment.Peers); the group's leader makes
// its raft members follow, one change at a time: a server to add becomes a
// learner, then a voter once it holds the leader's log; a voter no longer
// wanted is removed once every wanted server votes. The caller (the
// stream's leader) decides the changes; this file makes them.

// catchUpSlack is how far behind the leader's commit a learner may be and
// still count as caught up: a stream under load commits while the
// learner's acknowledgement is in flight.
const catchUpSlack = 64

// GroupMembers is a stream group's raft membership as this replica knows
// it.
type GroupMembers struct {
	// Voters and Learners are the members by name, sorted.
	Voters, Learners []string
	// CaughtUp are the learners that hold the leader's log (within
	// catchUpSlack entries) over a live link: on the leader only.
	CaughtUp []string
	// Leader reports whether this replica leads the group.
	Leader bool
}

// IsMember reports whether name is a voter or a learner.
func (m GroupMembers) IsMember(name string) bool {
	return slices.Contains(m.Voters, name) || slices.Contains(m.Learners, name)
}

// GroupMembers returns a stream group's membership as this replica knows
// it.
func (c *Cluster) GroupMembers(id uint64) (GroupMembers, error) {
	if id == MetaGroup {
		return GroupMembers{}, fmt.Errorf("%w: the meta group is not a stream's", ErrInvalidOptions)
	}
	st, err := c.node.Status(id)
	if err != nil {
		return GroupMembers{}, err
	}
	m := GroupMembers{Leader: st.RaftState == raft.StateLeader}
	for v := range st.Config.Voters.IDs() {
		m.Voters = append(m.Voters, c.nameOf(v))
	}
	for l := range st.Config.Learners {
		name := c.nameOf(l)
		m.Learners = append(m.Learners, name)
		if pr, ok := st.Progress[l]; ok && m.Leader && pr.RecentActive && pr.Match+catchUpSlack >= st.GetCommit() {
			m.CaughtUp = append(m.CaughtUp, name)
		}
	}
	slices.Sort(m.Voters)
	slices.Sort(m.Learners)
	slices.Sort(m.CaughtUp)
	return m, nil
}

// Membership changes of a stream's group.
const (
	AddLearner = raftpb.ConfChangeAddLearnerNode
	AddVoter   = raftpb.ConfChangeAddNode // a learner's promotion
	RemoveNode = raftpb.ConfChangeRemoveNode
)

// ChangeGroupMember has this server, a stream group's leader, propose one
// membership change of the server name, and waits until raft applied it
// here, ctx expired (a change raft drops, one being pending already, ends
// so) or the leadership was lost (ErrNotLeader).
func (c *Cluster) ChangeGroupMember(ctx context.Context, id uint64, t raftpb.ConfChangeType, name string) error {
	if id == MetaGroup {
		return fmt.Errorf("%w: the meta group is not a stream's", ErrInvalidOptions)
	}
	nid := RaftID(name)
	cc := &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: &t, NodeId: &nid}}}
	if err := c.node.ProposeConfChange(ctx, id, cc); err != nil {
		return fmt.Errorf("%s %s: %w", t, name, err)
	}
	for {
		st, err := c.node.Status(id)
		if err != nil {
			return err
		}
		_, voter := st.Config.Voters.IDs()[nid]
		_, learner := st.Config.Learners[nid]
		switch {
		case t == AddVoter && voter, t == AddLearner && (learner || voter), t == RemoveNode && !voter && !learner:
			return nil
		case st.RaftState != raft.StateLeader:
			return fmt.Errorf("%s %s: %w", t, name, ErrNotLeader)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s %s: not applied: %w", t, name, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// ResendSnapshot has this server, a stream group's leader, send the
// group's latest snapshot to the server name again, if it was sending it
// one.
func (c *Cluster) ResendSnapshot(id uint64, name string) error {
	return c.node.ResendSnapshot(id, RaftID(name))
}

// RemovesMember reports whether a committed entry of a stream's group is
// a membership change that removes name.
func RemovesMember(e *raftpb.Entry, name string) bool {
	var ccs []*raftpb.ConfChangeSingle
	switch e.GetType() {
	case raftpb.EntryConfChange:
		cc := &raftpb.ConfChange{}
		if proto.Unmarshal(e.GetData(), cc) != nil {
			return false
		}
		ccs = cc.AsV2().GetChanges()
	case raftpb.EntryConfChangeV2:
		cc := &raftpb.ConfChangeV2{}
		if proto.Unmarshal(e.GetData(), cc) != nil {
			return false
		}
		ccs = cc.GetChanges()
	}
	nid := RaftID(name)
	for _, s := range ccs {
		if s.GetType() == RemoveNode && s.GetNodeId() == nid {
			return true
		}
	}
	return false
}
