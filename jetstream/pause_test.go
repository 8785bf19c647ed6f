package jetstream_test

import (
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// TestPauseConsumer pauses and resumes a consumer with nats.go, and
// checks that a pause survives a restart: it is part of the configuration.
func TestPauseConsumer(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir)
	_, js := connect(t, b.srv.ClientURL())
	c := ctx(t)
	s, err := js.CreateStream(c, njs.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	require.NoError(t, err)
	_, err = js.Publish(c, "s.1", []byte("one"))
	require.NoError(t, err)
	cons, err := s.CreateConsumer(c, njs.ConsumerConfig{Durable: "W", AckPolicy: njs.AckExplicitPolicy})
	require.NoError(t, err)

	until := time.Now().Add(time.Hour)
	resp, err := js.PauseConsumer(c, "S", "W", until)
	require.NoError(t, err)
	require.True(t, resp.Paused)
	require.WithinDuration(t, until, resp.PauseUntil, time.Millisecond)
	require.InDelta(t, time.Hour.Seconds(), resp.PauseRemaining.Seconds(), 5)
	batch, err := cons.Fetch(1, njs.FetchMaxWait(300*time.Millisecond))
	require.NoError(t, err)
	for range batch.Messages() {
		t.Fatal("a paused consumer delivered")
	}

	// The pause is in the configuration, which a restart recovers.
	b.stop()
	b = startBroker(t, dir)
	_, js = connect(t, b.srv.ClientURL())
	cons, err = js.Consumer(c, "S", "W")
	require.NoError(t, err)
	info, err := cons.Info(c)
	require.NoError(t, err)
	require.True(t, info.Paused)
	require.NotNil(t, info.Config.PauseUntil)

	resp, err = js.ResumeConsumer(c, "S", "W")
	require.NoError(t, err)
	require.False(t, resp.Paused)
	msg, err := cons.Next(njs.FetchMaxWait(5 * time.Second))
	require.NoError(t, err)
	require.Equal(t, "one", string(msg.Data()))
	info, err = cons.Info(c)
	require.NoError(t, err)
	require.False(t, info.Paused)
	require.Nil(t, info.Config.PauseUntil)
}
