package posbitmap

import (
	"sync"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/skiffmq/skiff/match"
	"github.com/skiffmq/skiff/match/internal/idtable"
	"github.com/skiffmq/skiff/subject"
)

// Matcher is the position-optimized inverted-bitmap index. The zero value
// is not usable; call New.
type Matcher[S comparable] struct {
	scratch sync.Pool // *scratch, one per running Lookup

	mu struct {
		sync.RWMutex
		index index
		table idtable.Table[S]
		count int
	}
}

// scratch is the working state of one Lookup, pooled so that a lookup
// reuses the bitmap's slices and the iterator instead of allocating them.
type scratch struct {
	acc roaring.Bitmap
	it  roaring.IntIterator
}

var _ match.Matcher[int] = (*Matcher[int])(nil)

// New returns an empty index. It returns an error wrapping
// ErrInvalidOptions if opts cannot be used.
func New[S comparable](opts Options) (*Matcher[S], error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &Matcher[S]{}
	m.scratch.New = func() any { return new(scratch) }
	m.mu.index = newIndex(opts.MaxTokens)
	return m, nil
}

// Subscribe implements match.Matcher. Subscribing a pattern that has no
// subscribers yet sets its id in one bitmap per position it constrains, or
// puts it on the fallback list.
func (m *Matcher[S]) Subscribe(pattern, queue string, sub S) error {
	p, err := match.ParsePattern(pattern, queue)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := &m.mu.table
	if id, ok := t.ID(p); ok {
		set, added := t.Entries[id].Set.With(queue, sub)
		if added {
			t.Entries[id].Set = set
			m.mu.count++
		}
		return nil
	}
	set, _ := (*match.Set[S])(nil).With(queue, sub)
	m.mu.index.insert(p, t.Add(p, set))
	m.mu.count++
	return nil
}

// Unsubscribe implements match.Matcher. Removing a pattern's last
// subscriber clears its id from every bitmap and frees the id.
func (m *Matcher[S]) Unsubscribe(pattern, queue string, sub S) error {
	p, err := match.ParsePattern(pattern, queue)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := &m.mu.table
	id, ok := t.ID(p)
	if !ok {
		return match.ErrNotFound
	}
	set, removed := t.Entries[id].Set.Without(queue, sub)
	if !removed {
		return match.ErrNotFound
	}
	m.mu.count--
	if set != nil {
		t.Entries[id].Set = set
		return nil
	}
	m.mu.index.remove(p, id)
	t.Release(id)
	return nil
}

// Lookup implements match.Matcher. It ANDs at most MaxTokens+1 bitmaps,
// stopping at the first empty intersection, then tests each pattern of the
// fallback list.
func (m *Matcher[S]) Lookup(subj string, r *match.Result[S]) error {
	r.Reset()
	if err := subject.ValidateSubject(subj); err != nil {
		return err
	}
	sc := m.scratch.Get().(*scratch)
	m.mu.RLock()
	m.mu.index.intersect(subj, &sc.acc)
	entries := m.mu.table.Entries
	for sc.it.Initialize(&sc.acc); sc.it.HasNext(); {
		r.Add(entries[sc.it.Next()].Set)
	}
	for sc.it.Initialize(&m.mu.index.fallback); sc.it.HasNext(); {
		e := &entries[sc.it.Next()]
		if subject.Match(e.Pattern, subj) {
			r.Add(e.Set)
		}
	}
	m.mu.RUnlock()
	sc.acc.Clear()
	sc.it = roaring.IntIterator{} // do not keep the index reachable from the pool
	m.scratch.Put(sc)
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
	for _, e := range m.mu.table.Entries {
		out = e.Set.AppendEntries(out, e.Pattern)
	}
	return out
}
