package matchtest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/match"
	"github.com/skiffmq/skiff/subject"
)

// Factory returns a new, empty Matcher for one test.
type Factory func() match.Matcher[string]

// wildcardCases is the table of matching rules. Every engine must agree
// with every row, and so must the oracle.
var wildcardCases = []struct {
	pattern string
	match   []string
	noMatch []string
}{
	{"a", []string{"a"}, []string{"b", "a.b", "A"}},
	{"a.b.c", []string{"a.b.c"}, []string{"a.b", "a.b.c.d", "a.b.C"}},
	{"*", []string{"a", "*", ">", "#"}, []string{"a.b"}},
	{"a.*", []string{"a.b", "a.*"}, []string{"a", "a.b.c", "b.b"}},
	{"*.b", []string{"a.b", "b.b"}, []string{"b", "a.b.b"}},
	{"a.*.c", []string{"a.b.c"}, []string{"a.c", "a.b.b.c"}},
	{">", []string{"a", "a.b", "a.b.c"}, nil},
	{"a.>", []string{"a.b", "a.b.c"}, []string{"a", "b.c"}},
	{"a.*.>", []string{"a.b.c", "a.b.c.d"}, []string{"a.b", "a"}},
	{"#", []string{"a", "a.b", "a.b.c"}, nil},
	{"a.#", []string{"a", "a.b", "a.b.c"}, []string{"b", "b.a"}},
	{"#.a", []string{"a", "x.a", "x.y.a"}, []string{"a.x", "x"}},
	{"*.stock.#", []string{"usd.stock", "eur.stock.db", "eur.stock.db.x"}, []string{"stock.nasdaq", "stock", "a.b.stock"}},
	{"a.#.b", []string{"a.b", "a.x.b", "a.x.y.b", "a.b.b"}, []string{"a.x", "b", "a.b.x"}},
	{"a.#.#.b", []string{"a.b", "a.x.b", "a.x.y.b"}, []string{"a.x", "a"}},
	{"#.#", []string{"a", "a.b"}, nil},
	{"#.*", []string{"a", "a.b"}, nil},
	{"*.#", []string{"a", "a.b.c"}, nil},
	{"#.a.#", []string{"a", "x.a", "a.x", "x.a.y", "a.a.a"}, []string{"x", "x.y"}},
	{"a.#.>", []string{"a.b", "a.b.c"}, []string{"a"}},
	{"#.b.*", []string{"b.c", "a.b.c", "b.b.b"}, []string{"b", "a.b", "a.b.c.d"}},
	{"foo*", []string{"foo*"}, []string{"foo", "foox"}},
	{"f>o", []string{"f>o"}, []string{"fo"}},
	{"a#", []string{"a#"}, []string{"a", "a.b"}},
	{"Orders.EU", []string{"Orders.EU"}, []string{"orders.eu"}},
	{"ünï.cødé", []string{"ünï.cødé"}, []string{"uni.code"}},
}

var invalidPatterns = []struct {
	pattern string
	err     error
}{
	{"", subject.ErrEmpty},
	{".", subject.ErrEmptyToken},
	{"a..b", subject.ErrEmptyToken},
	{".a", subject.ErrEmptyToken},
	{"a.", subject.ErrEmptyToken},
	{"a.>.b", subject.ErrRestNotLast},
	{">.>", subject.ErrRestNotLast},
	{"a b", subject.ErrBadByte},
	{"a\tb", subject.ErrBadByte},
	{"a\r\nb", subject.ErrBadByte},
	{"a\x00", subject.ErrBadByte},
	{"a\u00a0b", subject.ErrBadByte},
	{"\xff", subject.ErrBadUTF8},
}

// RunConformance checks the matching rules, unsubscription, duplicates,
// queue groups, counting and snapshots.
func RunConformance(t *testing.T, newMatcher Factory) {
	t.Run("wildcards", func(t *testing.T) { testWildcards(t, newMatcher) })
	t.Run("invalid", func(t *testing.T) { testInvalid(t, newMatcher) })
	t.Run("unsubscribe", func(t *testing.T) { testUnsubscribe(t, newMatcher) })
	t.Run("duplicates", func(t *testing.T) { testDuplicates(t, newMatcher) })
	t.Run("queues", func(t *testing.T) { testQueues(t, newMatcher) })
	t.Run("overlap", func(t *testing.T) { testOverlap(t, newMatcher) })
	t.Run("snapshot", func(t *testing.T) { testSnapshot(t, newMatcher) })
	t.Run("reuse", func(t *testing.T) { testReuse(t, newMatcher) })
}

func testWildcards(t *testing.T, newMatcher Factory) {
	for _, tc := range wildcardCases {
		t.Run(tc.pattern, func(t *testing.T) {
			m := newMatcher()
			require.NoError(t, m.Subscribe(tc.pattern, "", "s"))
			for _, subj := range tc.match {
				require.True(t, Matches(tc.pattern, subj), "oracle: %q should match %q", tc.pattern, subj)
				require.True(t, subject.Match(tc.pattern, subj), "subject.Match: %q should match %q", tc.pattern, subj)
				require.Equal(t, []string{"s"}, lookup(t, m, subj).Plain, "%q should match %q", tc.pattern, subj)
			}
			for _, subj := range tc.noMatch {
				require.False(t, Matches(tc.pattern, subj), "oracle: %q should not match %q", tc.pattern, subj)
				require.False(t, subject.Match(tc.pattern, subj), "subject.Match: %q should not match %q", tc.pattern, subj)
				require.Empty(t, lookup(t, m, subj).Plain, "%q should not match %q", tc.pattern, subj)
			}
		})
	}
}

func testInvalid(t *testing.T, newMatcher Factory) {
	m := newMatcher()
	for _, tc := range invalidPatterns {
		err := m.Subscribe(tc.pattern, "", "s")
		require.ErrorIs(t, err, tc.err, "Subscribe(%q)", tc.pattern)
		err = m.Unsubscribe(tc.pattern, "", "s")
		require.ErrorIs(t, err, tc.err, "Unsubscribe(%q)", tc.pattern)
		if !errors.Is(tc.err, subject.ErrRestNotLast) {
			var r match.Result[string]
			require.ErrorIs(t, m.Lookup(tc.pattern, &r), tc.err, "Lookup(%q)", tc.pattern)
		}
	}
	for _, q := range []string{"a b", "q\n", "\x00", "\xfe"} {
		require.ErrorIs(t, m.Subscribe("a", q, "s"), match.ErrInvalidQueue, "queue %q", q)
	}
	require.Equal(t, 0, m.Count())
	require.Empty(t, m.Snapshot())
}

func testUnsubscribe(t *testing.T, newMatcher Factory) {
	m := newMatcher()
	require.NoError(t, m.Subscribe("a.*", "", "s1"))
	require.NoError(t, m.Subscribe("a.*", "", "s2"))
	require.NoError(t, m.Subscribe("a.b", "", "s1"))
	require.NoError(t, m.Subscribe("a.#.#", "", "s3"))
	require.Equal(t, 4, m.Count())

	require.NoError(t, m.Unsubscribe("a.*", "", "s1"))
	require.ElementsMatch(t, []string{"s1", "s2", "s3"}, lookup(t, m, "a.b").Plain)
	require.ElementsMatch(t, []string{"s2", "s3"}, lookup(t, m, "a.c").Plain)

	require.ErrorIs(t, m.Unsubscribe("a.*", "", "s1"), match.ErrNotFound)
	require.ErrorIs(t, m.Unsubscribe("a.*", "q", "s2"), match.ErrNotFound)
	require.ErrorIs(t, m.Unsubscribe("x.y.z", "", "s2"), match.ErrNotFound)
	require.ErrorIs(t, m.Unsubscribe("a", "", "s2"), match.ErrNotFound)
	require.ErrorIs(t, m.Unsubscribe("a.b.c", "", "s1"), match.ErrNotFound)

	// The canonical form names the same entry.
	require.NoError(t, m.Unsubscribe("a.#", "", "s3"))
	require.NoError(t, m.Unsubscribe("a.b", "", "s1"))
	require.NoError(t, m.Unsubscribe("a.*", "", "s2"))
	require.Equal(t, 0, m.Count())
	require.Empty(t, lookup(t, m, "a.b").Plain)
	require.Empty(t, m.Snapshot())

	// Everything can come back after the index emptied.
	require.NoError(t, m.Subscribe("a.b", "", "s1"))
	require.Equal(t, []string{"s1"}, lookup(t, m, "a.b").Plain)
}

func testDuplicates(t *testing.T, newMatcher Factory) {
	m := newMatcher()
	for range 3 {
		require.NoError(t, m.Subscribe("a.>", "", "s"))
		require.NoError(t, m.Subscribe("a.>", "q", "s"))
	}
	require.Equal(t, 2, m.Count())
	r := lookup(t, m, "a.b")
	require.Equal(t, []string{"s"}, r.Plain)
	require.Equal(t, []match.Group[string]{{Queue: "q", Members: []string{"s"}}}, r.Groups)
	require.NoError(t, m.Unsubscribe("a.>", "", "s"))
	require.NoError(t, m.Unsubscribe("a.>", "q", "s"))
	require.Equal(t, 0, m.Count())
	require.Equal(t, 0, lookup(t, m, "a.b").Len())
}

func testQueues(t *testing.T, newMatcher Factory) {
	m := newMatcher()
	require.NoError(t, m.Subscribe("a.*", "q", "m1"))
	require.NoError(t, m.Subscribe("a.*", "q", "m2"))
	require.NoError(t, m.Subscribe("a.b", "q", "m3"))
	require.NoError(t, m.Subscribe("a.b", "q", "m1")) // m1 is in q via two patterns
	require.NoError(t, m.Subscribe("#", "r", "m4"))
	require.NoError(t, m.Subscribe("a.b", "", "m1")) // and a plain subscriber too
	require.Equal(t, 6, m.Count())

	r := lookup(t, m, "a.b")
	require.Equal(t, []string{"m1"}, r.Plain)
	require.ElementsMatch(t, []string{"m1", "m2", "m3"}, groupMembers(r, "q"))
	require.ElementsMatch(t, []string{"m4"}, groupMembers(r, "r"))
	require.Len(t, r.Groups, 2)

	r = lookup(t, m, "a.c")
	require.Empty(t, r.Plain)
	require.ElementsMatch(t, []string{"m1", "m2"}, groupMembers(r, "q"))

	require.NoError(t, m.Unsubscribe("a.*", "q", "m1"))
	require.NoError(t, m.Unsubscribe("a.*", "q", "m2"))
	require.ElementsMatch(t, []string{"m4"}, groupMembers(lookup(t, m, "a.c"), "r"))
	require.Len(t, lookup(t, m, "a.c").Groups, 1)
	require.ElementsMatch(t, []string{"m1", "m3"}, groupMembers(lookup(t, m, "a.b"), "q"))
}

// testOverlap makes many patterns match one subject with many subscribers
// in common, so that results must remove repeats beyond the small-set path.
func testOverlap(t *testing.T, newMatcher Factory) {
	m := newMatcher()
	patterns := []string{"a.b.c", "a.*.c", "a.>", "#", "#.c", "a.#.c", "*.*.*"}
	var want []string
	for i := range 100 {
		sub := fmt.Sprintf("s%03d", i)
		want = append(want, sub)
		for j, p := range patterns {
			if (i+j)%3 != 0 {
				require.NoError(t, m.Subscribe(p, "", sub))
				require.NoError(t, m.Subscribe(p, "g", sub))
			}
		}
	}
	r := lookup(t, m, "a.b.c")
	require.ElementsMatch(t, want, r.Plain)
	require.ElementsMatch(t, want, groupMembers(r, "g"))
	r = lookup(t, m, "x.y.c")
	var wantXYC []string
	for i := range 100 {
		// "#" is pattern 3, "#.c" is 4, "*.*.*" is 6.
		if (i+3)%3 != 0 || (i+4)%3 != 0 || (i+6)%3 != 0 {
			wantXYC = append(wantXYC, fmt.Sprintf("s%03d", i))
		}
	}
	require.ElementsMatch(t, wantXYC, r.Plain)
}

func testSnapshot(t *testing.T, newMatcher Factory) {
	m := newMatcher()
	want := []match.Subscription[string]{
		{Pattern: "a", Subscriber: "s1"},
		{Pattern: "a.*", Subscriber: "s1"},
		{Pattern: "a.*", Subscriber: "s2"},
		{Pattern: "a.*", Queue: "q", Subscriber: "s3"},
		{Pattern: "a.>", Subscriber: "s1"},
		{Pattern: "#.b.#", Subscriber: "s4"},
		{Pattern: "x.y.z", Queue: "q", Subscriber: "s1"},
	}
	for _, s := range want {
		require.NoError(t, m.Subscribe(s.Pattern, s.Queue, s.Subscriber))
	}
	require.NoError(t, m.Subscribe("#.#.b.#", "", "s4")) // duplicate in canonical form
	require.Equal(t, len(want), m.Count())
	snap := m.Snapshot()
	require.ElementsMatch(t, want, snap)

	// A snapshot is a copy: later changes do not show in it.
	require.NoError(t, m.Unsubscribe("a", "", "s1"))
	require.ElementsMatch(t, want, snap)
	require.ElementsMatch(t, want[1:], m.Snapshot())
}

func testReuse(t *testing.T, newMatcher Factory) {
	m := newMatcher()
	require.NoError(t, m.Subscribe("a.b", "", "s1"))
	require.NoError(t, m.Subscribe("a.b", "q", "s2"))
	require.NoError(t, m.Subscribe("c", "", "s3"))
	var r match.Result[string]
	require.NoError(t, m.Lookup("a.b", &r))
	require.Equal(t, 2, r.Len())
	require.NoError(t, m.Lookup("c", &r))
	require.Equal(t, []string{"s3"}, r.Plain)
	require.Empty(t, r.Groups)
	require.Error(t, m.Lookup("a..b", &r))
	require.Equal(t, 0, r.Len())
}

func lookup(t testing.TB, m match.Matcher[string], subj string) *match.Result[string] {
	t.Helper()
	var r match.Result[string]
	require.NoError(t, m.Lookup(subj, &r), "Lookup(%q)", subj)
	return &r
}

func groupMembers(r *match.Result[string], queue string) []string {
	for _, g := range r.Groups {
		if g.Queue == queue {
			return g.Members
		}
	}
	return nil
}

// normalize sorts a Result's plain subscribers, groups and members so that
// two answers can be compared.
func normalize(r *match.Result[string]) string {
	var b strings.Builder
	plain := slices.Clone(r.Plain)
	slices.Sort(plain)
	fmt.Fprintf(&b, "plain=%v", plain)
	groups := slices.Clone(r.Groups)
	slices.SortFunc(groups, func(a, b match.Group[string]) int { return strings.Compare(a.Queue, b.Queue) })
	for _, g := range groups {
		members := slices.Clone(g.Members)
		slices.Sort(members)
		fmt.Fprintf(&b, " %s=%v", g.Queue, members)
	}
	return b.String()
}
