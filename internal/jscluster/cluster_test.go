package jscluster_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/internal/jscluster"
)

// TestMetaForms: 3 and 5 servers, started one after the other with the
// first as everyone's seed, form one meta group: the seed founds it, every
// other server joins as a learner and is promoted to voter, and all agree
// on the group's ID, its servers and its one leader.
func TestMetaForms(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("servers=%d", n), func(t *testing.T) {
			m := startMeta(t, n)
			m.waitFormed(t)
			st, _ := m.r(0).State()
			require.NotEmpty(t, st.ID)
			require.Len(t, st.Servers, n)
			for i := range n {
				name := m.Servers[i].Name()
				require.Equal(t, jscluster.RaftID(name), st.Servers[name].ID)
				require.Equal(t, st.ID, m.r(i).MetaID())
			}
		})
	}
}

// TestMetaProposeApplied: entries proposed on the leader are applied on
// every server, with their results told to the proposer; a follower
// refuses to propose.
func TestMetaProposeApplied(t *testing.T) {
	m := startMeta(t, 3)
	l := m.waitFormed(t)
	follower := (l + 1) % 3

	require.ErrorIs(t, m.propose(t, follower, assign("$G", "F")), jscluster.ErrNotLeader)
	require.NoError(t, m.propose(t, l, assign("$G", "ORDERS", "s2")))
	m.waitApplied(t, "$G", "ORDERS", false)
	require.ErrorIs(t, m.propose(t, l, assign("$G", "ORDERS", "s3")), jscluster.ErrStreamExists)
	require.NoError(t, m.propose(t, l, assign("ACC", "ORDERS", "s3")), "another account's stream of the same name")

	up := assign("$G", "ORDERS", "s1")
	up.Op = jscluster.OpUpdateStream
	require.NoError(t, m.propose(t, l, up))
	gone := assign("$G", "GONE")
	gone.Op = jscluster.OpUpdateStream
	require.ErrorIs(t, m.propose(t, l, gone), jscluster.ErrStreamNotFound)

	var group uint64
	require.Eventually(t, func() bool {
		for _, i := range m.live() {
			st, _ := m.r(i).State()
			sa := st.Streams[jscluster.StreamKey{Account: "$G", Name: "ORDERS"}]
			if sa == nil || len(sa.Peers) != 1 || sa.Peers[0] != "s1" || len(st.Streams) != 2 {
				return false
			}
			if group != 0 && sa.Group != group {
				return false
			}
			group = sa.Group
		}
		return group > 1
	}, clustertest.Wait, 10*time.Millisecond, "the update is not applied alike everywhere")

	rm := assign("$G", "ORDERS")
	rm.Op = jscluster.OpRemoveStream
	require.NoError(t, m.propose(t, l, rm))
	m.waitApplied(t, "$G", "ORDERS", true)
	require.ErrorIs(t, m.propose(t, l, rm), jscluster.ErrStreamNotFound)
}
