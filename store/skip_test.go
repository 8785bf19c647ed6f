package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testSkip: Skip moves the last sequence on over gaps, whether messages
// remain or not; a sequence at or below the last does nothing; AppendAt
// goes on after it.
func testSkip(t *testing.T, open opener) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	s := open(t, Options{})
	for _, tc := range []struct {
		name     string
		to       uint64
		append   uint64 // AppendAt after the skip, if not 0
		wantLast uint64
		wantLive []uint64
		wantDel  int
	}{
		{"empty stream", 4, 5, 5, []uint64{5}, 0},
		{"at the last: nothing", 5, 0, 5, []uint64{5}, 0},
		{"below the last: nothing", 2, 0, 5, []uint64{5}, 0},
		{"past messages", 9, 10, 10, []uint64{5, 10}, 4},
		{"a trailing gap", 12, 0, 12, []uint64{5, 10}, 6},
		{"then the next", 12, 13, 13, []uint64{5, 10, 13}, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, s.Skip(tc.to, base+int64(tc.to)))
			if tc.append != 0 {
				require.NoError(t, s.AppendAt(tc.append, base+int64(tc.append), "k", nil, payload(tc.append, 8), 0))
			}
			st := s.State()
			require.Equal(t, tc.wantLast, st.LastSeq)
			require.Equal(t, tc.wantLive, liveSeqs(t, s))
			require.Equal(t, tc.wantDel, st.NumDeleted)
		})
	}
	require.ErrorIs(t, s.AppendAt(15, base, "k", nil, nil, 0), ErrDiverged, "Skip makes no gap but its own")
	require.ErrorIs(t, s.Skip(^uint64(0), base), ErrInvalidConfig)
}

// TestSkipReopen: a skip survives a restart, with messages before it (a
// delete record in the last segment) and without (the floor): the
// sequences are not given again. A skip between messages, which starts a
// new segment after it, is no lost segment at the next start, nor once the
// segment before it is removed.
func TestSkipReopen(t *testing.T) {
	for _, tc := range []struct {
		name       string
		before     bool // a message before the skip
		dropBefore bool // that message removed, its segment with it
	}{
		{"with messages", true, false},
		{"empty", false, false},
		{"the segment before it removed", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, Options{Dir: dir})
			if tc.before {
				require.NoError(t, s.AppendAt(1, 1, "a", nil, []byte("x"), 0))
			}
			require.NoError(t, s.Skip(7, 7))
			require.NoError(t, s.Close())
			s = mustOpen(t, Options{Dir: dir})
			require.Equal(t, uint64(7), s.State().LastSeq)
			require.NoError(t, s.AppendAt(8, 8, "a", nil, []byte("y"), 0))
			require.NoError(t, s.AppendAt(9, 9, "a", nil, []byte("z"), 0))
			if tc.dropBefore {
				require.NoError(t, s.Remove(1))
			}
			require.NoError(t, s.Close())
			s = mustOpen(t, Options{Dir: dir})
			require.Empty(t, s.Recovery().Missing, "the skipped sequences are no lost segment")
			st := s.State()
			require.Equal(t, uint64(9), st.LastSeq)
			require.Equal(t, "y", string(mustGet(t, s, 8).Data))
			if tc.dropBefore {
				require.Equal(t, uint64(8), st.FirstSeq)
			}
			require.NoError(t, s.Close())
		})
	}
}
