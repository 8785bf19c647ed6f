package bufpool

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFixedBound: the pool keeps at most its bound of free buffers.
func TestFixedBound(t *testing.T) {
	p := NewFixed(1024, 8*1024, time.Hour)
	bufs := make([][]byte, 100)
	for i := range bufs {
		bufs[i] = p.Get()
		require.Equal(t, 1024, cap(bufs[i]))
	}
	for _, b := range bufs {
		p.Put(b)
	}
	require.Equal(t, int64(8*1024), p.Retained())
	p.Put(make([]byte, 10)) // not the pool's size: ignored
	require.Equal(t, int64(8*1024), p.Retained())
	b := append(p.Get(), 'x')
	require.Equal(t, 1, len(b))
	require.Equal(t, int64(7*1024), p.Retained())
}

// TestFixedIdleTrim: free buffers no Get needs are dropped after the idle
// period; those in use meanwhile are kept for one more.
func TestFixedIdleTrim(t *testing.T) {
	p := NewFixed(1024, 1<<20, 20*time.Millisecond)
	bufs := make([][]byte, 50)
	for i := range bufs {
		bufs[i] = p.Get()
	}
	for _, b := range bufs {
		p.Put(b)
	}
	require.Equal(t, int64(50*1024), p.Retained())
	require.Eventually(t, func() bool { return p.Retained() == 0 }, 5*time.Second, 5*time.Millisecond)
	p.mu.Lock()
	require.False(t, p.mu.armed)
	require.Nil(t, p.mu.free)
	p.mu.Unlock()

	// Still usable, and trimming again after it.
	p.Put(p.Get())
	require.Equal(t, int64(1024), p.Retained())
	require.Eventually(t, func() bool { return p.Retained() == 0 }, 5*time.Second, 5*time.Millisecond)
}
