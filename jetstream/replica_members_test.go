package jetstream_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
)

// holders returns the names of the servers that hold a replica of a
// global-account stream, sorted.
func (jc *jsCluster) holders(name string) []string {
	reps, _ := jc.replicas(name)
	var out []string
	for i, r := range reps {
		if r != nil {
			out = append(out, jc.Servers[i].Name())
		}
	}
	slices.Sort(out)
	return out
}

// waitHolders waits until exactly n servers hold a replica of the stream,
// each with every acknowledged message, and one leads; it returns them.
func (jc *jsCluster) waitHolders(t *testing.T, name string, n int, acked map[uint64]string) []string {
	t.Helper()
	var holders []string
	require.Eventually(t, func() bool {
		reps, lead := jc.replicas(name)
		holders = holders[:0]
		for i, r := range reps {
			if r == nil {
				continue
			}
			if len(r) != len(acked) {
				return false
			}
			for seq, data := range acked {
				if r[seq] != data {
					return false
				}
			}
			holders = append(holders, jc.Servers[i].Name())
		}
		return len(holders) == n && lead >= 0
	}, 2*clustertest.Wait, 20*time.Millisecond, "%d servers hold %s's %d acknowledged messages (now %v)", n, name, len(acked), jc.holders(name))
	slices.Sort(holders)
	return holders
}

// streamReplicas returns the replica count and the cluster replicas (not
// the leader) STREAM.INFO reports.
func streamReplicas(t *testing.T, js nats.JetStreamContext, name string) (int, []string) {
	t.Helper()
	info, err := js.StreamInfo(name)
	require.NoError(t, err)
	var peers []string
	for _, p := range info.Cluster.Replicas {
		peers = append(peers, p.Name)
	}
	return info.Config.Replicas, peers
}

// ackTen creates the durable pull consumer D of a stream and acknowledges
// its first ten messages.
func ackTen(t *testing.T, js nats.JetStreamContext, stream, subj string) {
	t.Helper()
	_, err := js.AddConsumer(stream, &nats.ConsumerConfig{Durable: "D", AckPolicy: nats.AckExplicitPolicy})
	require.NoError(t, err)
	sub, err := js.PullSubscribe(subj, "D", nats.Bind(stream, "D"))
	require.NoError(t, err)
	msgs, err := sub.Fetch(10, nats.MaxWait(clustertest.Wait))
	require.NoError(t, err)
	for _, m := range msgs {
		require.NoError(t, m.AckSync())
	}
}

// requireAckedTen waits until ackTen's consumer reports its ten
// acknowledgements, and the rest of the stream's total messages pending.
func requireAckedTen(t *testing.T, js nats.JetStreamContext, stream string, total int, step string) {
	t.Helper()
	require.Eventually(t, func() bool {
		ci, err := js.ConsumerInfo(stream, "D")
		return err == nil && ci.AckFloor.Stream == 10 && ci.NumPending == uint64(total-10)
	}, clustertest.Wait, 50*time.Millisecond, "%s: the consumer keeps its acknowledgements", step)
}

// TestClusterReplicatedScale: an R3 stream with a durable consumer is
// scaled to five replicas, down to one and back to three by stream
// update. At each step the meta state places it anew, the leader changes
// its group's members, new replicas catch up with every acknowledged
// message, removed ones drop their copies, publishing goes on, and the
// consumer keeps its acknowledgements.
func TestClusterReplicatedScale(t *testing.T) {
	jc := startReplicatedCluster(t, 5)
	_, js := jc.connectJS(t, 0)
	_, err := js.AddStream(&nats.StreamConfig{Name: "SC", Subjects: []string{"sc.>"}, Replicas: 3})
	require.NoError(t, err)
	acked := map[uint64]string{}
	publishTo(t, js, acked, "sc.a", "r3", 20)
	require.Len(t, jc.waitHolders(t, "SC", 3, acked), 3)
	ackTen(t, js, "SC", "sc.>")
	checkConsumer := func(step string) {
		t.Helper()
		requireAckedTen(t, js, "SC", len(acked), step)
	}

	for _, step := range []struct {
		replicas int
		prefix   string
	}{{5, "r5"}, {1, "r1"}, {3, "r3again"}} {
		info, err := js.UpdateStream(&nats.StreamConfig{Name: "SC", Subjects: []string{"sc.>"}, Replicas: step.replicas})
		require.NoError(t, err, "scale to %d", step.replicas)
		require.Equal(t, step.replicas, info.Config.Replicas)
		// Publishing goes on while the members change.
		publishTo(t, js, acked, "sc.a", step.prefix, 20)
		holders := jc.waitHolders(t, "SC", step.replicas, acked)
		require.Eventually(t, func() bool {
			n, peers := streamReplicas(t, js, "SC")
			return n == step.replicas && len(peers) == step.replicas-1
		}, clustertest.Wait, 50*time.Millisecond, "STREAM.INFO reports R%d", step.replicas)
		checkConsumer(fmt.Sprintf("R%d", step.replicas))
		t.Logf("R%d on %v", step.replicas, holders)
	}
	// The stream was R1 with a group of one: its PubAck, reads and
	// consumer work as for any replicated stream, and it deletes.
	require.NoError(t, js.DeleteStream("SC"))
	require.Eventually(t, func() bool { return len(jc.holders("SC")) == 0 }, clustertest.Wait, 20*time.Millisecond)
}

// TestClusterReplicatedPeerRemove: STREAM.PEER.REMOVE replaces a replica
// by a server that has none (the leader first adds it, then removes the
// old one), for a follower and for the leader itself; every acknowledged
// message stays, and the removed server drops its copy. Refusals: a peer
// that holds no replica (10040), no server to replace it with (10075), no
// peer named.
func TestClusterReplicatedPeerRemove(t *testing.T) {
	jc := startReplicatedCluster(t, 4)
	nc, js := jc.connectJS(t, 0)
	_, err := js.AddStream(&nats.StreamConfig{Name: "PR", Subjects: []string{"pr"}, Replicas: 3})
	require.NoError(t, err)
	acked := map[uint64]string{}
	publishTo(t, js, acked, "pr", "a", 20)
	before := jc.waitHolders(t, "PR", 3, acked)
	_, lead := jc.replicas("PR")
	leader := jc.Servers[lead].Name()
	var spare string
	for i := range jc.Servers {
		if n := jc.Servers[i].Name(); !slices.Contains(before, n) {
			spare = n
		}
	}
	remove := func(peer string) map[string]any {
		t.Helper()
		return requestJSON(t, nc, "$JS.API.STREAM.PEER.REMOVE.PR", []byte(`{"peer":"`+peer+`"}`), clustertest.Wait)
	}

	require.Equal(t, float64(10040), errCodeOf(remove(spare)), "not a member")
	m, err := nc.Request("$JS.API.STREAM.PEER.REMOVE.PR", nil, clustertest.Wait)
	require.NoError(t, err)
	require.Contains(t, string(m.Data), `"code":400`, "no peer named")

	// A follower, replaced by the spare server.
	var follower string
	for _, n := range before {
		if n != leader {
			follower = n
			break
		}
	}
	require.Equal(t, true, remove(follower)["success"])
	publishTo(t, js, acked, "pr", "b", 20)
	now := jc.waitHolders(t, "PR", 3, acked)
	require.Contains(t, now, spare)
	require.NotContains(t, now, follower)

	// The leader itself: it hands over, and the new leader removes it.
	require.Equal(t, true, remove(leader)["success"])
	publishTo(t, js, acked, "pr", "c", 20)
	now = jc.waitHolders(t, "PR", 3, acked)
	require.NotContains(t, now, leader)
	require.Contains(t, now, follower)
	_, lead = jc.replicas("PR")
	require.NotEqual(t, leader, jc.Servers[lead].Name())

	// Every server holds a replica of an R4 stream: none to replace with.
	_, err = js.UpdateStream(&nats.StreamConfig{Name: "PR", Subjects: []string{"pr"}, Replicas: 4})
	require.NoError(t, err)
	jc.waitHolders(t, "PR", 4, acked)
	require.Equal(t, float64(10075), errCodeOf(remove(leader)), "no replacement")
}

// TestClusterScaleUpFromOne: a stream made with one replica (no raft
// group) is scaled to three: its server turns it into a replicated stream
// in place, founding the group over its messages and its durable
// consumers, and the two new replicas take every message from it; the
// consumers keep their acknowledgements (D from its state on disk, M, with
// mem_storage, from its state as it stopped; on a memory stream both from
// memory), and publishing goes on. A file stream then survives a restart
// of every server; a memory stream, a restart of a follower, which takes
// the messages from its peers again.
func TestClusterScaleUpFromOne(t *testing.T) {
	for _, storage := range []nats.StorageType{nats.FileStorage, nats.MemoryStorage} {
		t.Run(storage.String(), func(t *testing.T) {
			jc := startReplicatedCluster(t, 3)
			_, js := jc.connectJS(t, 0)
			cfg := &nats.StreamConfig{Name: "UP1", Subjects: []string{"up1.>"}, Storage: storage}
			_, err := js.AddStream(cfg)
			require.NoError(t, err)
			acked := map[uint64]string{}
			publishTo(t, js, acked, "up1.a", "one", 30)
			require.NoError(t, js.DeleteMsg("UP1", 3)) // a gap, kept
			delete(acked, 3)
			require.Len(t, jc.holders("UP1"), 1, "made with one replica, without a group")
			ackTen(t, js, "UP1", "up1.>")
			_, err = js.AddConsumer("UP1", &nats.ConsumerConfig{Durable: "M", AckPolicy: nats.AckExplicitPolicy, MemoryStorage: true})
			require.NoError(t, err)
			sub, err := js.PullSubscribe("up1.>", "M", nats.Bind("UP1", "M"))
			require.NoError(t, err)
			msgs, err := sub.Fetch(6, nats.MaxWait(clustertest.Wait))
			require.NoError(t, err)
			for _, m := range msgs[:4] {
				require.NoError(t, m.AckSync())
			}
			require.NoError(t, sub.Unsubscribe())
			checkConsumers := func(step string) {
				t.Helper()
				total := len(acked)
				require.Eventually(t, func() bool {
					d, err := js.ConsumerInfo("UP1", "D")
					if err != nil || d.AckFloor.Stream != 11 || d.NumPending != uint64(total-10) {
						return false
					}
					m, err := js.ConsumerInfo("UP1", "M")
					return err == nil && m.AckFloor.Stream == 5 && m.NumAckPending == 2 && m.NumPending == uint64(total-6)
				}, clustertest.Wait, 50*time.Millisecond, "%s: the consumers keep their acknowledgements", step)
			}
			checkConsumers("R1")

			cfg.Replicas = 3
			info, err := js.UpdateStream(cfg)
			require.NoError(t, err)
			require.Equal(t, 3, info.Config.Replicas)
			require.Eventually(t, func() bool {
				ack, err := js.Publish("up1.a", []byte("one-5"), nats.MsgId("one-5"), nats.AckWait(time.Second))
				return err == nil && ack.Duplicate && ack.Sequence == 6
			}, clustertest.Wait, 10*time.Millisecond, "a publish retried across the turn is a duplicate")
			publishTo(t, js, acked, "up1.a", "three", 20)
			jc.waitHolders(t, "UP1", 3, acked)
			checkConsumers("R3")
			require.Eventually(t, func() bool {
				n, peers := streamReplicas(t, js, "UP1")
				return n == 3 && len(peers) == 2
			}, clustertest.Wait, 50*time.Millisecond, "STREAM.INFO reports R3")
			info, err = js.StreamInfo("UP1")
			require.NoError(t, err)
			require.Equal(t, 1, info.State.NumDeleted, "the gap is kept")

			if storage == nats.FileStorage {
				jc.RestartAll(t)
				jc.waitMeta(t)
				_, js = jc.connectJS(t, 1)
			} else {
				follower := (jc.streamLeaderOf("UP1") + 1) % 3
				jc.Stop(t, follower)
				jc.Restart(t, follower)
				_, js = jc.connectJS(t, follower)
			}
			jc.waitHolders(t, "UP1", 3, acked)
			publishTo(t, js, acked, "up1.a", "restarted", 5)
			jc.waitHolders(t, "UP1", 3, acked)
			checkConsumers("after a restart")
		})
	}
}

// TestClusterScaleUpFromOneTighter: an update that scales a stream made
// with one replica up and lowers its max_msgs under discard new keeps the
// newest messages, as an update of any stream does: the limits remove the
// oldest, whatever the discard policy, which governs new messages only.
func TestClusterScaleUpFromOneTighter(t *testing.T) {
	for _, storage := range []nats.StorageType{nats.FileStorage, nats.MemoryStorage} {
		t.Run(storage.String(), func(t *testing.T) {
			jc := startReplicatedCluster(t, 3)
			_, js := jc.connectJS(t, 0)
			cfg := &nats.StreamConfig{Name: "TIGHT", Subjects: []string{"tight"}, Storage: storage, Discard: nats.DiscardNew}
			_, err := js.AddStream(cfg)
			require.NoError(t, err)
			acked := map[uint64]string{}
			publishTo(t, js, acked, "tight", "m", 10)
			cfg.Replicas, cfg.MaxMsgs = 3, 5
			_, err = js.UpdateStream(cfg)
			require.NoError(t, err)
			for seq := range uint64(5) {
				delete(acked, seq+1)
			}
			jc.waitHolders(t, "TIGHT", 3, acked)
			_, err = js.Publish("tight", []byte("one more"))
			require.Error(t, err, "discard new: full")
		})
	}
}
