package jetstream_test

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// waitConsumerApplied waits until every running server's replica of a
// stream applied a durable consumer with the given ack floor and nothing
// pending (floor 0 and gone: the consumer is deleted everywhere).
func (jc *jsCluster) waitConsumerApplied(t *testing.T, stream, name string, floor uint64, gone bool) {
	t.Helper()
	var seen string // the replica that did not, as last seen
	ok := assert.Eventually(t, func() bool {
		jc.mu.Lock()
		defer jc.mu.Unlock()
		for i, js := range jc.js {
			if jc.Servers[i] == nil {
				continue
			}
			d, f, pending, ok := jetstream.ReplicaConsumer(js, server.GlobalAccountName, stream, name)
			if gone == ok || (!gone && (f != floor || pending != 0)) {
				seen = fmt.Sprintf("server %d: exists %v, delivered %d, floor %d, pending %d", i, ok, d, f, pending)
				return false
			}
		}
		return true
	}, clustertest.Wait, 20*time.Millisecond, "every replica applied consumer %s at floor %d (gone %v)", name, floor, gone)
	if !ok {
		t.Fatalf("consumer %s: %s", name, seen)
	}
}

// fetchAck fetches from a durable pull consumer until want messages came,
// acknowledging each synchronously; it retries across a leader change.
// It fails on a message that was acknowledged before (acked) and adds
// each acknowledged one.
func fetchAck(t *testing.T, js nats.JetStreamContext, stream, durable string, want int, acked map[uint64]bool) {
	t.Helper()
	deadline := time.Now().Add(clustertest.Wait)
	got := 0
	for got < want {
		require.True(t, time.Now().Before(deadline), "fetched %d of %d", got, want)
		sub, err := js.PullSubscribe("", durable, nats.Bind(stream, durable))
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		msgs, _ := sub.Fetch(want-got, nats.MaxWait(time.Second))
		for _, m := range msgs {
			md, err := m.Metadata()
			require.NoError(t, err)
			seq := md.Sequence.Stream
			require.False(t, acked[seq], "message %d delivered again after its ack was confirmed", seq)
			if m.AckSync(nats.AckWait(time.Second)) == nil {
				acked[seq] = true
				got++
			}
		}
		_ = sub.Unsubscribe()
	}
}

// TestClusterReplicatedConsumer: a durable consumer of an R3 stream is
// created through any server, its progress is applied by every replica,
// and after the stream's leader hands over, the new leader goes on where
// the consumer was (CONSUMER.LEADER.STEPDOWN hands the stream over):
// nothing acknowledged is delivered again, nothing is skipped. A delete
// removes it from every replica.
func TestClusterReplicatedConsumer(t *testing.T) {
	jc, nc, js, lead := startReplicatedStream(t, "RC", "rc.>")
	acked := map[uint64]string{}
	publishTo(t, js, acked, "rc.a", "m", 20)
	_, err := js.AddConsumer("RC", &nats.ConsumerConfig{Durable: "C", AckPolicy: nats.AckExplicitPolicy,
		AckWait: time.Second, Replicas: 3})
	require.NoError(t, err)

	done := map[uint64]bool{}
	fetchAck(t, js, "RC", "C", 10, done)
	jc.waitConsumerApplied(t, "RC", "C", 10, false)

	// CONSUMER.LEADER.STEPDOWN moves the consumer with its stream.
	to := jc.Servers[(lead+1)%3].Name()
	m, err := nc.Request("$JS.API.CONSUMER.LEADER.STEPDOWN.RC.C", []byte(`{"placement":{"preferred":"`+to+`"}}`), clustertest.Wait)
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"io.nats.jetstream.api.v1.consumer_leader_stepdown_response","success":true}`, string(m.Data))
	require.Eventually(t, func() bool {
		_, l := jc.replicas("RC")
		return l >= 0 && jc.Servers[l].Name() == to
	}, clustertest.Wait, 10*time.Millisecond, "%s leads", to)
	m, err = nc.Request("$JS.API.CONSUMER.LEADER.STEPDOWN.RC.NONE", nil, clustertest.Wait)
	require.NoError(t, err)
	require.Contains(t, string(m.Data), `"err_code":10014`)

	fetchAck(t, js, "RC", "C", 10, done)
	for seq := range uint64(20) {
		require.True(t, done[seq+1], "message %d acknowledged", seq+1)
	}
	jc.waitConsumerApplied(t, "RC", "C", 20, false)
	// Through another server, from the new leader.
	_, other := jc.connectJS(t, 2)
	ci, err := other.ConsumerInfo("RC", "C")
	require.NoError(t, err)
	require.Equal(t, uint64(20), ci.AckFloor.Stream)
	require.Equal(t, 0, ci.NumAckPending)
	require.Equal(t, 3, ci.Config.Replicas)
	require.Equal(t, to, ci.Cluster.Leader)

	_, err = js.AddConsumer("RC", &nats.ConsumerConfig{Durable: "R5", Replicas: 5})
	require.ErrorContains(t, err, "replica count exceeds parent stream")

	require.NoError(t, js.DeleteConsumer("RC", "C"))
	jc.waitConsumerApplied(t, "RC", "C", 0, true)
	_, err = js.ConsumerInfo("RC", "C")
	require.ErrorIs(t, err, nats.ErrConsumerNotFound)
}

// TestClusterReplicatedConsumerRecovery: a replica down while a durable
// consumer made progress and the others compacted their logs gets the
// consumer's state with the snapshot it catches up from, for a file and a
// memory stream; led by that replica, the consumer goes on where it was.
// After every server restarts, a file stream's consumer is where it was
// (its checkpointed state and the log after it).
func TestClusterReplicatedConsumerRecovery(t *testing.T) {
	jetstream.SetReplicaLog(t, 4, 256)
	jc := startReplicatedCluster(t, 3)
	nc, js := jc.connectJS(t, 0)
	names := []string{"CFILE", "CMEM"}
	done := map[string]map[uint64]bool{}
	for _, name := range names {
		cfg := &nats.StreamConfig{Name: name, Subjects: []string{strings.ToLower(name)}, Replicas: 3}
		if name == "CMEM" {
			cfg.Storage = nats.MemoryStorage
		}
		_, err := js.AddStream(cfg)
		require.NoError(t, err)
		jc.waitReplicated(t, name, map[uint64]string{})
		publishTo(t, js, map[uint64]string{}, strings.ToLower(name), "m", 30)
		_, err = js.AddConsumer(name, &nats.ConsumerConfig{Durable: "C", AckPolicy: nats.AckExplicitPolicy, AckWait: time.Second})
		require.NoError(t, err)
		done[name] = map[uint64]bool{}
		fetchAck(t, js, name, "C", 5, done[name])
		jc.waitConsumerApplied(t, name, "C", 5, false)
	}

	const victim = 2
	behind := jc.stopBehind(t, victim, names)
	for _, name := range names {
		fetchAck(t, js, name, "C", 15, done[name])
		jc.waitConsumerApplied(t, name, "C", 20, false)
	}
	jc.waitCompacted(t, behind, victim)

	jc.Restart(t, victim)
	jc.waitMeta(t)
	to := jc.Servers[victim].Name()
	for _, name := range names {
		jc.waitConsumerApplied(t, name, "C", 20, false)
		_, _, _, chunks := jc.replicaLog(victim, name)
		require.Positive(t, chunks, "%s: caught up from a snapshot", name)
		require.Eventually(t, func() bool {
			stepdownTo(t, nc, name, to)
			_, l := jc.replicas(name)
			return l == victim
		}, clustertest.Wait, 100*time.Millisecond, "%s leads %s", to, name)
		fetchAck(t, js, name, "C", 10, done[name])
		require.Len(t, done[name], 30)
		jc.waitConsumerApplied(t, name, "C", 30, false)
	}

	// Every server restarts: the file stream's consumer is where it was.
	jc.RestartAll(t)
	jc.waitMeta(t)
	nc, js = jc.connectJS(t, 0)
	jc.waitConsumerApplied(t, "CFILE", "C", 30, false)
	publishTo(t, js, map[uint64]string{}, "cfile", "n", 5)
	fetchAck(t, js, "CFILE", "C", 5, done["CFILE"])
	for seq := range uint64(35) {
		require.True(t, done["CFILE"][seq+1], "message %d acknowledged once", seq+1)
	}
}

// TestClusterReplicatedRetention: a work-queue R3 stream loses a message
// on every replica once its consumer acknowledged it, through a change of
// leader; an interest R3 stream keeps nothing nobody is interested in,
// and loses a message once every consumer that wanted it acknowledged it.
func TestClusterReplicatedRetention(t *testing.T) {
	jc, nc, js, _ := startReplicatedStream(t, "PLAIN", "plain")
	acked, _ := jc.addR3(t, js, &nats.StreamConfig{Name: "WQ", Subjects: []string{"wq.>"}, Retention: nats.WorkQueuePolicy}, "", 0)
	publishTo(t, js, acked, "wq.a", "m", 20)
	_, err := js.AddConsumer("WQ", &nats.ConsumerConfig{Durable: "W", AckPolicy: nats.AckExplicitPolicy, AckWait: time.Second})
	require.NoError(t, err)
	done := map[uint64]bool{}
	fetchAck(t, js, "WQ", "W", 10, done)
	left := map[uint64]string{}
	for seq, v := range acked {
		if !done[seq] {
			left[seq] = v
		}
	}
	wqLead := jc.waitReplicated(t, "WQ", left)
	to := jc.Servers[(wqLead+1)%3].Name()
	require.Eventually(t, func() bool {
		stepdownTo(t, nc, "WQ", to)
		_, l := jc.replicas("WQ")
		return l >= 0 && jc.Servers[l].Name() == to
	}, clustertest.Wait, 100*time.Millisecond, "%s leads WQ", to)
	fetchAck(t, js, "WQ", "W", 10, done)
	jc.waitReplicated(t, "WQ", map[uint64]string{})
	_, err = js.AddConsumer("WQ", &nats.ConsumerConfig{Durable: "W2", AckPolicy: nats.AckExplicitPolicy})
	require.Error(t, err, "one unfiltered consumer on a work queue")

	_, err = js.AddStream(&nats.StreamConfig{Name: "INT", Subjects: []string{"int.>"}, Replicas: 3, Retention: nats.InterestPolicy})
	require.NoError(t, err)
	jc.waitReplicated(t, "INT", map[uint64]string{})
	publishTo(t, js, map[uint64]string{}, "int.a", "nobody", 3)
	jc.waitReplicated(t, "INT", map[uint64]string{})
	for _, name := range []string{"I1", "I2"} {
		_, err = js.AddConsumer("INT", &nats.ConsumerConfig{Durable: name, AckPolicy: nats.AckExplicitPolicy, AckWait: time.Second})
		require.NoError(t, err)
	}
	kept := map[uint64]string{}
	publishTo(t, js, kept, "int.a", "wanted", 5)
	jc.waitReplicated(t, "INT", kept)
	fetchAck(t, js, "INT", "I1", 5, map[uint64]bool{})
	jc.waitReplicated(t, "INT", kept) // I2 still wants them
	fetchAck(t, js, "INT", "I2", 5, map[uint64]bool{})
	jc.waitReplicated(t, "INT", map[uint64]string{})
	si, err := js.StreamInfo("INT")
	require.NoError(t, err)
	require.Equal(t, uint64(8), si.State.LastSeq, "every publish took a sequence")
}

// TestClusterReplicatedRetentionRemovalDropped: a work-queue R3 stream
// whose leader's removals of acknowledged messages are dropped (raft may
// drop a proposal and keep its leader) still loses them: the leader
// sweeps again within a second, where only a new leader swept before,
// and the acknowledged messages stayed on every replica for good.
func TestClusterReplicatedRetentionRemovalDropped(t *testing.T) {
	jc, _, js, _ := startReplicatedStream(t, "PLAIN", "plain")
	jc.addR3(t, js, &nats.StreamConfig{Name: "WQD", Subjects: []string{"wqd"}, Retention: nats.WorkQueuePolicy}, "m", 10)
	_, err := js.AddConsumer("WQD", &nats.ConsumerConfig{Durable: "W", AckPolicy: nats.AckExplicitPolicy, AckWait: time.Minute})
	require.NoError(t, err)
	var dropped atomic.Int64
	jetstream.SetRemoveHook(t, func(seqs []uint64) error {
		if dropped.Load() == 0 {
			dropped.Add(int64(len(seqs)))
			return errors.New("dropped by the test")
		}
		return nil
	})
	done := map[uint64]bool{}
	fetchAck(t, js, "WQD", "W", 10, done)
	require.Positive(t, dropped.Load(), "no removal was dropped")
	jc.waitReplicated(t, "WQD", map[uint64]string{})
}

// TestClusterReplicatedExpiry: max_age and per-message TTLs of an R3
// stream run on the log's time: with nothing published, the leader's
// ticks expire the same messages on every replica.
func TestClusterReplicatedExpiry(t *testing.T) {
	jc, _, js, _ := startReplicatedStream(t, "PLAIN", "plain")
	_, err := js.AddStream(&nats.StreamConfig{Name: "AGED", Subjects: []string{"aged"}, Replicas: 3, MaxAge: 2 * time.Second})
	require.NoError(t, err)
	_, err = js.AddStream(&nats.StreamConfig{Name: "TTL", Subjects: []string{"ttl.>"}, Replicas: 3, AllowMsgTTL: true})
	require.NoError(t, err)
	jc.waitReplicated(t, "AGED", map[uint64]string{})
	jc.waitReplicated(t, "TTL", map[uint64]string{})
	aged := map[uint64]string{}
	publishTo(t, js, aged, "aged", "old", 5)
	jc.waitReplicated(t, "AGED", aged)

	keep := map[uint64]string{}
	publishTo(t, js, keep, "ttl.keep", "kept", 1)
	m := nats.NewMsg("ttl.short")
	m.Data = []byte("short")
	m.Header.Set("Nats-TTL", "1s")
	_, err = js.PublishMsg(m)
	require.NoError(t, err)
	publishTo(t, js, keep, "ttl.keep", "kept", 1)

	jc.waitReplicated(t, "AGED", map[uint64]string{})
	jc.waitReplicated(t, "TTL", keep)
	// Publishing goes on at the next sequences.
	after := map[uint64]string{}
	publishTo(t, js, after, "aged", "new", 1)
	require.Contains(t, after, uint64(6))
}

// TestClusterReplicatedUpdate: an update of an R3 stream goes through its
// group: every replica takes the new limits at the same place (the same
// messages evicted), new subjects are taken by the leader, and after every
// server restarts the configuration stays (an older one is not replayed
// over it). Changing num_replicas is refused.
func TestClusterReplicatedUpdate(t *testing.T) {
	jc, _, js, _ := startReplicatedStream(t, "UP", "up.a")
	want := map[uint64]string{}
	publishTo(t, js, want, "up.a", "m", 10)
	jc.waitReplicated(t, "UP", want)
	// Lowered, then raised again: the replay after the restart must not
	// lower it again.
	cfg := &nats.StreamConfig{Name: "UP", Subjects: []string{"up.a", "up.b"}, Replicas: 3, MaxMsgs: 4}
	si, err := js.UpdateStream(cfg)
	require.NoError(t, err)
	require.Equal(t, int64(4), si.Config.MaxMsgs)
	for seq := range want {
		if seq <= 6 {
			delete(want, seq)
		}
	}
	jc.waitReplicated(t, "UP", want)
	publishTo(t, js, want, "up.b", "b", 2)
	delete(want, 7)
	delete(want, 8)
	jc.waitReplicated(t, "UP", want)
	cfg.MaxMsgs = -1
	_, err = js.UpdateStream(cfg)
	require.NoError(t, err)
	publishTo(t, js, want, "up.a", "n", 6)
	jc.waitReplicated(t, "UP", want)
	require.Len(t, want, 10)

	jc.RestartAll(t)
	jc.waitMeta(t)
	jc.waitReplicated(t, "UP", want)
	_, js = jc.connectJS(t, 2)
	si, err = js.StreamInfo("UP")
	require.NoError(t, err)
	require.Equal(t, int64(-1), si.Config.MaxMsgs)
	require.Equal(t, []string{"up.a", "up.b"}, si.Config.Subjects)

	// Scaled down after the restart: one replica keeps every message.
	cfg.Replicas = 1
	_, err = js.UpdateStream(cfg)
	require.NoError(t, err)
	jc.waitHolders(t, "UP", 1, want)
}

// TestClusterReplicatedJsz: /jsz on every server details an R3 stream as
// nats-server's StreamDetail does, with its cluster (the leader, the other
// replicas) and its raft group, and counts the server's raft groups in
// ha_assets.
func TestClusterReplicatedJsz(t *testing.T) {
	jc := startReplicatedClusterWith(t, 3, server.Options{HTTPPort: server.RandomPort})
	_, js := jc.connectJS(t, 0)
	_, err := js.AddStream(&nats.StreamConfig{Name: "JZ", Subjects: []string{"jz"}, Replicas: 3})
	require.NoError(t, err)
	leader := jc.Servers[jc.waitReplicated(t, "JZ", map[uint64]string{})].Name()
	for _, s := range jc.Servers {
		var v natsserver.JSInfo
		require.Eventually(t, func() bool {
			v = natsserver.JSInfo{}
			if monitorJSON(t, s, "/jsz?streams=true", &v) != 200 || len(v.AccountDetails) != 1 || len(v.AccountDetails[0].Streams) != 1 {
				return false
			}
			c := v.AccountDetails[0].Streams[0].Cluster
			return c != nil && c.Leader == leader && len(c.Replicas) == 2
		}, clustertest.Wait, 20*time.Millisecond, "%s details JZ led by %s", s.Name(), leader)
		require.True(t, strings.HasPrefix(v.AccountDetails[0].Streams[0].RaftGroup, "S-R3-"), v.AccountDetails[0].Streams[0].RaftGroup)
		require.Equal(t, 2, v.HAAssets, "the meta group and JZ's")
	}
}

// TestClusterReplicatedAckUnconfirmed: a synchronous ack the stream's
// leader cannot have committed (its peers are gone) gets no answer at
// all, as on nats-server: clients take any answer, an error too, for the
// confirmation (nats.go's AckSync does), and an ack a client believes
// confirmed must never come back as a redelivery. With the peers back,
// the retried ack is confirmed and the consumer goes on with the next
// message.
func TestClusterReplicatedAckUnconfirmed(t *testing.T) {
	jc, _, js, lead := startReplicatedStream(t, "AU", "au")
	acked := map[uint64]string{}
	publishTo(t, js, acked, "au", "m", 2)
	jc.waitReplicated(t, "AU", acked)
	_, err := js.AddConsumer("AU", &nats.ConsumerConfig{Durable: "D", AckPolicy: nats.AckExplicitPolicy, AckWait: time.Minute})
	require.NoError(t, err)
	_, ljs := jc.connectJS(t, lead)
	sub, err := ljs.PullSubscribe("", "D", nats.Bind("AU", "D"))
	require.NoError(t, err)
	msgs, err := sub.Fetch(1, nats.MaxWait(clustertest.Wait))
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	// Every replica has the consumer, at floor 0; the delivery may or may
	// not be applied yet (waitConsumerApplied wants nothing pending, so it
	// failed whenever the delivery was: one run in eight).
	require.Eventually(t, func() bool {
		jc.mu.Lock()
		defer jc.mu.Unlock()
		for i, js := range jc.js {
			if _, floor, _, ok := jetstream.ReplicaConsumer(js, server.GlobalAccountName, "AU", "D"); jc.Servers[i] != nil && (!ok || floor != 0) {
				return false
			}
		}
		return true
	}, clustertest.Wait, 20*time.Millisecond, "every replica applied consumer D")

	var others []int
	for i := range 3 {
		if i != lead {
			others = append(others, i)
			jc.Stop(t, i)
		}
	}
	// The leader loses its quorum (CheckQuorum) within an election
	// timeout and gives the ack up; nothing may answer it.
	require.ErrorIs(t, msgs[0].AckSync(nats.AckWait(3*time.Second)), nats.ErrTimeout,
		"an ack the group could not commit is not confirmed")

	for _, i := range others {
		jc.Restart(t, i)
	}
	require.Eventually(t, func() bool {
		return msgs[0].AckSync(nats.AckWait(time.Second)) == nil
	}, clustertest.Wait, 100*time.Millisecond, "the retried ack is confirmed")
	_, njs := jc.connectJS(t, others[0])
	require.Eventually(t, func() bool {
		sub, err := njs.PullSubscribe("", "D", nats.Bind("AU", "D"))
		if err != nil {
			return false
		}
		defer func() { _ = sub.Unsubscribe() }()
		next, err := sub.Fetch(1, nats.MaxWait(time.Second))
		if err != nil || len(next) == 0 {
			return false
		}
		md, err := next[0].Metadata()
		require.NoError(t, err)
		require.Equal(t, uint64(2), md.Sequence.Stream, "the acknowledged message is not delivered again")
		return true
	}, clustertest.Wait, 100*time.Millisecond)
}
