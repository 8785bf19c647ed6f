package bitmap_test

import (
	"testing"

	"github.com/skiffmq/skiff/match"
	"github.com/skiffmq/skiff/match/bitmap"
	"github.com/skiffmq/skiff/match/matchtest"
)

// factory returns a constructor for the suites. Besides the default
// (an empty space that grows), the suites run with a space known in
// advance and with a space so small that most lookups take the scan.
func factory(opts bitmap.Options) matchtest.Factory {
	return func() match.Matcher[string] {
		m, err := bitmap.New[string](opts)
		if err != nil {
			panic(err)
		}
		return m
	}
}

var configs = []struct {
	name string
	opts bitmap.Options
}{
	{"default", bitmap.Options{}},
	{"known-space", bitmap.Options{Topics: []string{"a", "a.b", "a.b.c", "b.c", "x.y.c", "c.c.c.c.c"}}},
	{"max-topics=3", bitmap.Options{MaxTopics: 3}},
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

// TestMemoryReturns bounds the topic space. Subscribing a literal pattern
// adds its topic and the space never shrinks (see the package
// documentation), so under the default bound the check's 20000 distinct
// literal patterns leave 20000 topics behind by design: about half a
// megabyte, which passes only because it fits the check's 1 MB slack. With
// the space capped, the check measures what must return: bitmaps, ids and
// the id table.
func TestMemoryReturns(t *testing.T) {
	matchtest.RunMemoryReturns(t, factory(bitmap.Options{MaxTopics: 1024}))
}

// FuzzOps uses a small space so that inputs reach both the indexed lookup
// and the scan past MaxTopics.
func FuzzOps(f *testing.F) {
	matchtest.FuzzOps(f, factory(bitmap.Options{MaxTopics: 8}))
}
