package store

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSegmentIndexNeverMoves checks that a segment's index of its records
// grows in blocks (blockList) rather than by copies of everything in it,
// which a segment of millions of small records would pay under the
// stream's lock: once the first block is full, the entry of a segment's
// first record stays where it is while the segment takes thousands more,
// and every segment's index holds one entry a record.
func TestSegmentIndexNeverMoves(t *testing.T) {
	s := mustOpen(t, Options{Dir: t.TempDir(), SegmentBytes: 1 << 20})
	fb := s.be.(*fileBackend)
	var firstEnt *idxEntry
	var seg *segment
	var counts []int
	for i := range 3 * blockLen {
		_, _, err := s.Append("a", nil, payload(uint64(i), 100), 0)
		require.NoError(t, err)
		if fb.active != seg {
			if seg != nil {
				counts = append(counts, int(seg.last-seg.first+1))
				require.Equal(t, counts[len(counts)-1], seg.ents.len())
			}
			seg, firstEnt = fb.active, nil
		}
		switch {
		case seg.ents.len() == blockLen:
			// A short index grows as a slice; a full first block stays.
			firstEnt = seg.ents.at(0)
		case firstEnt != nil:
			require.Same(t, firstEnt, seg.ents.at(0), "record %d moved the segment's index", i)
		}
	}
	require.NotEmpty(t, counts, "segments rolled")
	require.Greater(t, counts[0], blockLen, "a segment's index took more than one block")
}
