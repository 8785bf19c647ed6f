package matchtest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/match"
)

// churnPatterns overlap heavily so that concurrent writers meet on the same
// nodes, and include every wildcard so that removals prune shared paths.
var churnPatterns = []string{
	"a", "a.b", "a.b.c", "a.b.c.d", "a.*", "a.*.c", "a.>", "*.b.>",
	"#", "a.#", "#.c", "a.#.d", "b.c", "b.*.d", "c.#.a.b", "*.*.*.*",
}

// RunConcurrent runs the concurrency checks: no lost update, linearizable
// snapshots under churn, and a full drain that leaves an empty index.
// Run it under the race detector.
func RunConcurrent(t *testing.T, newMatcher Factory) {
	t.Run("lost-update", func(t *testing.T) { testLostUpdate(t, newMatcher) })
	t.Run("snapshot", func(t *testing.T) { testSnapshotLinearizable(t, newMatcher) })
	t.Run("drain", func(t *testing.T) { testDrain(t, newMatcher) })
}

// subjectFor returns a random subject that pattern matches, built by
// replacing every wildcard with concrete tokens.
func subjectFor(pattern string, rng *rand.Rand) string {
	var toks []string
	for _, tok := range strings.Split(pattern, ".") {
		extra := 0
		switch tok {
		case "*":
			extra = 1
		case ">":
			extra = 1 + rng.IntN(2)
		case "#":
			extra = rng.IntN(3)
		default:
			toks = append(toks, tok)
		}
		for range extra {
			toks = append(toks, literalTokens[rng.IntN(len(literalTokens))])
		}
	}
	s := strings.Join(toks, ".")
	if s == "" {
		s = "a"
	}
	if !Matches(pattern, s) {
		panic(fmt.Sprintf("matchtest: built %q for %q, which does not match", s, pattern))
	}
	return s
}

// testLostUpdate has every goroutine own one subscriber and cycle it through
// the shared patterns: after its Subscribe returns, its own Lookup must see
// it; after its Unsubscribe returns, it must not (nobody else adds it).
// Other goroutines' churn on the same nodes must not lose either update.
func testLostUpdate(t *testing.T, newMatcher Factory) {
	m := newMatcher()
	const workers, rounds = 8, 300
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	// Snapshots taken during the churn must not disturb it (in the cstrie
	// they move the root to new generations under the writers' feet).
	stop := make(chan struct{})
	snapshotter := make(chan struct{})
	go func() {
		defer close(snapshotter)
		for {
			select {
			case <-stop:
				return
			default:
				m.Snapshot()
				runtime.Gosched()
			}
		}
	}()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			me := fmt.Sprintf("w%d", w)
			var r match.Result[string]
			for i := range rounds {
				p := churnPatterns[rng.IntN(len(churnPatterns))]
				q := queues[rng.IntN(len(queues))]
				subj := subjectFor(p, rng)
				if err := m.Subscribe(p, q, me); err != nil {
					errs <- err
					return
				}
				if err := m.Lookup(subj, &r); err != nil {
					errs <- err
					return
				}
				if !contains(&r, q, me) {
					errs <- fmt.Errorf("round %d: %s subscribed %q (queue %q) but Lookup(%q) = %s", i, me, p, q, subj, normalize(&r))
					return
				}
				if err := m.Unsubscribe(p, q, me); err != nil {
					errs <- fmt.Errorf("round %d: unsubscribe %q: %w", i, p, err)
					return
				}
				if err := m.Lookup(subj, &r); err != nil {
					errs <- err
					return
				}
				if contains(&r, q, me) {
					errs <- fmt.Errorf("round %d: %s unsubscribed %q but Lookup(%q) = %s", i, me, p, subj, normalize(&r))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-snapshotter
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	require.Equal(t, 0, m.Count())
	require.Empty(t, m.Snapshot())
}

func contains(r *match.Result[string], queue, sub string) bool {
	if queue == "" {
		return slices.Contains(r.Plain, sub)
	}
	return slices.Contains(groupMembers(r, queue), sub)
}

// An op is one writer operation with the logical times it started and
// ended. The clock is a shared atomic counter, so times are consistent with
// real-time order.
type op struct{ start, end int64 }

// testSnapshotLinearizable runs writers that each subscribe a private
// subscriber to their patterns in order and then unsubscribe them in order,
// round after round, while snapshots are taken. Each writer's part of a
// snapshot must be the state after some prefix of its operations, and some
// single instant within the snapshot call must be consistent with the
// prefixes of all writers at once (see feasible).
func testSnapshotLinearizable(t *testing.T, newMatcher Factory) {
	m := newMatcher()
	const writers, rounds = 6, 40
	var clock atomic.Int64
	patterns := churnPatterns[:6]
	history := make([][]op, writers) // per writer, in program order
	for w := range writers {
		history[w] = make([]op, 0, rounds*2*len(patterns))
	}
	// Background entries that never change must appear in every snapshot.
	require.NoError(t, m.Subscribe("z.z", "", "static"))

	var wg sync.WaitGroup
	var done atomic.Bool
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			me := fmt.Sprintf("w%d", w)
			q := queues[w%len(queues)]
			for range rounds {
				for _, unsub := range []bool{false, true} {
					for _, p := range patterns {
						o := op{start: clock.Add(1)}
						var err error
						if unsub {
							err = m.Unsubscribe(p, q, me)
						} else {
							err = m.Subscribe(p, q, me)
						}
						o.end = clock.Add(1)
						if err != nil {
							panic(err)
						}
						history[w] = append(history[w], o)
					}
				}
			}
		}()
	}
	type snap struct {
		start, end int64
		entries    []match.Subscription[string]
	}
	var snaps []snap
	snapDone := make(chan struct{})
	go func() {
		defer close(snapDone)
		// At least one snapshot, even if the writers finish first.
		for first := true; first || !done.Load(); first = false {
			s := snap{start: clock.Add(1)}
			s.entries = m.Snapshot()
			s.end = clock.Add(1)
			snaps = append(snaps, s)
			runtime.Gosched()
		}
	}()
	wg.Wait()
	done.Store(true)
	<-snapDone
	require.NotEmpty(t, snaps)

	for si, s := range snaps {
		perWriter := make([][]string, writers)
		static := false
		for _, e := range s.entries {
			if e.Subscriber == "static" {
				static = true
				continue
			}
			var w int
			_, err := fmt.Sscanf(e.Subscriber, "w%d", &w)
			require.NoError(t, err)
			require.Equal(t, queues[w%len(queues)], e.Queue)
			perWriter[w] = append(perWriter[w], e.Pattern)
		}
		require.True(t, static, "snapshot %d lost an unchanging entry", si)
		cands := make([][]int, writers)
		for w := range writers {
			cands[w] = prefixCandidates(perWriter[w], patterns, len(history[w]))
			require.NotEmpty(t, cands[w], "snapshot %d: writer %d holds %v, which no prefix of its operations produces", si, w, perWriter[w])
		}
		require.True(t, feasible(s.start, s.end, cands, history),
			"snapshot %d (clock %d..%d) is not a state at any single instant: per-writer prefixes %v", si, s.start, s.end, cands)
	}
}

// prefixCandidates returns every k such that the state after a writer's
// first k operations is exactly held. Operations cycle: n subscribes in
// pattern order, then n unsubscribes in pattern order.
func prefixCandidates(held, patterns []string, total int) []int {
	n := len(patterns)
	set := map[string]bool{}
	for _, p := range held {
		set[p] = true
	}
	var out []int
	for k := 0; k <= total; k++ {
		phase := k % (2 * n)
		want := map[string]bool{}
		if phase <= n {
			for _, p := range patterns[:phase] {
				want[p] = true
			}
		} else {
			for _, p := range patterns[phase-n:] {
				want[p] = true
			}
		}
		if len(want) == len(set) && len(held) == len(set) {
			same := true
			for p := range want {
				if !set[p] {
					same = false
					break
				}
			}
			if same {
				out = append(out, k)
			}
		}
	}
	return out
}

// feasible reports whether there is one instant L within [start, end] at
// which every writer w can be after exactly k operations for one of its
// candidates k: its k-th operation may have taken effect by L (it started
// before L) and its (k+1)-th may not have (it ended after L).
func feasible(start, end int64, cands [][]int, history [][]op) bool {
	window := func(w, k int) (lo, hi int64) {
		lo, hi = -1<<62, 1<<62
		if k > 0 {
			lo = history[w][k-1].start
		}
		if k < len(history[w]) {
			hi = history[w][k].end
		}
		return lo, hi
	}
	// The instant can be taken at the snapshot's start or at some candidate
	// window's lower end; try each.
	points := []int64{start}
	for w := range cands {
		for _, k := range cands[w] {
			if lo, _ := window(w, k); lo > start && lo <= end {
				points = append(points, lo)
			}
		}
	}
	for _, l := range points {
		ok := true
		for w := range cands {
			any := false
			for _, k := range cands[w] {
				if lo, hi := window(w, k); lo <= l && l <= hi {
					any = true
					break
				}
			}
			if !any {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// testDrain fills the index from several goroutines, empties it from
// several goroutines, and checks that nothing is left behind.
func testDrain(t *testing.T, newMatcher Factory) {
	m := newMatcher()
	const workers, per = 4, 500
	entries := func(w int) []match.Subscription[string] {
		rng := rand.New(rand.NewPCG(uint64(w), 99))
		var out []match.Subscription[string]
		for i := range per {
			out = append(out, match.Subscription[string]{
				Pattern:    RandomPattern(rng),
				Queue:      queues[rng.IntN(len(queues))],
				Subscriber: fmt.Sprintf("w%d-%d", w, i%7),
			})
		}
		return out
	}
	run := func(f func(e match.Subscription[string]) error) {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var r match.Result[string]
				for _, e := range entries(w) {
					if err := f(e); err != nil && !errors.Is(err, match.ErrNotFound) {
						panic(err)
					}
					_ = m.Lookup("a.b.c", &r)
				}
			}()
		}
		wg.Wait()
	}
	run(func(e match.Subscription[string]) error { return m.Subscribe(e.Pattern, e.Queue, e.Subscriber) })
	require.Positive(t, m.Count())
	// Each writer's list may repeat an entry; the second removal of it
	// reports ErrNotFound, which run ignores.
	run(func(e match.Subscription[string]) error { return m.Unsubscribe(e.Pattern, e.Queue, e.Subscriber) })
	require.Equal(t, 0, m.Count())
	require.Empty(t, m.Snapshot())
	var r match.Result[string]
	for _, s := range []string{"a", "a.b", "a.b.c", "c.c.c.c.c"} {
		require.NoError(t, m.Lookup(s, &r))
		require.Equal(t, 0, r.Len(), "lookup %q after drain", s)
	}
}
