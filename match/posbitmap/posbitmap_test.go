package posbitmap_test

import (
	"testing"

	"github.com/skiffmq/skiff/match"
	"github.com/skiffmq/skiff/match/matchtest"
	"github.com/skiffmq/skiff/match/posbitmap"
)

// factory returns a constructor for the suites. Besides the default, the
// suites run with MaxTokens below the lengths of the random patterns and
// subjects (1 to 5 and 1 to 6 tokens), so that the fallback list and the
// longer bitmap carry much of the work.
func factory(opts posbitmap.Options) matchtest.Factory {
	return func() match.Matcher[string] {
		m, err := posbitmap.New[string](opts)
		if err != nil {
			panic(err)
		}
		return m
	}
}

var configs = []struct {
	name string
	opts posbitmap.Options
}{
	{"default", posbitmap.Options{}},
	{"max-tokens=1", posbitmap.Options{MaxTokens: 1}},
	{"max-tokens=3", posbitmap.Options{MaxTokens: 3}},
}

func TestConformance(t *testing.T) {
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) { matchtest.RunConformance(t, factory(c.opts)) })
	}
}

func TestDifferential(t *testing.T) {
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) { matchtest.RunDifferential(t, factory(c.opts), 1, 3000) })
	}
}

func TestConcurrent(t *testing.T) {
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) { matchtest.RunConcurrent(t, factory(c.opts)) })
	}
}

func TestMemoryReturns(t *testing.T) { matchtest.RunMemoryReturns(t, factory(posbitmap.Options{})) }

// FuzzOps uses MaxTokens 3, below the longest fuzzed patterns (5 tokens)
// and subjects (6), so that inputs reach the positional bitmaps, the
// longer bitmap and the fallback list.
func FuzzOps(f *testing.F) {
	matchtest.FuzzOps(f, factory(posbitmap.Options{MaxTokens: 3}))
}
