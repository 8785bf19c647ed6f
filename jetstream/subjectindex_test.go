package jetstream

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/subject"
)

// TestSubjectIndexMatchesIntersects: the index finds an intersecting
// pattern exactly when comparing with every pattern, one by one, finds
// one, over random patterns with every kind of wildcard, as patterns are
// added and removed.
func TestSubjectIndexMatchesIntersects(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	toks := []string{"a", "b", "c", "*", "#"}
	pattern := func() string {
		n := 1 + rng.IntN(4)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = toks[rng.IntN(len(toks))]
		}
		if rng.IntN(5) == 0 {
			parts[n-1] = ">"
		}
		return strings.Join(parts, ".")
	}
	for round := range 300 {
		ix := newSubjectIndex()
		set := map[string]bool{}
		for range rng.IntN(12) {
			p := pattern()
			if !set[subject.Canonical(p)] {
				set[subject.Canonical(p)] = true
				ix.add(p, "S")
			}
		}
		for p := range set {
			if rng.IntN(3) == 0 {
				delete(set, p)
				ix.remove(p)
			}
		}
		for range 50 {
			q := pattern()
			want := false
			for p := range set {
				want = want || subject.Intersects(p, q)
			}
			got, owner, ok := ix.intersecting(q)
			require.Equal(t, want, ok, "round %d: %q against %v", round, q, set)
			if ok {
				require.True(t, set[got], "round %d: %q is not in the index", round, got)
				require.True(t, subject.Intersects(got, q), "round %d: %q does not intersect %q", round, got, q)
				require.Equal(t, "S", owner)
			}
		}
	}
}

// TestSubjectIndexRemovePrunes: removing every pattern leaves an empty
// root, so a '>' query finds nothing.
func TestSubjectIndexRemovePrunes(t *testing.T) {
	ix := newSubjectIndex()
	for i := range 100 {
		ix.add(fmt.Sprintf("a.%d.#.b", i), "S")
		ix.add(fmt.Sprintf("a.%d.*", i), "S")
	}
	_, _, ok := ix.intersecting("a.7.x")
	require.True(t, ok)
	for i := range 100 {
		ix.remove(fmt.Sprintf("a.%d.#.b", i))
		ix.remove(fmt.Sprintf("a.%d.*", i))
	}
	require.True(t, ix.root.empty())
	require.Zero(t, ix.hashes)
	_, _, ok = ix.intersecting(">")
	require.False(t, ok)
}
