package jscluster_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/internal/jscluster"
	"github.com/skiffmq/skiff/server"
)

// tick is the raft tick of the tests' servers: elections after 0.5 to
// 1 s without a leader, short enough for quick tests and long enough not
// to campaign spuriously on a loaded machine under -race.
const tick = 50 * time.Millisecond

// testOptions are a test server's raft options: a short tick, a short
// bootstrap wait, and snapshots every few entries so that restarts and
// catch-ups go through them.
func testOptions(dir, name string) jscluster.Options {
	o := jscluster.Options{Dir: dir, Tick: tick, BootstrapWait: 4 * tick, SnapshotEntries: 8, SnapshotKeep: 2}
	if os.Getenv("SKIFF_TEST_LOG") != "" {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("server", name)
	}
	return o
}

// metaCluster is an in-process cluster whose servers run the raft layer,
// each in a directory of its own that outlives its restarts.
type metaCluster struct {
	*clustertest.Cluster
	dirs []string
	mu   sync.Mutex
	raft []*jscluster.Cluster
	// tune, if set, changes the options of every server started from
	// then on.
	tune func(o *jscluster.Options)
}

func startMeta(t *testing.T, n int) *metaCluster {
	t.Helper()
	m := &metaCluster{dirs: make([]string, n), raft: make([]*jscluster.Cluster, n)}
	for i := range m.dirs {
		m.dirs[i] = t.TempDir()
	}
	m.Cluster = clustertest.StartWith(t, n, server.Options{}, func(t testing.TB, i int, s *server.Server) func() {
		o := testOptions(m.dirs[i], s.Name())
		m.mu.Lock()
		if m.tune != nil {
			m.tune(&o)
		}
		m.mu.Unlock()
		c, err := jscluster.Start(s, o)
		require.NoError(t, err)
		m.mu.Lock()
		m.raft[i] = c
		m.mu.Unlock()
		return nil // the server's Shutdown closes it
	})
	return m
}

// r returns server i's raft layer, nil if it is stopped.
func (m *metaCluster) r(i int) *jscluster.Cluster {
	if m.Servers[i] == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.raft[i]
}

func (m *metaCluster) live() []int {
	var idx []int
	for i, s := range m.Servers {
		if s != nil {
			idx = append(idx, i)
		}
	}
	return idx
}

// waitFormed waits until every running server is a voter of one meta
// group, all of them agree on its ID and its leader, exactly one of them
// leads, and every server applied as far as the leader; it returns the
// leader's index.
func (m *metaCluster) waitFormed(t *testing.T) int {
	t.Helper()
	leader := -1
	require.Eventually(t, func() bool {
		leader = -1
		var names []string
		for _, i := range m.live() {
			names = append(names, m.Servers[i].Name())
		}
		var meta, lead string
		var applied uint64
		for _, i := range m.live() {
			c := m.r(i)
			mem, err := c.Members()
			if err != nil || len(mem.Learners) > 0 || !equalSets(mem.Voters, names) {
				return false
			}
			name, _ := c.Leader()
			if name == "" || (lead != "" && name != lead) || (meta != "" && c.MetaID() != meta) {
				return false
			}
			lead, meta = name, c.MetaID()
			st, err := c.MetaStatus()
			if err != nil {
				return false
			}
			if st.RaftState == raft.StateLeader {
				if leader >= 0 {
					return false
				}
				leader = i
				applied = st.Applied
			}
		}
		if leader < 0 || m.Servers[leader].Name() != lead {
			return false
		}
		for _, i := range m.live() {
			if _, a := m.r(i).State(); a < applied {
				return false
			}
		}
		return true
	}, 2*clustertest.Wait, 20*time.Millisecond, "the meta group did not form with one leader")
	return leader
}

func equalSets(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	set := map[string]bool{}
	for _, x := range a {
		set[x] = true
	}
	for _, x := range b {
		if !set[x] {
			return false
		}
	}
	return true
}

// propose proposes e on server i, bounded in time.
func (m *metaCluster) propose(t *testing.T, i int, e jscluster.Entry) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), clustertest.Wait)
	defer cancel()
	return m.r(i).Propose(ctx, e)
}

// assign is an assignStream entry of stream name in account acc.
func assign(acc, name string, peers ...string) jscluster.Entry {
	cfg, _ := json.Marshal(map[string]any{"name": name, "subjects": []string{name + ".>"}})
	return jscluster.Entry{Op: jscluster.OpAssignStream, Stream: &jscluster.StreamAssignment{
		Account: acc, Name: name, Config: cfg, Peers: peers, Created: time.Now().UTC()}}
}

// waitApplied waits until every running server's state holds stream
// (acc, name), or none if gone.
func (m *metaCluster) waitApplied(t *testing.T, acc, name string, gone bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, i := range m.live() {
			st, _ := m.r(i).State()
			_, ok := st.Streams[jscluster.StreamKey{Account: acc, Name: name}]
			if ok == gone {
				return false
			}
		}
		return true
	}, clustertest.Wait, 10*time.Millisecond, "stream %s > %s not applied everywhere (gone: %v)", acc, name, gone)
}

// waitLeader waits until every running server agrees on a leader that is
// running and leads, and returns its index.
func (m *metaCluster) waitLeader(t *testing.T) int {
	t.Helper()
	leader := -1
	require.Eventually(t, func() bool {
		leader = -1
		var lead string
		for _, i := range m.live() {
			name, _ := m.r(i).Leader()
			if name == "" || (lead != "" && name != lead) {
				return false
			}
			lead = name
			if m.Servers[i].Name() == name {
				leader = i
			}
		}
		return leader >= 0 && m.r(leader).IsLeader()
	}, clustertest.Wait, 5*time.Millisecond, "no leader agreed on")
	return leader
}

// waitSameState waits until every running server's state is the leader's.
func (m *metaCluster) waitSameState(t *testing.T) jscluster.State {
	t.Helper()
	var want jscluster.State
	require.Eventually(t, func() bool {
		l := m.waitLeader(t)
		want, _ = m.r(l).State()
		for _, i := range m.live() {
			got, _ := m.r(i).State()
			if !reflect.DeepEqual(got, want) {
				return false
			}
		}
		return true
	}, clustertest.Wait, 20*time.Millisecond, "the servers' states differ")
	return want
}

// lone is a server outside the test cluster, with its raft layer.
type lone struct {
	s *server.Server
	*jscluster.Cluster
}

// startLone starts a server of the test cluster's name called name, with
// routes, running the raft layer in dir. It is shut down when the test
// ends, if it was not before.
func startLone(t *testing.T, name, dir string, routes []string) lone {
	t.Helper()
	o := server.Options{Host: "127.0.0.1", Port: server.RandomPort, ServerName: name}
	o.Cluster.Host, o.Cluster.Port, o.Cluster.Name, o.Cluster.Routes = "127.0.0.1", server.RandomPort, "test", routes
	s, err := server.New(o)
	require.NoError(t, err)
	c, err := jscluster.Start(s, testOptions(dir, name))
	require.NoError(t, err)
	require.NoError(t, s.Start())
	l := lone{s, c}
	t.Cleanup(l.shutdown)
	return l
}

func (l lone) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), clustertest.Wait)
	defer cancel()
	_ = l.s.Shutdown(ctx)
}
