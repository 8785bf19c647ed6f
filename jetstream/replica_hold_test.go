package jetstream_test

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// TestClusterReplicatedWipedHeld: a replica whose raft directory was
// wiped lost what it acknowledged and voted, so it must not help elect a
// leader that lacks what it acknowledged. Messages committed by the leader
// and one follower only, then both stopped and that follower's raft
// directory wiped: with the other follower (which never had them) and the
// wiped one up, no leader is elected; once the old leader is back, every
// acknowledged message is on every replica.
func TestClusterReplicatedWipedHeld(t *testing.T) {
	jc, nc, js, lead := startReplicatedStream(t, "WP", "wp")
	if lead == 0 {
		// Servers 1 and 2 find each other through server 0's routes: it
		// must be one of the two restarted first.
		stepdownTo(t, nc, "WP", jc.Servers[1].Name())
	}
	acked := map[uint64]string{}
	publishTo(t, js, acked, "wp", "early", 3)
	lead = jc.waitReplicated(t, "WP", acked)
	require.NotZero(t, lead)
	behind, wiped := (lead+1)%3, (lead+2)%3
	jc.Stop(t, behind)
	_, js = jc.connectJS(t, lead)
	publishTo(t, js, acked, "wp", "late", 3) // committed by lead and wiped
	jc.Stop(t, lead)
	jc.Stop(t, wiped)
	require.NoError(t, os.RemoveAll(filepath.Join(jc.dirs[wiped], "raft")))

	jc.Restart(t, behind)
	jc.Restart(t, wiped)
	require.Never(t, func() bool {
		_, l := jc.replicas("WP")
		return l >= 0
	}, 3*time.Second, 50*time.Millisecond, "a wiped replica helped elect a leader without the messages it acknowledged")

	jc.Restart(t, lead)
	jc.waitReplicated(t, "WP", acked)
}

// TestClusterReplicatedUnsyncedHeld: a server whose machine lost power
// under the interval policy comes back held (its raft log may miss what it
// acknowledged): with the only other server up one that stopped cleanly,
// no leader is elected, and /healthz names the hold; once the third is
// back, the server catches up, is released, and every acknowledged
// message is on every replica.
func TestClusterReplicatedUnsyncedHeld(t *testing.T) {
	p := newPower(3, jetstream.SyncInterval, jetstream.DefaultSyncInterval)
	p.hold = time.Minute // not released by time during the test
	jc := startJSClusterPowered(t, make([]string, 3), server.Options{HTTPPort: server.RandomPort}, nil, p)
	jc.waitMeta(t)
	_, js := jc.connectJS(t, 0)
	acked, _ := jc.addR3(t, js, &nats.StreamConfig{Name: "UH", Subjects: []string{"uh"}}, "m", 5)

	jc.Stop(t, 1)
	jc.Stop(t, 2)
	jc.powerLoss(t, 0)
	jc.Restart(t, 0)
	jc.Restart(t, 1)
	s := jc.Servers[0]
	var h server.HealthStatus
	require.Equal(t, http.StatusServiceUnavailable, monitorJSON(t, s, "/healthz", &h))
	require.Contains(t, h.Error, "held (unsynced)")
	require.Never(t, func() bool {
		_, lead := jc.replicas("UH")
		return lead >= 0
	}, 2*time.Second, 50*time.Millisecond, "a leader elected with the vote of a server that may have lost what it acknowledged")
	_, js0 := jc.connectJS(t, 0)
	si, err := js0.StreamInfo("UH", nats.MaxWait(5*time.Second))
	require.NoError(t, err)
	self := slices.IndexFunc(si.Cluster.Replicas, func(p *nats.PeerInfo) bool { return p.Name == s.Name() })
	require.GreaterOrEqual(t, self, 0, "STREAM.INFO lists the held replica")
	require.False(t, si.Cluster.Replicas[self].Current, "STREAM.INFO: a held replica is not current")

	jc.Restart(t, 2)
	jc.waitReplicated(t, "UH", acked)
	require.Eventually(t, func() bool { return monitorJSON(t, s, "/healthz", &h) == http.StatusOK },
		clustertest.Wait, 50*time.Millisecond, "released once caught up: %s", func() string { return h.Error }())
}
