package jetstream_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// TestStoreDirLock: a second JetStream on a store directory in use is
// refused with ErrStoreDirLocked, and the directory is free again once the
// first is closed.
func TestStoreDirLock(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("no flock(2)")
	}
	b := startBroker(t, "")
	opts := server.DefaultOptions()
	opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", server.RandomPort, 0
	s, err := server.New(opts)
	require.NoError(t, err)
	_, err = jetstream.New(s, jetstream.Options{StoreDir: b.dir})
	require.ErrorIs(t, err, jetstream.ErrStoreDirLocked)

	b.stop()
	js, err := jetstream.New(s, jetstream.Options{StoreDir: b.dir})
	require.NoError(t, err)
	require.NoError(t, js.Close())
}
