package cstrie

import (
	"hash/maphash"
	"math/bits"
)

// A table maps literal tokens to the child I-nodes of one C-node (an
// I-node knows its own token). It is
// persistent: with and without return a new table and leave the receiver
// intact, because lock-free readers may still be walking it.
//
// Up to smallMax branches are a slice scanned in order, which is both the
// smallest and the fastest form for the short fan-out of most trie levels.
// Past that the table becomes a hash array mapped trie (HAMT) keyed by a
// 64-bit hash of the token: a change copies one 32-way node per HAMT level
// (O(log32 n)) instead of the whole table, so a root with a million
// children stays cheap to update.
type table[S comparable] struct {
	small []*iNode[S]
	big   *hamt[S]
}

const (
	smallMax = 8 // a slice up to this many branches, a HAMT beyond
	smallMin = 4 // a HAMT that shrinks to this many becomes a slice again

	hamtBits  = 5
	hamtWidth = 1 << hamtBits
	hamtMask  = hamtWidth - 1
	// maxShift is the hash shift past which hashes are exhausted and
	// colliding tokens share a collision node (a plain list).
	maxShift = 64 - hamtBits
)

var seed = maphash.MakeSeed()

func hashToken(tok string) uint64 { return maphash.String(seed, tok) }

func (t *table[S]) len() int {
	if t.big != nil {
		return t.big.n
	}
	return len(t.small)
}

func (t *table[S]) get(tok string) *iNode[S] {
	if t.big != nil {
		return t.big.get(tok)
	}
	for _, b := range t.small {
		if b.tok == tok {
			return b
		}
	}
	return nil
}

// each calls fn for every branch, in no particular order.
func (t *table[S]) each(fn func(*iNode[S])) {
	if t.big != nil {
		t.big.root.each(fn)
		return
	}
	for _, b := range t.small {
		fn(b)
	}
}

// with returns a table holding b in place of any branch with b's token.
func (t *table[S]) with(b *iNode[S]) table[S] {
	if t.big != nil {
		return table[S]{big: t.big.with(b)}
	}
	for i, old := range t.small {
		if old.tok == b.tok {
			s := make([]*iNode[S], len(t.small))
			copy(s, t.small)
			s[i] = b
			return table[S]{small: s}
		}
	}
	if len(t.small) < smallMax {
		s := make([]*iNode[S], len(t.small)+1)
		copy(s, t.small)
		s[len(t.small)] = b
		return table[S]{small: s}
	}
	h := &hamt[S]{}
	for _, old := range t.small {
		h = h.with(old)
	}
	return table[S]{big: h.with(b)}
}

// without returns a table without the branch for tok, which must exist.
func (t *table[S]) without(tok string) table[S] {
	if t.big != nil {
		h := t.big.without(tok)
		if h.n > smallMin {
			return table[S]{big: h}
		}
		s := make([]*iNode[S], 0, h.n)
		h.root.each(func(b *iNode[S]) { s = append(s, b) })
		return table[S]{small: s}
	}
	if len(t.small) == 1 {
		return table[S]{}
	}
	s := make([]*iNode[S], 0, len(t.small)-1)
	for _, b := range t.small {
		if b.tok != tok {
			s = append(s, b)
		}
	}
	return table[S]{small: s}
}

// hamt is a persistent hash array mapped trie of branches.
type hamt[S comparable] struct {
	root *hnode[S]
	n    int
}

// An hnode has one slot per set bit of bitmap, in bit order. At shift
// maxShift and beyond it is a collision node: bitmap is unused and slots is
// a list of leaves whose hashes are all equal.
type hnode[S comparable] struct {
	bitmap uint32
	slots  []hslot[S]
}

// An hslot is either a leaf (child) or a sub-node (kid). A leaf's hash is
// not kept: it is recomputed in the rare case that a new token lands on
// the same slot and the two must move down into a sub-node, which keeps
// the slots that every change copies small.
type hslot[S comparable] struct {
	child *iNode[S]
	kid   *hnode[S]
}

func (h *hamt[S]) get(tok string) *iNode[S] { return h.root.find(tok, hashToken(tok)) }

// find returns the child for tok, whose hash is hash, or nil.
func (n *hnode[S]) find(tok string, hash uint64) *iNode[S] {
	for shift := uint(0); n != nil; shift += hamtBits {
		if shift > maxShift {
			for i := range n.slots {
				if n.slots[i].child.tok == tok {
					return n.slots[i].child
				}
			}
			return nil
		}
		bit := uint32(1) << ((hash >> shift) & hamtMask)
		if n.bitmap&bit == 0 {
			return nil
		}
		s := &n.slots[bits.OnesCount32(n.bitmap&(bit-1))]
		if s.kid != nil {
			n = s.kid
			continue
		}
		if s.child.tok == tok {
			return s.child
		}
		return nil
	}
	return nil
}

func (h *hamt[S]) with(c *iNode[S]) *hamt[S] {
	root, added := h.root.with(c, hashToken(c.tok), 0)
	n := h.n
	if added {
		n++
	}
	return &hamt[S]{root: root, n: n}
}

func (h *hamt[S]) without(tok string) *hamt[S] {
	root, removed := h.root.without(tok, hashToken(tok), 0)
	if !removed {
		panic("cstrie: removing a token the table does not hold")
	}
	return &hamt[S]{root: root, n: h.n - 1}
}

// with returns a copy of n (which may be nil) holding leaf c, whose token
// hashes to hash, and whether the token was new.
func (n *hnode[S]) with(c *iNode[S], hash uint64, shift uint) (*hnode[S], bool) {
	leaf := hslot[S]{child: c}
	if n == nil {
		return singleton(leaf, hash, shift), true
	}
	if shift > maxShift {
		for i := range n.slots {
			if n.slots[i].child.tok == c.tok {
				return n.replaced(i, leaf), false
			}
		}
		return &hnode[S]{slots: append(n.slots[:len(n.slots):len(n.slots)], leaf)}, true
	}
	bit := uint32(1) << ((hash >> shift) & hamtMask)
	pos := bits.OnesCount32(n.bitmap & (bit - 1))
	if n.bitmap&bit == 0 {
		slots := make([]hslot[S], len(n.slots)+1)
		copy(slots, n.slots[:pos])
		slots[pos] = leaf
		copy(slots[pos+1:], n.slots[pos:])
		return &hnode[S]{bitmap: n.bitmap | bit, slots: slots}, true
	}
	s := n.slots[pos]
	switch {
	case s.kid != nil:
		kid, added := s.kid.with(c, hash, shift+hamtBits)
		return n.replaced(pos, hslot[S]{kid: kid}), added
	case s.child.tok == c.tok:
		return n.replaced(pos, leaf), false
	default:
		kid := pair(s.child, hashToken(s.child.tok), c, hash, shift+hamtBits)
		return n.replaced(pos, hslot[S]{kid: kid}), true
	}
}

// without returns a copy of n without tok (nil if that empties it), and
// whether tok was present. A sub-node left holding a single leaf is pulled
// up into its parent, so the HAMT stays as shallow as its contents allow.
func (n *hnode[S]) without(tok string, hash uint64, shift uint) (*hnode[S], bool) {
	if n == nil {
		return nil, false
	}
	if shift > maxShift {
		for i := range n.slots {
			if n.slots[i].child.tok == tok {
				return n.removed(i, 0), true
			}
		}
		return n, false
	}
	bit := uint32(1) << ((hash >> shift) & hamtMask)
	if n.bitmap&bit == 0 {
		return n, false
	}
	pos := bits.OnesCount32(n.bitmap & (bit - 1))
	s := n.slots[pos]
	if s.kid == nil {
		if s.child.tok != tok {
			return n, false
		}
		return n.removed(pos, bit), true
	}
	kid, removed := s.kid.without(tok, hash, shift+hamtBits)
	switch {
	case !removed:
		return n, false
	case kid == nil:
		return n.removed(pos, bit), true
	case len(kid.slots) == 1 && kid.slots[0].kid == nil:
		return n.replaced(pos, kid.slots[0]), true
	default:
		return n.replaced(pos, hslot[S]{kid: kid}), true
	}
}

func (n *hnode[S]) replaced(pos int, s hslot[S]) *hnode[S] {
	slots := make([]hslot[S], len(n.slots))
	copy(slots, n.slots)
	slots[pos] = s
	return &hnode[S]{bitmap: n.bitmap, slots: slots}
}

// removed drops slot pos (and bit from the bitmap), or returns nil if that
// was the last slot.
func (n *hnode[S]) removed(pos int, bit uint32) *hnode[S] {
	if len(n.slots) == 1 {
		return nil
	}
	slots := make([]hslot[S], 0, len(n.slots)-1)
	slots = append(slots, n.slots[:pos]...)
	slots = append(slots, n.slots[pos+1:]...)
	return &hnode[S]{bitmap: n.bitmap &^ bit, slots: slots}
}

func (n *hnode[S]) each(fn func(*iNode[S])) {
	if n == nil {
		return
	}
	for i := range n.slots {
		if n.slots[i].kid != nil {
			n.slots[i].kid.each(fn)
		} else {
			fn(n.slots[i].child)
		}
	}
}

func singleton[S comparable](leaf hslot[S], hash uint64, shift uint) *hnode[S] {
	if shift > maxShift {
		return &hnode[S]{slots: []hslot[S]{leaf}}
	}
	return &hnode[S]{bitmap: 1 << ((hash >> shift) & hamtMask), slots: []hslot[S]{leaf}}
}

// pair returns a node at shift holding two leaves with different tokens
// and the given hashes.
func pair[S comparable](a *iNode[S], ha uint64, b *iNode[S], hb uint64, shift uint) *hnode[S] {
	sa, sb := hslot[S]{child: a}, hslot[S]{child: b}
	if shift > maxShift {
		return &hnode[S]{slots: []hslot[S]{sa, sb}}
	}
	ia, ib := (ha>>shift)&hamtMask, (hb>>shift)&hamtMask
	switch {
	case ia == ib:
		return &hnode[S]{bitmap: 1 << ia, slots: []hslot[S]{{kid: pair(a, ha, b, hb, shift+hamtBits)}}}
	case ia < ib:
		return &hnode[S]{bitmap: 1<<ia | 1<<ib, slots: []hslot[S]{sa, sb}}
	default:
		return &hnode[S]{bitmap: 1<<ia | 1<<ib, slots: []hslot[S]{sb, sa}}
	}
}
