package jetstream_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/server"
)

type metaJsz struct {
	Meta *struct {
		Name     string `json:"name"`
		Leader   string `json:"leader"`
		Peer     string `json:"peer"`
		Size     int    `json:"cluster_size"`
		Quorum   int    `json:"quorum_needed"`
		Replicas []struct {
			Name    string `json:"name"`
			Current bool   `json:"current"`
			Offline bool   `json:"offline"`
			Peer    string `json:"peer"`
		} `json:"replicas"`
	} `json:"meta_cluster"`
}

// monitorJSON GETs a monitoring path of s and decodes it into v, returning
// the HTTP status.
func monitorJSON(t *testing.T, s *server.Server, path string, v any) int {
	t.Helper()
	resp, err := http.Get("http://" + s.MonitorAddr().String() + path)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
	return resp.StatusCode
}

// peerHash is nats-server's peer ID of a server name (Server.Node, set
// once it runs).
func peerHash(t *testing.T, name string) string {
	t.Helper()
	if h, ok := peerHashes[name]; ok {
		return h
	}
	ns, err := natsserver.NewServer(&natsserver.Options{ServerName: name, Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	require.NoError(t, err)
	ns.Start()
	defer ns.Shutdown()
	require.True(t, ns.ReadyForConnections(clustertest.Wait))
	peerHashes[name] = ns.Node()
	require.NotEmpty(t, peerHashes[name])
	return peerHashes[name]
}

var peerHashes = map[string]string{}

// TestClusterMonitorMeta: /jsz shows the meta group, in nats-server's
// meta_cluster shape, from every server; /healthz is 200 while a server
// is current with the meta leader, and 503 with nats-server's reason once
// it has lost contact with one (two of three servers stopped), and 200
// again when they return.
func TestClusterMonitorMeta(t *testing.T) {
	jc := startJSClusterWith(t, 3, server.Options{HTTPPort: server.RandomPort})
	jc.waitMeta(t)
	leader, _ := jc.raft(0).Leader()
	var names []string
	for _, s := range jc.Servers {
		names = append(names, s.Name())
	}
	hashes := map[string]string{}
	for _, n := range names {
		hashes[n] = peerHash(t, n)
	}
	for i, s := range jc.Servers {
		// Replicas become current as the leader hears from them.
		var v metaJsz
		require.Eventually(t, func() bool {
			v = metaJsz{}
			if monitorJSON(t, s, "/jsz", &v) != http.StatusOK || v.Meta == nil {
				return false
			}
			for _, r := range v.Meta.Replicas {
				if !r.Current || r.Offline {
					return false
				}
			}
			return len(v.Meta.Replicas) == 2
		}, clustertest.Wait, 50*time.Millisecond, "server %d's replicas current", i)
		m := v.Meta
		require.Equal(t, s.ClusterName(), m.Name)
		require.Equal(t, leader, m.Leader)
		require.Equal(t, hashes[leader], m.Peer)
		require.Equal(t, 3, m.Size)
		require.Equal(t, 2, m.Quorum)
		for _, r := range m.Replicas {
			require.NotEqual(t, leader, r.Name, "every voter but the leader")
			require.Equal(t, hashes[r.Name], r.Peer)
		}
		var h map[string]any
		require.Equal(t, http.StatusOK, monitorJSON(t, s, "/healthz", &h))
		require.Equal(t, map[string]any{"status": "ok"}, h)
	}

	// Alone, a server loses its leader (CheckQuorum): unhealthy.
	keep := slices.Index(names, leader)
	for i := range 3 {
		if i != keep {
			jc.Stop(t, i)
		}
	}
	s := jc.Servers[keep]
	require.Eventually(t, func() bool {
		var h map[string]any
		code := monitorJSON(t, s, "/healthz", &h)
		return code == http.StatusServiceUnavailable && h["status"] == "unavailable" &&
			h["error"] == "JetStream has not established contact with a meta leader"
	}, clustertest.Wait, 50*time.Millisecond)
	var v metaJsz
	monitorJSON(t, s, "/jsz", &v)
	require.Empty(t, v.Meta.Leader)
	for _, r := range v.Meta.Replicas {
		require.True(t, r.Offline, "%s", r.Name)
	}
	var js map[string]any
	require.Equal(t, http.StatusOK, monitorJSON(t, s, "/healthz?js-enabled-only=true", &js), "JetStream is on")

	for i := range 3 {
		if i != keep {
			jc.Restart(t, i)
		}
	}
	jc.waitMeta(t)
	for _, s := range jc.Servers {
		require.Eventually(t, func() bool {
			var h map[string]any
			return monitorJSON(t, s, "/healthz", &h) == http.StatusOK
		}, clustertest.Wait, 50*time.Millisecond)
	}
}
