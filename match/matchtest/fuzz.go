package matchtest

import (
	"strings"
	"testing"

	"github.com/skiffmq/skiff/match"
	"github.com/skiffmq/skiff/subject"
)

// FuzzOps drives a Matcher with an operation stream decoded from the fuzzer's
// bytes and checks every lookup against the oracle. Engines call it from
// their own fuzz target:
//
//	func FuzzOps(f *testing.F) { matchtest.FuzzOps(f, newMatcher) }
func FuzzOps(f *testing.F, newMatcher Factory) {
	f.Add([]byte("\x00\x01\x02\x03\x10\x21\x32"))
	f.Add([]byte("\x05\x06\x07\x80\x81\x82\xff\x00"))
	f.Add([]byte("#a.#b\x00\x80*>\x05"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m := newMatcher()
		model := Model{}
		var r match.Result[string]
		d := decoder{data: data}
		for !d.done() {
			e := match.Subscription[string]{
				Pattern:    d.pattern(),
				Queue:      []string{"", "q"}[d.next()%2],
				Subscriber: []string{"x", "y", "z"}[d.next()%3],
			}
			if d.next()%3 == 0 {
				err := m.Unsubscribe(e.Pattern, e.Queue, e.Subscriber)
				_, had := model[e]
				if had != (err == nil) {
					t.Fatalf("Unsubscribe(%+v) = %v, but the model had it: %v", e, err, had)
				}
				delete(model, e)
			} else {
				if err := m.Subscribe(e.Pattern, e.Queue, e.Subscriber); err != nil {
					t.Fatalf("Subscribe(%+v): %v", e, err)
				}
				model[e] = struct{}{}
			}
			subj := d.subject()
			if err := m.Lookup(subj, &r); err != nil {
				t.Fatalf("Lookup(%q): %v", subj, err)
			}
			if got, want := normalize(&r), normalize(model.Expect(subj)); got != want {
				t.Fatalf("Lookup(%q) = %s, want %s; entries %v", subj, got, want, model.Entries())
			}
		}
		if m.Count() != len(model) {
			t.Fatalf("Count = %d, want %d", m.Count(), len(model))
		}
	})
}

// decoder turns fuzz bytes into small patterns and subjects.
type decoder struct {
	data []byte
	i    int
}

func (d *decoder) done() bool { return d.i >= len(d.data) }

func (d *decoder) next() byte {
	if d.done() {
		return 0
	}
	b := d.data[d.i]
	d.i++
	return b
}

func (d *decoder) pattern() string {
	b := d.next()
	n := 1 + int(b%5)
	toks := make([]string, n)
	for i := range toks {
		toks[i] = patternTokens[int(d.next())%len(patternTokens)]
		if toks[i] == ">" && i != n-1 {
			toks[i] = "#"
		}
	}
	return subject.Canonical(strings.Join(toks, "."))
}

func (d *decoder) subject() string {
	n := 1 + int(d.next()%6)
	toks := make([]string, n)
	for i := range toks {
		toks[i] = literalTokens[int(d.next())%len(literalTokens)]
	}
	return strings.Join(toks, ".")
}
