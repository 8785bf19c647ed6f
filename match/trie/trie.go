// Package trie is the classic subscription trie behind one sync.RWMutex,
// as RabbitMQ and ZeroMQ route topics: one node per token, wildcard
// children kept apart from literal ones, and a lookup that backtracks into
// every wildcard branch that could match.
//
// It is the lock-based baseline for the lock-free match/cstrie: lookups
// share the read lock and run in parallel, but every Subscribe and
// Unsubscribe excludes all of them. Empty nodes are pruned on removal, so
// memory follows the number of subscriptions.
package trie

import (
	"strings"
	"sync"

	"github.com/skiffmq/skiff/match"
	"github.com/skiffmq/skiff/subject"
)

// Matcher is the locked trie. The zero value is not usable; call New.
type Matcher[S comparable] struct {
	mu struct {
		sync.RWMutex
		root  node[S]
		count int
	}
}

// A node is reached by one token. set holds the entries whose pattern ends
// here; the children continue longer patterns.
type node[S comparable] struct {
	lits map[string]*node[S]
	one  *node[S] // "*"
	rest *node[S] // ">"; a leaf: nothing follows ">"
	any  *node[S] // "#"
	set  *match.Set[S]
}

var _ match.Matcher[int] = (*Matcher[int])(nil)

// New returns an empty trie.
func New[S comparable]() *Matcher[S] { return &Matcher[S]{} }

// Subscribe implements match.Matcher.
func (m *Matcher[S]) Subscribe(pattern, queue string, sub S) error {
	var buf [32]string
	toks, err := match.SplitPattern(buf[:0], pattern, queue)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := &m.mu.root
	for _, tok := range toks {
		n = n.child(tok, true)
	}
	set, added := n.set.With(queue, sub)
	if added {
		n.set = set
		m.mu.count++
	}
	return nil
}

// Unsubscribe implements match.Matcher.
func (m *Matcher[S]) Unsubscribe(pattern, queue string, sub S) error {
	var buf [32]string
	toks, err := match.SplitPattern(buf[:0], pattern, queue)
	if err != nil {
		return err
	}
	var pathBuf [33]*node[S]
	m.mu.Lock()
	defer m.mu.Unlock()
	path := append(pathBuf[:0], &m.mu.root)
	for _, tok := range toks {
		n := path[len(path)-1].child(tok, false)
		if n == nil {
			return match.ErrNotFound
		}
		path = append(path, n)
	}
	leaf := path[len(path)-1]
	set, removed := leaf.set.Without(queue, sub)
	if !removed {
		return match.ErrNotFound
	}
	leaf.set = set
	m.mu.count--
	// Prune the nodes the removal left empty, deepest first.
	for i := len(toks) - 1; i >= 0 && path[i+1].empty(); i-- {
		path[i].drop(toks[i])
	}
	return nil
}

// Lookup implements match.Matcher.
func (m *Matcher[S]) Lookup(subj string, r *match.Result[S]) error {
	r.Reset()
	var buf [32]string
	toks, err := subject.SplitSubject(buf[:0], subj)
	if err != nil {
		return err
	}
	m.mu.RLock()
	m.mu.root.lookup(toks, 0, r)
	m.mu.RUnlock()
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
	var path []string
	var walk func(n *node[S])
	walk = func(n *node[S]) {
		n.each(func(tok string, c *node[S]) {
			path = append(path, tok)
			out = c.set.AppendEntries(out, strings.Join(path, "."))
			walk(c)
			path = path[:len(path)-1]
		})
	}
	walk(&m.mu.root)
	return out
}

// lookup adds the entries below n that match toks[i:].
func (n *node[S]) lookup(toks []string, i int, r *match.Result[S]) {
	if c := n.any; c != nil {
		for j := i; j <= len(toks); j++ {
			c.follow(toks, j, r)
		}
	}
	if i == len(toks) {
		return
	}
	if c := n.lits[toks[i]]; c != nil {
		c.follow(toks, i+1, r)
	}
	if c := n.one; c != nil {
		c.follow(toks, i+1, r)
	}
	if c := n.rest; c != nil {
		r.Add(c.set)
	}
}

// follow continues the match after n's token consumed toks[:j].
func (n *node[S]) follow(toks []string, j int, r *match.Result[S]) {
	if j == len(toks) {
		r.Add(n.set)
	}
	n.lookup(toks, j, r)
}

// child returns the child for tok, creating it if create is set.
func (n *node[S]) child(tok string, create bool) *node[S] {
	var slot **node[S]
	switch subject.KindOf(tok) {
	case subject.One:
		slot = &n.one
	case subject.Rest:
		slot = &n.rest
	case subject.Any:
		slot = &n.any
	default:
		c := n.lits[tok]
		if c == nil && create {
			if n.lits == nil {
				n.lits = make(map[string]*node[S])
			}
			c = &node[S]{}
			n.lits[strings.Clone(tok)] = c
		}
		return c
	}
	if *slot == nil && create {
		*slot = &node[S]{}
	}
	return *slot
}

// drop removes the child for tok.
func (n *node[S]) drop(tok string) {
	switch subject.KindOf(tok) {
	case subject.One:
		n.one = nil
	case subject.Rest:
		n.rest = nil
	case subject.Any:
		n.any = nil
	default:
		delete(n.lits, tok)
		if len(n.lits) == 0 {
			n.lits = nil
		}
	}
}

func (n *node[S]) empty() bool {
	return n.set == nil && n.one == nil && n.rest == nil && n.any == nil && len(n.lits) == 0
}

func (n *node[S]) each(fn func(tok string, c *node[S])) {
	for tok, c := range n.lits {
		fn(tok, c)
	}
	for _, w := range [...]struct {
		tok string
		c   *node[S]
	}{{"*", n.one}, {">", n.rest}, {"#", n.any}} {
		if w.c != nil {
			fn(w.tok, w.c)
		}
	}
}
