package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// startJetStreamNodes starts three processes of cluster `cluster`, each
// with JetStream on and a store directory of its own, from configuration
// files.
func startJetStreamNodes(t *testing.T, cluster string) []*node {
	nodes := newNodes(t, 3)
	dir := t.TempDir()
	confNodes(t, nodes, cluster, func(n *node) string {
		return fmt.Sprintf("jetstream { store_dir: %q }", filepath.Join(dir, n.name))
	}, "")
	startCluster(t, nodes)
	return nodes
}

// TestClusterProcessesJetStream runs three `skiff serve` processes with
// JetStream and a cluster block, as nats-server users write them: they
// form one meta group, a stream created through one server is placed on
// one of them and published to and read through the others, and after the stream's
// server is killed (kill -9) and started again, every acknowledged
// message is there.
func TestClusterProcessesJetStream(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	nodes := startJetStreamNodes(t, "js")

	ctx := make([]nats.JetStreamContext, 3)
	for i, n := range nodes {
		nc, err := nats.Connect(n.clientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		ctx[i], err = nc.JetStream(nats.MaxWait(5 * time.Second))
		require.NoError(t, err)
	}
	// The meta group forms once the servers see each other.
	var info *nats.StreamInfo
	require.Eventually(t, func() bool {
		var err error
		info, err = ctx[0].AddStream(&nats.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}, Storage: nats.FileStorage})
		return err == nil
	}, 30*time.Second, 200*time.Millisecond)
	require.Equal(t, "ORDERS", info.Config.Name)

	acked := 0
	require.Eventually(t, func() bool { // the stream's interest reaches every server
		_, err := ctx[2].Publish("orders.probe", []byte("probe"))
		return err == nil
	}, 10*time.Second, 50*time.Millisecond)
	acked++
	for i := range 3 {
		for k := range 10 {
			_, err := ctx[i].Publish("orders.new", []byte(fmt.Sprintf("from %d #%d", i, k)))
			require.NoError(t, err)
			acked++
		}
	}
	placed := -1
	for i := range 3 {
		si, err := ctx[i].StreamInfo("ORDERS")
		require.NoError(t, err)
		require.Equal(t, uint64(acked), si.State.Msgs, "through %s", nodes[i].name)
		require.NotNil(t, si.Cluster, "STREAM.INFO names the stream's server")
		placed = slices.IndexFunc(nodes, func(n *node) bool { return n.name == si.Cluster.Leader })
	}
	require.GreaterOrEqual(t, placed, 0)

	// kill -9 the stream's server, start it again: nothing acknowledged
	// is lost, and a durable consumer through another server reads it all.
	nodes[placed].signal(t, syscall.SIGKILL)
	_ = nodes[placed].cmd.Wait()
	bin := buildSkiff(t)
	nodes[placed].start(t, bin)
	waitMesh(t, 15*time.Second, nodes...)
	other := (placed + 1) % 3
	require.Eventually(t, func() bool {
		si, err := ctx[other].StreamInfo("ORDERS")
		return err == nil && si.State.Msgs == uint64(acked)
	}, 30*time.Second, 100*time.Millisecond, "the acknowledged messages after the restart")
	sub, err := ctx[other].PullSubscribe("orders.>", "reader")
	require.NoError(t, err)
	got := 0
	for got < acked {
		msgs, err := sub.Fetch(acked-got, nats.MaxWait(5*time.Second))
		require.NoError(t, err)
		for _, m := range msgs {
			require.NoError(t, m.Ack())
			got++
		}
	}
	require.Equal(t, acked, got)
}
