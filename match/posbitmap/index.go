package posbitmap

import (
	"strings"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/skiffmq/skiff/match/internal/idtable"
	"github.com/skiffmq/skiff/subject"
)

// index holds the bitmaps of pattern ids, one set per token position, and
// the fallback list of the patterns they cannot express. The Matcher's lock
// guards it.
//
// Every pattern in null at a position is in null at every later position
// (a subject that may end before p may end before p+1), so a lookup needs
// only the null bitmap at the position where its subject ends.
type index struct {
	pos      []position     // MaxTokens of them
	longer   roaring.Bitmap // patterns accepting subjects of more than MaxTokens tokens
	fallback roaring.Bitmap // patterns every lookup tests with subject.Match
}

// position holds the bitmaps of one token position.
type position struct {
	rows  map[string]*roaring.Bitmap // literal token -> patterns with that token here; none empty
	peak  int                        // largest len(rows) since rows was last rebuilt
	other roaring.Bitmap             // patterns accepting any token here
	null  roaring.Bitmap             // patterns accepting a subject that ends before here
}

func newIndex(maxTokens int) index {
	return index{pos: make([]position, maxTokens)}
}

// insert adds the id of a valid canonical pattern to every bitmap it
// belongs in, or to the fallback list.
func (ix *index) insert(pattern string, id uint32) {
	var buf [DefaultMaxTokens]string
	toks, _ := subject.SplitPattern(buf[:0], pattern) // valid: the caller parsed it
	if !ix.expressible(toks) {
		ix.fallback.Add(id)
		return
	}
	ix.update(toks, id, true)
}

// remove undoes insert: it takes the id out of every bitmap insert put it
// in, and drops rows left empty.
func (ix *index) remove(pattern string, id uint32) {
	var buf [DefaultMaxTokens]string
	toks, _ := subject.SplitPattern(buf[:0], pattern)
	if !ix.expressible(toks) {
		ix.fallback.Remove(id)
		return
	}
	ix.update(toks, id, false)
}

// expressible reports whether a pattern can be indexed by position: it has
// at most MaxTokens tokens and no "#" before its last token. (">" is last
// in every valid pattern.) A "#" in the middle would need a bitmap per
// possible shift of the tokens after it.
func (ix *index) expressible(toks []string) bool {
	if len(toks) > len(ix.pos) {
		return false
	}
	for _, tok := range toks[:len(toks)-1] {
		if tok == subject.AnyToken {
			return false
		}
	}
	return true
}

// update adds id to, or removes it from, the bitmaps of an expressible
// pattern:
//
//	literal t at p      rows[p][t]
//	"*" at p            other[p]
//	">" at p (last)     other[p]; other[q] and null[q] for q > p; longer
//	"#" at p (last)     other[q] and null[q] for q >= p; longer
//	n tokens, no ">#"   null[q] for q >= n
func (ix *index) update(toks []string, id uint32, add bool) {
	flip := func(bm *roaring.Bitmap) {
		if add {
			bm.Add(id)
		} else {
			bm.Remove(id)
		}
	}
	for p, tok := range toks {
		switch kind := subject.KindOf(tok); kind {
		case subject.Literal:
			ix.updateRow(p, tok, id, add)
		case subject.One:
			flip(&ix.pos[p].other)
		case subject.Rest, subject.Any:
			for q := p; q < len(ix.pos); q++ {
				flip(&ix.pos[q].other)
				if q > p || kind == subject.Any {
					flip(&ix.pos[q].null)
				}
			}
			flip(&ix.longer)
			return // the wildcard is the last token
		}
	}
	for q := len(toks); q < len(ix.pos); q++ {
		flip(&ix.pos[q].null)
	}
}

// updateRow adds id to, or removes it from, the row of a literal token.
func (ix *index) updateRow(p int, tok string, id uint32, add bool) {
	pos := &ix.pos[p]
	bm := pos.rows[tok]
	if add {
		if bm == nil {
			if pos.rows == nil {
				pos.rows = make(map[string]*roaring.Bitmap)
			}
			bm = roaring.New()
			pos.rows[tok] = bm
			pos.peak = max(pos.peak, len(pos.rows))
		}
		bm.Add(id)
		return
	}
	bm.Remove(id)
	if bm.IsEmpty() {
		delete(pos.rows, tok)
		pos.rows, pos.peak = idtable.Compact(pos.rows, pos.peak)
	}
}

// intersect leaves in acc, which must be empty, the ids of the indexed
// patterns matching a valid subject: the AND over positions of the
// subject token's row OR other, then the null bitmap where the subject
// ends, or longer if it has more than MaxTokens tokens. It stops as soon
// as acc is empty.
func (ix *index) intersect(subj string, acc *roaring.Bitmap) {
	p := 0
	for off := 0; off <= len(subj); p++ {
		if p == len(ix.pos) {
			acc.And(&ix.longer)
			return
		}
		end := strings.IndexByte(subj[off:], '.')
		if end < 0 {
			end = len(subj)
		} else {
			end += off
		}
		tok := subj[off:end]
		off = end + 1

		pos := &ix.pos[p]
		row := pos.rows[tok]
		switch {
		case p == 0:
			if row != nil {
				acc.Or(row)
			}
			acc.Or(&pos.other)
		case row == nil:
			acc.And(&pos.other)
		case pos.other.IsEmpty():
			acc.And(row)
		default:
			acc.AndAny(row, &pos.other)
		}
		if acc.IsEmpty() {
			return
		}
	}
	if p < len(ix.pos) {
		acc.And(&ix.pos[p].null)
	}
}
