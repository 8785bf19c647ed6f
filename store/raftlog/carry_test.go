package raftlog

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store/storetest"
)

// TestCarryIdleGroups writes group 2's two entries once, then churns group
// 1 through about 40 segments (compacting as it goes): group 2's entries
// are copied forward instead of keeping their segment, and every later
// one, so the log stays a few segments long. Group 2's entries read back
// from the carried copies in the running log (no cache), after a clean
// reopen, and after an operating system crash at every tenth step.
func TestCarryIdleGroups(t *testing.T) {
	mem := storetest.NewMemFS()
	opts := Options{SegmentBytes: 8 << 10, CacheBytes: 1}
	l := mustOpen(t, mem, opts)
	save(t, l.Group(2), Update{Entries: ents(2, 1, 2, 1), HardState: hardState(1, 2, 2)})
	steps, maxSegs := 0, 0
	churn(t, l, 1, func() bool {
		steps++
		maxSegs = max(maxSegs, l.Stats().Segments)
		if steps%10 == 0 {
			crashed, err := Open(withDefaults(mem.CrashClone(), opts))
			require.NoError(t, err)
			require.Empty(t, crashed.Recovery().Damage, "step %d", steps)
			requireLog(t, crashed, 2, 1, 1, 1)
			require.NoError(t, crashed.Close())
		}
		return steps > 1500
	})
	st := l.Stats()
	require.NotZero(t, st.Carried)
	require.LessOrEqual(t, maxSegs, 4, "the log stays a few segments long")
	requireLog(t, l, 2, 1, 1, 1)
	require.NoError(t, l.Close())

	l = mustOpen(t, mem, opts)
	require.Empty(t, l.Recovery().Damage)
	requireLog(t, l, 2, 1, 1, 1)
	hs, _, err := l.Group(2).InitialState()
	require.NoError(t, err)
	require.Equal(t, uint64(2), hs.GetCommit())
}

// TestCarryLimit: a group whose entries take more than SegmentBytes/16
// is not carried; it keeps its segments, as a group written to does until
// it compacts.
func TestCarryLimit(t *testing.T) {
	mem := storetest.NewMemFS()
	opts := Options{SegmentBytes: 1 << 10, CacheBytes: 1}
	l := mustOpen(t, mem, opts)
	save(t, l.Group(2), Update{Entries: ents(2, 1, 3, 1)}) // more than 64 bytes
	first := segmentPaths(mem)[0]
	n := 0
	churn(t, l, 1, func() bool { n++; return n > 100 })
	require.Zero(t, l.Stats().Carried)
	require.Contains(t, segmentPaths(mem), first)
	requireLog(t, l, 2, 1, 1, 1, 1)
}
