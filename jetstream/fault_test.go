package jetstream_test

import (
	"errors"
	"fmt"
	"testing"

	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/store"
	"github.com/skiffmq/skiff/store/storetest"
)

// TestFullDisk: while the disk is full a publish gets an error
// acknowledgement (503, 10077, naming the cause) and nothing is stored;
// what was acknowledged before stays; once space returns, publishing
// goes on with the next sequence, and a restart finds every acknowledged
// message.
func TestFullDisk(t *testing.T) {
	// Only the message segments fill up: the rest (meta files, consumers)
	// writes on.
	disk := storetest.NewFaultFS(store.OSFS)
	disk.Match = storetest.IsSegment
	dir := t.TempDir()
	b := startBrokerWith(t, jetstream.Options{StoreDir: dir, FS: disk})
	_, js := connect(t, b.srv.ClientURL())
	c := ctx(t)
	_, err := js.CreateStream(c, njs.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	require.NoError(t, err)
	publishN(t, js, 0, 3)

	disk.SetFull(true)
	for range 2 {
		_, err = js.Publish(c, "s.x", []byte("lost"))
		var apiErr *njs.APIError
		require.True(t, errors.As(err, &apiErr), "want an error acknowledgement, got %v", err)
		require.Equal(t, njs.ErrorCode(10077), apiErr.ErrorCode)
		require.Equal(t, 503, apiErr.Code)
		require.Contains(t, apiErr.Description, "no space left on device")
	}
	disk.SetFull(false)

	ack, err := js.Publish(c, "s.3", []byte("3"))
	require.NoError(t, err)
	require.Equal(t, uint64(4), ack.Sequence, "refused publishes take no sequence")
	b.stop()

	b = startBroker(t, dir)
	_, js = connect(t, b.srv.ClientURL())
	s, err := js.Stream(c, "S")
	require.NoError(t, err)
	require.Equal(t, uint64(4), s.CachedInfo().State.Msgs)
	for i := range 4 {
		m, err := s.GetMsg(c, uint64(i+1))
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(i), string(m.Data))
	}
}
