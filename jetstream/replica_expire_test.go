package jetstream

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/internal/multiraft/multiraftest"
	"github.com/skiffmq/skiff/store"
)

// markerOptions are the store options of a replica of a stream with
// subject delete markers: the log's clock, max_age, a marker TTL of 2s.
func markerOptions() store.Options {
	return store.Options{LogClock: true, MaxAge: time.Minute, SubjectDeleteMarkerTTL: 2 * time.Second, MaxMsgsPerSubject: 5}
}

// TestReplicaFSMExpiryReplicates: expiry rounds on a stream with delete
// markers, planned on the store of whichever replica leads and proposed
// (again and again, as the network loses them) while the network drops,
// duplicates, delays and reorders messages, leave the three stores the
// same: one marker for each subject whose last message max_age removed,
// at the same sequence, with the reference server's headers, the older
// messages removed without one; then the markers go by their own TTL,
// leaving none, and publishing goes on after them.
func TestReplicaFSMExpiryReplicates(t *testing.T) {
	for _, seed := range []int64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			g := newReplicaGroupWith(t, seed, multiraftest.Faults{Drop: 0.05, Dup: 0.05, Delay: 3, Reorder: true}, markerOptions())
			g.run(500)
			base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
			last := func(seq uint64) func(*store.Stream) bool {
				return func(s *store.Stream) bool { return s.State().LastSeq >= seq }
			}
			op := &replicaOp{kind: opMsgs, proposer: 1, propID: 1}
			for seq := uint64(1); seq <= 9; seq++ {
				op.msgs = append(op.msgs, replicaMsg{seq: seq, ts: base + int64(seq), subj: fmt.Sprintf("s.%d", seq%3),
					data: []byte(fmt.Sprint("m", seq))})
			}
			g.propose(op, last(9))

			// A round once max_age passed: 7, 8 and 9 are their subjects'
			// last, each replaced by a marker (10, 11, 12 in their order).
			round := func(propID uint64, now int64) *replicaOp {
				// The faulty network may have cost the group its leader
				// for a while: ticks bring one back.
				l := g.leader()
				for i := 0; i < 100 && l < 0; i++ {
					g.run(20)
					l = g.leader()
				}
				require.GreaterOrEqual(t, l, 0, "the group elects a leader")
				plan, err := g.stores[l].PlanExpiry(now)
				require.NoError(t, err)
				op := expireOp(plan, nil)
				op.proposer, op.propID = 1, propID
				return op
			}
			now := base + int64(time.Minute) + 10
			exp := round(2, now)
			require.Equal(t, []uint64{1, 2, 3, 4, 5, 6}, exp.seqs)
			require.Equal(t, []uint64{7, 8, 9}, exp.replaced)
			g.propose(exp, func(s *store.Stream) bool { return s.State().LastSeq >= 12 && s.State().Msgs == 3 })
			want := g.requireSame()
			require.Equal(t, map[string][]string{"s.1": {"10"}, "s.2": {"11"}, "s.0": {"12"}}, DumpMarkers(want))
			m, err := g.stores[0].Get(10)
			require.NoError(t, err)
			require.Equal(t, "NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: 2s\r\nNats-Rollup: sub\r\n\r\n", string(m.Header))
			require.Equal(t, now, m.Timestamp)

			// Publishing goes on after the markers; the markers go by
			// their TTL, without markers of their own.
			g.propose(&replicaOp{kind: opMsgs, proposer: 1, propID: 3, msgs: []replicaMsg{{seq: 13, ts: now + 1, subj: "s.1"}}}, last(13))
			exp = round(4, now+int64(2*time.Second))
			require.Equal(t, []uint64{10, 11, 12}, exp.seqs)
			require.Empty(t, exp.msgs)
			g.propose(exp, func(s *store.Stream) bool { return s.State().Msgs == 1 })
			want = g.requireSame()
			require.Equal(t, []string{"first 13 last 13 msgs 1", fmt.Sprintf("13 s.1 \"\" \"\" %d", now+1)}, want)
		})
	}
}

// requireSame checks that the three stores hold the same, and returns
// what they hold.
func (g *replicaGroup) requireSame() []string {
	g.t.Helper()
	want := StoreDump(g.stores[0])
	for i, s := range g.stores[1:] {
		require.Equal(g.t, want, StoreDump(s), "replica %d", i+2)
	}
	return want
}

// TestReplicaFSMExpireTwice: an expiry round's entry applied again (a
// log replayed over a store that has it, and what came after) changes
// nothing: no marker twice, none lost; a marker no consumer wanted is
// removed but keeps its sequence; a round that would leave a gap stops
// the replica.
func TestReplicaFSMExpireTwice(t *testing.T) {
	s, err := store.Open(store.Options{Storage: store.MemoryStorage, LogClock: true, MaxAge: time.Minute,
		SubjectDeleteMarkerTTL: time.Second, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	f := &replicaFSM{store: s, onApplied: func(_ *replicaOp, _ uint64, err error) { require.NoError(t, err) }}
	entry := func(index uint64, op *replicaOp) *raftpb.Entry {
		return &raftpb.Entry{Index: &index, Type: raftpb.EntryNormal.Enum(), Data: appendOp(nil, op)}
	}
	now := int64(time.Minute) + 20
	exp := expireOp(store.ExpiryPlan{Now: now, Removed: []uint64{1}, Markers: []store.Marker{
		{Seq: 4, Subject: "a", Replaced: 2, Timestamp: now, TTL: time.Second},
		{Seq: 5, Subject: "b", Replaced: 3, Timestamp: now, TTL: time.Second},
	}}, func(subj string) bool { return subj == "b" })
	ents := []*raftpb.Entry{
		entry(1, &replicaOp{kind: opMsgs, msgs: []replicaMsg{{seq: 1, ts: 10, subj: "a"}, {seq: 2, ts: 11, subj: "a"}, {seq: 3, ts: 12, subj: "b"}}}),
		entry(2, exp),
		entry(3, &replicaOp{kind: opMsgs, msgs: []replicaMsg{{seq: 6, ts: now + 1, subj: "c"}}}),
	}
	require.NoError(t, f.Apply(ents))
	once := StoreDump(s)
	require.Equal(t, map[string][]string{"a": {"4"}}, DumpMarkers(once), "b's marker wanted by no consumer")
	require.Equal(t, "first 4 last 6 msgs 2", once[0])
	require.NoError(t, f.Apply(ents))
	require.Equal(t, once, StoreDump(s))

	f.onApplied = nil
	gap := expireOp(store.ExpiryPlan{Now: now, Markers: []store.Marker{{Seq: 9, Subject: "c", Replaced: 6, TTL: time.Second}}}, nil)
	require.ErrorIs(t, f.Apply([]*raftpb.Entry{entry(4, gap)}), store.ErrDiverged)
	require.Equal(t, once, StoreDump(s), "nothing applied by the refused round")
}
