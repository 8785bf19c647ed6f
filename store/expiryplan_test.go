package store

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// planMsg is a message of a planned-expiry case, appended at base+at.
type planMsg struct {
	at   time.Duration
	subj string
	hdr  string
	ttl  time.Duration
}

const kvPurge = "NATS/1.0\r\nKV-Operation: PURGE\r\n\r\n"

// TestPlannedExpiryAsRounds: a round planned on a log-clock stream
// (PlanExpiry) and applied (ApplyExpiry) removes and appends exactly what
// the expiry round of a stream on its own clock does at the same time,
// for every storage kind: the same markers at the same sequences, times
// and TTLs, the same messages left.
func TestPlannedExpiryAsRounds(t *testing.T) {
	cases := []struct {
		name   string
		opts   Options
		msgs   []planMsg
		rounds []time.Duration
		// markers is how many markers the rounds leave in all.
		markers int
	}{
		{
			name: "max age leaves a marker for each subject's last",
			opts: Options{MaxAge: time.Minute, SubjectDeleteMarkerTTL: 2 * time.Second},
			msgs: []planMsg{{subj: "a"}, {subj: "a"}, {subj: "b"}, {subj: "c", hdr: kvPurge}, {subj: "d"},
				{subj: "d", ttl: time.Second}},
			rounds:  []time.Duration{time.Second + 1, 2*time.Second + 1, time.Minute + 1, time.Minute + 3*time.Second},
			markers: 3,
		},
		{
			name:    "a TTL with an older message of its subject leaves none",
			opts:    Options{SubjectDeleteMarkerTTL: time.Second, MaxMsgsPerSubject: 5},
			msgs:    []planMsg{{subj: "k"}, {subj: "k", ttl: time.Second}, {at: time.Millisecond, subj: "j", ttl: 3 * time.Second}},
			rounds:  []time.Duration{time.Second + 1, 3 * time.Second, 3*time.Second + time.Millisecond, 5 * time.Second},
			markers: 1,
		},
		{
			name:    "discard new: a marker the limits refuse is not left",
			opts:    Options{MaxAge: time.Minute, SubjectDeleteMarkerTTL: time.Second, MaxMsgs: 2, Discard: DiscardNew},
			msgs:    []planMsg{{subj: "a"}, {at: time.Millisecond, subj: "b"}},
			rounds:  []time.Duration{time.Minute + time.Millisecond},
			markers: 1,
		},
		{
			name:    "one message per subject",
			opts:    Options{MaxAge: time.Minute, SubjectDeleteMarkerTTL: time.Second, MaxMsgsPerSubject: 1},
			msgs:    []planMsg{{subj: "a"}, {subj: "b"}, {subj: "a", ttl: time.Second}},
			rounds:  []time.Duration{time.Second, time.Minute, time.Minute + 2*time.Second},
			markers: 2,
		},
		{
			name:    "never outlives max age, beside a marker",
			opts:    Options{MaxAge: time.Minute, SubjectDeleteMarkerTTL: time.Second},
			msgs:    []planMsg{{subj: "a", ttl: TTLNever}, {subj: "b"}, {at: time.Second, subj: "a"}},
			rounds:  []time.Duration{time.Minute + time.Second, 2 * time.Minute},
			markers: 1,
		},
		{
			name:    "due twice, by its TTL and by max age: one marker",
			opts:    Options{MaxAge: time.Minute, SubjectDeleteMarkerTTL: time.Second},
			msgs:    []planMsg{{subj: "a", ttl: time.Minute}},
			rounds:  []time.Duration{time.Minute},
			markers: 1,
		},
		{
			name:    "TTLs without markers",
			opts:    Options{AllowMsgTTL: true, MaxAge: time.Minute},
			msgs:    []planMsg{{subj: "a", ttl: time.Second}, {subj: "b"}, {subj: "c", ttl: 2 * time.Second}},
			rounds:  []time.Duration{time.Second + 1, time.Minute + 1},
			markers: 0,
		},
	}
	for _, kind := range storages {
		t.Run(kind.name, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					clock := newFakeClock()
					base := clock.Now()
					at := func(d time.Duration) { clock.Advance(base.Add(d).Sub(clock.Now())) }
					var x expiries
					ro := tc.opts
					ro.Storage, ro.Now = MemoryStorage, clock.Now
					ref := mustOpen(t, x.options(ro))
					po := tc.opts
					po.LogClock = true
					planned := kind.open(t, po)
					for _, m := range tc.msgs {
						at(m.at)
						var hdr []byte
						if m.hdr != "" {
							hdr = []byte(m.hdr)
						}
						seq, ts, err := ref.Append(m.subj, hdr, []byte(m.subj), m.ttl)
						require.NoError(t, err)
						require.NoError(t, planned.AppendAt(seq, ts, m.subj, hdr, []byte(m.subj), m.ttl))
					}
					markers := 0
					for _, r := range tc.rounds {
						at(r)
						ref.expireRound()
						want := x.take()
						plan, err := planned.PlanExpiry(clock.Now().UnixNano())
						require.NoError(t, err)
						got, err := planned.ApplyExpiry(plan)
						require.NoError(t, err)
						require.Equal(t, want.Markers, got.Markers, "markers at %v", r)
						require.ElementsMatch(t, want.Removed, got.Removed, "removed at %v", r)
						requireSameStream(t, ref, planned)
						markers += len(got.Markers)
					}
					require.Equal(t, tc.markers, markers)
				})
			}
		})
	}
}

// requireSameStream checks that two streams hold the same messages.
func requireSameStream(t *testing.T, want, got *Stream) {
	t.Helper()
	ws, gs := want.State(), got.State()
	require.Equal(t, ws.LastSeq, gs.LastSeq)
	require.Equal(t, liveSeqs(t, want), liveSeqs(t, got))
	for _, seq := range liveSeqs(t, want) {
		w, err := want.Get(seq)
		require.NoError(t, err)
		g, err := got.Get(seq)
		require.NoError(t, err)
		require.Equal(t, w.Subject, g.Subject, "sequence %d", seq)
		require.Equal(t, string(w.Header), string(g.Header), "sequence %d", seq)
		require.Equal(t, w.Data, g.Data, "sequence %d", seq)
		require.Equal(t, w.Timestamp, g.Timestamp, "sequence %d", seq)
	}
}

// markerStream opens a log-clock memory stream with markers and the
// messages a (1), a (2), b (3) at base, and returns it with base.
func markerStream(t *testing.T, o Options) (*Stream, int64) {
	t.Helper()
	base := newFakeClock().Now().UnixNano()
	o.Storage, o.LogClock = MemoryStorage, true
	if o.MaxAge == 0 {
		o.MaxAge = time.Minute
	}
	if o.SubjectDeleteMarkerTTL == 0 {
		o.SubjectDeleteMarkerTTL = time.Second
	}
	s := mustOpen(t, o)
	for i, subj := range []string{"a", "a", "b"} {
		require.NoError(t, s.AppendAt(uint64(i+1), base, subj, nil, nil, 0))
	}
	return s, base
}

// TestApplyExpiryTwice: a plan applied again, over the stream it left or
// over one that has gone on since (the log replayed), changes nothing.
func TestApplyExpiryTwice(t *testing.T) {
	s, base := markerStream(t, Options{})
	now := base + int64(time.Minute)
	plan, err := s.PlanExpiry(now)
	require.NoError(t, err)
	require.Equal(t, ExpiryPlan{Now: now, Removed: []uint64{1},
		Markers: []Marker{{Seq: 4, Subject: "a", Replaced: 2, Timestamp: now, TTL: time.Second},
			{Seq: 5, Subject: "b", Replaced: 3, Timestamp: now, TTL: time.Second}}}, plan)
	ev, err := s.ApplyExpiry(plan)
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 2, 3}, ev.Removed)
	require.Len(t, ev.Markers, 2)
	once := s.State()

	ev, err = s.ApplyExpiry(plan)
	require.NoError(t, err)
	require.Equal(t, Expired{}, ev)
	require.Equal(t, once, s.State())

	require.NoError(t, s.AppendAt(6, now+1, "a", nil, []byte("later"), 0))
	later := s.State()
	ev, err = s.ApplyExpiry(plan)
	require.NoError(t, err)
	require.Equal(t, Expired{}, ev)
	require.Equal(t, later, s.State(), "a replayed plan leaves what came after it")
	require.Equal(t, []uint64{4, 5, 6}, liveSeqs(t, s))
	m, err := s.Get(4)
	require.NoError(t, err)
	require.Equal(t, string(MarkerHeader(time.Second)), string(m.Header))
}

// TestApplyExpiryRefusals: a plan no leader could have made stops its
// replica (ErrDiverged) before its markers; a marker the limits refuse
// (the configuration changed after the plan) leaves its sequence empty,
// and what it replaces goes all the same.
func TestApplyExpiryRefusals(t *testing.T) {
	marker := func(seq uint64, subj string, ttl time.Duration) ExpiryPlan {
		return ExpiryPlan{Markers: []Marker{{Seq: seq, Subject: subj, Replaced: 3, TTL: ttl}}}
	}
	for _, tc := range []struct {
		name string
		plan ExpiryPlan
	}{
		{"a gap", marker(5, "b", time.Second)},
		{"no TTL", marker(4, "b", 0)},
		{"an invalid subject", marker(4, "b..c", time.Second)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := markerStream(t, Options{})
			before := s.State()
			_, err := s.ApplyExpiry(tc.plan)
			require.ErrorIs(t, err, ErrDiverged)
			require.Equal(t, before, s.State())
		})
	}
	t.Run("refused by the limits", func(t *testing.T) {
		s, base := markerStream(t, Options{MaxMsgs: 3, Discard: DiscardNew})
		plan := marker(4, "b", time.Second)
		plan.Now = base
		ev, err := s.ApplyExpiry(plan)
		require.NoError(t, err)
		require.Equal(t, Expired{Removed: []uint64{3}}, ev)
		require.Equal(t, uint64(4), s.State().LastSeq, "the marker's sequence is used")
		require.Equal(t, []uint64{1, 2}, liveSeqs(t, s))
		require.NoError(t, s.AppendAt(5, base, "c", nil, nil, 0), "the next message follows it")
	})
}

// TestLogClockMarkersPlanned: under the log clock, a stream with markers
// expires nothing by itself, however far its log's time moves (AppendAt,
// AdvanceTime): NextExpiry tells the leader when to plan, PlanExpiry
// changes nothing, and once the plan is applied the next expiry is the
// markers'. The log clock stays through UpdateConfig.
func TestLogClockMarkersPlanned(t *testing.T) {
	s, base := markerStream(t, Options{})
	require.Equal(t, base+int64(time.Minute), s.NextExpiry(), "max age of the first message")
	late := base + int64(time.Hour)
	require.NoError(t, s.AppendAt(4, late, "c", nil, nil, 0))
	n, err := s.AdvanceTime(late)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Equal(t, []uint64{1, 2, 3, 4}, liveSeqs(t, s), "due, but not planned")

	before := s.State()
	p1, err := s.PlanExpiry(late)
	require.NoError(t, err)
	p2, err := s.PlanExpiry(late)
	require.NoError(t, err)
	require.Equal(t, p1, p2, "planning changes nothing")
	require.Equal(t, before, s.State())
	require.Equal(t, base+int64(time.Minute), s.NextExpiry())

	_, err = s.ApplyExpiry(p1)
	require.NoError(t, err)
	require.Equal(t, []uint64{4, 5, 6}, liveSeqs(t, s))
	require.Equal(t, late+int64(time.Second), s.NextExpiry(), "the markers' TTL")

	o := s.Options()
	o.SubjectDeleteMarkerTTL = 0
	require.NoError(t, s.UpdateConfig(o))
	require.True(t, s.Options().LogClock, "fixed at Open")
	n, err = s.AdvanceTime(late + int64(2*time.Second))
	require.NoError(t, err)
	require.Equal(t, 2, n, "without markers the log's time expires the markers by their TTL")
	require.Equal(t, []uint64{4}, liveSeqs(t, s))

	empty, err := s.PlanExpiry(math.MaxInt64)
	require.NoError(t, err)
	require.Equal(t, ExpiryPlan{Now: math.MaxInt64}, empty, "without markers, max age is not a round's")
}
