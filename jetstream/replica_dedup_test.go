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

// leadsAlone reports whether server i's replica of a global-account
// stream leads and no other running replica believes it does.
func (jc *jsCluster) leadsAlone(name string, i int) bool {
	jc.mu.Lock()
	defer jc.mu.Unlock()
	for k, js := range jc.js {
		if jc.Servers[k] == nil || js == nil {
			continue
		}
		if _, leads, _ := jetstream.LocalStream(js, server.GlobalAccountName, name); leads != (k == i) {
			return false
		}
	}
	return true
}

// TestClusterReplicatedDedupAfterLostEntry: a leader cut off from its
// group takes a publish with a message ID and proposes it; it never
// commits, and the other two go on under a new leader, whose messages
// take its sequence. Back in the group, and leading again, the old
// leader must not take the publisher's retry, with the same ID, for a
// duplicate of a message it never stored: the retry is stored, and its
// PubAck names the sequence that holds it.
func TestClusterReplicatedDedupAfterLostEntry(t *testing.T) {
	jc, _, _, lead := startReplicatedStream(t, "DD", "dd")
	acked := map[uint64]string{}
	ncLead, jsLead := jc.connectJS(t, lead)
	other := (lead + 1) % 3
	_, jsOther := jc.connectJS(t, other)
	publishTo(t, jsLead, acked, "dd", "before", 3)
	jc.waitReplicated(t, "DD", acked)

	// The leader's raft links go down; its routes stay up, so a publish
	// through its server still reaches it while it believes it leads.
	names := map[string]int{}
	for i := range jc.Servers {
		names[jc.Servers[i].Name()] = i
	}
	jc.raft(lead).SetPartition(func(string) bool { return true })
	for i := range jc.Servers {
		if i != lead {
			jc.raft(i).SetPartition(func(peer string) bool { return names[peer] == lead })
		}
	}
	_, err := jsLead.Publish("dd", []byte("lost"), nats.MsgId("x"), nats.AckWait(200*time.Millisecond))
	require.Error(t, err, "a publish the group never took is acknowledged")

	// The other two elect one of them and store messages at the lost
	// publish's sequence and after.
	require.Eventually(t, func() bool { return jc.leadsAlone("DD", other) || jc.leadsAlone("DD", 3-lead-other) },
		clustertest.Wait, 10*time.Millisecond, "the majority elects a leader, and the old one steps down")
	publishTo(t, jsOther, acked, "dd", "during", 3)

	for i := range jc.Servers {
		jc.raft(i).SetPartition(nil)
	}
	jc.waitReplicated(t, "DD", acked)
	m := stepdownTo(t, ncLead, "DD", jc.Servers[lead].Name())
	require.Contains(t, string(m.Data), `"success":true`)
	require.Eventually(t, func() bool { return jc.leadsAlone("DD", lead) }, clustertest.Wait, 10*time.Millisecond,
		"the old leader leads again")

	var ack *nats.PubAck
	require.Eventually(t, func() bool {
		ack, err = jsLead.Publish("dd", []byte("retried"), nats.MsgId("x"), nats.AckWait(time.Second))
		return err == nil
	}, clustertest.Wait, 10*time.Millisecond)
	require.False(t, ack.Duplicate, "a retry acknowledged as a duplicate of a message never stored, at sequence %d", ack.Sequence)
	require.NotContains(t, acked, ack.Sequence, "sequence %d acknowledged for two messages", ack.Sequence)
	acked[ack.Sequence] = "retried"
	jc.waitReplicated(t, "DD", acked)
}

// TestClusterReplicatedStaleBatch: a batch its leader decided in one
// term and raft appended in another is skipped by every replica; its
// publisher hears 10008 at once rather than waiting out its timeout, its
// message ID is no duplicate, and the next publishes take the sequences
// it would have had.
func TestClusterReplicatedStaleBatch(t *testing.T) {
	jc, _, _, lead := startReplicatedStream(t, "ST", "st")
	acked := map[uint64]string{}
	nc, js := jc.connectJS(t, lead)
	publishTo(t, js, acked, "st", "before", 3)
	jc.waitReplicated(t, "ST", acked)

	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	jc.mu.Lock()
	err = jetstream.ProposeStale(jc.js[lead], server.GlobalAccountName, "ST", "st", "y", "stale", inbox)
	jc.mu.Unlock()
	require.NoError(t, err)
	m, err := sub.NextMsg(clustertest.Wait / 2)
	require.NoError(t, err, "the stale batch's publisher is not answered")
	require.Contains(t, string(m.Data), `"err_code":10008`)

	ack, err := js.Publish("st", []byte("retried"), nats.MsgId("y"))
	require.NoError(t, err)
	require.False(t, ack.Duplicate, "the retry is taken for a duplicate of a message never stored")
	require.Equal(t, uint64(4), ack.Sequence)
	acked[ack.Sequence] = "retried"
	publishTo(t, js, acked, "st", "after", 2)
	jc.waitReplicated(t, "ST", acked)
}
