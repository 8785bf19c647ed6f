package subject_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/match/matchtest"
	"github.com/skiffmq/skiff/subject"
)

func TestCovers(t *testing.T) {
	tests := []struct {
		a, p string
		want bool
	}{
		{"foo.*", "foo.bar", true},
		{"foo.*", "foo.*", true},
		{"foo.*", "foo.>", false},
		{"foo.>", "foo.*.baz", true},
		{"foo.>", "foo.#", false}, // foo.# matches "foo", foo.> does not
		{"foo.>", "foo.#.x", true},
		{">", "#", false},
		{"#", ">", true},
		{"#", "a.#.b", true},
		{"a.#", "a", true},
		{"a.#.c", "a.b.*.c", true},
		{"a.#.c", "a.b.*", false},
		{"*", "a", true},
		{"*", "*", true},
		{"*", "#", false},
		{"a", "a.b", false},
		{"a.b", "a", false},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, subject.Covers(tc.a, tc.p), "Covers(%q, %q)", tc.a, tc.p)
	}
}

// TestCoversSound checks on random patterns that whenever Covers says a
// covers p, every subject p matches (over an alphabet with every literal
// they use and one more) a matches too.
func TestCoversSound(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	subjects := allSubjects([]string{"a", "b", "c", "z"}, 5)
	trues := 0
	for range 3000 {
		a, p := matchtest.RandomPattern(rng), matchtest.RandomPattern(rng)
		if !subject.Covers(a, p) {
			continue
		}
		trues++
		for _, s := range subjects {
			if matchtest.Matches(p, s) && !matchtest.Matches(a, s) {
				t.Fatalf("Covers(%q, %q) but %q matches p and not a", a, p, s)
			}
		}
	}
	require.Greater(t, trues, 100, "the random patterns should exercise true answers")
}

func allSubjects(alphabet []string, maxLen int) []string {
	var out []string
	var rec func(prefix []string)
	rec = func(prefix []string) {
		if len(prefix) > 0 {
			out = append(out, strings.Join(prefix, "."))
		}
		if len(prefix) == maxLen {
			return
		}
		for _, tok := range alphabet {
			rec(append(prefix, tok))
		}
	}
	rec(nil)
	return out
}
