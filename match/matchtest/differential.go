package matchtest

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/match"
	"github.com/skiffmq/skiff/subject"
)

// alphabet is kept tiny so that random patterns and subjects collide often.
var (
	literalTokens = []string{"a", "b", "c"}
	patternTokens = []string{"a", "b", "c", "a", "b", "*", "#", ">"}
	queues        = []string{"", "", "", "q1", "q2"}
)

// Model is a Matcher's expected state: a plain set of entries answered by
// the oracle. It is not safe for concurrent use.
type Model map[match.Subscription[string]]struct{}

// Expect answers a lookup from the model.
func (m Model) Expect(subj string) *match.Result[string] {
	var r match.Result[string]
	groups := map[string][]string{}
	seen := map[match.Subscription[string]]bool{}
	for e := range m {
		if !Matches(e.Pattern, subj) {
			continue
		}
		key := match.Subscription[string]{Queue: e.Queue, Subscriber: e.Subscriber}
		if seen[key] {
			continue
		}
		seen[key] = true
		if e.Queue == "" {
			r.Plain = append(r.Plain, e.Subscriber)
		} else {
			groups[e.Queue] = append(groups[e.Queue], e.Subscriber)
		}
	}
	for q, members := range groups {
		r.Groups = append(r.Groups, match.Group[string]{Queue: q, Members: members})
	}
	return &r
}

// Entries returns the model's entries, sorted.
func (m Model) Entries() []match.Subscription[string] {
	out := make([]match.Subscription[string], 0, len(m))
	for e := range m {
		out = append(out, e)
	}
	sortEntries(out)
	return out
}

func sortEntries(s []match.Subscription[string]) {
	slices.SortFunc(s, func(a, b match.Subscription[string]) int {
		if c := strings.Compare(a.Pattern, b.Pattern); c != 0 {
			return c
		}
		if c := strings.Compare(a.Queue, b.Queue); c != 0 {
			return c
		}
		return strings.Compare(a.Subscriber, b.Subscriber)
	})
}

// RandomPattern returns a random valid pattern of 1 to 5 tokens over a
// small alphabet with every wildcard.
func RandomPattern(rng *rand.Rand) string {
	n := 1 + rng.IntN(5)
	toks := make([]string, n)
	for i := range toks {
		toks[i] = patternTokens[rng.IntN(len(patternTokens))]
		if toks[i] == ">" && i != n-1 {
			toks[i] = "*"
		}
	}
	return strings.Join(toks, ".")
}

// RandomSubject returns a random subject of 1 to 6 literal tokens.
func RandomSubject(rng *rand.Rand) string {
	n := 1 + rng.IntN(6)
	toks := make([]string, n)
	for i := range toks {
		toks[i] = literalTokens[rng.IntN(len(literalTokens))]
	}
	return strings.Join(toks, ".")
}

// RunDifferential applies ops random subscribes and unsubscribes to a
// Matcher and to a Model, checking random lookups, Count and Snapshot
// against the model as it goes.
func RunDifferential(t *testing.T, newMatcher Factory, seed uint64, ops int) {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	m := newMatcher()
	model := Model{}
	var r match.Result[string]
	subs := []string{"s0", "s1", "s2", "s3", "s4", "s5"}
	for i := range ops {
		e := match.Subscription[string]{
			Pattern:    subject.Canonical(RandomPattern(rng)),
			Queue:      queues[rng.IntN(len(queues))],
			Subscriber: subs[rng.IntN(len(subs))],
		}
		if _, ok := model[e]; ok && rng.IntN(3) > 0 {
			require.NoError(t, m.Unsubscribe(e.Pattern, e.Queue, e.Subscriber), "op %d: unsubscribe %+v", i, e)
			delete(model, e)
		} else {
			require.NoError(t, m.Subscribe(e.Pattern, e.Queue, e.Subscriber), "op %d: subscribe %+v", i, e)
			model[e] = struct{}{}
		}
		// Drain the index now and then, to exercise pruning.
		if rng.IntN(ops/4+1) == 0 {
			for _, e := range model.Entries() {
				require.NoError(t, m.Unsubscribe(e.Pattern, e.Queue, e.Subscriber))
			}
			clear(model)
		}
		for range 3 {
			subj := RandomSubject(rng)
			require.NoError(t, m.Lookup(subj, &r))
			require.Equal(t, normalize(model.Expect(subj)), normalize(&r), "op %d: lookup %q with entries %v", i, subj, model.Entries())
		}
		if i%50 == 0 {
			require.Equal(t, len(model), m.Count(), "op %d", i)
			snap := m.Snapshot()
			sortEntries(snap)
			require.Equal(t, model.Entries(), snap, "op %d", i)
		}
	}
}
