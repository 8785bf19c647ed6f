package bufpool

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReleaser: memory is returned once enough was dropped, and not more
// often than Every; a release held back by Every happens once it passed.
// (Drops by trims, not Puts, so Quiet plays no part.)
func TestReleaser(t *testing.T) {
	var freed atomic.Int64
	r := &Releaser{MinBytes: 1 << 20, Every: 100 * time.Millisecond, free: func() { freed.Add(1) }}
	r.Trimmed(0) // no storm: Quiet does not hold it back
	for _, step := range []struct {
		name    string
		drop    int64
		want    int64 // releases right after
		pending int64
	}{
		{"below the minimum", 512 << 10, 0, 512 << 10},
		{"reaching it", 512 << 10, 1, 0},
		{"again at once: held back", 1 << 20, 1, 1 << 20},
	} {
		r.Trimmed(step.drop)
		r.Release()
		require.Equal(t, step.want, freed.Load(), step.name)
		require.Equal(t, step.want, r.Releases(), step.name)
		require.Equal(t, step.pending, r.pending.Load(), step.name)
	}
	require.Eventually(t, func() bool { return freed.Load() == 2 }, 5*time.Second, 5*time.Millisecond,
		"the held back release runs once Every passed")
	require.Zero(t, r.pending.Load())
}

// TestFixedReleases: a pool with a Releaser reports what it drops, past
// its bound and at trims, and releases after a trim.
func TestFixedReleases(t *testing.T) {
	var freed atomic.Int64
	r := &Releaser{MinBytes: 64 << 10, Every: time.Hour, free: func() { freed.Add(1) }}
	p := NewFixed(1024, 8*1024, 20*time.Millisecond).WithReleaser(r)
	bufs := make([][]byte, 100)
	for i := range bufs {
		bufs[i] = p.Get()
	}
	for _, b := range bufs {
		p.Put(b)
	}
	require.Equal(t, int64(92*1024), r.pending.Load(), "dropped past the bound")
	require.Eventually(t, func() bool { return freed.Load() == 1 }, 5*time.Second, 5*time.Millisecond,
		"released after the trim")
	require.Eventually(t, func() bool { return p.Retained() == 0 }, 5*time.Second, 5*time.Millisecond)
}

// TestReleaserWaitsForQuiet: while buffers are still being dropped (a
// storm closing), the release waits until drops stopped for Quiet, so
// that it returns the storm's memory at once, not its first part.
func TestReleaserWaitsForQuiet(t *testing.T) {
	var freed atomic.Int64
	r := &Releaser{MinBytes: 1 << 20, Quiet: 200 * time.Millisecond, Every: time.Hour, free: func() { freed.Add(1) }}
	r.Dropped(2 << 20)
	r.Release()
	require.Zero(t, freed.Load(), "drops just happened")
	start := time.Now()
	require.Eventually(t, func() bool { return freed.Load() == 1 }, 5*time.Second, 5*time.Millisecond)
	require.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
	require.Zero(t, r.pending.Load())
}
