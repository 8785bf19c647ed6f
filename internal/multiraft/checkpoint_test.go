package multiraft_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A replica's state machine checkpointed past its log's snapshot (the
// checkpoint was durable, the snapshot after it not yet): raft starts
// with the snapshot's members and applies nothing up to the checkpoint,
// so the membership changes in between would be lost and the replica,
// with no members, could never campaign. The node replays the log from
// the first such change, and the replica takes leadership when asked.
func TestCheckpointPastMembershipChanges(t *testing.T) {
	h := threeLedBy1(t)
	h.propose(1, 7, "a")
	h.stabilize()
	h.crash(3)
	h.checkpoints[[2]uint64{3, 7}] = h.servers[3].sms[7].applied
	h.restart(3)
	h.stabilize()
	st, err := h.servers[3].node.Status(7)
	require.NoError(t, err)
	require.Len(t, st.Config.Voters[0], 3, "the members after the restart")
	require.NoError(t, h.servers[1].node.TransferLeadership(7, 3))
	for range 50 {
		if lead, _ := h.leaderOf(7); lead == 3 {
			break
		}
		h.tick()
		h.stabilize()
	}
	lead, _ := h.leaderOf(7)
	require.Equal(t, uint64(3), lead)
	h.propose(3, 7, "b")
	h.settle(100)
}
