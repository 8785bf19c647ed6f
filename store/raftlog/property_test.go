package raftlog

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/store"
	"github.com/skiffmq/skiff/store/storetest"
)

// modelState is what a group's log should hold.
type modelState struct {
	first, prevTerm    uint64
	terms              []uint64 // of entries first, first+1, ...
	term, vote, commit uint64
	snapIndex          uint64
}

func (m modelState) last() uint64 { return m.first + uint64(len(m.terms)) - 1 }

func (m modelState) clone() modelState {
	m.terms = slices.Clone(m.terms)
	return m
}

func (m modelState) String() string {
	return fmt.Sprintf("first %d prevTerm %d last %d terms %v hs %d/%d/%d snap %d",
		m.first, m.prevTerm, m.last(), m.terms, m.term, m.vote, m.commit, m.snapIndex)
}

// stateOf reads a group's state back from the log, checking each entry's
// data on the way.
func stateOf(t *testing.T, g *Group) modelState {
	t.Helper()
	var m modelState
	var err error
	m.first, err = g.FirstIndex()
	require.NoError(t, err)
	last, err := g.LastIndex()
	require.NoError(t, err)
	m.prevTerm, err = g.Term(m.first - 1)
	require.NoError(t, err)
	if last >= m.first {
		es, err := g.Entries(m.first, last+1, 1<<40)
		require.NoError(t, err)
		for _, e := range es {
			require.Equal(t, entryData(g.ID(), e.GetIndex(), e.GetTerm()), e.GetData())
			m.terms = append(m.terms, e.GetTerm())
		}
	}
	if m.terms == nil {
		m.terms = []uint64{}
	}
	hs, _, err := g.InitialState()
	require.NoError(t, err)
	m.term, m.vote, m.commit = hs.GetTerm(), hs.GetVote(), hs.GetCommit()
	snap, err := g.Snapshot()
	require.NoError(t, err)
	m.snapIndex = snap.GetMetadata().GetIndex()
	return m
}

// step is a group's state after the op with a global sequence number.
type step struct {
	seq   int64
	state modelState
}

// epoch is one life of the log between crashes: what its callbacks
// acknowledged.
type epoch struct {
	written atomic.Int64 // highest op acknowledged: it and all before it reached the OS
	durable atomic.Int64 // highest op acknowledged as fsynced: it and all before it survive an OS crash
}

func raise(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// TestCrashProperty runs random operations from several groups, with the
// writer batching them concurrently, and crashes at random points: an
// operating system crash (each file keeps what was fsynced) or a process
// crash (everything written survives). After every crash, each group's
// recovered log must be its state after some prefix of the operations,
// one prefix for all groups, that includes every operation acknowledged
// as durable (as written, for a process crash), entries with their terms
// and data. Then the operations go on from what was recovered.
func TestCrashProperty(t *testing.T) {
	for _, policy := range []store.SyncPolicy{store.SyncAlways, store.SyncInterval, store.SyncNever} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("sync=%s/seed=%d", policy, seed), func(t *testing.T) {
				crashProperty(t, policy, seed)
			})
		}
	}
}

func crashProperty(t *testing.T, policy store.SyncPolicy, seed uint64) {
	const groups, ops = 4, 1500
	rng := rand.New(rand.NewPCG(seed, uint64(policy)))
	opts := Options{SegmentBytes: 2 << 10, CacheBytes: 1 << 10, MaxCacheBytes: 3 << 10,
		Durability: store.Durability{Sync: policy, Interval: 1 << 40}}
	mem := storetest.NewMemFS()
	l, err := Open(withDefaults(mem, opts))
	require.NoError(t, err)
	defer func() { _ = l.Close() }()

	hist := make([][]step, groups+1) // per group, oldest first
	for g := 1; g <= groups; g++ {
		hist[g] = []step{{seq: 0, state: modelState{first: 1, terms: []uint64{}}}}
	}
	ep := &epoch{}
	var seq int64
	crashes := 0
	cur := func(g int) modelState { return hist[g][len(hist[g])-1].state.clone() }

	for n := 0; n < ops; n++ {
		g := 1 + rng.IntN(groups)
		m := cur(g)
		grp := l.Group(uint64(g))
		seq++
		s, e := seq, ep
		var u Update
		mustSync := false
		switch r := rng.IntN(100); {
		case r < 50: // appends in the current term
			if m.term == 0 {
				m.term = 1
				u.HardState = hardState(m.term, m.vote, m.commit)
				mustSync = true
			}
			k := 1 + rng.IntN(4)
			u.Entries = ents(uint64(g), m.last()+1, m.last()+uint64(k), m.term)
			m.terms = append(m.terms, repeat(m.term, k)...)
		case r < 62 && len(m.terms) > 0: // a new leader overwrites the uncommitted suffix
			from := max(m.first, m.commit+1)
			from += uint64(rng.IntN(int(m.last() + 2 - from)))
			m.term++
			m.vote = uint64(rng.IntN(5))
			k := 1 + rng.IntN(3)
			u.Entries = ents(uint64(g), from, from+uint64(k)-1, m.term)
			u.HardState = hardState(m.term, m.vote, m.commit)
			m.terms = append(m.terms[:from-m.first], repeat(m.term, k)...)
			mustSync = true
		case r < 75: // the commit index advances
			if m.commit >= m.last() {
				seq--
				continue
			}
			m.commit += 1 + uint64(rng.IntN(int(m.last()-m.commit)))
			u.HardState = hardState(m.term, m.vote, m.commit)
		case r < 85 && m.commit >= m.first: // the state machine compacts what it applied
			i := m.first + uint64(rng.IntN(int(m.commit-m.first+1)))
			if rng.IntN(3) == 0 && i > m.snapIndex {
				_, err := grp.CreateSnapshot(i, &pb.ConfState{Voters: []uint64{1, 2, 3}}, nil)
				require.NoError(t, err)
				m.snapIndex = i
				raise(&e.written, s)
				if policy == store.SyncAlways {
					raise(&e.durable, s)
				}
				hist[g] = append(hist[g], step{seq: s, state: m.clone()})
				seq++
				s = seq
			}
			require.NoError(t, grp.Compact(i))
			raise(&e.written, s)
			m.prevTerm = m.terms[i-m.first]
			m.terms = m.terms[i+1-m.first:]
			m.first = i + 1
			hist[g] = append(hist[g], step{seq: s, state: m})
			continue
		case r < 88: // a snapshot from the leader replaces the log
			i := max(m.snapIndex, m.last()) + 1 + uint64(rng.IntN(5))
			if len(m.terms) > 2 && rng.IntN(2) == 0 {
				i = max(m.snapIndex+1, m.first+uint64(rng.IntN(len(m.terms))))
			}
			m.term++
			u.Snapshot = &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(i), Term: new(m.term), ConfState: &pb.ConfState{Voters: []uint64{1, 2}}}}
			u.HardState = hardState(m.term, m.vote, i)
			m.first, m.prevTerm, m.terms, m.commit, m.snapIndex = i+1, m.term, []uint64{}, i, i
			mustSync = true
		case r < 92: // Sync: everything before is durable
			require.NoError(t, l.Sync())
			raise(&e.written, s)
			raise(&e.durable, s)
			continue
		default: // a crash
			crashes++
			os := rng.IntN(2) == 0
			var bound int64
			var fs *storetest.MemFS
			if os {
				bound = e.durable.Load()
				fs = mem.CrashClone()
			} else {
				bound = e.written.Load()
				fs = mem.Clone()
			}
			_ = l.Close()
			mem = fs
			l, err = Open(withDefaults(mem, opts))
			require.NoError(t, err)
			require.Empty(t, l.Recovery().Damage)
			checkRecovered(t, l, hist, bound, fmt.Sprintf("crash %d (os %v) at op %d", crashes, os, s))
			ep = &epoch{}
			raise(&ep.written, s)
			raise(&ep.durable, s)
			continue
		}
		if policy == store.SyncAlways && len(u.Entries) > 0 {
			mustSync = true
		}
		hist[g] = append(hist[g], step{seq: s, state: m})
		grp.Save(u, func(err error) {
			if err != nil {
				t.Errorf("op %d: %v", s, err)
				return
			}
			raise(&e.written, s)
			if mustSync {
				raise(&e.durable, s)
			}
		})
	}
	require.NoError(t, l.Sync())
	checkRecovered(t, l, hist, seq, "the end")
	t.Logf("%d ops, %d crashes", seq, crashes)
}

// checkRecovered checks that each group's recovered state is its state
// after one global prefix of the ops, at least bound long, and rebases
// each group's history on what was recovered.
func checkRecovered(t *testing.T, l *Log, hist [][]step, bound int64, where string) {
	t.Helper()
	lo, hi := bound, int64(1<<62) // the prefixes every group allows so far
	for g := 1; g < len(hist); g++ {
		got := stateOf(t, l.Group(uint64(g)))
		h := hist[g]
		match := -1
		for j := len(h) - 1; j >= 0; j-- {
			end := int64(1 << 62) // the prefix this state stands for: [h[j].seq, end)
			if j+1 < len(h) {
				end = h[j+1].seq
			}
			if end <= lo {
				break
			}
			if h[j].seq < hi && sameState(got, h[j].state) {
				match = j
				lo, hi = max(lo, h[j].seq), min(hi, end)
				break
			}
		}
		if match < 0 {
			var b []string
			for _, st := range h[max(0, len(h)-8):] {
				b = append(b, fmt.Sprintf("  op %d: %v", st.seq, st.state))
			}
			t.Fatalf("%s: group %d recovered\n  %v\nwhich is no state at op >= %d, < %d; the last states:\n%s",
				where, g, got, lo, hi, joinLines(b))
		}
		hist[g] = []step{{seq: 0, state: h[match].state}}
	}
}

func sameState(a, b modelState) bool {
	return a.first == b.first && a.prevTerm == b.prevTerm && slices.Equal(a.terms, b.terms) &&
		a.term == b.term && a.vote == b.vote && a.commit == b.commit && a.snapIndex == b.snapIndex
}

func joinLines(b []string) string {
	s := ""
	for _, l := range b {
		s += l + "\n"
	}
	return s
}
