package jetstream_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
	"github.com/skiffmq/skiff/store"
)

// TestClusterReplicatedPayloadsWrittenOnce: the messages of an R3 file
// stream under the interval and never policies go to each replica's files
// once, to its store, staged when its raft log takes them; the log keeps a
// head of each entry (replica_payloads.go). Every replica's log grows by
// far less than the messages, every store holds them, and a replica
// stopped and started again (its log replayed from its checkpoint, its
// staged records committed or cut) holds them too, as does one that joins
// after small and large messages were mixed (these kept whole). Under
// always the entries stay whole: the log grows by the messages.
func TestClusterReplicatedPayloadsWrittenOnce(t *testing.T) {
	for _, tc := range []struct {
		sync   store.SyncPolicy
		staged bool
	}{
		{store.SyncInterval, true},
		{store.SyncNever, true},
		{store.SyncAlways, false},
	} {
		t.Run(tc.sync.String(), func(t *testing.T) { testPayloadsWrittenOnce(t, tc.sync, tc.staged) })
	}
}

func testPayloadsWrittenOnce(t *testing.T, sync store.SyncPolicy, staged bool) {
	jc := startJSClusterTuned(t, make([]string, 3), server.Options{}, nil, func(_ int, o *jetstream.Options) {
		o.Cluster.Durability = store.Durability{Sync: sync}
	}, nil)
	jc.waitMeta(t)
	_, js := jc.connectJS(t, 0)
	_, err := js.AddStream(&nats.StreamConfig{Name: "ONCE", Subjects: []string{"once"}, Replicas: 3})
	require.NoError(t, err)
	before := make([]int64, len(jc.Servers))
	for i := range jc.Servers {
		before[i] = jc.raft(i).LogStats().Bytes
	}
	big := strings.Repeat("k", 1024)
	acked := map[uint64]string{}
	const n = 300
	for k := range n {
		data := fmt.Sprintf("%d-%s", k, big)
		ack, err := js.Publish("once", []byte(data))
		require.NoError(t, err)
		acked[ack.Sequence] = data
	}
	lead := jc.waitReplicated(t, "ONCE", acked)
	for i := range jc.Servers {
		grew := jc.raft(i).LogStats().Bytes - before[i]
		if staged {
			assert.Less(t, grew, int64(n*len(big)/4), "server %d's raft log grew by %d bytes for %d KiB of messages", i, grew, n)
		} else {
			assert.Greater(t, grew, int64(n*len(big)), "server %d's raft log grew by %d bytes for %d KiB of messages", i, grew, n)
		}
	}

	// A follower stopped and started again, then small messages (kept
	// whole) mixed with large ones (staged).
	victim := (lead + 1) % 3
	_, js = jc.connectJS(t, lead)
	jc.Stop(t, victim)
	for k := range 40 {
		data := fmt.Sprintf("mixed-%d", k)
		if k%2 == 0 {
			data += big
		}
		var ack *nats.PubAck
		require.Eventually(t, func() bool {
			var err error
			ack, err = js.Publish("once", []byte(data), nats.AckWait(time.Second))
			return err == nil
		}, clustertest.Wait, 10*time.Millisecond)
		acked[ack.Sequence] = data
	}
	jc.Restart(t, victim)
	jc.waitReplicated(t, "ONCE", acked)
}
