package raftlog

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/store"
	"github.com/skiffmq/skiff/store/storetest"
)

// TestOneFsyncPerBatch holds the writer inside an fsync while 50 groups
// queue their appends, then lets it go: the 50 appends are written in one
// batch with one fsync, and every callback runs after it.
func TestOneFsyncPerBatch(t *testing.T) {
	gt := newGate()
	var syncs atomic.Int64
	fs := &hookFS{FS: storetest.NewMemFS(), onSync: func(name string) { syncs.Add(1); gt.wait(name) }}
	l := mustOpen(t, fs, Options{SegmentBytes: 1 << 20})
	before := l.Stats()

	gt.close()
	first := make(chan error, 1)
	l.Group(1).Save(Update{Entries: ents(1, 1, 1, 1)}, func(err error) { first <- err })
	<-gt.entered // the writer is inside the first batch's fsync

	const groups = 50
	var done sync.WaitGroup
	var syncsAtCallback atomic.Int64
	done.Add(groups)
	for g := uint64(2); g < 2+groups; g++ {
		l.Group(g).Save(Update{Entries: ents(g, 1, 3, 1), HardState: hardState(1, 0, 0)}, func(err error) {
			require.NoError(t, err)
			syncsAtCallback.Store(syncs.Load())
			done.Done()
		})
	}
	require.Never(t, func() bool { return len(first) > 0 }, 20*time.Millisecond, time.Millisecond, "a callback ran before its fsync")
	released := syncs.Load()
	gt.open()
	require.NoError(t, <-first)
	done.Wait()

	st := l.Stats()
	require.Equal(t, int64(2), st.Batches-before.Batches, "the queued appends make one batch")
	require.Equal(t, int64(2), st.Fsyncs-before.Fsyncs, "one fsync per batch")
	require.Equal(t, int64(1+groups*4), st.Records-before.Records)
	require.Equal(t, released+1, syncsAtCallback.Load(), "the second batch's callbacks ran after its fsync")
	for g := uint64(2); g < 2+groups; g++ {
		last, err := l.Group(g).LastIndex()
		require.NoError(t, err)
		require.Equal(t, uint64(3), last)
	}
}

// durableAt reopens a copy of fs as an operating system crash would leave
// it and returns group g's last index and HardState there.
func durableAt(t *testing.T, crash *storetest.MemFS, g uint64) (uint64, *pb.HardState) {
	t.Helper()
	l, err := Open(withDefaults(crash, Options{}))
	require.NoError(t, err)
	defer func() { _ = l.Close() }()
	last, err := l.Group(g).LastIndex()
	require.NoError(t, err)
	hs, _, err := l.Group(g).InitialState()
	require.NoError(t, err)
	return last, hs
}

// TestSyncPolicies checks, under each policy, what a callback promises:
// an operating system crash taken inside the callback keeps the write iff
// the policy (or raft's MustSync) asks for an fsync before it.
func TestSyncPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy store.SyncPolicy
		// entries: appended entries are durable at their callback.
		entries bool
	}{
		{store.SyncAlways, true},
		{store.SyncInterval, false},
		{store.SyncNever, false},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			mem := storetest.NewMemFS()
			l := mustOpen(t, mem, Options{Durability: store.Durability{Sync: tc.policy, Interval: time.Hour}})
			g := l.Group(1)
			// saveCrash saves u and returns the crash image taken in its callback.
			saveCrash := func(u Update) *storetest.MemFS {
				ch := make(chan *storetest.MemFS, 1)
				g.Save(u, func(err error) {
					require.NoError(t, err)
					ch <- mem.CrashClone()
				})
				return <-ch
			}

			// Entries with a HardState whose term and vote change: raft's
			// MustSync, fsynced under every policy.
			last, hs := durableAt(t, saveCrash(Update{Entries: ents(1, 1, 3, 1), HardState: hardState(1, 1, 0)}), 1)
			require.Equal(t, uint64(3), last)
			require.Equal(t, hardState(1, 1, 0).String(), hs.String())

			// Entries and a commit index only.
			last, hs = durableAt(t, saveCrash(Update{Entries: ents(1, 4, 6, 1), HardState: hardState(1, 1, 3)}), 1)
			if tc.entries {
				require.Equal(t, uint64(6), last)
				require.Equal(t, uint64(3), hs.GetCommit())
			} else {
				require.Equal(t, uint64(3), last, "not fsynced under %s", tc.policy)
				require.Equal(t, uint64(0), hs.GetCommit())
			}

			// A new term alone.
			_, hs = durableAt(t, saveCrash(Update{HardState: hardState(2, 0, 3)}), 1)
			require.Equal(t, uint64(2), hs.GetTerm())

			// A vote alone, in the same term.
			_, hs = durableAt(t, saveCrash(Update{HardState: hardState(2, 3, 3)}), 1)
			require.Equal(t, uint64(3), hs.GetVote())

			// A snapshot received from a leader.
			snap := &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(20)), Term: new(uint64(2)), ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}}}
			last, _ = durableAt(t, saveCrash(Update{Snapshot: snap}), 1)
			require.Equal(t, uint64(20), last)

			// Log.Sync makes everything written durable under every policy.
			save(t, g, Update{Entries: ents(1, 21, 25, 2)})
			require.NoError(t, l.Sync())
			last, _ = durableAt(t, mem.CrashClone(), 1)
			require.Equal(t, uint64(25), last)
		})
	}
}

// TestSyncInterval checks that SyncInterval fsyncs in the background:
// appends not fsynced at their callback become durable within a few
// intervals, with no other write to carry them.
func TestSyncInterval(t *testing.T) {
	mem := storetest.NewMemFS()
	l := mustOpen(t, mem, Options{Durability: store.Durability{Sync: store.SyncInterval, Interval: 5 * time.Millisecond}})
	save(t, l.Group(1), Update{Entries: ents(1, 1, 10, 1)})
	require.Eventually(t, func() bool {
		last, _ := durableAt(t, mem.CrashClone(), 1)
		return last == 10
	}, 5*time.Second, 5*time.Millisecond)
}

// TestSyncIntervalUnderLoad keeps the writer's queue from ever being
// empty (each callback queues the next append): the background fsync must
// still come every interval, not wait for the writer to idle.
func TestSyncIntervalUnderLoad(t *testing.T) {
	mem := storetest.NewMemFS()
	l := mustOpen(t, mem, Options{SegmentBytes: 1 << 40, // no segment start fsyncs for it
		Durability: store.Durability{Sync: store.SyncInterval, Interval: 2 * time.Millisecond}})
	grp := l.Group(1)
	var stop atomic.Bool
	var next func(i uint64)
	next = func(i uint64) {
		grp.Save(Update{Entries: ents(1, i, i, 1)}, func(error) {
			if !stop.Load() {
				next(i + 1)
			}
		})
	}
	next(1)
	defer stop.Store(true)
	require.Eventually(t, func() bool {
		last, _ := durableAt(t, mem.CrashClone(), 1)
		return last > 0
	}, 2*time.Second, 10*time.Millisecond, "nothing fsynced under load")
}

// TestSyncNever checks that under SyncNever nothing but MustSync
// and segment starts fsyncs, even over many batches.
func TestSyncNever(t *testing.T) {
	var syncs atomic.Int64
	fs := &hookFS{FS: storetest.NewMemFS(), onSync: func(string) { syncs.Add(1) }}
	l := mustOpen(t, fs, Options{Durability: store.Durability{Sync: store.SyncNever}, SegmentBytes: 1 << 20})
	start := syncs.Load()
	g := l.Group(1)
	save(t, g, Update{HardState: hardState(1, 1, 0)}) // MustSync
	require.Equal(t, start+1, syncs.Load())
	for i := uint64(1); i <= 100; i++ {
		save(t, g, Update{Entries: ents(1, i, i, 1), HardState: hardState(1, 1, i-1)})
	}
	require.Equal(t, start+1, syncs.Load(), "no fsync for entries or commit indexes under SyncNever")
}

// TestManyGroupsConcurrently drives 8 groups from 8 goroutines through
// appends, conflicting overwrites, hard states, snapshots and compactions,
// with reads alongside, and checks every group's log after a reopen.
func TestManyGroupsConcurrently(t *testing.T) {
	mem := storetest.NewMemFS()
	opts := Options{SegmentBytes: 8 << 10, CacheBytes: 2 << 10, MaxCacheBytes: 8 << 10}
	l := mustOpen(t, mem, opts)
	const groups, rounds = 8, 60
	want := make([][]uint64, groups+1) // terms of entries first.., per group
	firsts := make([]uint64, groups+1)
	var wg sync.WaitGroup
	for g := uint64(1); g <= groups; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			grp := l.Group(g)
			terms := []uint64{}
			first, term := uint64(1), uint64(1)
			for r := 0; r < rounds; r++ {
				last := first + uint64(len(terms)) - 1
				switch {
				case r%7 == 3 && len(terms) > 3: // a new leader overwrites a suffix
					term++
					from := last - uint64(r%3)
					if from < first {
						from = first
					}
					require.NoError(t, grp.SaveWait(Update{Entries: ents(g, from, from+1, term), HardState: hardState(term, g, 0)}))
					terms = append(terms[:from-first], term, term)
				case r%11 == 10 && len(terms) > 4:
					c := first + uint64(len(terms))/2
					_, err := grp.CreateSnapshot(c, &pb.ConfState{Voters: []uint64{1, 2, 3}}, []byte("s"))
					require.NoError(t, err)
					require.NoError(t, grp.Compact(c))
					terms = terms[c+1-first:]
					first = c + 1
				default:
					require.NoError(t, grp.SaveWait(Update{Entries: ents(g, last+1, last+4, term)}))
					terms = append(terms, term, term, term, term)
				}
				last = first + uint64(len(terms)) - 1
				es, err := grp.Entries(first, last+1, 1<<30)
				require.NoError(t, err)
				require.Len(t, es, len(terms))
				for k, e := range es {
					require.Equal(t, terms[k], e.GetTerm(), "group %d entry %d", g, e.GetIndex())
					require.Equal(t, entryData(g, e.GetIndex(), e.GetTerm()), e.GetData())
				}
			}
			want[g], firsts[g] = terms, first
		}()
	}
	wg.Wait()
	require.LessOrEqual(t, l.Stats().CacheBytes, opts.MaxCacheBytes)
	require.NoError(t, l.Close())

	l = mustOpen(t, mem, opts)
	require.Empty(t, l.Recovery().Damage)
	for g := uint64(1); g <= groups; g++ {
		grp := l.Group(g)
		first, err := grp.FirstIndex()
		require.NoError(t, err)
		require.Equal(t, firsts[g], first)
		es, err := grp.Entries(first, first+uint64(len(want[g])), 1<<30)
		require.NoError(t, err)
		require.Len(t, es, len(want[g]))
		for k, e := range es {
			require.Equal(t, want[g][k], e.GetTerm())
			require.Equal(t, entryData(g, e.GetIndex(), e.GetTerm()), e.GetData())
		}
	}
}

// TestEntryCacheBounds checks the cache's bounds: per group and for the
// whole log, and that it keeps the groups that appended most recently.
func TestEntryCacheBounds(t *testing.T) {
	opts := Options{SegmentBytes: 1 << 20, CacheBytes: 4 << 10, MaxCacheBytes: 10 << 10}
	l := mustOpen(t, storetest.NewMemFS(), opts)
	cached := func(g uint64) int64 {
		grp := l.Group(g)
		grp.mu.Lock()
		defer grp.mu.Unlock()
		return grp.mu.st.cacheBytes
	}
	for round := uint64(0); round < 20; round++ {
		for g := uint64(1); g <= 5; g++ {
			save(t, l.Group(g), Update{Entries: ents(g, round*5+1, round*5+5, 1)})
			require.LessOrEqual(t, cached(g), opts.CacheBytes, "group %d", g)
			require.LessOrEqual(t, l.Stats().CacheBytes, opts.MaxCacheBytes)
		}
	}
	var sum int64
	for g := uint64(1); g <= 5; g++ {
		sum += cached(g)
	}
	require.Equal(t, l.Stats().CacheBytes, sum, "the log's count is the groups' sum")

	// Entries are served the same from the cache and from the files.
	for g := uint64(1); g <= 5; g++ {
		es, err := l.Group(g).Entries(1, 101, 1<<30)
		require.NoError(t, err)
		require.Len(t, es, 100)
		for _, e := range es {
			require.Equal(t, entryData(g, e.GetIndex(), 1), e.GetData())
		}
	}

	// Truncation and removal return their bytes.
	save(t, l.Group(5), Update{Entries: ents(5, 50, 50, 2)})
	require.NoError(t, l.Remove(4))
	sum = 0
	for _, g := range l.Groups() {
		sum += cached(g)
	}
	require.Equal(t, l.Stats().CacheBytes, sum)
}

// TestEntryCacheLRU fills the log's cache with five groups' entries, then
// a sixth group's: the least recently appended groups lose theirs first,
// oldest entries first, and only as many as needed.
func TestEntryCacheLRU(t *testing.T) {
	const entryCost = 512 // data and the Entry (entrySize)
	l := mustOpen(t, storetest.NewMemFS(), Options{SegmentBytes: 1 << 20, CacheBytes: 8 * entryCost, MaxCacheBytes: 20 * entryCost})
	appendN := func(g, n uint64) {
		var es []*pb.Entry
		for i := uint64(1); i <= n; i++ {
			es = append(es, &pb.Entry{Index: new(i), Term: new(uint64(1)), Data: make([]byte, entryCost-64)})
		}
		save(t, l.Group(g), Update{Entries: es})
	}
	cachedFrom := func(g uint64) (uint64, int) { // first cached index, entries cached
		grp := l.Group(g)
		grp.mu.Lock()
		defer grp.mu.Unlock()
		st := &grp.mu.st
		return st.last + 1 - uint64(len(st.cache)), len(st.cache)
	}
	for g := uint64(1); g <= 5; g++ {
		appendN(g, 4)
	}
	appendN(6, 6)
	for g, want := range map[uint64][2]uint64{1: {5, 0}, 2: {3, 2}, 3: {1, 4}, 4: {1, 4}, 5: {1, 4}, 6: {1, 6}} {
		from, n := cachedFrom(g)
		require.Equal(t, want, [2]uint64{from, uint64(n)}, "group %d", g)
	}
	require.Equal(t, int64(20*entryCost), l.Stats().CacheBytes)
}

// TestRemoveAndReset covers a group's removal and a damaged group's Reset.
func TestRemoveAndReset(t *testing.T) {
	mem := storetest.NewMemFS()
	l := mustOpen(t, mem, Options{})
	save(t, l.Group(1), Update{Entries: ents(1, 1, 5, 1), HardState: hardState(1, 1, 5)})
	save(t, l.Group(2), Update{Entries: ents(2, 1, 5, 1), HardState: hardState(3, 2, 4)})
	old := l.Group(1)
	require.NoError(t, l.Remove(1))
	_, err := old.LastIndex()
	require.ErrorIs(t, err, ErrRemoved)
	require.ErrorIs(t, old.SaveWait(Update{Entries: ents(1, 6, 6, 1)}), ErrRemoved)
	require.Equal(t, []uint64{2}, l.Groups())
	last, err := l.Group(1).LastIndex()
	require.NoError(t, err)
	require.Zero(t, last, "a removed group's ID starts empty")

	require.NoError(t, l.Group(2).Reset())
	require.NoError(t, l.Close())
	l = mustOpen(t, mem, Options{})
	require.Equal(t, []uint64{2}, l.Groups())
	g := l.Group(2)
	hs, cs, err := g.InitialState()
	require.NoError(t, err)
	require.Equal(t, hardState(3, 2, 0).String(), hs.String(), "Reset keeps term and vote")
	require.Empty(t, cs.GetVoters())
	first, _ := g.FirstIndex()
	last, _ = g.LastIndex()
	require.Equal(t, uint64(1), first)
	require.Zero(t, last)
}

// TestInvalidUpdates checks that updates breaking raft's storage contract
// are refused with ErrInvalid and write nothing. A refused Save fails its
// group (raft's view and the log's differ); a refused snapshot or
// compaction, the application's own call, does not.
func TestInvalidUpdates(t *testing.T) {
	l := mustOpen(t, storetest.NewMemFS(), Options{})
	big := make([]byte, MaxSnapshotData+1)
	for name, u := range map[string]Update{
		"hole":           {Entries: ents(1, 7, 8, 1)},
		"not contiguous": {Entries: []*pb.Entry{ent(1, 6, 1), ent(1, 8, 1)}},
		"received snapshot data too big": {Snapshot: &pb.Snapshot{Data: big,
			Metadata: &pb.SnapshotMetadata{Index: new(uint64(9)), Term: new(uint64(1))}}},
	} {
		t.Run(name, func(t *testing.T) {
			g := l.Group(uint64(len(l.Groups()) + 1))
			save(t, g, Update{Entries: ents(g.ID(), 1, 5, 1)})
			require.ErrorIs(t, g.SaveWait(u), ErrInvalid)
			require.ErrorIs(t, g.Err(), ErrFailed)
			require.ErrorIs(t, g.SaveWait(Update{Entries: ents(g.ID(), 6, 6, 1)}), ErrFailed)
		})
	}

	g := l.Group(100)
	save(t, g, Update{Entries: ents(100, 1, 5, 1)})
	for name, err := range map[string]error{
		"compact past the end": g.Compact(6),
		"snapshot past the end": func() error {
			_, err := g.CreateSnapshot(6, nil, nil)
			return err
		}(),
		"snapshot data too big": func() error {
			_, err := g.CreateSnapshot(3, nil, big)
			return err
		}(),
	} {
		require.ErrorIs(t, err, ErrInvalid, name)
	}
	require.NoError(t, g.Err())
	last, err := g.LastIndex()
	require.NoError(t, err)
	require.Equal(t, uint64(5), last)
	save(t, g, Update{Entries: ents(100, 6, 6, 1)})
}

func TestOpenOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"no dir", Options{FS: storetest.NewMemFS()}},
		{"policy", Options{Dir: walDir, FS: storetest.NewMemFS(), Durability: store.Durability{Sync: 9}}},
		{"interval", Options{Dir: walDir, FS: storetest.NewMemFS(), Durability: store.Durability{Interval: -1}}},
		{"segment", Options{Dir: walDir, FS: storetest.NewMemFS(), SegmentBytes: 10}},
		{"cache", Options{Dir: walDir, FS: storetest.NewMemFS(), CacheBytes: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(tc.o)
			require.ErrorIs(t, err, ErrInvalidConfig)
		})
	}
	o := DefaultOptions("/x")
	require.Equal(t, int64(DefaultSegmentBytes), o.SegmentBytes)
	require.Equal(t, store.DefaultSyncInterval, o.Durability.Interval)
}

// TestClosed checks that a closed log refuses writes with ErrClosed.
func TestClosed(t *testing.T) {
	l := mustOpen(t, storetest.NewMemFS(), Options{})
	g := l.Group(1)
	require.NoError(t, l.Close())
	require.ErrorIs(t, l.Close(), ErrClosed)
	require.ErrorIs(t, g.SaveWait(Update{Entries: ents(1, 1, 1, 1)}), ErrClosed)
	require.ErrorIs(t, l.Sync(), ErrClosed)
}

// TestUpdateOf checks what a MsgStorageAppend asks to save.
func TestUpdateOf(t *testing.T) {
	m := &pb.Message{Entries: ents(1, 1, 2, 1)}
	u := UpdateOf(m)
	require.Nil(t, u.HardState)
	require.Nil(t, u.Snapshot)
	require.Len(t, u.Entries, 2)
	m = &pb.Message{Term: new(uint64(2)), Vote: new(uint64(0)), Commit: new(uint64(1)),
		Snapshot: &pb.Snapshot{Metadata: &pb.SnapshotMetadata{Index: new(uint64(5))}}}
	u = UpdateOf(m)
	require.Equal(t, hardState(2, 0, 1).String(), u.HardState.String())
	require.NotNil(t, u.Snapshot)
	require.Nil(t, UpdateOf(&pb.Message{Snapshot: &pb.Snapshot{}}).Snapshot, "an empty snapshot is none")
}
