package store

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSegmentIndexSizedByTheLastOne checks that a new segment's index
// starts with room for the records of the segment sealed before it.
func TestSegmentIndexSizedByTheLastOne(t *testing.T) {
	s := mustOpen(t, Options{Dir: t.TempDir(), SegmentBytes: 64 << 10})
	fb := s.be.(*fileBackend)
	var counts []int
	for i := range 2000 {
		first := fb.active
		_, _, err := s.Append("a", nil, payload(uint64(i), 100), 0)
		require.NoError(t, err)
		if first != nil && fb.active != first {
			counts = append(counts, len(first.ents))
			require.Equal(t, len(first.ents), cap(fb.active.ents), "room for the sealed segment's records")
		}
	}
	require.GreaterOrEqual(t, len(counts), 2, "segments rolled")
}
