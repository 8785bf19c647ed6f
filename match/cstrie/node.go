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
type iNode[S comparable] struct {
	main atomic.Pointer[mainNode[S]]
	gen  *generation
}

type mainKind uint8

const (
	kindC      mainKind = iota // a C-node: the branches of one trie level
	kindT                      // a T-node: the I-node is dead and holds nothing
	kindFailed                 // a GCAS failure marker, only ever found in prev
)

// A mainNode is what an I-node points to. It is immutable once published,
// except for prev, which belongs to the GCAS protocol (gcas.go).
//
// A T-node (kindT) carries nothing: in this trie an I-node is tombed only
// when its C-node has no branch left. Invariant: once an I-node's committed
// main node is a T-node, it never changes again.
type mainNode[S comparable] struct {
	// prev is nil once the GCAS that installed this node has committed.
	// While it is pending, prev is the node it replaced; while it is being
	// aborted, prev is a kindFailed node whose own prev is that node.
	prev atomic.Pointer[mainNode[S]]
	kind mainKind
	cn   cNode[S]
}

// A cNode is one level of the subscription trie: a branch per distinct
// next token. Wildcard branches have their own fields so that a lookup
// finds them without a table probe.
type cNode[S comparable] struct {
	lits table[S]   // literal tokens
	one  *branch[S] // "*"
	rest *branch[S] // ">"; always a leaf: nothing follows ">"
	any  *branch[S] // "#"
}

// A branch is the edge for one token. set holds the entries whose pattern
// ends with this token; in leads to the next level, for longer patterns.
// A branch is immutable; changing one builds a new one.
type branch[S comparable] struct {
	tok string
	in  *iNode[S]
	set *match.Set[S]
}

func newINode[S comparable](gen *generation, m *mainNode[S]) *iNode[S] {
	in := &iNode[S]{gen: gen}
	in.main.Store(m)
	return in
}

func newTomb[S comparable]() *mainNode[S] { return &mainNode[S]{kind: kindT} }

func (cn *cNode[S]) empty() bool {
	return cn.one == nil && cn.rest == nil && cn.any == nil && cn.lits.len() == 0
}

// get returns the branch for a pattern token, or nil.
func (cn *cNode[S]) get(tok string) *branch[S] {
	switch subject.KindOf(tok) {
	case subject.One:
		return cn.one
	case subject.Rest:
		return cn.rest
	case subject.Any:
		return cn.any
	}
	return cn.lits.get(tok)
}

// with returns a new C-node main node holding b in place of any branch
// with b's token.
func (cn *cNode[S]) with(b *branch[S]) *mainNode[S] {
	m := &mainNode[S]{kind: kindC, cn: *cn}
	switch subject.KindOf(b.tok) {
	case subject.One:
		m.cn.one = b
	case subject.Rest:
		m.cn.rest = b
	case subject.Any:
		m.cn.any = b
	default:
		m.cn.lits = cn.lits.with(b)
	}
	return m
}

// without returns a new C-node main node without the branch for tok,
// which must exist.
func (cn *cNode[S]) without(tok string) *mainNode[S] {
	m := &mainNode[S]{kind: kindC, cn: *cn}
	switch subject.KindOf(tok) {
	case subject.One:
		m.cn.one = nil
	case subject.Rest:
		m.cn.rest = nil
	case subject.Any:
		m.cn.any = nil
	default:
		m.cn.lits = cn.lits.without(tok)
	}
	return m
}

// each calls fn for every branch of the C-node.
func (cn *cNode[S]) each(fn func(*branch[S])) {
	cn.lits.each(fn)
	for _, b := range [...]*branch[S]{cn.one, cn.rest, cn.any} {
		if b != nil {
			fn(b)
		}
	}
}

// chain builds the private path for toks: an I-node whose C-node has a
// branch for toks[0], leading to toks[1], and so on; the last branch holds
// set. Nobody else can see it until a GCAS publishes it, so its main nodes
// are created already committed.
func chain[S comparable](toks []string, set *match.Set[S], gen *generation) *iNode[S] {
	var b *branch[S]
	var in *iNode[S]
	for k := len(toks) - 1; k >= 0; k-- {
		b = &branch[S]{tok: toks[k], in: in}
		if k == len(toks)-1 {
			b.in, b.set = nil, set
		}
		var empty cNode[S]
		in = newINode(gen, empty.with(b))
	}
	return in
}
