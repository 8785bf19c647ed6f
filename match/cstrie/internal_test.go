package cstrie

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/match"
)

// shape counts what the live trie holds: I-nodes below the root, dead
// ones, and non-empty sets.
type shape struct{ inodes, dead, sets int }

func (t *Trie[S]) shape() shape {
	var s shape
	var visit func(in *iNode[S])
	visit = func(in *iNode[S]) {
		m := t.gcasRead(in)
		if m.kind == kindT {
			s.dead++
			return
		}
		if !m.cn.set.Empty() {
			s.sets++
		}
		m.cn.each(func(c *iNode[S]) {
			s.inodes++
			visit(c)
		})
	}
	visit(t.readRoot(false))
	return s
}

func TestGenerationsAreDistinct(t *testing.T) {
	a, b := new(generation), new(generation)
	require.NotSame(t, a, b)
	require.NotZero(t, unsafe.Sizeof(generation{}), "a zero-size generation may share its address with another")
}

// TestPruning checks that removing everything leaves only the empty root,
// from one goroutine and from many racing ones.
func TestPruning(t *testing.T) {
	tr := New[int]()
	patterns := []string{"a.b.c.d", "a.b.c", "a.*.c.#", "a.>", "#.x.#", "q.w.e.r.t.y"}
	for i, p := range patterns {
		require.NoError(t, tr.Subscribe(p, "", i))
		require.NoError(t, tr.Subscribe(p, "g", i))
	}
	require.Positive(t, tr.shape().inodes)
	for i, p := range patterns {
		require.NoError(t, tr.Unsubscribe(p, "", i))
		require.NoError(t, tr.Unsubscribe(p, "g", i))
	}
	require.Equal(t, shape{}, tr.shape())

	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for range 2000 {
				p := patterns[rng.IntN(len(patterns))]
				_ = tr.Subscribe(p, "", w)
				if rng.IntN(4) == 0 {
					tr.ReadOnlySnapshot()
				}
				_ = tr.Unsubscribe(p, "", w)
			}
		}()
	}
	wg.Wait()
	require.Equal(t, 0, tr.Count())
	require.Equal(t, shape{}, tr.shape(), "racing removals and snapshots left nodes behind")
}

func TestReadOnlySnapshot(t *testing.T) {
	tr := New[string]()
	require.NoError(t, tr.Subscribe("a.b", "", "x"))
	require.NoError(t, tr.Subscribe("a.*", "q", "y"))
	snap := tr.ReadOnlySnapshot()
	require.Same(t, snap, snap.ReadOnlySnapshot())

	require.NoError(t, tr.Unsubscribe("a.b", "", "x"))
	require.NoError(t, tr.Subscribe("a.b.c", "", "z"))
	require.NoError(t, tr.Subscribe("a.b", "", "w"))

	var r match.Result[string]
	require.NoError(t, snap.Lookup("a.b", &r))
	require.Equal(t, []string{"x"}, r.Plain)
	require.Equal(t, []match.Group[string]{{Queue: "q", Members: []string{"y"}}}, r.Groups)
	require.Equal(t, 2, snap.Count())
	require.ErrorIs(t, snap.Subscribe("a", "", "x"), ErrReadOnly)
	require.ErrorIs(t, snap.Unsubscribe("a.b", "", "x"), ErrReadOnly)

	require.NoError(t, tr.Lookup("a.b", &r))
	require.Equal(t, []string{"w"}, r.Plain)
	require.Equal(t, 3, tr.Count())

	// A second snapshot sees the live state, and the first is unchanged.
	require.ElementsMatch(t, []match.Subscription[string]{
		{Pattern: "a.*", Queue: "q", Subscriber: "y"},
		{Pattern: "a.b.c", Subscriber: "z"},
		{Pattern: "a.b", Subscriber: "w"},
	}, tr.Snapshot())
	require.ElementsMatch(t, []match.Subscription[string]{
		{Pattern: "a.b", Subscriber: "x"},
		{Pattern: "a.*", Queue: "q", Subscriber: "y"},
	}, snap.Snapshot())
}

func TestTableGrowsAndShrinks(t *testing.T) {
	var tb table[int]
	const n = 5000
	for i := range n {
		tb = tb.with(&iNode[int]{tok: fmt.Sprint(i)})
		require.Equal(t, i+1, tb.len())
	}
	require.NotNil(t, tb.big)
	old := tb
	for i := range n {
		require.NotNil(t, tb.get(fmt.Sprint(i)), "token %d", i)
	}
	require.Nil(t, tb.get("nope"))
	seven := &iNode[int]{tok: "7"}
	tb = tb.with(seven)
	require.Equal(t, n, tb.len(), "replacing a child keeps the size")
	require.Same(t, seven, tb.get("7"))
	require.NotSame(t, seven, old.get("7"), "the old table is untouched")
	for i := range n - 2 {
		tb = tb.without(fmt.Sprint(i))
		require.Equal(t, n-i-1, tb.len())
		require.Nil(t, tb.get(fmt.Sprint(i)))
	}
	require.Nil(t, tb.big, "a shrunken table is a slice again")
	require.ElementsMatch(t, []string{fmt.Sprint(n - 2), fmt.Sprint(n - 1)}, tokens(&tb))
	require.Equal(t, n, old.len())
}

// TestHAMTCollisions forces full hash collisions and shared hash prefixes,
// which real tokens essentially never produce, by handing the nodes chosen
// hashes. The first two leaves are paired explicitly; every later one lands
// on a sub-node or an empty slot, so no real hash is ever recomputed.
func TestHAMTCollisions(t *testing.T) {
	hashes := []uint64{0, 0, 0, 1 << 60, 32, 64 | 1<<40, 1 << 25, 0}
	leaves := make([]*iNode[int], len(hashes))
	for i := range leaves {
		leaves[i] = &iNode[int]{tok: fmt.Sprint(i)}
	}
	root := &hnode[int]{bitmap: 1, slots: []hslot[int]{{kid: pair(leaves[0], hashes[0], leaves[1], hashes[1], hamtBits)}}}
	for i := 2; i < len(hashes); i++ {
		var added bool
		root, added = root.with(leaves[i], hashes[i], 0)
		require.True(t, added, "leaf %d", i)
	}
	_, added := root.with(&iNode[int]{tok: "7"}, 0, 0)
	require.False(t, added, "same token, same hash: a replacement")
	for i, h := range hashes {
		require.Same(t, leaves[i], root.find(fmt.Sprint(i), h), "token %d", i)
	}
	require.Nil(t, root.find("x", 0))
	n := 0
	root.each(func(*iNode[int]) { n++ })
	require.Equal(t, len(hashes), n)
	for i, h := range hashes {
		var removed bool
		root, removed = root.without(fmt.Sprint(i), h, 0)
		require.True(t, removed, "leaf %d", i)
		for j := i + 1; j < len(hashes); j++ {
			require.Same(t, leaves[j], root.find(fmt.Sprint(j), hashes[j]), "after removing %d", i)
		}
	}
	require.Nil(t, root)
}

func tokens[S comparable](tb *table[S]) []string {
	var out []string
	tb.each(func(c *iNode[S]) { out = append(out, c.tok) })
	return out
}
