package multiraft_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/internal/multiraft"
	"github.com/skiffmq/skiff/internal/multiraft/multiraftest"
)

// syncRecorder is a StateMachine safe to read from the test goroutine
// while the node applies.
type syncRecorder struct {
	mu      sync.Mutex
	applied uint64
	datas   []string
	leader  uint64
}

func (r *syncRecorder) Apply(ents []*raftpb.Entry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range ents {
		if e.GetIndex() != r.applied+1 {
			return fmt.Errorf("applied %d after %d", e.GetIndex(), r.applied)
		}
		r.applied = e.GetIndex()
		if e.GetType() == raftpb.EntryNormal && len(e.GetData()) > 0 {
			r.datas = append(r.datas, string(e.GetData()))
		}
	}
	return nil
}

func (r *syncRecorder) Restore(snap *raftpb.Snapshot) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applied = snap.GetMetadata().GetIndex()
	return nil
}

func (r *syncRecorder) Checkpoint() uint64 { return 0 }

func (r *syncRecorder) LeaderChanged(leader, _ uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leader = leader
}

func (r *syncRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.datas)
}

// tcpServer is one server of a real-time cluster: a Node with its
// goroutines, a TCP transport over loopback, an async in-memory disk.
type tcpServer struct {
	id   uint64
	node *multiraft.Node
	tr   *multiraft.TCP
	disk *multiraftest.MemDisk
	sms  map[uint64]multiraft.StateMachine
}

func (s *tcpServer) recorder(group uint64) *syncRecorder { return s.sms[group].(*syncRecorder) }

func (s *tcpServer) stop() {
	_ = s.tr.Close()
	_ = s.node.Close()
	s.disk.Close()
}

// startTCPCluster starts n servers hosting groups, each replica with the
// state machine newSM returns (a syncRecorder if nil).
func startTCPCluster(t testing.TB, n int, groups []uint64, opts multiraft.Options, newSM func() multiraft.StateMachine) []*tcpServer {
	if newSM == nil {
		newSM = func() multiraft.StateMachine { return &syncRecorder{} }
	}
	t.Helper()
	var ids []uint64
	for i := 1; i <= n; i++ {
		ids = append(ids, uint64(i))
	}
	servers := make([]*tcpServer, n)
	for i, id := range ids {
		// A link is dropped after a second of silence, not three 20 ms
		// pings: nothing here dials a dropped link again, and under -race
		// on a loaded machine a process stalls for 60 ms now and then (the
		// cluster then had no links, and no group a leader, for good).
		tr, err := multiraft.NewTCP(multiraft.TCPOptions{PingInterval: 20 * time.Millisecond, PingMisses: 50})
		require.NoError(t, err)
		o := opts
		o.ID = id
		node, err := multiraft.New(o, tr)
		require.NoError(t, err)
		tr.SetHandler(node)
		s := &tcpServer{id: id, node: node, tr: tr, disk: multiraftest.NewAsyncMemDisk(), sms: map[uint64]multiraft.StateMachine{}}
		servers[i] = s
		t.Cleanup(s.stop)
	}
	for i := range servers {
		for j := i + 1; j < len(servers); j++ {
			a, b := multiraft.LoopbackConns(t)
			require.NoError(t, servers[i].tr.Add(servers[j].id, a))
			require.NoError(t, servers[j].tr.Add(servers[i].id, b))
		}
	}
	for _, s := range servers {
		for _, g := range groups {
			sm := newSM()
			s.sms[g] = sm
			require.NoError(t, s.node.AddGroup(multiraft.GroupConfig{ID: g, Log: s.disk.Log(g), StateMachine: sm, Peers: ids}))
		}
	}
	return servers
}

// leaderOf returns the leader of group that the live servers agree on, or
// 0.
func leaderOf(servers []*tcpServer, group uint64) uint64 {
	var lead uint64
	for _, s := range servers {
		l, _, err := s.node.Leader(group)
		if err != nil || l == 0 || (lead != 0 && l != lead) {
			return 0
		}
		lead = l
	}
	return lead
}

func waitUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Three servers with their goroutines over loopback TCP: groups elect,
// proposals are applied everywhere, and when the leader's server dies the
// links going down make its followers elect a new leader well before an
// election timeout would.
func TestTCPClusterProposeAndFailover(t *testing.T) {
	const tick = 20 * time.Millisecond
	opts := multiraft.Options{Tick: tick, FailoverGrace: 10 * time.Millisecond, CampaignStagger: 30 * time.Millisecond}
	groups := []uint64{1, 2, 3, 4, 5, 6, 7, 8}
	servers := startTCPCluster(t, 3, groups, opts, nil)
	for _, g := range groups {
		waitUntil(t, 5*time.Second, fmt.Sprintf("a leader of group %d", g), func() bool { return leaderOf(servers, g) != 0 })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const perGroup = 20
	for _, g := range groups {
		lead := leaderOf(servers, g)
		for i := range perGroup {
			require.NoError(t, servers[lead-1].node.Propose(ctx, g, fmt.Appendf(nil, "g%d-%d", g, i)))
		}
	}
	for _, s := range servers {
		for _, g := range groups {
			waitUntil(t, 5*time.Second, "every proposal applied", func() bool { return s.recorder(g).count() == perGroup })
		}
	}

	victim := leaderOf(servers, 1)
	var rest []*tcpServer
	for _, s := range servers {
		if s.id != victim {
			rest = append(rest, s)
		}
	}
	start := time.Now()
	servers[victim-1].stop()
	waitUntil(t, 5*time.Second, "a new leader of group 1", func() bool {
		l := leaderOf(rest, 1)
		return l != 0 && l != victim
	})
	took := time.Since(start)
	t.Logf("failover of group 1 took %v (election timeout: %v to %v)", took, 10*tick, 20*tick)
	require.Less(t, took, 10*tick, "fast failover beats the election timeout")

	lead := leaderOf(rest, 1)
	for _, s := range rest {
		if s.id == lead {
			require.NoError(t, s.node.Propose(ctx, 1, []byte("after")))
		}
	}
	for _, s := range rest {
		waitUntil(t, 5*time.Second, "the proposal after failover", func() bool { return s.recorder(1).count() == perGroup+1 })
	}
}

// Many goroutines propose to many groups at once, on servers with four
// workers each: every group applies the same entries in the same order on
// every server (the race detector watches the scheduler's hand-offs).
func TestTCPClusterConcurrentProposers(t *testing.T) {
	var groups []uint64
	for g := uint64(1); g <= 32; g++ {
		groups = append(groups, g)
	}
	servers := startTCPCluster(t, 3, groups, multiraft.Options{Tick: 20 * time.Millisecond, Workers: 4}, nil)
	for _, g := range groups {
		waitUntil(t, 10*time.Second, "leaders", func() bool { return leaderOf(servers, g) != 0 })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const proposers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, proposers)
	for p := range proposers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				g := groups[(p*each+i)%len(groups)]
				lead := leaderOf(servers, g)
				if lead == 0 {
					errs <- fmt.Errorf("group %d lost its leader", g)
					return
				}
				if err := servers[lead-1].node.Propose(ctx, g, fmt.Appendf(nil, "p%d-%d", p, i)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for _, s := range servers {
		require.Zero(t, s.node.Stats().LostLogBeats, "server %d answered a heartbeat as if it lost its log", s.id)
	}
	for err := range errs {
		require.NoError(t, err)
	}
	total := func(s *tcpServer) int {
		n := 0
		for _, g := range groups {
			n += s.recorder(g).count()
		}
		return n
	}
	for _, s := range servers {
		waitUntil(t, 10*time.Second, "every proposal applied", func() bool { return total(s) == proposers*each })
	}
	for _, g := range groups {
		want := servers[0].recorder(g)
		want.mu.Lock()
		for _, s := range servers[1:] {
			got := s.recorder(g)
			got.mu.Lock()
			require.Equal(t, want.datas, got.datas, "group %d on server %d", g, s.id)
			got.mu.Unlock()
		}
		want.mu.Unlock()
	}
}
