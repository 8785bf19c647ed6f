package store

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// testKeepBound: a purge below KeepBound's sequence removes what a purge
// with Keep removes, for every subject and for filters, with deleted
// messages among them; 0 when no more than Keep match.
func testKeepBound(t *testing.T, open opener) {
	fill := func() *Stream {
		s := open(t, Options{})
		for i := range 20 {
			_, _, err := s.Append(fmt.Sprintf("k.%d", i%3), nil, nil, 0)
			require.NoError(t, err)
		}
		require.NoError(t, s.Delete(19)) // a k.0, near the end
		require.NoError(t, s.Delete(2))
		return s
	}
	for _, tc := range []struct {
		subject string
		keep    uint64
		none    bool
	}{
		{"", 1, false}, {"", 5, false}, {"", 17, false}, {"", 18, true},
		{"k.0", 2, false}, {"k.0", 6, true}, {"k.*", 3, false}, {"k.>", 50, true}, {"nothing", 1, true},
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.subject, tc.keep), func(t *testing.T) {
			a, b := fill(), fill()
			bound, err := a.KeepBound(tc.subject, tc.keep)
			require.NoError(t, err)
			if tc.none {
				require.Zero(t, bound)
				return
			}
			_, err = a.Purge(PurgeRequest{Subject: tc.subject, Seq: bound})
			require.NoError(t, err)
			_, err = b.Purge(PurgeRequest{Subject: tc.subject, Keep: tc.keep})
			require.NoError(t, err)
			require.Equal(t, liveSeqs(t, b), liveSeqs(t, a))
		})
	}
	s := fill()
	_, err := s.KeepBound("", 0)
	require.ErrorIs(t, err, ErrInvalidPurge)
	_, err = s.KeepBound("a..b", 1)
	require.Error(t, err)
}
