package bitmap

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/match"
	"github.com/skiffmq/skiff/match/internal/idtable"
	"github.com/skiffmq/skiff/match/matchtest"
	"github.com/skiffmq/skiff/subject"
)

func TestNewOptions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    Options
		wantErr error // also ErrInvalidOptions unless nil
		topics  int
	}{
		{"zero", Options{}, nil, 0},
		{"topics", Options{Topics: []string{"a", "a.b", "*", "a"}}, nil, 3},
		{"max-equals-topics", Options{Topics: []string{"a", "b", "a"}, MaxTopics: 2}, nil, 2},
		{"negative-max", Options{MaxTopics: -1}, ErrInvalidOptions, 0},
		{"too-many-topics", Options{Topics: []string{"a", "b", "c"}, MaxTopics: 2}, ErrInvalidOptions, 0},
		{"empty-token", Options{Topics: []string{"a..b"}}, subject.ErrEmptyToken, 0},
		{"bad-byte", Options{Topics: []string{"a b"}}, subject.ErrBadByte, 0},
		{"empty", Options{Topics: []string{""}}, subject.ErrEmpty, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := New[string](tc.opts)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, ErrInvalidOptions)
				require.ErrorIs(t, err, tc.wantErr)
				require.Nil(t, m)
				return
			}
			require.NoError(t, err)
			require.Len(t, m.mu.topics, tc.topics)
			want := tc.opts.MaxTopics
			if want == 0 {
				want = DefaultOptions().MaxTopics
			}
			require.Equal(t, want, m.maxTopics)
		})
	}
}

// TestTopicSpace walks one index through the growth of its topic space:
// literal subscribes and lookups add topics until MaxTopics, after which
// lookups outside the space scan and add nothing.
func TestTopicSpace(t *testing.T) {
	m, err := New[string](Options{Topics: []string{"a.b"}, MaxTopics: 4})
	require.NoError(t, err)
	steps := []struct {
		op        string // "sub", "unsub" or "lookup"
		arg       string // pattern or subject
		sub       string // subscriber of "sub" and "unsub"
		want      []string
		wantSpace []string
	}{
		{op: "sub", arg: "a.*", sub: "s1", wantSpace: []string{"a.b"}},
		{op: "lookup", arg: "a.b", want: []string{"s1"}, wantSpace: []string{"a.b"}},
		// A lookup outside the space adds its subject, indexed.
		{op: "lookup", arg: "a.c", want: []string{"s1"}, wantSpace: []string{"a.b", "a.c"}},
		{op: "lookup", arg: "x", wantSpace: []string{"a.b", "a.c", "x"}},
		// A literal pattern outside the space adds its topic, indexed
		// against the patterns already there.
		{op: "sub", arg: "a.d", sub: "s2", wantSpace: []string{"a.b", "a.c", "a.d", "x"}},
		{op: "lookup", arg: "a.d", want: []string{"s1", "s2"}, wantSpace: []string{"a.b", "a.c", "a.d", "x"}},
		// The space is full: lookups outside it scan and add nothing.
		{op: "lookup", arg: "a.e", want: []string{"s1"}, wantSpace: []string{"a.b", "a.c", "a.d", "x"}},
		{op: "sub", arg: "q.r", sub: "s3", wantSpace: []string{"a.b", "a.c", "a.d", "x"}},
		{op: "lookup", arg: "q.r", want: []string{"s3"}, wantSpace: []string{"a.b", "a.c", "a.d", "x"}},
		{op: "sub", arg: "#", sub: "s4", wantSpace: []string{"a.b", "a.c", "a.d", "x"}},
		{op: "lookup", arg: "x", want: []string{"s4"}, wantSpace: []string{"a.b", "a.c", "a.d", "x"}},
		{op: "lookup", arg: "q.r", want: []string{"s3", "s4"}, wantSpace: []string{"a.b", "a.c", "a.d", "x"}},
		// Emptying the index keeps the space.
		{op: "unsub", arg: "a.*", sub: "s1", wantSpace: []string{"a.b", "a.c", "a.d", "x"}},
		{op: "unsub", arg: "a.d", sub: "s2", wantSpace: []string{"a.b", "a.c", "a.d", "x"}},
		{op: "unsub", arg: "q.r", sub: "s3", wantSpace: []string{"a.b", "a.c", "a.d", "x"}},
		{op: "unsub", arg: "#", sub: "s4", wantSpace: []string{"a.b", "a.c", "a.d", "x"}},
		{op: "lookup", arg: "a.d", wantSpace: []string{"a.b", "a.c", "a.d", "x"}},
	}
	var r match.Result[string]
	for i, s := range steps {
		switch s.op {
		case "sub":
			require.NoError(t, m.Subscribe(s.arg, "", s.sub), "step %d", i)
		case "unsub":
			require.NoError(t, m.Unsubscribe(s.arg, "", s.sub), "step %d", i)
		case "lookup":
			require.NoError(t, m.Lookup(s.arg, &r), "step %d", i)
			require.ElementsMatch(t, s.want, r.Plain, "step %d: Lookup(%q)", i, s.arg)
		}
		require.Equal(t, s.wantSpace, space(m), "step %d: %s %q", i, s.op, s.arg)
	}
	requireNoBits(t, m)

	// An invalid subject is rejected before it can reach the space.
	m, err = New[string](Options{})
	require.NoError(t, err)
	require.ErrorIs(t, m.Lookup("a..b", &r), subject.ErrEmptyToken)
	require.Empty(t, space(m))
}

// TestBitmaps checks which topics hold a pattern's id: a wildcard pattern
// is indexed in every topic it matches, and the lowest free id is reused.
func TestBitmaps(t *testing.T) {
	m, err := New[string](Options{Topics: []string{"a", "a.b", "a.c", "b.c", "a.b.c"}})
	require.NoError(t, err)
	for _, p := range []string{"a.*", "*.c", "a.#", "a.b"} {
		require.NoError(t, m.Subscribe(p, "", "s"))
	}
	want := map[string][]uint32{ // ids: a.* 0, *.c 1, a.# 2, a.b 3
		"a":     {2},
		"a.b":   {0, 2, 3},
		"a.c":   {0, 1, 2},
		"b.c":   {1},
		"a.b.c": {2},
	}
	for topic, ids := range want {
		require.Equal(t, ids, m.mu.topics[topic].ToArray(), "topic %q", topic)
	}

	require.NoError(t, m.Unsubscribe("*.c", "", "s"))
	require.Nil(t, m.mu.topics["b.c"], "an emptied bitmap is dropped")
	require.NoError(t, m.Subscribe("#.c", "", "s"))
	id, _ := m.mu.table.ID("#.c")
	require.Equal(t, uint32(1), id, "the freed id is reused")
	require.Equal(t, []uint32{1, 2}, m.mu.topics["a.b.c"].ToArray())
}

// TestRelease fills the index with many patterns and empties it: every
// bitmap, id and table slot must go, so that only the topic space stays.
func TestRelease(t *testing.T) {
	m, err := New[string](Options{})
	require.NoError(t, err)
	var patterns []string
	for i := range 500 {
		patterns = append(patterns, fmt.Sprintf("t.%d", i), fmt.Sprintf("t.%d.*", i%50), fmt.Sprintf("#.%d", i%20))
	}
	var r match.Result[string]
	for i, p := range patterns {
		require.NoError(t, m.Subscribe(p, "", "s"))
		require.NoError(t, m.Lookup(fmt.Sprintf("t.%d.x", i%60), &r))
	}
	require.Greater(t, len(m.mu.table.Entries), idtable.CompactFloor)
	for _, p := range patterns {
		err := m.Unsubscribe(p, "", "s")
		if err != nil {
			require.ErrorIs(t, err, match.ErrNotFound) // a repeated pattern
		}
	}
	requireNoBits(t, m)
}

func space[S comparable](m *Matcher[S]) []string {
	var out []string
	for topic := range m.mu.topics {
		out = append(out, topic)
	}
	slices.Sort(out)
	return out
}

// requireNoBits checks that an index with no entries holds no memory for
// them: no bitmap, no id, no table slot.
func requireNoBits[S comparable](t *testing.T, m *Matcher[S]) {
	t.Helper()
	require.Equal(t, 0, m.Count())
	for topic, bm := range m.mu.topics {
		require.Nil(t, bm, "topic %q keeps a bitmap", topic)
	}
	require.True(t, m.mu.table.Empty(), "the id table keeps memory")
}

// TestInvariant applies random operations and then checks every bitmap of
// the space exactly: a topic holds the id of a pattern if and only if the
// pattern matches the topic, and an emptied bitmap is dropped.
func TestInvariant(t *testing.T) {
	for _, maxTopics := range []int{0, 20} {
		t.Run(fmt.Sprint("max-topics=", maxTopics), func(t *testing.T) {
			m, err := New[string](Options{MaxTopics: maxTopics})
			require.NoError(t, err)
			rng := rand.New(rand.NewPCG(5, 6))
			var r match.Result[string]
			for range 2000 {
				p := matchtest.RandomPattern(rng)
				sub := fmt.Sprint("s", rng.IntN(3))
				if rng.IntN(3) == 0 {
					_ = m.Unsubscribe(p, "", sub)
				} else {
					require.NoError(t, m.Subscribe(p, "", sub))
				}
				require.NoError(t, m.Lookup(matchtest.RandomSubject(rng), &r))
			}
			if maxTopics > 0 {
				require.Len(t, m.mu.topics, maxTopics)
			}
			for topic, bm := range m.mu.topics {
				var want []uint32
				for id, e := range m.mu.table.Entries {
					if e.Set != nil && subject.Match(e.Pattern, topic) {
						want = append(want, uint32(id))
					}
				}
				var got []uint32
				if bm != nil {
					got = bm.ToArray()
					require.NotEmpty(t, got, "topic %q keeps an empty bitmap", topic)
				}
				require.Equal(t, want, got, "topic %q", topic)
			}
		})
	}
}

// TestLookupAllocs checks that a lookup in the space, with a reused
// Result, allocates nothing.
func TestLookupAllocs(t *testing.T) {
	m, err := New[string](Options{})
	require.NoError(t, err)
	for i := range 100 {
		require.NoError(t, m.Subscribe(fmt.Sprintf("a.%d.c", i), "", "s1"))
		require.NoError(t, m.Subscribe(fmt.Sprintf("a.*.%d", i), "q", "s2"))
	}
	require.NoError(t, m.Subscribe("a.*.c", "q", "s2"))
	var r match.Result[string]
	require.NoError(t, m.Lookup("a.7.c", &r)) // adds the topic to the space
	allocs := testing.AllocsPerRun(100, func() { _ = m.Lookup("a.7.c", &r) })
	require.Equal(t, 2, r.Len())
	require.Zero(t, allocs)
}
