package posbitmap

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/match"
	"github.com/skiffmq/skiff/match/matchtest"
)

func TestNewOptions(t *testing.T) {
	for _, tc := range []struct {
		maxTokens int
		want      int // positions; 0 for an error
	}{
		{0, DefaultMaxTokens},
		{1, 1},
		{5, 5},
		{maxMaxTokens, maxMaxTokens},
		{-1, 0},
		{maxMaxTokens + 1, 0},
	} {
		t.Run(fmt.Sprint(tc.maxTokens), func(t *testing.T) {
			m, err := New[string](Options{MaxTokens: tc.maxTokens})
			if tc.want == 0 {
				require.ErrorIs(t, err, ErrInvalidOptions)
				require.Nil(t, m)
				return
			}
			require.NoError(t, err)
			require.Len(t, m.mu.index.pos, tc.want)
		})
	}
	require.Equal(t, DefaultMaxTokens, DefaultOptions().MaxTokens)
}

// TestPlacement checks the bitmaps each kind of pattern is indexed in,
// with MaxTokens 3.
func TestPlacement(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		want    []string
	}{
		{"a", []string{"rows[0][a]", "null[1]", "null[2]"}},
		{"a.*.c", []string{"rows[0][a]", "other[1]", "rows[2][c]"}},
		{"*.*.*", []string{"other[0]", "other[1]", "other[2]"}},
		{"a.>", []string{"rows[0][a]", "other[1]", "other[2]", "null[2]", "longer"}},
		{">", []string{"other[0]", "other[1]", "null[1]", "other[2]", "null[2]", "longer"}},
		{"a.#", []string{"rows[0][a]", "other[1]", "null[1]", "other[2]", "null[2]", "longer"}},
		{"#", []string{"other[0]", "null[0]", "other[1]", "null[1]", "other[2]", "null[2]", "longer"}},
		{"a.b.#", []string{"rows[0][a]", "rows[1][b]", "other[2]", "null[2]", "longer"}},
		{"a.b.>", []string{"rows[0][a]", "rows[1][b]", "other[2]", "longer"}},
		{"foo*.#x", []string{"rows[0][foo*]", "rows[1][#x]", "null[2]"}},
		// Not expressible by position.
		{"a.#.b", []string{"fallback"}},
		{"#.a", []string{"fallback"}},
		{"a.b.c.d", []string{"fallback"}},
		{"a.b.c.#", []string{"fallback"}},
		{"a.b.c.>", []string{"fallback"}},
	} {
		t.Run(tc.pattern, func(t *testing.T) {
			m, err := New[string](Options{MaxTokens: 3})
			require.NoError(t, err)
			require.NoError(t, m.Subscribe(tc.pattern, "", "s"))
			require.Equal(t, tc.want, placement(&m.mu.index, 0))
			require.NoError(t, m.Unsubscribe(tc.pattern, "", "s"))
			requireEmpty(t, m)
		})
	}
}

// TestLongSubjects looks up subjects shorter than, as long as and longer
// than MaxTokens, against patterns of each kind: literal, wildcard, fallback
// and multi-token wildcards that reach past MaxTokens through "longer".
func TestLongSubjects(t *testing.T) {
	m, err := New[string](Options{MaxTokens: 2})
	require.NoError(t, err)
	for _, p := range []string{"a", "a.b", "*.*", "a.>", "a.#", "#", ">", "a.b.c", "a.#.c", "*.b.>"} {
		require.NoError(t, m.Subscribe(p, "", p))
	}
	for _, tc := range []struct {
		subject string
		want    []string
	}{
		{"a", []string{"a", "a.#", "#", ">"}},
		{"b", []string{"#", ">"}},
		{"a.b", []string{"a.b", "*.*", "a.>", "a.#", "#", ">"}},
		{"x.b", []string{"*.*", "#", ">"}},
		// Past MaxTokens: only patterns in longer or on the fallback list.
		{"a.b.c", []string{"a.>", "a.#", "#", ">", "a.b.c", "a.#.c", "*.b.>"}},
		{"a.x.c", []string{"a.>", "a.#", "#", ">", "a.#.c"}},
		{"x.b.c.d", []string{"#", ">", "*.b.>"}},
		{"b.c.d.e.f.g.h", []string{"#", ">"}},
	} {
		t.Run(tc.subject, func(t *testing.T) {
			var r match.Result[string]
			require.NoError(t, m.Lookup(tc.subject, &r))
			require.ElementsMatch(t, tc.want, r.Plain)
		})
	}
	require.Equal(t, []uint32{3, 4, 5, 6}, m.mu.index.longer.ToArray()) // a.>, a.#, #, >
	require.Equal(t, []uint32{7, 8, 9}, m.mu.index.fallback.ToArray())  // a.b.c, a.#.c, *.b.> (3 tokens)
}

// TestFallback checks that fallback patterns match like the others, share
// ids with them, and leave the list when their last subscriber goes.
func TestFallback(t *testing.T) {
	m, err := New[string](Options{MaxTokens: 3})
	require.NoError(t, err)
	require.NoError(t, m.Subscribe("a.#.z", "", "s1"))
	require.NoError(t, m.Subscribe("a.#.z", "q", "s2"))
	require.NoError(t, m.Subscribe("a.b.c.d", "", "s3"))
	require.NoError(t, m.Subscribe("a.*", "", "s4"))
	require.Equal(t, []uint32{0, 1}, m.mu.index.fallback.ToArray())

	var r match.Result[string]
	require.NoError(t, m.Lookup("a.z", &r))
	require.Equal(t, []string{"s4", "s1"}, r.Plain, "indexed patterns first, then the fallback list")
	require.Equal(t, []match.Group[string]{{Queue: "q", Members: []string{"s2"}}}, r.Groups)
	require.NoError(t, m.Lookup("a.b.c.d", &r))
	require.Equal(t, []string{"s3"}, r.Plain)

	require.NoError(t, m.Unsubscribe("a.#.z", "", "s1"))
	require.Equal(t, []uint32{0, 1}, m.mu.index.fallback.ToArray(), "a.#.z keeps a subscriber")
	require.NoError(t, m.Unsubscribe("a.#.z", "q", "s2"))
	require.Equal(t, []uint32{1}, m.mu.index.fallback.ToArray())
	require.NoError(t, m.Lookup("a.x.z", &r))
	require.Empty(t, r.Plain)

	require.NoError(t, m.Subscribe("#.x.#", "", "s5"))
	require.Equal(t, []uint32{0, 1}, m.mu.index.fallback.ToArray(), "the freed id is reused")
	require.NoError(t, m.Unsubscribe("a.b.c.d", "", "s3"))
	require.NoError(t, m.Unsubscribe("a.*", "", "s4"))
	require.NoError(t, m.Unsubscribe("#.x.#", "", "s5"))
	requireEmpty(t, m)
}

// TestNullMonotone checks the invariant Lookup relies on to AND a single
// null bitmap: null[p] is a subset of null[p+1].
func TestNullMonotone(t *testing.T) {
	m, err := New[string](Options{MaxTokens: 6})
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		require.NoError(t, m.Subscribe(matchtest.RandomPattern(rng), "", "s"))
	}
	pos := m.mu.index.pos
	for p := range len(pos) - 1 {
		require.True(t, roaring.AndNot(&pos[p].null, &pos[p+1].null).IsEmpty(), "null[%d] is not within null[%d]", p, p+1)
	}
}

// TestRelease fills the index with many patterns and empties it: no row,
// id or table slot may be left.
func TestRelease(t *testing.T) {
	m, err := New[string](Options{MaxTokens: 4})
	require.NoError(t, err)
	var patterns []string
	for i := range 300 {
		patterns = append(patterns,
			fmt.Sprintf("t.%d", i), fmt.Sprintf("*.%d.>", i), fmt.Sprintf("%d.#", i%40),
			fmt.Sprintf("x.#.%d", i), fmt.Sprintf("a.b.c.d.%d", i))
	}
	for _, p := range patterns {
		require.NoError(t, m.Subscribe(p, "", "s"))
	}
	require.Len(t, m.mu.index.pos[1].rows, 300)
	for _, p := range patterns {
		err := m.Unsubscribe(p, "", "s")
		if err != nil {
			require.ErrorIs(t, err, match.ErrNotFound) // a repeated pattern
		}
	}
	requireEmpty(t, m)
}

// placement names every bitmap that holds id, in position order.
func placement(ix *index, id uint32) []string {
	var out []string
	for p := range ix.pos {
		pos := &ix.pos[p]
		var toks []string
		for tok, bm := range pos.rows {
			if bm.Contains(id) {
				toks = append(toks, tok)
			}
		}
		slices.Sort(toks)
		for _, tok := range toks {
			out = append(out, fmt.Sprintf("rows[%d][%s]", p, tok))
		}
		if pos.other.Contains(id) {
			out = append(out, fmt.Sprintf("other[%d]", p))
		}
		if pos.null.Contains(id) {
			out = append(out, fmt.Sprintf("null[%d]", p))
		}
	}
	if ix.longer.Contains(id) {
		out = append(out, "longer")
	}
	if ix.fallback.Contains(id) {
		out = append(out, "fallback")
	}
	return out
}

// requireEmpty checks that an index with no entries holds nothing for
// them: no row, no set bit, no id, no table slot.
func requireEmpty[S comparable](t *testing.T, m *Matcher[S]) {
	t.Helper()
	require.Equal(t, 0, m.Count())
	ix := &m.mu.index
	for p := range ix.pos {
		require.Nil(t, ix.pos[p].rows, "position %d keeps rows", p)
		require.True(t, ix.pos[p].other.IsEmpty(), "other[%d]", p)
		require.True(t, ix.pos[p].null.IsEmpty(), "null[%d]", p)
	}
	require.True(t, ix.longer.IsEmpty())
	require.True(t, ix.fallback.IsEmpty())
	require.True(t, m.mu.table.Empty(), "the id table keeps memory")
}
