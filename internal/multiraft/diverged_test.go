package multiraft_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"

	"github.com/skiffmq/skiff/internal/multiraft"
)

// allowLoss tells the checkers that group's entries after index were
// lost by a quorum's power loss (allowed under a policy that does not
// fsync every write): what was applied there is forgotten, and the
// replicas of exempt, which applied them, are not checked against the
// group's history until wiped.
func (h *harness) allowLoss(group, index uint64, exempt ...uint64) {
	var lost []string
	for i, id := range h.committed[group] {
		if i > index {
			delete(h.committed[group], i)
			if id.data != "" {
				lost = append(lost, id.data)
			}
		}
	}
	h.acked[group] = slices.DeleteFunc(h.acked[group], func(d string) bool { return slices.Contains(lost, d) })
	for _, d := range lost {
		delete(h.ackedSet, d)
	}
	for _, id := range exempt {
		h.exempt[id] = true
	}
}

// A quorum loses power under a policy that does not fsync every write:
// the two replicas lose entries all three had committed, are released
// from their hold when no leader turns up, and the group goes on without
// the entries, writing others at their indexes. The third replica, which
// kept them and applied them, comes back: its log conflicts with the
// leader's below its own commit index. etcd raft would answer the
// leader's appends with its commit index, which the leader takes as a
// match of its own, different, entries (a quorum counting an entry only
// the leader has); the node detects the conflict instead, fails the
// replica (ErrDiverged, held damaged) and never answers. Once wiped, as
// the layer above does, it catches up with the group as it is.
func TestDivergedReplicaFailsInsteadOfMatching(t *testing.T) {
	h, synced := threeWithA(t)
	h.propose(1, 7, "b")
	h.propose(1, 7, "c")
	h.stabilize()
	for _, id := range h.ids {
		require.Equal(t, []string{"a", "b", "c"}, h.servers[id].sms[7].datas, "server %d", id)
	}

	h.crash(3) // clean: it keeps everything
	h.opts.HoldTimeout = 2 * time.Second
	h.powerLoss(1, 7, synced)
	h.powerLoss(2, 7, synced)
	h.allowLoss(7, synced, 3)
	for range 100 {
		if lead, _ := h.leaderOf(7); lead != 0 {
			break
		}
		h.tick()
		h.stabilize()
	}
	lead, _ := h.leaderOf(7)
	require.NotZero(t, lead, "the two released replicas elect a leader")
	for _, d := range []string{"d", "e", "f", "g"} {
		h.propose(lead, 7, d)
	}
	h.stabilize()
	require.Equal(t, []string{"a", "d", "e", "f", "g"}, h.servers[lead].sms[7].datas)

	h.restart(3)
	for range 30 {
		h.tick()
		h.stabilize()
	}
	st, err := h.servers[3].node.Status(7)
	require.NoError(t, err)
	require.ErrorIs(t, st.Err, multiraft.ErrDiverged)
	require.Equal(t, multiraft.HoldDamaged, st.Held)
	lst, err := h.servers[lead].node.Status(7)
	require.NoError(t, err)
	require.Equal(t, raft.StateLeader, lst.RaftState, "the leader keeps its leadership")
	require.Less(t, lst.Progress[3].Match, lst.GetCommit(), "the diverged replica is not counted as holding the leader's entries")

	// The layer above wipes the replica; it catches up from the leader.
	h.exempt[3] = false
	h.wipe(3)
	h.settle(200)
	require.Equal(t, []string{"a", "d", "e", "f", "g"}, h.servers[3].sms[7].datas)
}

// A replica whose log is dropped and which is added again, empty, on its
// running node (the layer above rebuilding it) while its group is idle:
// the leader still counts it as holding its whole log, so it has nothing
// to send it but heartbeats. The worker answers a heartbeat that commits
// past its log with a rejection, and the leader hands its leadership to
// the other follower, whose fresh progress probes the replica from
// scratch: it catches up without another proposal.
func TestEmptiedReplicaOfIdleGroupCatchesUp(t *testing.T) {
	h := threeLedBy1(t)
	h.propose(1, 7, "a")
	h.propose(1, 7, "b")
	h.stabilize()
	s := h.servers[3]
	require.NoError(t, s.node.RemoveGroup(7))
	s.disk.Wipe()
	h.addReplica(s, 7, multiraft.HoldWiped)
	for range 100 {
		if ok, _ := h.converged(); ok {
			break
		}
		h.tick()
		h.stabilize()
	}
	h.requireConverged()
	require.Equal(t, []string{"a", "b"}, s.sms[7].datas)
}
