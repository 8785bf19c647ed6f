package jetstream_test

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/internal/jscluster"
	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// jsCluster is an in-process cluster whose servers run JetStream with the
// internal cluster option, each with a store directory that outlives its
// restarts.
type jsCluster struct {
	*clustertest.Cluster
	dirs []string
	mu   sync.Mutex
	js   []*jetstream.JetStream
}

func startJSCluster(t *testing.T, n int) *jsCluster {
	t.Helper()
	jc := &jsCluster{dirs: make([]string, n), js: make([]*jetstream.JetStream, n)}
	for i := range n {
		jc.dirs[i] = t.TempDir()
	}
	jc.Cluster = clustertest.StartWith(t, n, server.Options{}, func(t testing.TB, i int, s *server.Server) func() {
		js, err := jetstream.New(s, jetstream.Options{StoreDir: jc.dirs[i],
			Cluster: &jscluster.Options{Tick: 50 * time.Millisecond, BootstrapWait: 200 * time.Millisecond}})
		require.NoError(t, err)
		jc.mu.Lock()
		jc.js[i] = js
		jc.mu.Unlock()
		return func() { require.NoError(t, js.Close()) }
	})
	return jc
}

func (jc *jsCluster) raft(i int) *jscluster.Cluster {
	jc.mu.Lock()
	defer jc.mu.Unlock()
	return jetstream.RaftOf(jc.js[i])
}

// waitMeta waits until every running server is a voter of one meta group
// and agrees on its leader.
func (jc *jsCluster) waitMeta(t *testing.T) {
	t.Helper()
	require.Eventually(t, func() bool {
		var lead string
		for i, s := range jc.Servers {
			if s == nil {
				continue
			}
			r := jc.raft(i)
			m, err := r.Members()
			name, _ := r.Leader()
			if err != nil || len(m.Voters) != len(jc.Live()) || name == "" || (lead != "" && name != lead) {
				return false
			}
			lead = name
		}
		return true
	}, 2*clustertest.Wait, 20*time.Millisecond, "the meta group did not form")
}

// TestClusterOptionStartsMeta: JetStream on a clustered server with the
// internal cluster option runs the raft layer in StoreDir/raft, and the
// servers form one meta group, which a restarted server rejoins from its
// WAL.
func TestClusterOptionStartsMeta(t *testing.T) {
	jc := startJSCluster(t, 3)
	jc.waitMeta(t)
	for _, f := range []string{"node", "wal"} {
		_, err := os.Stat(filepath.Join(jc.dirs[1], "raft", f))
		require.NoError(t, err)
	}
	id := jc.raft(0).MetaID()
	jc.Stop(t, 1)
	jc.Restart(t, 1)
	require.Equal(t, id, jc.raft(1).MetaID(), "restarted from its WAL")
	jc.waitMeta(t)
}

// TestClusterOptionNeedsCluster: the cluster option on a server without a
// cluster is refused.
func TestClusterOptionNeedsCluster(t *testing.T) {
	s, err := server.New(server.Options{Host: "127.0.0.1", Port: server.RandomPort, ServerName: "s1"})
	require.NoError(t, err)
	_, err = jetstream.New(s, jetstream.Options{StoreDir: t.TempDir(), Cluster: &jscluster.Options{}})
	require.ErrorIs(t, err, jscluster.ErrNotClustered)
}
