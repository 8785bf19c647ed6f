package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/bufpool"
)

// TestChunkPoolGivesMemoryBack: after thousands of clients with queued
// output close at once, the chunk pool keeps at most chunkPoolRetained
// bytes of their chunks, and none once they stayed unused for its idle
// period (here shortened), where a sync.Pool kept all of them until two
// garbage collections.
func TestChunkPoolGivesMemoryBack(t *testing.T) {
	saved := chunks
	chunks = bufpool.NewFixed(chunkSize, chunkPoolRetained, 50*time.Millisecond)
	t.Cleanup(func() { chunks = saved })

	const clients = 2000 // 125 MiB of chunks
	outs := make([]*outbound, clients)
	for i := range outs {
		o := &outbound{}
		o.init(1 << 20)
		require.True(t, o.queue([]byte("INFO {}\r\n")))
		outs[i] = o
	}
	for _, o := range outs {
		o.startClosing(false) // gives its chunk back
	}
	require.LessOrEqual(t, chunks.Retained(), int64(chunkPoolRetained))
	require.Positive(t, chunks.Retained())
	require.Eventually(t, func() bool { return chunks.Retained() == 0 }, 10*time.Second, 10*time.Millisecond)
}
