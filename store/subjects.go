package store

import (
	"sort"
	"sync"

	"github.com/skiffmq/skiff/subject"
)

// entry is the in-memory index of one sequence between the stream's base
// and its last sequence. A removed sequence keeps its entry, with subj nil,
// until the first sequence passes it; its timestamp keeps the entries
// sorted by time for SeqAtOrAfterTime.
type entry struct {
	subj *subjectState // nil once removed
	ts   int64
	size uint32 // record size, counted in State.Bytes
	off  uint32 // file storage: offset of the record in its segment
}

// subjectState is the per-subject index: the subject's sequences in
// ascending order. Removing a message leaves its sequence in seqs; dead
// sequences are trimmed from either end at once and compacted from the
// middle when they outnumber the live ones, so that removal is O(1)
// amortised and a lookup never scans more dead than live sequences.
type subjectState struct {
	name string
	seqs []uint64 // ascending; may hold dead sequences
	n    int      // live messages
}

// filterKind classifies a Next/Purge/Subjects filter.
type filterKind uint8

const (
	filterAllSubjects filterKind = iota // "", ">", "#": every subject
	filterLiteral                       // one subject
	filterWildcard                      // anything else
)

// classifyFilter validates a filter and says how to evaluate it.
func classifyFilter(f string) (filterKind, error) {
	if f == "" || f == subject.RestToken {
		return filterAllSubjects, nil
	}
	if err := subject.ValidatePattern(f); err != nil {
		return 0, wrapFilterErr(f, err)
	}
	if subject.Canonical(f) == subject.AnyToken {
		return filterAllSubjects, nil
	}
	if subject.IsLiteral(f) {
		return filterLiteral, nil
	}
	return filterWildcard, nil
}

// firstAtOrAfter returns the index in ss.seqs of the first sequence >= seq.
func (ss *subjectState) firstAtOrAfter(seq uint64) int {
	return sort.Search(len(ss.seqs), func(i int) bool { return ss.seqs[i] >= seq })
}

// filterCache remembers, per wildcard filter, the subjects that match it, so
// that a consumer calling Next with the same narrow filter over and over
// pays for matching every subject once, not per call. Entries are kept
// current as subjects come and go (subjectAdded, subjectRemoved run under
// the stream's write lock); an entry with too many departed subjects is
// dropped and recomputed on next use.
type filterCache struct {
	mu sync.Mutex
	m  map[string]*filterSubs
}

type filterSubs struct {
	subs  []*subjectState // may include subjects since removed (n == 0)
	stale int
}

// maxCachedFilters bounds the cache; past it, the cache starts over.
const maxCachedFilters = 256

// get returns the subjects matching a wildcard filter. The caller holds the
// stream's lock (read or write), so subjects is stable and no subjectAdded
// runs concurrently. The slice must not be modified.
func (c *filterCache) get(filter string, subjects map[string]*subjectState) []*subjectState {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fs, ok := c.m[filter]; ok {
		return fs.subs
	}
	fs := &filterSubs{}
	for name, ss := range subjects {
		if subject.Match(filter, name) {
			fs.subs = append(fs.subs, ss)
		}
	}
	if c.m == nil || len(c.m) >= maxCachedFilters {
		c.m = make(map[string]*filterSubs)
	}
	c.m[filter] = fs
	return fs.subs
}

// subjectAdded adds a new subject to the entries it matches. The caller
// holds the stream's write lock.
func (c *filterCache) subjectAdded(ss *subjectState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for f, fs := range c.m {
		if subject.Match(f, ss.name) {
			fs.subs = append(fs.subs, ss)
		}
	}
}

// subjectRemoved notes that a subject has no messages left. The caller
// holds the stream's write lock.
func (c *filterCache) subjectRemoved(ss *subjectState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for f, fs := range c.m {
		if subject.Match(f, ss.name) {
			fs.stale++
			if fs.stale > len(fs.subs)/2+8 {
				delete(c.m, f)
			}
		}
	}
}

// reset forgets every entry (after a purge of everything).
func (c *filterCache) reset() {
	c.mu.Lock()
	c.m = nil
	c.mu.Unlock()
}
