package bitmap

import (
	"github.com/RoaringBitmap/roaring/v2"

	"github.com/skiffmq/skiff/match"
)

// compactFloor is the peak size below which a map or the entry table is
// never rebuilt to give memory back: rebuilding small ones saves little.
const compactFloor = 64

// table numbers the patterns that have subscribers. A pattern gets the
// lowest free id, so ids stay dense and the roaring bitmaps that hold them
// stay few containers wide. The Matcher's lock guards it.
type table[S comparable] struct {
	entries []entry[S]        // by id; a free id holds the zero entry
	free    roaring.Bitmap    // free ids below len(entries)
	ids     map[string]uint32 // canonical pattern -> id
	peak    int               // largest len(ids) since ids was last rebuilt
}

// entry is one pattern and its subscribers. A nil set marks a free id.
type entry[S comparable] struct {
	pattern string
	set     *match.Set[S]
}

// id returns the id of a pattern that has subscribers.
func (t *table[S]) id(pattern string) (uint32, bool) {
	id, ok := t.ids[pattern]
	return id, ok
}

// add numbers a pattern that has no id yet and stores its first set.
func (t *table[S]) add(pattern string, set *match.Set[S]) uint32 {
	var id uint32
	if t.free.IsEmpty() {
		id = uint32(len(t.entries))
		t.entries = append(t.entries, entry[S]{pattern, set})
	} else {
		id = t.free.Minimum()
		t.free.Remove(id)
		t.entries[id] = entry[S]{pattern, set}
	}
	if t.ids == nil {
		t.ids = make(map[string]uint32)
	}
	t.ids[pattern] = id
	t.peak = max(t.peak, len(t.ids))
	return id
}

// release frees the id of a pattern whose last subscriber left. Trailing
// free ids are dropped from the table, and the table and the pattern map
// are rebuilt smaller once they fall to a quarter of their peak, so memory
// returns as patterns go.
func (t *table[S]) release(id uint32) {
	delete(t.ids, t.entries[id].pattern)
	t.entries[id] = entry[S]{}
	t.free.Add(id)
	n := len(t.entries)
	for n > 0 && t.free.Contains(uint32(n-1)) {
		n--
	}
	if n < len(t.entries) {
		t.free.RemoveRange(uint64(n), uint64(len(t.entries)))
		clear(t.entries[n:]) // drop the references the spare capacity would keep
		t.entries = t.entries[:n]
	}
	switch {
	case n == 0:
		t.entries = nil
	case cap(t.entries) >= compactFloor && n < cap(t.entries)/4:
		t.entries = append([]entry[S](nil), t.entries...)
	}
	t.ids, t.peak = compact(t.ids, t.peak)
}

// compact returns m and its peak size, or a new map holding m's entries
// when deletes have left m under a quarter of its peak: a Go map keeps its
// buckets after a delete, so only a rebuild gives the memory back.
func compact[K comparable, V any](m map[K]V, peak int) (map[K]V, int) {
	n := len(m)
	if n == 0 {
		return nil, 0
	}
	if peak < compactFloor || n >= peak/4 {
		return m, peak
	}
	c := make(map[K]V, n)
	for k, v := range m {
		c[k] = v
	}
	return c, n
}
