package subject_test

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/skiffmq/skiff/match/matchtest"
	"github.com/skiffmq/skiff/subject"
)

// validByRule restates the validity rules token by token, as plainly as
// possible, for the fuzzer to check the fast scanner against.
func validByRule(s string, pattern bool) bool {
	if s == "" || !utf8.ValidString(s) {
		return false
	}
	toks := strings.Split(s, ".")
	for i, tok := range toks {
		if tok == "" || strings.ContainsRune(tok, 0) || strings.IndexFunc(tok, unicode.IsSpace) >= 0 {
			return false
		}
		if pattern && tok == ">" && i != len(toks)-1 {
			return false
		}
	}
	return true
}

func FuzzSplit(f *testing.F) {
	for _, s := range []string{"a", "a.b", "a..b", ".", "a.>.b", "a.#", "\xff", "a b", "ü.\u00a0", "*.>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, pattern := range []bool{false, true} {
			split := subject.SplitSubject
			if pattern {
				split = subject.SplitPattern
			}
			toks, err := split(nil, s)
			if want := validByRule(s, pattern); (err == nil) != want {
				t.Fatalf("split(%q, pattern=%v) error %v, want valid=%v", s, pattern, err, want)
			}
			if err == nil && strings.Join(toks, ".") != s {
				t.Fatalf("split(%q) = %q, which does not join back", s, toks)
			}
		}
	})
}

func FuzzMatch(f *testing.F) {
	f.Add("a.#.b", "a.x.y.b")
	f.Add("#.a.#", "a.a.a")
	f.Add("*.stock.#", "usd.stock")
	f.Add("a.>", "a")
	f.Fuzz(func(t *testing.T, pattern, subj string) {
		if subject.ValidatePattern(pattern) != nil || subject.ValidateSubject(subj) != nil {
			return
		}
		if got, want := subject.Match(pattern, subj), matchtest.Matches(pattern, subj); got != want {
			t.Fatalf("Match(%q, %q) = %v, oracle says %v", pattern, subj, got, want)
		}
		if got, want := subject.Match(subject.Canonical(pattern), subj), matchtest.Matches(pattern, subj); got != want {
			t.Fatalf("Match(Canonical(%q), %q) = %v, oracle says %v", pattern, subj, got, want)
		}
	})
}
