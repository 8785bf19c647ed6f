package jscluster_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/internal/clustertest"
)

// listFSM is a stream group's state machine for tests: the data of the
// entries it applied, in order. It replays nothing (Checkpoint 0), so a
// restart applies the whole log again, from an empty list.
type listFSM struct {
	mu   sync.Mutex
	data []string
}

func (f *listFSM) Apply(ents []*raftpb.Entry) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range ents {
		if e.GetType() == raftpb.EntryNormal && len(e.GetData()) > 0 {
			f.data = append(f.data, string(e.GetData()))
		}
	}
	return nil
}

func (f *listFSM) Restore(*raftpb.Snapshot) error { return nil }
func (f *listFSM) Checkpoint() uint64             { return 0 }
func (f *listFSM) LeaderChanged(uint64, uint64)   {}

func (f *listFSM) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.data)
}

// TestStreamGroups: a stream group on three servers of the meta group,
// over their raft links and WAL, elects a leader, replicates what it
// proposes, goes on when its leader's server stops, and catches the
// server up from the log when it returns.
func TestStreamGroups(t *testing.T) {
	m := startMeta(t, 3)
	m.waitFormed(t)
	const group = 1000
	var names []string
	for i := range 3 {
		names = append(names, m.Servers[i].Name())
	}
	fsms := make([]*listFSM, 3)
	for i := range 3 {
		fsms[i] = &listFSM{}
		require.NoError(t, m.r(i).AddGroup(group, names, fsms[i]))
	}
	leader := func() int {
		var idx int
		require.Eventually(t, func() bool {
			for i := range 3 {
				if m.Servers[i] == nil {
					continue
				}
				name, _ := m.r(i).GroupLeader(group)
				if name == names[i] {
					idx = i
					return true
				}
			}
			return false
		}, clustertest.Wait, 10*time.Millisecond, "no leader of the stream group")
		return idx
	}
	propose := func(want []string, data string) {
		t.Helper()
		l := leader()
		require.NoError(t, m.r(l).ProposeGroup(group, []byte(data), func(error) {}))
		require.Eventually(t, func() bool {
			for i, f := range fsms {
				if m.Servers[i] != nil && !slices.Equal(f.list(), want) {
					return false
				}
			}
			return true
		}, clustertest.Wait, 10*time.Millisecond, "%q applied everywhere", data)
	}
	var want []string
	for k := range 5 {
		want = append(want, fmt.Sprintf("op-%d", k))
		propose(want, want[k])
	}
	none, _ := m.r(0).GroupLeader(group + 1)
	require.Empty(t, none, "no group, no leader")

	// The leader's server stops: the other two elect another and go on.
	l := leader()
	m.Stop(t, l)
	want = append(want, "while-down")
	propose(want, "while-down")

	// It comes back: the group is added again from its log in the WAL,
	// with no peers given, and it catches up.
	m.Restart(t, l)
	fsms[l] = &listFSM{}
	require.NoError(t, m.r(l).AddGroup(group, nil, fsms[l]))
	want = append(want, "after")
	propose(want, "after")

	require.Error(t, m.r(0).AddGroup(1, names, &listFSM{}), "the meta group is not a stream's")
	require.NoError(t, m.r(0).RemoveGroup(group))
	name, _ := m.r(0).GroupLeader(group)
	require.Empty(t, name)
}
