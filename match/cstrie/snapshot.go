package cstrie

import (
	"strings"

	"github.com/skiffmq/skiff/match"
)

// ReadOnlySnapshot returns a frozen view of the trie in O(1): it moves the
// live trie's root to a new generation (RDCSS) and keeps the old root. The
// two then share every node until an update to the live trie copies the
// nodes on its path (renew). The snapshot answers Lookup, Count and
// Snapshot; Subscribe and Unsubscribe on it return ErrReadOnly.
//
// It is linearizable: the snapshot holds exactly the entries of the live
// trie at the instant the root moved.
func (t *Trie[S]) ReadOnlySnapshot() *Trie[S] {
	if t.readOnly {
		return t
	}
	for {
		r := t.root.Load()
		if r.desc != nil {
			t.rdcssComplete(false)
			continue
		}
		expect := t.gcasRead(r.in)
		next := &rootRef[S]{in: newINode(new(generation), "", expect)}
		if t.rdcssRoot(r, expect, next) {
			s := &Trie[S]{readOnly: true}
			s.root.Store(&rootRef[S]{in: r.in})
			return s
		}
	}
}

// Snapshot implements match.Matcher: it takes a ReadOnlySnapshot and lists
// it, so it never blocks updates and its result is one instant's state.
func (t *Trie[S]) Snapshot() []match.Subscription[S] {
	var out []match.Subscription[S]
	t.ReadOnlySnapshot().walk(func(pattern string, set *match.Set[S]) {
		out = set.AppendEntries(out, pattern)
	})
	return out
}

// walk calls fn for every node with entries, with the node's pattern. On
// a live trie it sees each I-node at a different instant; callers that
// need one instant walk a snapshot.
func (t *Trie[S]) walk(fn func(pattern string, set *match.Set[S])) {
	var path []string
	t.walkINode(t.readRoot(false), &path, fn)
}

func (t *Trie[S]) walkINode(in *iNode[S], path *[]string, fn func(string, *match.Set[S])) {
	m := t.gcasRead(in)
	if m.kind != kindC {
		return
	}
	if !m.cn.set.Empty() {
		fn(strings.Join(*path, "."), &m.cn.set)
	}
	m.cn.each(func(c *iNode[S]) {
		*path = append(*path, c.tok)
		t.walkINode(c, path, fn)
		*path = (*path)[:len(*path)-1]
	})
}
