package jetstream_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
	"github.com/skiffmq/skiff/store"
)

// replicaLog returns jetstream.ReplicaLog for server i's replica of a
// global-account stream.
func (jc *jsCluster) replicaLog(i int, name string) (applied, first, snapped, chunks uint64) {
	jc.mu.Lock()
	defer jc.mu.Unlock()
	return jetstream.ReplicaLog(jc.js[i], server.GlobalAccountName, name)
}

// stopBehind stops server victim and returns, by stream, the index its
// replica had applied.
func (jc *jsCluster) stopBehind(t *testing.T, victim int, names []string) map[string]uint64 {
	t.Helper()
	behind := map[string]uint64{}
	for _, name := range names {
		behind[name], _, _, _ = jc.replicaLog(victim, name)
	}
	jc.Stop(t, victim)
	return behind
}

// waitCompacted waits until every replica but the victim's compacted its
// log of each stream past the index the victim had (behind, by stream).
func (jc *jsCluster) waitCompacted(t *testing.T, behind map[string]uint64, victim int) {
	t.Helper()
	require.Eventually(t, func() bool {
		for name, idx := range behind {
			for i := range jc.Servers {
				if _, first, _, _ := jc.replicaLog(i, name); i != victim && first <= idx+1 {
					return false
				}
			}
		}
		return true
	}, clustertest.Wait, 50*time.Millisecond, "the live replicas compact their logs")
}

// TestClusterReplicatedCatchup: replicas snapshot their groups and compact
// the logs behind them; a replica down while the others compacted past
// what it has catches up from a peer's store, in chunks, on restart:
// messages it never saw come, and messages deleted or purged while it was
// down (removals in entries it never gets) go, for a file and a memory
// stream. A replica whose store directory was lost catches up the same
// way.
func TestClusterReplicatedCatchup(t *testing.T) {
	jetstream.SetReplicaLog(t, 4, 256)
	jc := startReplicatedCluster(t, 3)
	_, js := jc.connectJS(t, 0)
	names := []string{"FILE", "MEM"}
	want := map[string]map[uint64]string{}
	for _, name := range names {
		cfg := &nats.StreamConfig{Name: name, Subjects: []string{strings.ToLower(name) + ".>"}, Replicas: 3}
		if name == "MEM" {
			cfg.Storage = nats.MemoryStorage
		}
		_, err := js.AddStream(cfg)
		require.NoError(t, err)
		want[name] = map[uint64]string{}
		jc.waitReplicated(t, name, want[name])
	}
	subj := func(name, tok string) string { return strings.ToLower(name) + "." + tok }
	for _, name := range names {
		publishTo(t, js, want[name], subj(name, "a"), "a", 10)
		publishTo(t, js, want[name], subj(name, "b"), "b", 10)
		jc.waitReplicated(t, name, want[name])
	}

	const victim = 2
	behind := jc.stopBehind(t, victim, names)
	for _, name := range names {
		w := want[name]
		// The victim may have led the stream: retried through the election.
		require.Eventually(t, func() bool {
			err := js.DeleteMsg(name, 3)
			return err == nil || apiCode(err) == 10043 // done by a try whose answer was lost
		}, clustertest.Wait, 20*time.Millisecond)
		delete(w, 3)
		require.Eventually(t, func() bool {
			return js.PurgeStream(name, &nats.StreamPurgeRequest{Subject: subj(name, "b")}) == nil
		}, clustertest.Wait, 20*time.Millisecond)
		for seq, data := range w {
			if strings.HasPrefix(data, "b-") {
				delete(w, seq)
			}
		}
		publishTo(t, js, w, subj(name, "c"), "c", 30)
		jc.waitReplicated(t, name, w)
	}
	// The others snapshot and compact past what the victim has.
	jc.waitCompacted(t, behind, victim)

	jc.Restart(t, victim)
	jc.waitMeta(t)
	for _, name := range names {
		jc.waitReplicated(t, name, want[name])
		_, _, _, chunks := jc.replicaLog(victim, name)
		require.Greater(t, chunks, uint64(1), "%s: caught up in chunks of 256 bytes", name)
		publishTo(t, js, want[name], subj(name, "d"), "d", 5)
		jc.waitReplicated(t, name, want[name])
	}

	// A replica whose store directory is lost: its log's snapshot is
	// ahead of a store with no checkpoint, so it catches up at start.
	require.Eventually(t, func() bool {
		_, _, snapped, _ := jc.replicaLog(victim, "FILE")
		a, _, _, _ := jc.replicaLog(victim, "FILE")
		return snapped > 0 && snapped == a
	}, clustertest.Wait, 50*time.Millisecond, "the victim snapshots FILE")
	jc.mu.Lock()
	dir := jetstream.StreamDir(jc.js[victim], server.GlobalAccountName, "FILE")
	jc.mu.Unlock()
	require.NotEmpty(t, dir)
	jc.Stop(t, victim)
	require.NoError(t, os.RemoveAll(dir))
	jc.Restart(t, victim)
	jc.waitMeta(t)
	jc.waitReplicated(t, "FILE", want["FILE"])
	_, _, _, chunks := jc.replicaLog(victim, "FILE")
	require.Positive(t, chunks)
}

// TestClusterReplicatedMemoryLost: every replica of a memory stream
// restarts after its log was compacted: none has the messages any more,
// so none can catch up from another; each takes the loss (the stream is
// empty at its last sequence) instead of waiting forever, and the stream
// goes on with new sequences.
func TestClusterReplicatedMemoryLost(t *testing.T) {
	jetstream.SetReplicaLog(t, 2, 1<<20)
	jc := startReplicatedCluster(t, 3)
	_, js := jc.connectJS(t, 0)
	_, err := js.AddStream(&nats.StreamConfig{Name: "M", Subjects: []string{"m"}, Replicas: 3, Storage: nats.MemoryStorage})
	require.NoError(t, err)
	want := map[uint64]string{}
	jc.waitReplicated(t, "M", want)
	publishTo(t, js, want, "m", "m", 20)
	jc.waitReplicated(t, "M", want)
	// Every replica snapshots past the last message (a snapshot short of
	// it leaves the last messages in the log, replayed after the
	// restart) and compacts its log.
	var stored [3]uint64
	for i := range 3 {
		stored[i], _, _, _ = jc.replicaLog(i, "M")
	}
	require.Eventually(t, func() bool {
		for i := range 3 {
			if _, first, snapped, _ := jc.replicaLog(i, "M"); first < 10 || snapped < stored[i] {
				return false
			}
		}
		return true
	}, clustertest.Wait, 50*time.Millisecond, "every replica snapshots past its messages and compacts its log")
	jc.RestartAll(t)
	jc.waitMeta(t)
	clear(want)
	jc.waitReplicated(t, "M", want)
	_, js = jc.connectJS(t, 1)
	publishTo(t, js, want, "m", "after", 1)
	require.Contains(t, want, uint64(21), "sequences are not given again")
	jc.waitReplicated(t, "M", want)
}

// TestClusterReplicatedAdvisories: a replicated stream's new leader
// advises LEADER_ELECTED once it takes publishes (after a stepdown here),
// and a leader whose replicas all stopped advises QUORUM_LOST as it steps
// down; both decode, with no unknown field, into nats-server's own types
// (jsm.go's published schemas have "replicas" as an object where
// nats-server sends an array, and no "account", so they are not used).
func TestClusterReplicatedAdvisories(t *testing.T) {
	jc, nc, _, lead := startReplicatedStream(t, "ADV", "adv")

	// Watch from a server that will stay up: the quorum-lost leader's
	// advisory has to cross a route to it, or be heard on its own server.
	subs := make([]*nats.Subscription, 3)
	for i := range 3 {
		c := jc.Connect(t, i)
		var err error
		subs[i], err = c.SubscribeSync("$JS.EVENT.ADVISORY.STREAM.>")
		require.NoError(t, err)
		require.NoError(t, c.Flush())
	}
	jc.WaitInterest(t, "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.ADV", 0, 1, 2)
	to := (lead + 1) % 3
	stepdownTo(t, nc, "ADV", jc.Servers[to].Name())
	next := func(sub *nats.Subscription, subject string, into any) {
		t.Helper()
		for {
			m, err := sub.NextMsg(clustertest.Wait)
			require.NoError(t, err, "waiting for %s", subject)
			if m.Subject != subject {
				continue
			}
			d := json.NewDecoder(bytes.NewReader(m.Data))
			d.DisallowUnknownFields()
			require.NoError(t, d.Decode(into), "%s", m.Data)
			return
		}
	}
	var elected natsserver.JSStreamLeaderElectedAdvisory
	next(subs[0], "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.ADV", &elected)
	require.Equal(t, natsserver.JSStreamLeaderElectedAdvisoryType, elected.Type)
	require.Equal(t, jc.Servers[to].Name(), elected.Leader)
	require.Equal(t, "ADV", elected.Stream)
	require.Equal(t, server.GlobalAccountName, elected.Account)
	require.Len(t, elected.Replicas, 2)

	// The two others stop: the leader no longer hears a quorum.
	for i := range 3 {
		if i != to {
			jc.Stop(t, i)
		}
	}
	var lost natsserver.JSStreamQuorumLostAdvisory
	next(subs[to], "$JS.EVENT.ADVISORY.STREAM.QUORUM_LOST.ADV", &lost)
	require.Equal(t, natsserver.JSStreamQuorumLostAdvisoryType, lost.Type)
	require.Equal(t, "ADV", lost.Stream)
	require.Len(t, lost.Replicas, 3, "every replica: no leader now")
}

// TestClusterReplicatedHealthz: /healthz is 503 while a server's replica
// of a replicated stream is catching up from a peer, naming the stream as
// nats-server does, and 200 again once it is current.
func TestClusterReplicatedHealthz(t *testing.T) {
	jc := startReplicatedClusterWith(t, 3, server.Options{HTTPPort: server.RandomPort})
	_, js := jc.connectJS(t, 0)
	_, err := js.AddStream(&nats.StreamConfig{Name: "HZ", Subjects: []string{"hz"}, Replicas: 3})
	require.NoError(t, err)
	jc.waitReplicated(t, "HZ", map[uint64]string{})
	s := jc.Servers[1]
	var h server.HealthStatus
	require.Eventually(t, func() bool { return monitorJSON(t, s, "/healthz", &h) == http.StatusOK },
		clustertest.Wait, 20*time.Millisecond, "healthy")
	jc.mu.Lock()
	jetstream.SetRestoring(jc.js[1], server.GlobalAccountName, "HZ", true)
	jc.mu.Unlock()
	require.Equal(t, http.StatusServiceUnavailable, monitorJSON(t, s, "/healthz", &h))
	require.Equal(t, "JetStream stream '$G > HZ' is not current: catching up from a peer", h.Error)
	jc.mu.Lock()
	jetstream.SetRestoring(jc.js[1], server.GlobalAccountName, "HZ", false)
	jc.mu.Unlock()
	require.Equal(t, http.StatusOK, monitorJSON(t, s, "/healthz", &h))
}

// TestClusterReplicatedCatchupFindsRemoved: a replica whose store lost
// messages its group holds (the effect of a delete or a purge the group
// lost) is found diverged by its catch-up from the leader's snapshot,
// and rebuilt: it ends with every message. The leader lists what it
// holds from its own first sequence on, so a store that starts past
// messages it holds shows as well as one with a hole.
func TestClusterReplicatedCatchupFindsRemoved(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remove func(s *store.Stream) error
	}{
		{"delete", func(s *store.Stream) error { return s.Delete(3) }},
		{"purge-below-first", func(s *store.Stream) error {
			_, err := s.Purge(store.PurgeRequest{Seq: 6})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jetstream.SetReplicaLog(t, 4, 256)
			jc := startReplicatedCluster(t, 3)
			_, js := jc.connectJS(t, 0)
			want, lead := jc.addR3(t, js, &nats.StreamConfig{Name: "RM", Subjects: []string{"rm"}}, "early", 10)
			victim := spareOf(lead)
			require.NoError(t, jetstream.AlterLocalStore(jc.js[victim], server.GlobalAccountName, "RM", tc.remove))
			behind := jc.stopBehind(t, victim, []string{"RM"})
			publishTo(t, js, want, "rm", "late", 10)
			jc.waitCompacted(t, behind, victim)
			jc.Restart(t, victim)
			jc.waitReplicated(t, "RM", want)
		})
	}
}

// TestClusterReplicatedWALBounded: one stream takes a few messages and
// then nothing, while another takes megabytes, through WALs of 256 KiB
// segments. The meta group and the idle stream's group keep entries that
// are never compacted (too few for a snapshot, or within the entries kept
// behind one); each WAL must carry them forward rather than keep their
// segments and every one after them, and stay a few segments long.
func TestClusterReplicatedWALBounded(t *testing.T) {
	jetstream.SetReplicaLog(t, 8, 1<<20)
	jc := startJSClusterTuned(t, make([]string, 3), server.Options{}, nil, func(_ int, o *jetstream.Options) {
		o.Cluster.WALSegmentBytes = 256 << 10
	}, nil)
	jc.waitMeta(t)
	nc, js := jc.connectJS(t, 0)
	idle, _ := jc.addR3(t, js, &nats.StreamConfig{Name: "IDLE", Subjects: []string{"idle"}}, "idle", 5)
	busy, _ := jc.addR3(t, js, &nats.StreamConfig{Name: "BUSY", Subjects: []string{"busy"}}, "busy", 0)
	publishAsyncTo(t, nc, busy, "busy", 1<<10, 6000, 500, clustertest.Wait/2)
	jc.waitReplicated(t, "BUSY", busy)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for i := range jc.Servers {
			st := jc.raft(i).LogStats()
			assert.LessOrEqual(c, st.Segments, 6, "server %d's WAL", i)
			assert.NotZero(c, st.Carried, "server %d carried nothing", i)
		}
	}, clustertest.Wait, 100*time.Millisecond)
	jc.waitReplicated(t, "IDLE", idle)
}

// TestClusterReplicatedInfoAfterCreate: a stream create is answered once
// the new group has a leader, as on nats-server, so the info asked right
// after names it and lists the two other replicas (async-nats's
// create_stream_with_replicas).
func TestClusterReplicatedInfoAfterCreate(t *testing.T) {
	jc := startJSCluster(t, 3)
	jc.waitMeta(t)
	_, js := jc.connectJS(t, 1)
	for _, name := range []string{"A", "B", "C"} {
		_, err := js.AddStream(&nats.StreamConfig{Name: name, Subjects: []string{name}, Replicas: 3, Storage: nats.MemoryStorage})
		require.NoError(t, err)
		info, err := js.StreamInfo(name)
		require.NoError(t, err)
		require.NotNil(t, info.Cluster)
		require.NotEmpty(t, info.Cluster.Leader, "stream %s", name)
		require.Len(t, info.Cluster.Replicas, 2, "stream %s: the replicas other than the leader", name)
	}
}
