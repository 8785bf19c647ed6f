package jscluster_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/internal/jscluster"
	"github.com/skiffmq/skiff/internal/multiraft"
	"github.com/skiffmq/skiff/server"
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

// TestMetaLeaderFailover: when the meta leader shuts down, the others
// elect a new one at once (the links to it close, and fast failover does
// not wait for an election timeout), which takes proposals.
func TestMetaLeaderFailover(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("servers=%d", n), func(t *testing.T) {
			m := startMeta(t, n)
			old := m.waitFormed(t)
			require.NoError(t, m.propose(t, old, assign("$G", "BEFORE")))
			start := time.Now()
			m.Stop(t, old)
			l := m.waitLeader(t)
			took := time.Since(start)
			t.Logf("new leader %s after %v", m.Servers[l].Name(), took)
			// An election timeout is 10 to 20 ticks; failover needs none.
			require.Less(t, took, 10*tick+time.Second, "failover waited for an election timeout")
			require.NoError(t, m.propose(t, l, assign("$G", "AFTER")))
			m.waitApplied(t, "$G", "AFTER", false)
			m.waitApplied(t, "$G", "BEFORE", false)
		})
	}
}

// TestMetaRestart: a server restarted from its WAL is back in the meta
// group at once (not joined again), catches up with what it missed, past
// snapshots and compactions; a whole cluster restarted is the same group
// with the same state.
func TestMetaRestart(t *testing.T) {
	m := startMeta(t, 3)
	l := m.waitFormed(t)
	id := m.r(0).MetaID()
	for i := range 20 {
		require.NoError(t, m.propose(t, l, assign("$G", fmt.Sprintf("S%d", i))))
	}
	f := (l + 1) % 3
	before := m.waitSameState(t)
	m.Stop(t, f)
	l = m.waitLeader(t)
	for i := range 20 {
		require.NoError(t, m.propose(t, l, assign("ACC", fmt.Sprintf("T%d", i))))
	}
	m.Restart(t, f)
	require.Equal(t, id, m.r(f).MetaID(), "the meta state comes back from the WAL at Start")
	after := m.waitSameState(t)
	require.Len(t, after.Streams, 40)
	require.Equal(t, before.Servers, after.Servers, "the restarted server was not joined again")
	m.waitFormed(t)

	m.RestartAll(t)
	m.waitFormed(t)
	again := m.waitSameState(t)
	require.Equal(t, id, again.ID)
	require.Equal(t, after, again)
}

// TestMetaWipedServer: a server that lost its raft directory comes back
// empty, is held until it caught up (it never votes with what it lost),
// and gets the state from the leader.
func TestMetaWipedServer(t *testing.T) {
	m := startMeta(t, 3)
	l := m.waitFormed(t)
	for i := range 20 {
		require.NoError(t, m.propose(t, l, assign("$G", fmt.Sprintf("S%d", i))))
	}
	f := (l + 1) % 3
	before := m.waitSameState(t)
	m.Stop(t, f)
	m.dirs[f] = t.TempDir()
	m.Restart(t, f)
	st := m.waitSameState(t)
	require.Len(t, st.Streams, 20)
	require.Equal(t, before.Servers, st.Servers, "the wiped server is the member it was, not a new one")
	m.waitFormed(t)
	l = m.waitLeader(t)
	require.NoError(t, m.propose(t, l, assign("$G", "LAST")))
	m.waitApplied(t, "$G", "LAST", false)
}

// TestMetaRefusesOtherGroup: a server that founded a meta group of its own
// (alone, then restarted with a route to a cluster that has another) is
// refused by every server of that cluster, whichever side dials the raft
// link, and never becomes a member; the cluster's group goes on.
func TestMetaRefusesOtherGroup(t *testing.T) {
	for _, name := range []string{"a0", "x9"} { // dials the cluster's servers; is dialed by them
		t.Run(name, func(t *testing.T) {
			m := startMeta(t, 3)
			l := m.waitFormed(t)
			dir := t.TempDir()
			alone := startLone(t, name, dir, nil)
			require.Eventually(t, alone.IsLeader, clustertest.Wait, 10*time.Millisecond, "the lone server founds its group")
			other := alone.MetaID()
			require.NotEqual(t, m.r(0).MetaID(), other)
			alone.shutdown()

			joined := startLone(t, name, dir, []string{m.Servers[0].RouteURL()})
			require.Equal(t, other, joined.MetaID())
			refused := func() uint64 {
				n := joined.Stats().LinksRefused
				for _, i := range m.live() {
					n += m.r(i).Stats().LinksRefused
				}
				return n
			}
			require.Eventually(t, func() bool { return refused() >= 3 }, clustertest.Wait, 10*time.Millisecond,
				"the links between the two groups were not refused")
			require.NoError(t, m.propose(t, l, assign("$G", "STILL")))
			m.waitApplied(t, "$G", "STILL", false)
			st, _ := m.r(l).State()
			require.NotContains(t, st.Servers, name)
			mem, err := m.r(l).Members()
			require.NoError(t, err)
			require.Len(t, mem.Voters, 3)
			require.Empty(t, mem.Learners)
			require.Empty(t, joined.Stats().LinksUp)
		})
	}
}

// TestStartRefused: the raft layer needs a clustered server with a name,
// and a raft directory of its own.
func TestStartRefused(t *testing.T) {
	clustered := func(name string) server.Options {
		o := server.Options{Host: "127.0.0.1", Port: server.RandomPort, ServerName: name}
		o.Cluster.Host, o.Cluster.Port = "127.0.0.1", server.RandomPort
		return o
	}
	claimed := t.TempDir()
	s, err := server.New(clustered("s1"))
	require.NoError(t, err)
	c, err := jscluster.Start(s, testOptions(claimed, "s1"))
	require.NoError(t, err)
	require.NoError(t, c.Close())

	tests := []struct {
		name string
		opts server.Options
		dir  string
		want error
	}{
		{"not clustered", server.Options{ServerName: "s1"}, t.TempDir(), jscluster.ErrNotClustered},
		{"no server name", clustered(""), t.TempDir(), jscluster.ErrNoServerName},
		{"another server's directory", clustered("s2"), claimed, jscluster.ErrRenamed},
		{"no directory", clustered("s1"), "", jscluster.ErrInvalidOptions},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := server.New(tt.opts)
			require.NoError(t, err)
			_, err = jscluster.Start(s, jscluster.Options{Dir: tt.dir})
			require.ErrorIs(t, err, tt.want)
		})
	}
}

// TestCalls: a server calls another over their raft link and gets its
// handler's answer, or its failure; a server without a link to the callee
// fails at once.
func TestCalls(t *testing.T) {
	m := startMeta(t, 3)
	m.waitFormed(t)
	for i := range 3 {
		name := m.Servers[i].Name()
		m.r(i).HandleCalls(func(from string, req []byte) ([]byte, error) {
			if string(req) == "fail" {
				return nil, errors.New("as asked")
			}
			return []byte(name + " answers " + from + ": " + string(req)), nil
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), clustertest.Wait)
	defer cancel()
	var wg sync.WaitGroup
	for i := range 3 {
		for j := range 3 {
			if i == j {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range 20 {
					req := fmt.Sprintf("q%d", k)
					ans, err := m.r(i).Call(ctx, m.Servers[j].Name(), []byte(req))
					assert.NoError(t, err)
					assert.Equal(t, fmt.Sprintf("s%d answers s%d: %s", j+1, i+1, req), string(ans))
				}
			}()
		}
	}
	wg.Wait()
	_, err := m.r(0).Call(ctx, "s2", []byte("fail"))
	require.ErrorIs(t, err, jscluster.ErrCallFailed)
	require.ErrorContains(t, err, "as asked")
	_, err = m.r(0).Call(ctx, "nobody", nil)
	require.ErrorIs(t, err, multiraft.ErrNoLink)
}

// TestMetaPartition: the raft links of a minority holding the meta leader
// are cut: the majority elects a leader of its own, which takes entries,
// while the old leader steps down and takes none; once healed, the
// minority catches up and the group is one again.
func TestMetaPartition(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("servers=%d", n), func(t *testing.T) {
			m := startMeta(t, n)
			l := m.waitFormed(t)
			minority := map[string]bool{m.Servers[l].Name(): true}
			if n == 5 {
				minority[m.Servers[(l+1)%n].Name()] = true
			}
			for i := range n {
				in := minority[m.Servers[i].Name()]
				m.r(i).SetPartition(func(peer string) bool { return minority[peer] != in })
			}
			var majorityLeader int
			require.Eventually(t, func() bool {
				majorityLeader = -1
				for i := range n {
					if !minority[m.Servers[i].Name()] && m.r(i).IsLeader() {
						majorityLeader = i
					}
				}
				return majorityLeader >= 0 && !m.r(l).IsLeader()
			}, clustertest.Wait, 10*time.Millisecond, "the majority has no leader of its own, or the old one still leads")
			require.NoError(t, m.propose(t, majorityLeader, assign("$G", "DURING")))
			require.ErrorIs(t, m.propose(t, l, assign("$G", "LOST")), jscluster.ErrNotLeader)
			st, _ := m.r(l).State()
			require.NotContains(t, st.Streams, jscluster.StreamKey{Account: "$G", Name: "DURING"}, "cut off, the minority learns nothing")

			for i := range n {
				m.r(i).SetPartition(nil)
			}
			m.waitFormed(t)
			m.waitApplied(t, "$G", "DURING", false)
			m.waitApplied(t, "$G", "LOST", true)
		})
	}
}
