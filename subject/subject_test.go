package subject_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/subject"
)

func TestSplit(t *testing.T) {
	tests := []struct {
		in      string
		pattern bool
		toks    []string
		err     error
	}{
		{in: "a", toks: []string{"a"}},
		{in: "a.b.c", toks: []string{"a", "b", "c"}},
		{in: "a.*.>", toks: []string{"a", "*", ">"}}, // literal tokens in a subject
		{in: "a.>.b", toks: []string{"a", ">", "b"}},
		{in: "a.>.b", pattern: true, err: subject.ErrRestNotLast},
		{in: "a.#.b.#", pattern: true, toks: []string{"a", "#", "b", "#"}},
		{in: "ünï.cødé", toks: []string{"ünï", "cødé"}},
		{in: "foo*.ba>r", pattern: true, toks: []string{"foo*", "ba>r"}},
		{in: "", err: subject.ErrEmpty},
		{in: ".", err: subject.ErrEmptyToken},
		{in: "a.", err: subject.ErrEmptyToken},
		{in: ".a", err: subject.ErrEmptyToken},
		{in: "a..b", err: subject.ErrEmptyToken},
		{in: "a b", err: subject.ErrBadByte},
		{in: "a\tb", err: subject.ErrBadByte},
		{in: "a\rb", err: subject.ErrBadByte},
		{in: "a\nb", err: subject.ErrBadByte},
		{in: "a\x00b", err: subject.ErrBadByte},
		{in: "a\u2028b", err: subject.ErrBadByte},
		{in: "a\u3000", err: subject.ErrBadByte},
		{in: "a\xffb", err: subject.ErrBadUTF8},
		{in: "a\xc3", err: subject.ErrBadUTF8},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			split := subject.SplitSubject
			validate := subject.ValidateSubject
			if tc.pattern {
				split, validate = subject.SplitPattern, subject.ValidatePattern
			}
			toks, err := split(nil, tc.in)
			require.ErrorIs(t, validate(tc.in), tc.err)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.toks, toks)
		})
	}
}

func TestValidateLiteral(t *testing.T) {
	require.NoError(t, subject.ValidateLiteral("a.b.foo*"))
	for _, s := range []string{"a.*", ">", "#.a", "a.#"} {
		require.ErrorIs(t, subject.ValidateLiteral(s), subject.ErrWildcard, s)
		require.NoError(t, subject.ValidateSubject(s), s)
	}
	require.ErrorIs(t, subject.ValidateLiteral("a..b"), subject.ErrEmptyToken)
}

func TestCanonical(t *testing.T) {
	tests := map[string]string{
		"a.b":         "a.b",
		"#":           "#",
		"#.#":         "#",
		"a.#.#.#.b.#": "a.#.b.#",
		"#.#.a.#.#":   "#.a.#",
		"a#.#b":       "a#.#b",
		"*.#.*":       "*.#.*",
	}
	for in, want := range tests {
		require.Equal(t, want, subject.Canonical(in), in)
	}
}

func TestIsLiteralAndKind(t *testing.T) {
	require.True(t, subject.IsLiteral("a.b.foo*"))
	require.False(t, subject.IsLiteral("a.*"))
	require.False(t, subject.IsLiteral("a.#.b"))
	require.Equal(t, subject.One, subject.KindOf("*"))
	require.Equal(t, subject.Rest, subject.KindOf(">"))
	require.Equal(t, subject.Any, subject.KindOf("#"))
	require.Equal(t, subject.Literal, subject.KindOf("**"))
	require.Equal(t, "#", subject.Any.String())
}

func TestNoAllocs(t *testing.T) {
	var buf [32]string
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := subject.SplitPattern(buf[:0], "orders.*.eu.#.created"); err != nil {
			t.Fatal(err)
		}
		if _, err := subject.SplitSubject(buf[:0], "orders.x.eu.y.z.created"); err != nil {
			t.Fatal(err)
		}
		if !subject.Match("orders.*.eu.#.created", "orders.x.eu.y.z.created") {
			t.Fatal("no match")
		}
		if subject.ValidatePattern("a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z.a.b.c.d.e.f.g.h") != nil {
			t.Fatal("invalid")
		}
	})
	require.Zero(t, allocs)
}

func TestErrorsWrap(t *testing.T) {
	err := subject.ValidatePattern("a..b")
	require.True(t, errors.Is(err, subject.ErrEmptyToken))
	require.Contains(t, err.Error(), `"a..b"`)
}
