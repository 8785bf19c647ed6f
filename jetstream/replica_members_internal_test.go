package jetstream

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/internal/jscluster"
)

// TestNextMemberChange: the leader's next membership change toward the
// stream's peers: learners first, promotions once caught up, removals
// only once every wanted server votes, the leader itself last (it hands
// over: "me").
func TestNextMemberChange(t *testing.T) {
	m := func(voters, learners, caughtUp []string) jscluster.GroupMembers {
		return jscluster.GroupMembers{Voters: voters, Learners: learners, CaughtUp: caughtUp, Leader: true}
	}
	abc := []string{"a", "b", "c"}
	for _, tc := range []struct {
		name    string
		members jscluster.GroupMembers
		want    []string
		change  raftpb.ConfChangeType
		who     string
	}{
		{"nothing to do", m(abc, nil, nil), abc, 0, ""},
		{"scale up: learners first", m(abc, nil, nil), []string{"a", "b", "c", "e", "d"}, jscluster.AddLearner, "d"},
		{"a learner behind waits", m(abc, []string{"d"}, nil), []string{"a", "b", "c", "d"}, 0, ""},
		{"a caught up learner votes", m(abc, []string{"d"}, []string{"d"}), []string{"a", "b", "c", "d"}, jscluster.AddVoter, "d"},
		{"no removal before the replacement votes", m(abc, []string{"d"}, nil), []string{"a", "c", "d"}, 0, ""},
		{"a replaced voter goes", m([]string{"a", "b", "c", "d"}, nil, nil), []string{"a", "c", "d"}, jscluster.RemoveNode, "b"},
		{"scale down: one voter at a time", m(abc, nil, nil), []string{"a"}, jscluster.RemoveNode, "b"},
		{"scale down: then the next", m([]string{"a", "c"}, nil, nil), []string{"a"}, jscluster.RemoveNode, "c"},
		{"the leader unwanted hands over last", m([]string{"a", "b", "c", "d"}, nil, nil), []string{"b", "c", "d"}, 0, "a"},
		{"others unwanted go before the leader", m([]string{"a", "b", "c"}, nil, nil), []string{"c"}, jscluster.RemoveNode, "b"},
		{"an unwanted learner goes", m(abc, []string{"e"}, nil), abc, jscluster.RemoveNode, "e"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			change, who := nextMemberChange(tc.members, tc.want, "a")
			require.Equal(t, tc.who, who)
			if who != "" && who != "a" {
				require.Equal(t, tc.change, change)
			}
		})
	}
}
