package subject_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/match/matchtest"
	"github.com/skiffmq/skiff/subject"
)

func TestIntersects(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
		{"a.*", "a.b", true},
		{"a.*", "*.b", true},
		{"a.>", "a", false},
		{"a.>", "a.b.c", true},
		{"a.#", "a", true},
		{"#", "x.y", true},
		{"#.c", "a.*", true},
		{"a.*", "b.>", false},
		{"*.*", "a.b.c", false},
		{"$JS.API.>", "orders.>", false},
		{"#", "$JS.API.INFO", true},
		{">", "a", true},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, subject.Intersects(tc.a, tc.b), "Intersects(%q, %q)", tc.a, tc.b)
		require.Equal(t, tc.want, subject.Intersects(tc.b, tc.a), "Intersects(%q, %q)", tc.b, tc.a)
	}
}

// TestIntersectsExact checks Intersects against brute force over short
// subjects: true must have a witness, false must have none.
func TestIntersectsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	subjects := allSubjects([]string{"a", "b", "c", "z"}, 5)
	for range 2000 {
		a, b := matchtest.RandomPattern(rng), matchtest.RandomPattern(rng)
		witness := ""
		for _, s := range subjects {
			if matchtest.Matches(a, s) && matchtest.Matches(b, s) {
				witness = s
				break
			}
		}
		got := subject.Intersects(a, b)
		if witness != "" {
			require.True(t, got, "%q and %q both match %q", a, b, witness)
		} else if got {
			// No witness up to 5 tokens: a longer one must exist, which
			// only patterns with several multi-token wildcards need.
			require.GreaterOrEqual(t, len(a)+len(b), 9, "Intersects(%q, %q) with no witness", a, b)
		}
	}
}
