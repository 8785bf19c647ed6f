package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// testAppendAt: a replica's appends at its leader's sequences and times.
// Replayed sequences are no-ops, a gap is a divergence, timestamps never
// go back, and the stream reads as if Append had stored them.
func testAppendAt(t *testing.T, open opener) {
	clock := newFakeClock()
	s := open(t, Options{Now: clock.Now})
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	for _, tc := range []struct {
		name    string
		seq     uint64
		ts      int64
		subj    string
		data    string
		diverge bool
		want    []uint64 // live sequences after
	}{
		{"first", 1, base, "a", "one", false, []uint64{1}},
		{"next", 2, base + 10, "b", "two", false, []uint64{1, 2}},
		{"replayed: stored already", 2, base + 10, "b", "other", false, []uint64{1, 2}},
		{"replayed far back", 1, base, "a", "other", false, []uint64{1, 2}},
		{"a gap", 4, base + 20, "c", "four", true, []uint64{1, 2}},
		{"a time before the last", 3, base - 5, "c", "three", false, []uint64{1, 2, 3}},
		{"an invalid subject", 4, base + 30, "a..b", "x", true, []uint64{1, 2, 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.AppendAt(tc.seq, tc.ts, tc.subj, nil, []byte(tc.data), 0)
			if tc.diverge {
				require.ErrorIs(t, err, ErrDiverged)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.want, liveSeqs(t, s))
		})
	}
	m := mustGet(t, s, 2)
	require.Equal(t, "two", string(m.Data), "a replay does not overwrite")
	require.Equal(t, base+10, m.Timestamp)
	m = mustGet(t, s, 3)
	require.Equal(t, base+10, m.Timestamp, "never before the last timestamp")
	st := s.State()
	require.Equal(t, uint64(3), st.LastSeq)
	// Append goes on after the last sequence AppendAt stored.
	seq, _, err := s.Append("d", nil, nil, 0)
	require.NoError(t, err)
	require.Equal(t, uint64(4), seq)
}

// testAppendAtLimits: limits apply to AppendAt as to Append, with the
// message's time as the time MaxAge expires from; what DiscardNew would
// refuse is a divergence.
func testAppendAtLimits(t *testing.T, open opener) {
	clock := newFakeClock()
	base := clock.Now().UnixNano()
	s := open(t, Options{Now: clock.Now, MaxMsgsPerSubject: 2, MaxAge: time.Minute})
	for i, ts := range []int64{base, base + 1, base + 2} {
		require.NoError(t, s.AppendAt(uint64(i+1), ts, "k", nil, []byte("v"), 0))
	}
	require.Equal(t, []uint64{2, 3}, liveSeqs(t, s), "per-subject limit")
	// Two minutes later in the log (the clock has not moved): MaxAge
	// removes what the log's time says is old.
	require.NoError(t, s.AppendAt(4, base+int64(2*time.Minute), "other", nil, nil, 0))
	require.Equal(t, []uint64{4}, liveSeqs(t, s))

	n := open(t, Options{Now: clock.Now, MaxMsgs: 1, Discard: DiscardNew})
	require.NoError(t, n.AppendAt(1, base, "a", nil, nil, 0))
	require.ErrorIs(t, n.AppendAt(2, base, "a", nil, nil, 0), ErrDiverged)
	require.ErrorIs(t, n.AppendAt(2, base, "a", nil, nil, 0), ErrMaxMsgs, "the limit is named")
	require.Equal(t, uint64(1), n.State().LastSeq, "nothing stored")
}

// TestAppendAtReopen: after a restart, a replica's log replays from its
// checkpoint over messages the store kept: those are no-ops, and the
// rest follow, at their leader's times.
func TestAppendAtReopen(t *testing.T) {
	dir := t.TempDir()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	s, err := Open(Options{Dir: dir, Logger: quiet})
	require.NoError(t, err)
	for seq := uint64(1); seq <= 10; seq++ {
		require.NoError(t, s.AppendAt(seq, base+int64(seq), "r", nil, payload(seq, 20), 0))
	}
	require.NoError(t, s.Close())
	s = mustOpen(t, Options{Dir: dir})
	for seq := uint64(5); seq <= 12; seq++ {
		require.NoError(t, s.AppendAt(seq, base+int64(seq), "r", nil, payload(seq, 20), 0))
	}
	require.Equal(t, seqRange(1, 12), liveSeqs(t, s))
	for seq := uint64(1); seq <= 12; seq++ {
		m := mustGet(t, s, seq)
		require.Equal(t, payload(seq, 20), m.Data)
		require.Equal(t, base+int64(seq), m.Timestamp)
	}
}
