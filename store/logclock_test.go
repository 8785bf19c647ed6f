package store

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testLogClock: under the log clock, time moves only with AppendAt and
// AdvanceTime, however far the wall clock goes: MaxAge and TTLs expire
// inside those calls and reads agree with them; the background goroutine
// expires nothing.
func testLogClock(t *testing.T, open opener) {
	clock := newFakeClock()
	base := clock.Now().UnixNano()
	s := open(t, Options{Now: clock.Now, LogClock: true, MaxAge: time.Minute, AllowMsgTTL: true})
	s.StartExpiry() // does nothing under the log clock
	require.NoError(t, s.AppendAt(1, base, "a", nil, nil, 0))
	require.NoError(t, s.AppendAt(2, base+int64(time.Second), "b", nil, nil, 5*time.Second))
	require.NoError(t, s.AppendAt(3, base+int64(2*time.Second), "c", nil, nil, 0))
	require.Equal(t, base+int64(6*time.Second), s.NextExpiry(), "the TTL of 2 comes before MaxAge")

	// An hour passes on the wall: nothing moves, and reads still see all.
	clock.Advance(time.Hour)
	time.Sleep(20 * time.Millisecond) // the background goroutine had a chance
	require.Equal(t, []uint64{1, 2, 3}, liveSeqs(t, s))
	_, err := s.Get(1)
	require.NoError(t, err, "a read applies MaxAge by the log's time")

	// The log's time moves past 2's TTL.
	n, err := s.AdvanceTime(base + int64(6*time.Second))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []uint64{1, 3}, liveSeqs(t, s))
	n, err = s.AdvanceTime(base + int64(6*time.Second))
	require.NoError(t, err)
	require.Zero(t, n, "applied again, nothing more")
	require.Equal(t, base+int64(time.Minute), s.NextExpiry(), "MaxAge of 1 next")

	// A message a minute later in the log expires 1 as it is appended.
	require.NoError(t, s.AppendAt(4, base+int64(time.Minute)+1, "d", nil, nil, 0))
	require.Equal(t, []uint64{3, 4}, liveSeqs(t, s))
	n, err = s.AdvanceTime(base + int64(2*time.Minute) + 2)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Empty(t, liveSeqs(t, s))
	require.Equal(t, int64(math.MaxInt64), s.NextExpiry())
	// Time never goes back: an older time expires nothing and changes
	// nothing.
	n, err = s.AdvanceTime(base)
	require.NoError(t, err)
	require.Zero(t, n)

	// Without the log clock AdvanceTime does nothing.
	w := open(t, Options{Now: clock.Now, MaxAge: time.Minute})
	require.NoError(t, w.AppendAt(1, clock.Now().UnixNano(), "a", nil, nil, 0))
	n, err = w.AdvanceTime(math.MaxInt64)
	require.NoError(t, err)
	require.Zero(t, n)
}
