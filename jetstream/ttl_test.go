package jetstream_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// TestMessageTTLRestart stores messages with TTLs, restarts, and checks
// that they still expire on time: the expiries are rebuilt from the
// stored headers.
func TestMessageTTLRestart(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir)
	_, js := connect(t, b.srv.ClientURL())
	c := ctx(t)
	_, err := js.CreateStream(c, njs.StreamConfig{Name: "T", Subjects: []string{"t.>"}, AllowMsgTTL: true})
	require.NoError(t, err)
	publish := func(subj, ttl string) {
		m := nats.NewMsg(subj)
		m.Header.Set("Nats-TTL", ttl)
		_, err := js.PublishMsg(c, m)
		require.NoError(t, err)
	}
	publish("t.short", "2s")
	publish("t.long", "1h")
	_, err = js.Publish(c, "t.plain", nil)
	require.NoError(t, err)

	b.stop()
	b = startBroker(t, dir)
	_, js = connect(t, b.srv.ClientURL())
	s, err := js.Stream(c, "T")
	require.NoError(t, err)
	require.EqualValues(t, 3, s.CachedInfo().State.Msgs)
	require.Eventually(t, func() bool {
		info, err := s.Info(c)
		return err == nil && info.State.Msgs == 2
	}, 10*time.Second, 50*time.Millisecond, "the 2 s message did not expire after the restart")
	_, err = s.GetMsg(c, 1)
	require.ErrorIs(t, err, njs.ErrMsgNotFound)
	m, err := s.GetMsg(c, 2)
	require.NoError(t, err)
	require.Equal(t, "t.long", m.Subject)
}

// TestMessageTTLNeverWithMaxAge: "never" would have to outlive max_age,
// which Skiff's store does not do; it says so rather than expire the
// message anyway.
func TestMessageTTLNeverWithMaxAge(t *testing.T) {
	b := startBroker(t, "")
	_, js := connect(t, b.srv.ClientURL())
	c := ctx(t)
	_, err := js.CreateStream(c, njs.StreamConfig{Name: "T", Subjects: []string{"t.>"}, AllowMsgTTL: true, MaxAge: time.Hour})
	require.NoError(t, err)
	m := nats.NewMsg("t.a")
	m.Header.Set("Nats-TTL", "never")
	_, err = js.PublishMsg(c, m)
	require.Error(t, err)
	require.Contains(t, err.Error(), "not supported by Skiff")
	require.EqualValues(t, 10165, apiCode(err))
}
