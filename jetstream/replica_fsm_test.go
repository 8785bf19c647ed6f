package jetstream

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/internal/multiraft"
	"github.com/skiffmq/skiff/internal/multiraft/multiraftest"
	"github.com/skiffmq/skiff/store"
)

// replicaGroup is three replicas of one stream, each a multiraft node
// with a memory store, over a faulty in-memory network, driven step by
// step by the test (no wall clock).
type replicaGroup struct {
	t      *testing.T
	net    *multiraftest.FakeTransport
	nodes  []*multiraft.Node
	disks  []*multiraftest.MemDisk
	stores []*store.Stream
}

const testGroup = 7

func newReplicaGroup(t *testing.T, seed int64, faults multiraftest.Faults) *replicaGroup {
	return newReplicaGroupWith(t, seed, faults, store.Options{MaxMsgsPerSubject: 5})
}

// newReplicaGroupWith is newReplicaGroup with o as each replica's store
// options (memory storage).
func newReplicaGroupWith(t *testing.T, seed int64, faults multiraftest.Faults, o store.Options) *replicaGroup {
	g := &replicaGroup{t: t, net: multiraftest.NewFakeTransport(seed)}
	o.Storage, o.Logger = store.MemoryStorage, slog.New(slog.DiscardHandler)
	for id := uint64(1); id <= 3; id++ {
		n, err := multiraft.New(multiraft.Options{ID: id, Manual: true}, g.net.Endpoint(id))
		require.NoError(t, err)
		g.net.Endpoint(id).SetHandler(n)
		s, err := store.Open(o)
		require.NoError(t, err)
		disk := multiraftest.NewMemDisk()
		require.NoError(t, n.AddGroup(multiraft.GroupConfig{ID: testGroup, Log: disk.Log(testGroup),
			StateMachine: &replicaFSM{store: s}, Peers: []uint64{1, 2, 3}}))
		g.nodes, g.disks, g.stores = append(g.nodes, n), append(g.disks, disk), append(g.stores, s)
		t.Cleanup(func() { _ = n.Close(); _ = s.Close() })
	}
	g.net.SetFaults(faults)
	return g
}

// run moves the group on by steps: a tick every 10 steps, and every node,
// disk and message that can move.
func (g *replicaGroup) run(steps int) {
	for i := range steps {
		if i%10 == 0 {
			g.net.Tick()
			for _, n := range g.nodes {
				n.Tick()
			}
		}
		for j, n := range g.nodes {
			n.Process()
			g.disks[j].Flush()
		}
		g.net.Step()
	}
}

// leader returns the index of the group's leader, or -1.
func (g *replicaGroup) leader() int {
	for i, n := range g.nodes {
		if st, err := n.Status(testGroup); err == nil && st.RaftState.String() == "StateLeader" {
			return i
		}
	}
	return -1
}

// propose has the leader of the moment propose op, proposing it again
// (ops are idempotent) until every replica's store has the sequence want
// as its last.
func (g *replicaGroup) propose(op *replicaOp, applied func(*store.Stream) bool) {
	g.t.Helper()
	for try := 0; try < 200; try++ {
		if l := g.leader(); l >= 0 {
			// Decided in the leader's term, as a replica's leader does:
			// appended in another, it would be skipped.
			st, err := g.nodes[l].Status(testGroup)
			require.NoError(g.t, err)
			op.term = st.GetTerm()
			_ = g.nodes[l].ProposeAsync(testGroup, appendOp(nil, op), func(error) {})
		}
		g.run(50)
		all := true
		for _, s := range g.stores {
			all = all && applied(s)
		}
		if all {
			return
		}
	}
	g.t.Fatalf("op of kind %d not applied on every replica", op.kind)
}

// TestReplicaFSMReplicates: a stream's ops, proposed by whichever replica
// leads while the network drops, duplicates, delays and reorders
// messages (some proposals lost and proposed again), leave the three
// stores with the same messages at the same sequences and times: appends
// with limits, a rollup, deletes, a purge.
func TestReplicaFSMReplicates(t *testing.T) {
	for _, seed := range []int64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			g := newReplicaGroup(t, seed, multiraftest.Faults{Drop: 0.05, Dup: 0.05, Delay: 3, Reorder: true})
			g.run(500)
			base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
			last := func(seq uint64) func(*store.Stream) bool {
				return func(s *store.Stream) bool { return s.State().LastSeq >= seq }
			}
			seq := uint64(0)
			for batch := range 10 {
				op := &replicaOp{kind: opMsgs, proposer: 1, propID: uint64(batch + 1)}
				for k := range 5 {
					seq++
					m := replicaMsg{seq: seq, ts: base + int64(seq), subj: fmt.Sprintf("s.%d", k%3), data: []byte(fmt.Sprintf("m%d", seq))}
					if seq == 42 {
						m.flags = msgRollupSubject // s.1's earlier messages go (40 among them)
					}
					op.msgs = append(op.msgs, m)
				}
				g.propose(op, last(seq))
			}
			has := func(seq uint64, want bool) func(*store.Stream) bool {
				return func(s *store.Stream) bool {
					_, err := s.Get(seq)
					return (err == nil) == want
				}
			}
			g.propose(&replicaOp{kind: opRemove, propID: 11, seqs: []uint64{50, 49}, persist: true}, has(50, false))
			g.propose(&replicaOp{kind: opPurge, propID: 12, subject: "s.0", below: 46}, has(44, false))

			ns := g.net.Stats()
			require.Positive(t, ns.Dropped, "the network lost messages")
			require.Positive(t, ns.Duplicated, "and duplicated some")
			t.Logf("%d messages delivered, %d dropped, %d duplicated", ns.Delivered, ns.Dropped, ns.Duplicated)
			want := g.stores[0].State()
			require.Equal(t, uint64(50), want.LastSeq)
			require.Positive(t, want.Msgs)
			for i, s := range g.stores[1:] {
				require.Equal(t, want, s.State(), "replica %d", i+2)
			}
			for seq := want.FirstSeq; seq <= want.LastSeq; seq++ {
				m0, err0 := g.stores[0].Get(seq)
				for i, s := range g.stores[1:] {
					m, err := s.Get(seq)
					require.Equal(t, err0 == nil, err == nil, "sequence %d on replica %d", seq, i+2)
					if err0 == nil {
						require.Equal(t, m0.Subject, m.Subject)
						require.Equal(t, m0.Data, m.Data)
						require.Equal(t, m0.Timestamp, m.Timestamp)
					}
				}
			}
			for seq, why := range map[uint64]string{23: "past s.2's limit of 5", 40: "rolled up", 44: "purged", 50: "deleted"} {
				_, err := g.stores[0].Get(seq)
				require.ErrorIs(t, err, store.ErrNotFound, "%d: %s", seq, why)
			}
			for _, seq := range []uint64{28, 42, 46, 48} {
				_, err := g.stores[0].Get(seq)
				require.NoError(t, err, "%d stays", seq)
			}
		})
	}
}

// TestReplicaFSMApplyTwice: the same entries applied again (a log
// replayed over a store that has them) change nothing; an op a replica
// cannot apply stops it with the reason.
func TestReplicaFSMApplyTwice(t *testing.T) {
	s, err := store.Open(store.Options{Storage: store.MemoryStorage, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	var seen []uint64
	f := &replicaFSM{store: s, onApplied: func(_ *replicaOp, index uint64, err error) {
		require.NoError(t, err)
		seen = append(seen, index)
	}}
	entry := func(index uint64, op replicaOp) *raftpb.Entry {
		return &raftpb.Entry{Index: &index, Type: raftpb.EntryNormal.Enum(), Data: appendOp(nil, &op)}
	}
	ents := []*raftpb.Entry{
		entry(1, replicaOp{kind: opMsgs, msgs: []replicaMsg{{seq: 1, ts: 10, subj: "a"}, {seq: 2, ts: 11, subj: "a"}, {seq: 3, ts: 12, subj: "b"}}}),
		entry(2, replicaOp{kind: opRemove, seqs: []uint64{2}}),
		entry(3, replicaOp{kind: opPurge, subject: "b", below: 4}),
	}
	require.NoError(t, f.Apply(ents))
	once := s.State()
	require.NoError(t, f.Apply(ents))
	require.Equal(t, once, s.State())
	require.Equal(t, []uint64{1, 2, 3, 1, 2, 3}, seen)
	require.Equal(t, uint64(1), once.Msgs)

	f.onApplied = nil
	for _, tc := range []struct {
		name string
		e    *raftpb.Entry
		want error
	}{
		{"a gap", entry(4, replicaOp{kind: opMsgs, msgs: []replicaMsg{{seq: 9, ts: 13, subj: "a"}}}), store.ErrDiverged},
		{"a purge without a bound", entry(5, replicaOp{kind: opPurge}), errNoBound},
		{"unreadable", &raftpb.Entry{Index: ptr(uint64(6)), Type: raftpb.EntryNormal.Enum(), Data: []byte{9, 9}}, errBadOp},
		{"a configuration with nothing to apply it", entry(7, replicaOp{kind: opConfig, config: []byte("{}")}), errBadOp},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, f.Apply([]*raftpb.Entry{tc.e}), tc.want)
		})
	}
	require.Equal(t, once, s.State(), "nothing applied by the refused ops")
}

// TestReplicaFSMKeepsMsgsRoom checks that Apply decodes each opMsgs op
// into the room of the one before, cleared once applied so that it keeps
// no entry's bytes, and gives up the room of an op that failed.
func TestReplicaFSMKeepsMsgsRoom(t *testing.T) {
	s, err := store.Open(store.Options{Storage: store.MemoryStorage, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	var arrays []*replicaMsg
	f := &replicaFSM{store: s, onApplied: func(op *replicaOp, _ uint64, _ error) {
		if op.kind == opMsgs {
			arrays = append(arrays, &op.msgs[:1][0])
		}
	}}
	entry := func(index uint64, op replicaOp) *raftpb.Entry {
		return &raftpb.Entry{Index: &index, Type: raftpb.EntryNormal.Enum(), Data: appendOp(nil, &op)}
	}
	msgs := func(first uint64, n int) replicaOp {
		op := replicaOp{kind: opMsgs}
		for i := range n {
			op.msgs = append(op.msgs, replicaMsg{seq: first + uint64(i), ts: 10, subj: "a", data: []byte("payload")})
		}
		return op
	}
	require.NoError(t, f.Apply([]*raftpb.Entry{entry(1, msgs(1, 3)), entry(2, msgs(4, 2))}))
	require.NoError(t, f.Apply([]*raftpb.Entry{entry(3, replicaOp{kind: opRemove, seqs: []uint64{1}}), entry(4, msgs(6, 3))}))
	require.Len(t, arrays, 3)
	require.Same(t, arrays[0], arrays[1], "the second op in the first op's room")
	require.Same(t, arrays[0], arrays[2], "kept across a remove op and an Apply")
	require.Equal(t, make([]replicaMsg, cap(f.msgs)), f.msgs[:cap(f.msgs)], "the room holds nothing once applied")

	require.Error(t, f.Apply([]*raftpb.Entry{entry(5, msgs(20, 1))}), "a gap")
	require.Nil(t, f.msgs, "a failed op keeps its room")
	require.NoError(t, f.Apply([]*raftpb.Entry{entry(5, msgs(9, 2))}))
	require.Len(t, arrays, 5)
	require.NotSame(t, arrays[0], arrays[4])
	require.Equal(t, uint64(10), s.State().LastSeq)
}

func ptr[T any](v T) *T { return &v }
