package cstrie

import (
	"sync/atomic"

	"github.com/skiffmq/skiff/match"
	"github.com/skiffmq/skiff/subject"
)

// generation marks the I-nodes that belong to one snapshot epoch. Only its
// address matters. It must not be a zero-size type: Go may give distinct
// zero-size values the same address, which would make two generations
// indistinguishable. The byte field gives every new(generation) its own.
type generation struct{ _ byte }

// An iNode is the indirection through which every change below it is
// published: its main node is replaced, never modified, by GCAS. The
// I-node itself stays in place while the nodes above and below it are
// copied, so concurrent inserts at different depths cannot lose each other.
// tok is the token of the edge that leads to it (empty for the root).
type iNode[S comparable] struct {
	main atomic.Pointer[mainNode[S]]
	gen  *generation
	tok  string
}

type mainKind uint8

const (
	kindC      mainKind = iota // a C-node: one trie level
	kindT                      // a T-node: the I-node is dead and holds nothing
	kindFailed                 // a GCAS failure marker, only ever found in prev
)

// A mainNode is what an I-node points to. It is immutable once published,
// except for prev, which belongs to the GCAS protocol (gcas.go).
//
// A T-node (kindT) carries nothing: in this trie an I-node is tombed only
// when its C-node holds no entry and no child. Invariant: once an I-node's
// committed main node is a T-node, it never changes again.
type mainNode[S comparable] struct {
	// prev is nil once the GCAS that installed this node has committed.
	// While it is pending, prev is the node it replaced; while it is being
	// aborted, prev is a kindFailed node whose own prev is that node.
	prev atomic.Pointer[mainNode[S]]
	kind mainKind
	cn   cNode[S]
}

// A cNode is one level of the subscription trie, reached by the tokens on
// the path from the root: set holds the entries whose pattern is exactly
// that path, and the children continue longer patterns.
//
// Most levels of a subscription trie have a single child (the tail of a
// long subject), so a lone child sits inline in solo, which costs no extra
// allocation and keeps a main node in the 80-byte size class; from the
// second child on they move to kids. Children sit behind that pointer so
// that a change to the set, the commonest update, copies only this small
// node and shares them. At most one of solo and kids is set.
type cNode[S comparable] struct {
	set  match.Set[S]
	solo *iNode[S]
	kids *children[S]
}

// children are the next level's I-nodes when there are two or more.
// Wildcard children have their own fields so that a lookup finds them
// without a table probe. Immutable.
type children[S comparable] struct {
	lits table[S]  // literal tokens
	one  *iNode[S] // "*"
	rest *iNode[S] // ">"; always a leaf: nothing follows ">"
	any  *iNode[S] // "#"
}

func newINode[S comparable](gen *generation, tok string, m *mainNode[S]) *iNode[S] {
	in := &iNode[S]{gen: gen, tok: tok}
	in.main.Store(m)
	return in
}

func newTomb[S comparable]() *mainNode[S] { return &mainNode[S]{kind: kindT} }

func (cn *cNode[S]) empty() bool { return cn.set.Empty() && cn.solo == nil && cn.kids == nil }

// child returns the child for a pattern token, or nil.
func (cn *cNode[S]) child(tok string) *iNode[S] {
	if cn.solo != nil {
		if cn.solo.tok == tok {
			return cn.solo
		}
		return nil
	}
	if cn.kids == nil {
		return nil
	}
	return cn.kids.get(tok)
}

// withChild returns a new C-node main node holding c in place of any child
// with c's token.
func (cn *cNode[S]) withChild(c *iNode[S]) *mainNode[S] {
	m := &mainNode[S]{kind: kindC, cn: cNode[S]{set: cn.set}}
	switch {
	case cn.kids != nil:
		k := *cn.kids
		k.put(c)
		m.cn.kids = &k
	case cn.solo == nil || cn.solo.tok == c.tok:
		m.cn.solo = c
	default:
		k := &children[S]{}
		k.put(cn.solo)
		k.put(c)
		m.cn.kids = k
	}
	return m
}

// withoutChild returns a new C-node main node without the child for tok,
// which must exist.
func (cn *cNode[S]) withoutChild(tok string) *mainNode[S] {
	m := &mainNode[S]{kind: kindC, cn: cNode[S]{set: cn.set}}
	if cn.solo != nil {
		return m
	}
	k := *cn.kids
	k.drop(tok)
	var last *iNode[S]
	n := 0
	k.each(func(c *iNode[S]) { n, last = n+1, c })
	switch n {
	case 0:
	case 1:
		m.cn.solo = last
	default:
		m.cn.kids = &k
	}
	return m
}

// withSet returns a new C-node main node with the same children and set.
func (cn *cNode[S]) withSet(set match.Set[S]) *mainNode[S] {
	return &mainNode[S]{kind: kindC, cn: cNode[S]{set: set, solo: cn.solo, kids: cn.kids}}
}

// each calls fn for every child of the C-node.
func (cn *cNode[S]) each(fn func(*iNode[S])) {
	if cn.solo != nil {
		fn(cn.solo)
	} else if cn.kids != nil {
		cn.kids.each(fn)
	}
}

func (k *children[S]) get(tok string) *iNode[S] {
	switch subject.KindOf(tok) {
	case subject.One:
		return k.one
	case subject.Rest:
		return k.rest
	case subject.Any:
		return k.any
	}
	return k.lits.get(tok)
}

// put sets the child for c's token to c, in a children value being built.
func (k *children[S]) put(c *iNode[S]) {
	switch subject.KindOf(c.tok) {
	case subject.One:
		k.one = c
	case subject.Rest:
		k.rest = c
	case subject.Any:
		k.any = c
	default:
		k.lits = k.lits.with(c)
	}
}

// drop removes the child for tok, in a children value being built.
func (k *children[S]) drop(tok string) {
	switch subject.KindOf(tok) {
	case subject.One:
		k.one = nil
	case subject.Rest:
		k.rest = nil
	case subject.Any:
		k.any = nil
	default:
		k.lits = k.lits.without(tok)
	}
}

func (k *children[S]) each(fn func(*iNode[S])) {
	k.lits.each(fn)
	for _, c := range [...]*iNode[S]{k.one, k.rest, k.any} {
		if c != nil {
			fn(c)
		}
	}
}

// chain builds the private path for toks: an I-node for toks[0] whose
// C-node leads to toks[1], and so on; the last one holds set. Nobody else
// can see it until a GCAS publishes it, so its main nodes are created
// already committed.
func chain[S comparable](toks []string, set match.Set[S], gen *generation) *iNode[S] {
	var in *iNode[S]
	for k := len(toks) - 1; k >= 0; k-- {
		m := &mainNode[S]{kind: kindC}
		if in == nil {
			m.cn.set = set
		} else {
			m = m.cn.withChild(in)
		}
		in = newINode(gen, toks[k], m)
	}
	return in
}
