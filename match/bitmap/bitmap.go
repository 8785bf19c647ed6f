package bitmap

import (
	"strings"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/skiffmq/skiff/match"
	"github.com/skiffmq/skiff/match/internal/idtable"
	"github.com/skiffmq/skiff/subject"
)

// Matcher is the inverted-bitmap index. The zero value is not usable; call
// New.
type Matcher[S comparable] struct {
	maxTopics int
	iters     sync.Pool // *roaring.IntIterator, one per running Lookup

	mu struct {
		sync.RWMutex
		// topics maps every topic of the space to the ids of the patterns
		// matching it; nil when none does.
		topics map[string]*roaring.Bitmap
		table  idtable.Table[S]
		count  int
	}
}

var _ match.Matcher[int] = (*Matcher[int])(nil)

// New returns an empty index over the topic space opts.Topics. It returns
// an error wrapping ErrInvalidOptions if opts cannot be used.
func New[S comparable](opts Options) (*Matcher[S], error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	m := &Matcher[S]{maxTopics: opts.MaxTopics}
	m.iters.New = func() any { return new(roaring.IntIterator) }
	m.mu.topics = make(map[string]*roaring.Bitmap, len(opts.Topics))
	for _, t := range opts.Topics {
		m.mu.topics[strings.Clone(t)] = nil
	}
	return m, nil
}

// Subscribe implements match.Matcher. Subscribing a pattern that has no
// subscribers yet indexes it: a literal pattern in its own topic, adding
// that topic to the space if there is room; a wildcard pattern in every
// topic it matches, which tests every topic.
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
	id := t.Add(p, set)
	m.mu.count++
	if subject.IsLiteral(p) {
		_, ok := m.mu.topics[p]
		switch {
		case ok:
			m.addBitLocked(p, id)
		case len(m.mu.topics) < m.maxTopics:
			// Indexing the topic reaches the new pattern too, since it
			// is already in the table.
			m.addTopicLocked(p)
		}
		// Otherwise the space is full and lookups of p scan.
		return nil
	}
	for topic := range m.mu.topics {
		if subject.Match(p, topic) {
			m.addBitLocked(topic, id)
		}
	}
	return nil
}

// Unsubscribe implements match.Matcher. Removing a pattern's last
// subscriber clears its id from every topic: a literal pattern's own topic,
// or for a wildcard pattern, every topic of the space.
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
	if subject.IsLiteral(p) {
		m.clearBitLocked(p, id)
	} else {
		for topic, bm := range m.mu.topics {
			if bm != nil && bm.CheckedRemove(id) && bm.IsEmpty() {
				m.mu.topics[topic] = nil
			}
		}
	}
	t.Release(id)
	return nil
}

// Lookup implements match.Matcher. A subject in the topic space costs one
// map access and a walk over its bitmap, under the read lock. A subject
// outside it is added to the space under the write lock, which tests it
// against every pattern, or, once the space holds MaxTopics topics, is
// answered by testing every pattern under the read lock.
func (m *Matcher[S]) Lookup(subj string, r *match.Result[S]) error {
	r.Reset()
	if err := subject.ValidateSubject(subj); err != nil {
		return err
	}
	m.mu.RLock()
	if bm, ok := m.mu.topics[subj]; ok {
		m.addAllLocked(bm, r)
		m.mu.RUnlock()
		return nil
	}
	if len(m.mu.topics) >= m.maxTopics {
		m.scanLocked(subj, r)
		m.mu.RUnlock()
		return nil
	}
	m.mu.RUnlock()

	m.mu.Lock()
	defer m.mu.Unlock()
	// Another lookup may have added the subject, or filled the space,
	// while no lock was held.
	bm, ok := m.mu.topics[subj]
	switch {
	case ok:
	case len(m.mu.topics) < m.maxTopics:
		bm = m.addTopicLocked(subj)
	default:
		m.scanLocked(subj, r)
		return nil
	}
	m.addAllLocked(bm, r)
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

// addAllLocked adds the set of every pattern in bm to r. The caller holds the
// lock, read or write.
func (m *Matcher[S]) addAllLocked(bm *roaring.Bitmap, r *match.Result[S]) {
	if bm == nil {
		return
	}
	it := m.iters.Get().(*roaring.IntIterator)
	entries := m.mu.table.Entries
	for it.Initialize(bm); it.HasNext(); {
		r.Add(entries[it.Next()].Set)
	}
	*it = roaring.IntIterator{} // do not keep bm reachable from the pool
	m.iters.Put(it)
}

// scanLocked adds every pattern matching subj to r, testing each one: the
// answer for a subject that the full topic space has no room for. The
// caller holds the lock, read or write.
func (m *Matcher[S]) scanLocked(subj string, r *match.Result[S]) {
	for _, e := range m.mu.table.Entries {
		if e.Set != nil && subject.Match(e.Pattern, subj) {
			r.Add(e.Set)
		}
	}
}

// addTopicLocked adds a topic to the space, indexed against every pattern,
// and returns its bitmap. The caller holds the write lock and has checked
// that the topic is new and the space has room.
func (m *Matcher[S]) addTopicLocked(topic string) *roaring.Bitmap {
	var bm *roaring.Bitmap
	for id, e := range m.mu.table.Entries {
		if e.Set != nil && subject.Match(e.Pattern, topic) {
			if bm == nil {
				bm = roaring.New()
			}
			bm.Add(uint32(id))
		}
	}
	// The key outlives the call; a subject may be a slice of a large
	// read buffer that it must not pin.
	m.mu.topics[strings.Clone(topic)] = bm
	return bm
}

// addBitLocked sets id in the bitmap of a topic of the space. The caller
// holds the write lock.
func (m *Matcher[S]) addBitLocked(topic string, id uint32) {
	bm := m.mu.topics[topic]
	if bm == nil {
		bm = roaring.New()
		m.mu.topics[topic] = bm
	}
	bm.Add(id)
}

// clearBitLocked clears id from the bitmap of a topic, if the topic is in the
// space, and drops the bitmap once it is empty. The caller holds the
// write lock.
func (m *Matcher[S]) clearBitLocked(topic string, id uint32) {
	bm := m.mu.topics[topic]
	if bm != nil && bm.CheckedRemove(id) && bm.IsEmpty() {
		m.mu.topics[topic] = nil
	}
}
