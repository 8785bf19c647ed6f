package jetstream_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
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
	require.Eventually(t, func() bool {
		jc.mu.Lock()
		defer jc.mu.Unlock()
		for i, js := range jc.js {
			if jc.Servers[i] == nil {
				continue
			}
			_, f, pending, ok := jetstream.ReplicaConsumer(js, server.GlobalAccountName, stream, name)
			if gone == ok || (!gone && (f != floor || pending != 0)) {
				return false
			}
		}
		return true
	}, clustertest.Wait, 20*time.Millisecond, "every replica applied consumer %s at floor %d (gone %v)", name, floor, gone)
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
// the consumer was: nothing acknowledged is delivered again, nothing is
// skipped. A delete removes it from every replica.
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

	to := jc.Servers[(lead+1)%3].Name()
	stepdownTo(t, nc, "RC", to)
	require.Eventually(t, func() bool {
		_, l := jc.replicas("RC")
		return l >= 0 && jc.Servers[l].Name() == to
	}, clustertest.Wait, 10*time.Millisecond, "%s leads", to)

	fetchAck(t, js, "RC", "C", 10, done)
	for seq := range uint64(20) {
		require.True(t, done[seq+1], "message %d acknowledged", seq+1)
	}
	jc.waitConsumerApplied(t, "RC", "C", 20, false)
	// Through another server, from the new leader.
	other, err := jc.Connect(t, 2).JetStream(nats.MaxWait(clustertest.Wait))
	require.NoError(t, err)
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
