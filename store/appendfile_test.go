package store

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store/storetest"
)

// TestHeldBufferGrowsOnce: while writes are held, the write buffer grows
// past its limit; the next hold's buffer grows at once to the size the
// last one reached instead of doubling its way up, and a buffer past four
// times the limit goes back to the pool when written. What was appended
// reaches the file, in order, either way.
func TestHeldBufferGrowsOnce(t *testing.T) {
	mem := storetest.NewMemFS()
	f, err := mem.Create("/a.log")
	require.NoError(t, err)
	a := &appendFile{f: f, limit: 4096}
	var want bytes.Buffer
	hold := func(records int) (grows int) {
		a.held = true
		last := cap(a.buf)
		for i := range records {
			rec := bytes.Repeat([]byte{byte(i)}, 100)
			require.NoError(t, a.append(rec[:40], rec[40:]))
			want.Write(rec)
			if cap(a.buf) != last {
				grows, last = grows+1, cap(a.buf)
			}
		}
		a.held = false
		require.NoError(t, a.flush())
		return grows
	}

	require.Greater(t, hold(1000), 1, "the first hold doubles its way up")
	require.Equal(t, 100_000, a.lastHeld)
	require.Nil(t, a.buf, "past 4 times the limit, the buffer went back to the pool")
	require.Equal(t, 1, hold(1000), "the next hold grows once, to the last one's size")
	require.Equal(t, 1, hold(500), "a smaller hold too")
	require.Equal(t, 50_000, a.lastHeld, "the last hold's size, not the largest")

	require.NoError(t, a.append([]byte("after")))
	want.WriteString("after")
	require.NoError(t, a.flush())
	require.Equal(t, int64(want.Len()), a.size)
	got := make([]byte, want.Len())
	_, err = f.ReadAt(got, 0)
	if err != nil && err != io.EOF {
		require.NoError(t, err)
	}
	require.Equal(t, want.Bytes(), got)
}
