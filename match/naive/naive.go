// Package naive is the baseline subscription index: a map from pattern to
// subscribers, where a lookup tests the subject against every pattern.
//
// Subscribe and Unsubscribe are O(1); Lookup is O(patterns × tokens), which
// is why this engine exists only to be measured against. A sync.RWMutex
// makes it safe for concurrent use.
package naive

import (
	"sync"

	"github.com/skiffmq/skiff/match"
	"github.com/skiffmq/skiff/subject"
)

// Matcher is the naive index. The zero value is not usable; call New.
type Matcher[S comparable] struct {
	mu struct {
		sync.RWMutex
		sets  map[string]*match.Set[S] // canonical pattern -> subscribers
		count int
	}
}

var _ match.Matcher[int] = (*Matcher[int])(nil)

// New returns an empty index.
func New[S comparable]() *Matcher[S] {
	m := &Matcher[S]{}
	m.mu.sets = make(map[string]*match.Set[S])
	return m
}

// Subscribe implements match.Matcher.
func (m *Matcher[S]) Subscribe(pattern, queue string, sub S) error {
	p, err := match.ParsePattern(pattern, queue)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	set, added := m.mu.sets[p].With(queue, sub)
	if added {
		m.mu.sets[p] = set
		m.mu.count++
	}
	return nil
}

// Unsubscribe implements match.Matcher.
func (m *Matcher[S]) Unsubscribe(pattern, queue string, sub S) error {
	p, err := match.ParsePattern(pattern, queue)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	set, removed := m.mu.sets[p].Without(queue, sub)
	if !removed {
		return match.ErrNotFound
	}
	if set == nil {
		delete(m.mu.sets, p)
	} else {
		m.mu.sets[p] = set
	}
	m.mu.count--
	return nil
}

// Lookup implements match.Matcher.
func (m *Matcher[S]) Lookup(subj string, r *match.Result[S]) error {
	r.Reset()
	if err := subject.ValidateSubject(subj); err != nil {
		return err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	for p, set := range m.mu.sets {
		if subject.Match(p, subj) {
			r.Add(set)
		}
	}
	return nil
}

// Count implements match.Matcher.
func (m *Matcher[S]) Count() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.mu.count
}

// Snapshot implements match.Matcher.
func (m *Matcher[S]) Snapshot() []match.Subscription[S] {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]match.Subscription[S], 0, m.mu.count)
	for p, set := range m.mu.sets {
		out = set.AppendEntries(out, p)
	}
	return out
}
