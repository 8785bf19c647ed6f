// Package idtable numbers the patterns of the bitmap engines: each pattern
// with subscribers gets a small dense integer id, the bit position the
// engines' Roaring bitmaps hold. It is not safe for concurrent use; the
// engines guard it with their lock.
package idtable

import (
	"github.com/RoaringBitmap/roaring/v2"

	"github.com/skiffmq/skiff/match"
)

// CompactFloor is the peak size below which a map or the entry table is
// never rebuilt to give memory back: rebuilding small ones saves little.
const CompactFloor = 64

// Table numbers the patterns that have subscribers. A pattern gets the
// lowest free id, so ids stay dense and the roaring bitmaps that hold them
// stay few containers wide. The zero value is an empty table.
type Table[S comparable] struct {
	Entries []Entry[S]        // by id; a free id holds the zero Entry
	free    roaring.Bitmap    // free ids below len(Entries)
	ids     map[string]uint32 // canonical pattern -> id
	peak    int               // largest len(ids) since ids was last rebuilt
}

// Entry is one pattern and its subscribers. A nil set marks a free id.
type Entry[S comparable] struct {
	Pattern string
	Set     *match.Set[S]
}

// ID returns the id of a pattern that has subscribers.
func (t *Table[S]) ID(pattern string) (uint32, bool) {
	id, ok := t.ids[pattern]
	return id, ok
}

// Add numbers a pattern that has no id yet and stores its first set.
func (t *Table[S]) Add(pattern string, set *match.Set[S]) uint32 {
	var id uint32
	if t.free.IsEmpty() {
		id = uint32(len(t.Entries))
		t.Entries = append(t.Entries, Entry[S]{pattern, set})
	} else {
		id = t.free.Minimum()
		t.free.Remove(id)
		t.Entries[id] = Entry[S]{pattern, set}
	}
	if t.ids == nil {
		t.ids = make(map[string]uint32)
	}
	t.ids[pattern] = id
	t.peak = max(t.peak, len(t.ids))
	return id
}

// Release frees the id of a pattern whose last subscriber left. Trailing
// free ids are dropped from the table, and the table and the pattern map
// are rebuilt smaller once they fall to a quarter of their peak, so memory
// returns as patterns go.
func (t *Table[S]) Release(id uint32) {
	delete(t.ids, t.Entries[id].Pattern)
	t.Entries[id] = Entry[S]{}
	t.free.Add(id)
	n := len(t.Entries)
	for n > 0 && t.free.Contains(uint32(n-1)) {
		n--
	}
	if n < len(t.Entries) {
		t.free.RemoveRange(uint64(n), uint64(len(t.Entries)))
		t.Entries = t.Entries[:n] // the dropped slots are zero: no references kept
	}
	switch {
	case n == 0:
		t.Entries = nil
	case cap(t.Entries) >= CompactFloor && n < cap(t.Entries)/4:
		t.Entries = append([]Entry[S](nil), t.Entries...)
	}
	t.ids, t.peak = Compact(t.ids, t.peak)
}

// Compact returns m and its peak size, or a new map holding m's entries
// when deletes have left m under a quarter of its peak: a Go map keeps its
// buckets after a delete, so only a rebuild gives the memory back.
func Compact[K comparable, V any](m map[K]V, peak int) (map[K]V, int) {
	n := len(m)
	if n == 0 {
		return nil, 0
	}
	if peak < CompactFloor || n >= peak/4 {
		return m, peak
	}
	c := make(map[K]V, n)
	for k, v := range m {
		c[k] = v
	}
	return c, n
}

// Empty reports whether the table holds no pattern and keeps no memory for
// freed ones.
func (t *Table[S]) Empty() bool {
	return t.Entries == nil && t.ids == nil && t.free.IsEmpty()
}
