package jetstream_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/internal/natscli"
	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// startReplicatedCluster starts n servers whose JetStream creates
// replicated streams (internal: issue 13, phase 3).
func startReplicatedCluster(t testing.TB, n int) *jsCluster {
	t.Helper()
	return startReplicatedClusterWith(t, n, server.Options{})
}

// connectJS connects a client to server i and returns it with its
// JetStream context, whose requests wait clustertest.Wait.
func (jc *jsCluster) connectJS(t testing.TB, i int) (*nats.Conn, nats.JetStreamContext) {
	t.Helper()
	nc := jc.Connect(t, i)
	js, err := nc.JetStream(nats.MaxWait(clustertest.Wait))
	require.NoError(t, err)
	return nc, js
}

// startReplicatedClusterWith is startReplicatedCluster with base as every
// server's options (a monitoring port, say).
func startReplicatedClusterWith(t testing.TB, n int, base server.Options) *jsCluster {
	t.Helper()
	jc := startJSClusterEach(t, make([]string, n), base, nil)
	jc.waitMeta(t)
	return jc
}

// replicas returns each running server's copy of a global-account stream
// (nil for a stopped one) and the index of the server leading its group
// (-1 for none).
func (jc *jsCluster) replicas(name string) ([]map[uint64]string, int) {
	jc.mu.Lock()
	defer jc.mu.Unlock()
	out, lead := make([]map[uint64]string, len(jc.js)), -1
	for i, js := range jc.js {
		if jc.Servers[i] == nil {
			continue
		}
		msgs, leads, ok := jetstream.LocalStream(js, server.GlobalAccountName, name)
		if ok {
			out[i] = msgs
		}
		if leads {
			lead = i
		}
	}
	return out, lead
}

// waitReplicated waits until every running server's replica holds want
// and one leads, and returns the leader's index.
func (jc *jsCluster) waitReplicated(t testing.TB, name string, want map[uint64]string) int {
	t.Helper()
	var (
		lead int
		seen []int // each replica's message count, last looked at (-1: none)
	)
	ok := assert.Eventually(t, func() bool {
		var reps []map[uint64]string
		reps, lead = jc.replicas(name)
		seen = seen[:0]
		equal := true
		for i, r := range reps {
			seen = append(seen, len(r))
			if r == nil {
				seen[i] = -1
			}
			if jc.Servers[i] != nil && !maps.Equal(r, want) {
				equal = false
			}
		}
		return equal && lead >= 0
	}, clustertest.Wait, 20*time.Millisecond, "every replica of %s holds the %d acknowledged messages", name, len(want))
	if !ok {
		t.Fatalf("%s: replicas hold %v messages; leader %d", name, seen, lead)
	}
	return lead
}

// publishAcked publishes n messages on repl.x through js (publishTo).
func publishAcked(t *testing.T, js nats.JetStreamContext, acked map[uint64]string, prefix string, n int) {
	t.Helper()
	publishTo(t, js, acked, "repl.x", prefix, n)
}

// publishTo publishes n messages on subj through js until each is
// acknowledged, retrying a publish the stream refused or did not answer
// (an election) with the same message ID: every acknowledged message is
// recorded in acked by sequence, and none twice.
func publishTo(t *testing.T, js nats.JetStreamContext, acked map[uint64]string, subj, prefix string, n int) {
	t.Helper()
	for k := range n {
		data := fmt.Sprintf("%s-%d", prefix, k)
		var ack *nats.PubAck
		require.Eventually(t, func() bool {
			var err error
			ack, err = js.Publish(subj, []byte(data), nats.MsgId(data), nats.AckWait(time.Second))
			return err == nil
		}, clustertest.Wait, 10*time.Millisecond, "publish %s", data)
		if prev, ok := acked[ack.Sequence]; ok {
			require.Equal(t, data, prev, "sequence %d acknowledged for two messages", ack.Sequence)
			require.True(t, ack.Duplicate)
			continue
		}
		acked[ack.Sequence] = data
	}
}

// publishAsyncTo publishes n messages of size bytes on subj through nc,
// window at a time in flight (as nats bench does, within nats.go's bound
// on them), until each is acknowledged: a publish the stream refused (its
// leader lost its quorum, say, on a loaded machine) or did not answer
// within ackWait goes again with the same message ID. Message k's data starts with its ID,
// subj-k, and every acknowledged message is recorded in acked by
// sequence, none twice and no data at two sequences.
func publishAsyncTo(t *testing.T, nc *nats.Conn, acked map[uint64]string, subj string, size, n, window int, ackWait time.Duration) {
	t.Helper()
	js, err := nc.JetStream(nats.PublishAsyncTimeout(ackWait))
	require.NoError(t, err)
	id := func(k int) string { return subj + "-" + strconv.Itoa(k) }
	data := func(k int) string { return id(k) + strings.Repeat("x", max(0, size-len(id(k)))) }
	todo := make([]int, n)
	for k := range todo {
		todo[k] = k
	}
	seen := map[int]uint64{} // message k's sequence, acknowledged
	deadline := time.Now().Add(6 * clustertest.Wait)
	for len(todo) > 0 {
		require.True(t, time.Now().Before(deadline), "%d publishes on %s never acknowledged", len(todo), subj)
		var again []int
		for len(todo) > 0 {
			batch := todo[:min(window, len(todo))]
			todo = todo[len(batch):]
			futures := make([]nats.PubAckFuture, len(batch))
			for i, k := range batch {
				f, err := js.PublishAsync(subj, []byte(data(k)), nats.MsgId(id(k)))
				require.NoError(t, err)
				futures[i] = f
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(clustertest.Wait):
				t.Fatal("publishes not answered")
			}
			for i, f := range futures {
				select {
				case ack := <-f.Ok():
					k := batch[i]
					if prev, ok := seen[k]; ok {
						require.Equal(t, prev, ack.Sequence, "%s-%d acknowledged at two sequences", subj, k)
						continue
					}
					require.NotContains(t, acked, ack.Sequence, "sequence acknowledged twice")
					acked[ack.Sequence], seen[k] = data(k), ack.Sequence
				case err := <-f.Err():
					t.Logf("publish %d on %s: %v; again", batch[i], subj, err)
					again = append(again, batch[i])
				}
			}
		}
		if todo = again; len(todo) > 0 {
			time.Sleep(50 * time.Millisecond) // an election's time
		}
	}
}

// TestClusterReplicatedStream: an R3 stream created through one server
// is held by three; publishes through any server are acknowledged once a
// quorum applied them, and every replica holds the same messages at the
// same sequences; the leader's server stops and the others elect another
// and go on; it comes back and catches up from the log; a retried publish
// is deduplicated.
func TestClusterReplicatedStream(t *testing.T) {
	jc := startReplicatedCluster(t, 3)
	ctxs := make([]nats.JetStreamContext, 3)
	for i := range 3 {
		_, js := jc.connectJS(t, i)
		ctxs[i] = js
	}
	info, err := ctxs[0].AddStream(&nats.StreamConfig{Name: "REPL", Subjects: []string{"repl.>"}, Replicas: 3})
	require.NoError(t, err)
	require.Equal(t, 3, info.Config.Replicas)
	st, _ := jc.raft(0).State()
	for _, sa := range st.Streams {
		require.Len(t, sa.Peers, 3, "placed on the three servers")
	}
	acked := map[uint64]string{}
	jc.waitReplicated(t, "REPL", acked)
	for i := range 3 {
		publishAcked(t, ctxs[i], acked, fmt.Sprintf("from%d", i), 20)
	}
	require.Len(t, acked, 60)
	lead := jc.waitReplicated(t, "REPL", acked)

	// STREAM.INFO, answered by the leader, names it and the two other
	// replicas, current.
	require.Eventually(t, func() bool {
		si, err := ctxs[(lead+1)%3].StreamInfo("REPL")
		if err != nil || si.Cluster == nil || si.Cluster.Leader != jc.Servers[lead].Name() || len(si.Cluster.Replicas) != 2 {
			return false
		}
		for _, r := range si.Cluster.Replicas {
			if !r.Current || r.Name == si.Cluster.Leader {
				return false
			}
		}
		return true
	}, clustertest.Wait, 20*time.Millisecond, "cluster info with the leader and two current replicas")

	// The same message ID again: a duplicate, stored once.
	ack, err := ctxs[1].Publish("repl.x", []byte("from1-3"), nats.MsgId("from1-3"))
	require.NoError(t, err)
	require.True(t, ack.Duplicate)

	// The leader's server stops: the two others go on.
	jc.Stop(t, lead)
	other := (lead + 1) % 3
	publishAcked(t, ctxs[other], acked, "while-down", 20)
	jc.waitReplicated(t, "REPL", acked)

	// It comes back and catches up.
	jc.Restart(t, lead)
	jc.waitMeta(t)
	publishAcked(t, ctxs[other], acked, "after", 10)
	jc.waitReplicated(t, "REPL", acked)
	require.Len(t, acked, 90)
	for i := range 3 {
		_, js := jc.connectJS(t, i)
		si, err := js.StreamInfo("REPL")
		require.NoError(t, err)
		require.Equal(t, uint64(90), si.State.Msgs, "through server %d", i)
	}
}

// TestClusterReplicatedRefusals: more replicas than nats-server allows,
// or than the cluster has servers, are refused as nats-server refuses
// them.
func TestClusterReplicatedRefusals(t *testing.T) {
	jc := startReplicatedCluster(t, 3)
	_, js := jc.connectJS(t, 0)
	_, err := js.AddStream(&nats.StreamConfig{Name: "R9", Subjects: []string{"r9"}, Replicas: 9})
	require.ErrorContains(t, err, "maximum replicas is 5")
	_, err = js.AddStream(&nats.StreamConfig{Name: "R3", Subjects: []string{"r3"}, Replicas: 3})
	require.NoError(t, err)
	jc.waitReplicated(t, "R3", map[uint64]string{})
	// More replicas than servers: nats-server's 10005.
	_, err = js.UpdateStream(&nats.StreamConfig{Name: "R3", Subjects: []string{"r3"}, Replicas: 5})
	require.Equal(t, njs.ErrorCode(10005), apiCode(err), "%v", err)
	require.NoError(t, js.DeleteStream("R3"))
	require.Eventually(t, func() bool {
		reps, _ := jc.replicas("R3")
		for _, r := range reps {
			if r != nil {
				return false
			}
		}
		return true
	}, clustertest.Wait, 20*time.Millisecond, "deleted from every server")
}

// TestClusterReplicatedDeletes: a message delete and purges (of a subject,
// below a sequence, of everything) of an R3 stream go through its group:
// every replica removes the same messages, and publishing goes on at the
// next sequence.
func TestClusterReplicatedDeletes(t *testing.T) {
	jc := startReplicatedCluster(t, 3)
	nc, js := jc.connectJS(t, 1)
	_, err := js.AddStream(&nats.StreamConfig{Name: "D", Subjects: []string{"d.>"}, Replicas: 3})
	require.NoError(t, err)
	want := map[uint64]string{}
	jc.waitReplicated(t, "D", want)
	publish := func(n int) {
		for range n {
			subj := "d.a"
			if len(want)%2 == 1 {
				subj = "d.b"
			}
			var ack *nats.PubAck
			require.Eventually(t, func() bool {
				ack, err = js.Publish(subj, []byte(subj))
				return err == nil
			}, clustertest.Wait, 10*time.Millisecond)
			want[ack.Sequence] = subj
		}
	}
	publish(10)
	jc.waitReplicated(t, "D", want)
	// Expectations are checked against the leader's projection.
	_, err = js.Publish("d.a", nil, nats.ExpectLastSequence(9))
	require.Equal(t, njs.ErrorCode(10071), apiCode(err), "%v", err)
	_, err = js.Publish("d.a", nil, nats.ExpectLastSequencePerSubject(10))
	require.Equal(t, njs.ErrorCode(10071), apiCode(err), "d.a's last is 9: %v", err)

	require.NoError(t, js.DeleteMsg("D", 3))
	delete(want, 3)
	require.Equal(t, njs.ErrorCode(10043), apiCode(js.DeleteMsg("D", 3)), "gone already")
	require.NoError(t, js.PurgeStream("D", &nats.StreamPurgeRequest{Subject: "d.b"}))
	for seq, subj := range want {
		if subj == "d.b" {
			delete(want, seq)
		}
	}
	jc.waitReplicated(t, "D", want)
	require.NoError(t, js.PurgeStream("D", &nats.StreamPurgeRequest{Sequence: 5}))
	for seq := range want {
		if seq < 5 {
			delete(want, seq)
		}
	}
	jc.waitReplicated(t, "D", want)

	publish(4)
	require.Contains(t, want, uint64(14), "sequences go on")
	jc.waitReplicated(t, "D", want)
	// Keeping the newest: of d.a (11 and 13 of 5, 7, 9, 11, 13), then of
	// all (the last three).
	purge := func(req string) uint64 {
		t.Helper()
		m, err := nc.Request("$JS.API.STREAM.PURGE.D", []byte(req), clustertest.Wait)
		require.NoError(t, err)
		var r struct {
			Success bool   `json:"success"`
			Purged  uint64 `json:"purged"`
		}
		require.NoError(t, json.Unmarshal(m.Data, &r))
		require.True(t, r.Success, "%s", m.Data)
		return r.Purged
	}
	require.Equal(t, uint64(3), purge(`{"filter":"d.a","keep":2}`))
	for seq, subj := range want {
		if subj == "d.a" && seq < 11 {
			delete(want, seq)
		}
	}
	jc.waitReplicated(t, "D", want)
	require.Equal(t, uint64(len(want)-3), purge(`{"keep":3}`))
	for seq := range want {
		if seq < 12 {
			delete(want, seq)
		}
	}
	jc.waitReplicated(t, "D", want)
	require.Zero(t, purge(`{"keep":5}`), "no more than five")
	require.NoError(t, js.PurgeStream("D"))
	clear(want)
	jc.waitReplicated(t, "D", want)
	si, err := js.StreamInfo("D")
	require.NoError(t, err)
	require.Equal(t, uint64(14), si.State.LastSeq)
	require.Zero(t, si.State.Msgs)
}

// TestClusterReplicatedCheckpoint: a replica of a file stream checkpoints
// what its store holds on disk; restarted, it opens from its checkpoint
// (raft hands over only the entries after it) and holds every message; a
// memory stream has none and replays its log.
func TestClusterReplicatedCheckpoint(t *testing.T) {
	jc := startReplicatedCluster(t, 3)
	_, js := jc.connectJS(t, 0)
	for _, name := range []string{"FILE", "MEM"} {
		cfg := &nats.StreamConfig{Name: name, Subjects: []string{strings.ToLower(name) + ".>"}, Replicas: 3}
		if name == "MEM" {
			cfg.Storage = nats.MemoryStorage
		}
		_, err := js.AddStream(cfg)
		require.NoError(t, err)
	}
	want := map[string]map[uint64]string{"FILE": {}, "MEM": {}}
	for name, w := range want {
		jc.waitReplicated(t, name, w)
		for k := range 20 {
			data := fmt.Sprintf("%s-%d", name, k)
			var ack *nats.PubAck
			require.Eventually(t, func() bool {
				var err error
				ack, err = js.Publish(strings.ToLower(name)+".x", []byte(data), nats.MsgId(data))
				return err == nil
			}, clustertest.Wait, 10*time.Millisecond)
			w[ack.Sequence] = data
		}
		jc.waitReplicated(t, name, w)
	}
	// Every replica of FILE checkpoints (once a second); MEM's never do.
	const victim = 2
	require.Eventually(t, func() bool {
		jc.mu.Lock()
		defer jc.mu.Unlock()
		for _, s := range jc.js {
			if _, saved := jetstream.ReplicaCheckpoints(s, server.GlobalAccountName, "FILE"); saved == 0 {
				return false
			}
		}
		return true
	}, clustertest.Wait, 50*time.Millisecond)
	jc.mu.Lock()
	_, memSaved := jetstream.ReplicaCheckpoints(jc.js[victim], server.GlobalAccountName, "MEM")
	jc.mu.Unlock()
	require.Zero(t, memSaved, "memory streams have no checkpoint")

	jc.Stop(t, victim)
	jc.Restart(t, victim)
	jc.waitMeta(t)
	jc.mu.Lock()
	opened, _ := jetstream.ReplicaCheckpoints(jc.js[victim], server.GlobalAccountName, "FILE")
	memOpened, _ := jetstream.ReplicaCheckpoints(jc.js[victim], server.GlobalAccountName, "MEM")
	jc.mu.Unlock()
	require.Positive(t, opened, "opened from its checkpoint")
	require.Zero(t, memOpened)
	for name, w := range want {
		jc.waitReplicated(t, name, w) // the memory replica refilled from the log
	}
}

// TestClusterReplicatedDiscardNew: an R3 stream with discard new takes
// messages up to its limits and refuses the next, as a single server's,
// while publishes are in flight; a KV bucket of three replicas (discard
// new, per-subject history, rollups) puts, gets and deletes keys.
func TestClusterReplicatedDiscardNew(t *testing.T) {
	jc := startReplicatedCluster(t, 3)
	_, js := jc.connectJS(t, 1)
	_, err := js.AddStream(&nats.StreamConfig{Name: "DN", Subjects: []string{"dn.>"}, Replicas: 3,
		Discard: nats.DiscardNew, MaxMsgs: 10})
	require.NoError(t, err)
	jc.waitReplicated(t, "DN", map[uint64]string{})
	// Twenty asynchronous publishes at once: ten stored, ten refused.
	var futures []nats.PubAckFuture
	require.Eventually(t, func() bool {
		_, err := js.Publish("dn.probe", nil)
		return err == nil
	}, clustertest.Wait, 10*time.Millisecond)
	for k := range 20 {
		f, err := js.PublishAsync("dn.x", []byte(fmt.Sprint(k)))
		require.NoError(t, err)
		futures = append(futures, f)
	}
	stored, refused := 1, 0
	for _, f := range futures {
		select {
		case <-f.Ok():
			stored++
		case err := <-f.Err():
			require.ErrorContains(t, err, "maximum messages exceeded")
			refused++
		case <-time.After(clustertest.Wait):
			t.Fatal("no answer")
		}
	}
	require.Equal(t, 10, stored)
	require.Equal(t, 11, refused)
	require.Eventually(t, func() bool {
		reps, _ := jc.replicas("DN")
		for _, r := range reps {
			if len(r) != 10 {
				return false
			}
		}
		return true
	}, clustertest.Wait, 20*time.Millisecond, "every replica holds the ten")

	kv, err := js.CreateKeyValue(&nats.KeyValueConfig{Bucket: "cfg", Replicas: 3, History: 2})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := kv.Put("a", []byte("1"))
		return err == nil
	}, clustertest.Wait, 10*time.Millisecond)
	_, err = kv.Put("a", []byte("2"))
	require.NoError(t, err)
	e, err := kv.Get("a")
	require.NoError(t, err)
	require.Equal(t, "2", string(e.Value()))
	_, err = kv.Create("a", []byte("3"))
	require.Error(t, err, "the key exists")
	require.NoError(t, kv.Delete("a"))
	_, err = kv.Get("a")
	require.ErrorIs(t, err, nats.ErrKeyNotFound)
	require.NoError(t, kv.Purge("a"))

	// A watch: an ephemeral ordered consumer on the stream's leader.
	_, err = kv.Put("b", []byte("1"))
	require.NoError(t, err)
	w, err := kv.Watch("b")
	require.NoError(t, err)
	defer func() { _ = w.Stop() }()
	next := func() nats.KeyValueEntry {
		select {
		case e := <-w.Updates():
			return e
		case <-time.After(clustertest.Wait):
			t.Fatal("no watch update")
			return nil
		}
	}
	require.Equal(t, "1", string(next().Value()))
	require.Nil(t, next(), "the end of the initial values")
	_, err = kv.Put("b", []byte("2"))
	require.NoError(t, err)
	require.Equal(t, "2", string(next().Value()))
	keys, err := kv.Keys()
	require.NoError(t, err)
	require.Equal(t, []string{"b"}, keys)
}

// startReplicatedStream starts three servers, connects a client to the
// first and creates an R3 stream on subj, and returns the cluster, the
// client, its JetStream and the index of the stream's leader.
func startReplicatedStream(t *testing.T, name, subj string) (*jsCluster, *nats.Conn, nats.JetStreamContext, int) {
	t.Helper()
	jc := startReplicatedCluster(t, 3)
	nc, js := jc.connectJS(t, 0)
	_, err := js.AddStream(&nats.StreamConfig{Name: name, Subjects: []string{subj}, Replicas: 3})
	require.NoError(t, err)
	return jc, nc, js, jc.waitReplicated(t, name, map[uint64]string{})
}

// addR3 makes an R3 stream of cfg (its Replicas set to 3) through js,
// publishes n acknowledged messages on its first subject, their data
// prefix-0 to prefix-(n-1), waits until every running replica holds them,
// and returns them with the index of the stream's leader.
func (jc *jsCluster) addR3(t *testing.T, js nats.JetStreamContext, cfg *nats.StreamConfig, prefix string, n int) (map[uint64]string, int) {
	t.Helper()
	cfg.Replicas = 3
	_, err := js.AddStream(cfg)
	require.NoError(t, err)
	acked := map[uint64]string{}
	if n > 0 {
		publishTo(t, js, acked, cfg.Subjects[0], prefix, n)
	}
	return acked, jc.waitReplicated(t, cfg.Name, acked)
}

// startUnsyncedR3 starts three powered servers whose files fsync only
// when asked (the interval policy, an hour apart), makes the R3 stream
// cfg with n messages (addR3) through server 0, fsyncs every raft log,
// and returns the cluster, a JetStream context on server 0, the messages
// and the stream's leader: what comes after may be lost to a power loss.
func startUnsyncedR3(t *testing.T, cfg *nats.StreamConfig, n int) (*jsCluster, nats.JetStreamContext, map[uint64]string, int) {
	t.Helper()
	jc := startJSClusterPowered(t, make([]string, 3), server.Options{}, nil, newPower(3, jetstream.SyncInterval, time.Hour))
	jc.waitMeta(t)
	_, js := jc.connectJS(t, 0)
	acked, lead := jc.addR3(t, js, cfg, "early", n)
	for i := range jc.Servers {
		require.NoError(t, jc.raft(i).SyncLog(), "server %d", i)
	}
	return jc, js, acked, lead
}

// spareOf returns, of three servers, one that is neither lead nor server
// 0, whose routes the other two find each other through: the one a test
// stops while the other two go on, and restarts last.
func spareOf(lead int) int {
	if lead == 0 {
		return 1
	}
	return 3 - lead
}

// stepdownTo asks a stream's leader to hand the group to the server named
// to, and returns the answer.
func stepdownTo(t *testing.T, nc *nats.Conn, stream, to string) *nats.Msg {
	t.Helper()
	m, err := nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+stream, []byte(`{"placement":{"preferred":"`+to+`"}}`), clustertest.Wait)
	require.NoError(t, err)
	return m
}

// TestClusterReplicatedStepdown: STREAM.LEADER.STEPDOWN through any server
// has an R3 stream's leader hand the group to another replica (a
// preferred one if named), and publishing goes on; an R1 stream answers
// success with nothing to do.
func TestClusterReplicatedStepdown(t *testing.T) {
	jc, nc, js, lead := startReplicatedStream(t, "SD", "sd")
	acked := map[uint64]string{}
	to := jc.Servers[(lead+1)%3].Name()
	m := stepdownTo(t, nc, "SD", to)
	require.JSONEq(t, `{"type":"io.nats.jetstream.api.v1.stream_leader_stepdown_response","success":true}`, string(m.Data))
	require.Eventually(t, func() bool {
		_, l := jc.replicas("SD")
		return l >= 0 && jc.Servers[l].Name() == to
	}, clustertest.Wait, 10*time.Millisecond, "%s leads", to)
	publishTo(t, js, acked, "sd", "sd", 5)
	jc.waitReplicated(t, "SD", acked)

	_, err := js.AddStream(&nats.StreamConfig{Name: "ONE", Subjects: []string{"one"}})
	require.NoError(t, err)
	m, err = nc.Request("$JS.API.STREAM.LEADER.STEPDOWN.ONE", nil, clustertest.Wait)
	require.NoError(t, err)
	require.Contains(t, string(m.Data), `"success":true`)
}

// TestClusterReplicatedAsyncStepdowns: async publishes, 500 in flight,
// while the stream's leader steps down again and again. Publishes caught
// by a change of leader are refused (10008) and go again with their
// message IDs; at the end every replica holds each acknowledged message
// once, at the sequence its ack named, and nothing else.
func TestClusterReplicatedAsyncStepdowns(t *testing.T) {
	jc, nc, _, _ := startReplicatedStream(t, "ASD", "asd")
	acked := map[uint64]string{}
	done, stepped := make(chan struct{}), make(chan int)
	go func() {
		n := 0
		defer func() { stepped <- n }()
		for range 4 {
			select {
			case <-done:
				return
			case <-time.After(400 * time.Millisecond):
			}
			t.Logf("stepdown at %v", time.Now().Format("05.000"))
			if m, err := nc.Request("$JS.API.STREAM.LEADER.STEPDOWN.ASD", nil, clustertest.Wait); err == nil && strings.Contains(string(m.Data), `"success":true`) {
				n++
			}
		}
	}()
	t.Logf("start %v", time.Now().Format("05.000"))
	publishAsyncTo(t, nc, acked, "asd", 1024, 4000, 500, time.Second)
	t.Logf("end %v", time.Now().Format("05.000"))
	close(done)
	n := <-stepped
	require.NotZero(t, n, "no stepdown while publishing")
	t.Logf("%d stepdowns while publishing", n)
	jc.waitReplicated(t, "ASD", acked)
	require.Len(t, acked, 4000)
}

// TestClusterReplicatedLeaderSince: a replicated stream's info and its
// consumers', asked on any server, carry nats-server 2.12's leader_since
// (from the create on; a stepdown moves it on) and name the system
// account as the one the group's replication traffic is accounted to
// (async-nats's create_stream_with_replicas checks all three).
func TestClusterReplicatedLeaderSince(t *testing.T) {
	before := time.Now()
	jc, nc, js, lead := startReplicatedStream(t, "LS", "ls")
	_, err := js.AddConsumer("LS", &nats.ConsumerConfig{Durable: "d", AckPolicy: nats.AckExplicitPolicy})
	require.NoError(t, err)
	check := func(ci *nats.ClusterInfo, what string) time.Time {
		require.NotNil(t, ci, what)
		require.NotNil(t, ci.LeaderSince, "%s: leader_since", what)
		require.True(t, ci.SystemAcc, "%s: system_account", what)
		require.Equal(t, "$SYS", ci.TrafficAcc, "%s: traffic_account", what)
		require.Regexp(t, `^S-R3-\d+$`, ci.RaftGroup, "%s: raft_group, as RAFTZ names it", what)
		for _, r := range ci.Replicas {
			require.Regexp(t, `^[0-9A-Za-z]{8}$`, r.Peer, "%s: replica %s's peer ID", what, r.Name)
		}
		return *ci.LeaderSince
	}
	for i := range 3 {
		_, jsi := jc.connectJS(t, i)
		si, err := jsi.StreamInfo("LS")
		require.NoError(t, err)
		since := check(si.Cluster, "stream info on "+jc.Servers[i].Name())
		require.False(t, since.Before(before), "leader_since %v before the create at %v", since, before)
		require.False(t, since.After(time.Now()), "leader_since %v in the future", since)
		ci, err := jsi.ConsumerInfo("LS", "d")
		require.NoError(t, err)
		check(ci.Cluster, "consumer info on "+jc.Servers[i].Name())
		// Every field is one the published schemas define.
		nc := jc.Connect(t, i)
		for _, subj := range []string{"$JS.API.STREAM.INFO.LS", "$JS.API.CONSUMER.INFO.LS.d"} {
			m, err := nc.Request(subj, nil, clustertest.Wait)
			require.NoError(t, err)
			require.NoError(t, validateAnswer(t, m.Data, "", false), "%s on %s", subj, jc.Servers[i].Name())
		}
	}

	si, err := js.StreamInfo("LS")
	require.NoError(t, err)
	first := check(si.Cluster, "stream info")
	to := jc.Servers[(lead+1)%3].Name()
	stepdownTo(t, nc, "LS", to)
	require.Eventually(t, func() bool {
		si, err := js.StreamInfo("LS")
		return err == nil && si.Cluster != nil && si.Cluster.Leader == to &&
			si.Cluster.LeaderSince != nil && si.Cluster.LeaderSince.After(first)
	}, clustertest.Wait, 10*time.Millisecond, "%s leads, since after %v", to, first)
}

// TestClusterReplicatedLinearRead: STREAM.MSG.GET is answered by the
// stream's leader once a quorum confirms it still leads (a read index), so
// a leader cut off from its peers answers 10008 rather than what may be
// stale; with its peers back, it (or the new leader) answers again.
func TestClusterReplicatedLinearRead(t *testing.T) {
	jc, _, js, _ := startReplicatedStream(t, "LR", "lr")
	acked := map[uint64]string{}
	publishTo(t, js, acked, "lr", "lr", 3)
	lead := jc.waitReplicated(t, "LR", acked)
	ln := jc.Connect(t, lead)
	get := func(nc *nats.Conn) string {
		m, err := nc.Request("$JS.API.STREAM.MSG.GET.LR", []byte(`{"seq":2}`), clustertest.Wait)
		require.NoError(t, err)
		return string(m.Data)
	}
	require.Contains(t, get(ln), `"seq":2`)

	var others []int
	for i := range 3 {
		if i != lead {
			others = append(others, i)
			jc.Stop(t, i)
		}
	}
	require.Contains(t, get(ln), `"err_code":10008`, "a leader without its quorum answers no read")

	for _, i := range others {
		jc.Restart(t, i)
	}
	require.Eventually(t, func() bool {
		nc := jc.Connect(t, others[0])
		defer nc.Close()
		return strings.Contains(get(nc), `"seq":2`)
	}, clustertest.Wait, 100*time.Millisecond, "reads answered again")
}

// TestClusterReplicatedNATSCLI: the `nats` CLI makes and uses replicated
// assets as on nats-server: `stream add --replicas 3` (info shows the
// leader and both replicas), `kv add --replicas 3` and `object add
// --replicas 3`, each command through another server.
func TestClusterReplicatedNATSCLI(t *testing.T) {
	bin := natscli.Path(t)
	jc := startReplicatedCluster(t, 3)
	cli := func(i int) *natscli.CLI { return natscli.New(t, bin, jc.URL(i)) }

	out := cli(0).Run("stream", "add", "ORDERS", "--subjects", "orders.*", "--storage", "file", "--replicas", "3", "--defaults")
	require.Contains(t, out, "Stream ORDERS was created")
	require.Contains(t, out, "Replicas: 3")
	jc.waitReplicated(t, "ORDERS", map[uint64]string{})
	out = cli(1).Run("pub", "--jetstream", "orders.new", "order {{Count}}", "--count", "5")
	require.Contains(t, out, `Published 7 bytes to "orders.new"`)
	out = cli(2).Run("stream", "info", "ORDERS")
	require.Contains(t, out, "Messages: 5")
	_, lead := jc.replicas("ORDERS")
	require.Regexp(t, `Leader: `+jc.Servers[lead].Name(), out)
	for i := range 3 {
		if i != lead {
			require.Regexp(t, `Replica: `+jc.Servers[i].Name()+`, current`, out)
		}
	}
	out = cli(1).Run("consumer", "add", "ORDERS", "WORKER", "--pull", "--ack", "explicit", "--deliver", "all", "--defaults")
	require.Contains(t, out, "Information for Consumer ORDERS > WORKER")
	out = cli(0).Run("consumer", "next", "ORDERS", "WORKER", "--count", "3")
	require.Contains(t, out, "order 3")

	out = cli(2).Run("kv", "add", "CFG", "--replicas", "3")
	require.Contains(t, out, "CFG")
	jc.waitReplicated(t, "KV_CFG", map[uint64]string{})
	cli(0).Run("kv", "put", "CFG", "k", "v1")
	out = cli(1).Run("kv", "get", "CFG", "k", "--raw")
	require.Equal(t, "v1", strings.TrimSpace(out))

	out = cli(1).Run("object", "add", "FILES", "--replicas", "3")
	require.Contains(t, out, "FILES")
	jc.waitReplicated(t, "OBJ_FILES", map[uint64]string{})
	file := filepath.Join(t.TempDir(), "blob")
	blob := strings.Repeat("replicated object ", 20000) // several chunks
	require.NoError(t, os.WriteFile(file, []byte(blob), 0o600))
	cli(2).Run("object", "put", "FILES", file, "--name", "blob", "-f")
	got := filepath.Join(t.TempDir(), "got")
	cli(0).Run("object", "get", "FILES", "blob", "--output", got, "-f")
	b, err := os.ReadFile(got)
	require.NoError(t, err)
	require.Equal(t, blob, string(b))
	out = cli(1).Run("stream", "info", "OBJ_FILES")
	require.Contains(t, out, "Replicas: 3")
}

// TestClusterReplicatedExpectedRefusal: a leader checks
// Nats-Expected-Last-Sequence against messages it has not committed yet,
// so it answers a refusal only once they are: cut off from its peers with
// a message in flight, it never answers "wrong last sequence" naming that
// message, which the group may still lose; with its peers back, refusals
// name the committed last sequence.
func TestClusterReplicatedExpectedRefusal(t *testing.T) {
	jc, _, js, _ := startReplicatedStream(t, "EX", "ex")
	acked := map[uint64]string{}
	publishTo(t, js, acked, "ex", "ex", 2)
	lead := jc.waitReplicated(t, "EX", acked)
	ln := jc.Connect(t, lead)
	expecting := func(nc *nats.Conn, last uint64, wait time.Duration) (string, error) {
		m := nats.NewMsg("ex")
		m.Header.Set("Nats-Expected-Last-Sequence", strconv.FormatUint(last, 10))
		m.Data = []byte("expecting")
		r, err := nc.RequestMsg(m, wait)
		if err != nil {
			return "", err
		}
		return string(r.Data), nil
	}

	var others []int
	for i := range 3 {
		if i != lead {
			others = append(others, i)
			jc.Stop(t, i)
		}
	}
	// A message the leader takes and cannot commit.
	_, err := ln.Request("ex", []byte("in flight"), 200*time.Millisecond)
	require.Error(t, err, "no PubAck without a quorum")
	answer, err := expecting(ln, 2, 500*time.Millisecond)
	if err == nil {
		require.NotContains(t, answer, "wrong last sequence", "a refusal against an uncommitted message")
	}

	for _, i := range others {
		jc.Restart(t, i)
	}
	require.Eventually(t, func() bool {
		nc := jc.Connect(t, others[0])
		defer nc.Close()
		answer, err := expecting(nc, 0, time.Second)
		if err != nil || !strings.Contains(answer, "wrong last sequence") {
			return false
		}
		njs, err := nc.JetStream()
		if err != nil {
			return false
		}
		info, err := njs.StreamInfo("EX")
		return err == nil && strings.Contains(answer, fmt.Sprintf("wrong last sequence: %d", info.State.LastSeq))
	}, clustertest.Wait, 100*time.Millisecond, "refusals name the committed last sequence")
}
