package jetstream_test

import (
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// A consumer with sample_freq publishes an ack metric per sampled ack, in
// the published schema; a malformed frequency is refused (10095).
func TestAckSampling(t *testing.T) {
	b := startBroker(t, "")
	nc, js := connect(t, b.srv.ClientURL())
	_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "S", Subjects: []string{"s"}})
	require.NoError(t, err)
	_, err = js.CreateOrUpdateConsumer(ctx(t), "S", njs.ConsumerConfig{Durable: "BAD", SampleFrequency: "lots"})
	require.Equal(t, njs.ErrorCode(10095), apiCode(err))

	c, err := js.CreateOrUpdateConsumer(ctx(t), "S", njs.ConsumerConfig{Durable: "C", AckPolicy: njs.AckExplicitPolicy, SampleFrequency: "100%"})
	require.NoError(t, err)
	require.Equal(t, "100%", c.CachedInfo().Config.SampleFrequency)
	metrics, err := nc.SubscribeSync("$JS.EVENT.METRIC.CONSUMER.ACK.S.C")
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	_, err = js.Publish(ctx(t), "s", []byte("x"))
	require.NoError(t, err)
	batch, err := c.Fetch(1, njs.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	for m := range batch.Messages() {
		require.NoError(t, m.DoubleAck(ctx(t)))
	}
	m, err := metrics.NextMsg(5 * time.Second)
	require.NoError(t, err)
	require.NoError(t, validateAnswer(t, m.Data, "", false))
	require.Contains(t, string(m.Data), `"stream_seq":1`)
}
