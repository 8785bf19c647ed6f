package cstrie

import "sync/atomic"

// The root reference is changed with RDCSS, restricted double-compare
// single-swap (Harris et al.), as in the Ctrie: a snapshot replaces the root
// I-node with a copy in a new generation only if the old root's main node
// is still the one the snapshot read. RDCSS installs a descriptor first,
// then anyone who reads the root completes or aborts it.

// rootRef is the value of Trie.root: either a root I-node or a pending
// RDCSS descriptor.
type rootRef[S comparable] struct {
	in   *iNode[S]
	desc *rdcss[S]
}

// rdcss describes a pending root swap from old to next, conditional on the
// old root I-node still holding expect.
type rdcss[S comparable] struct {
	old       *rootRef[S]
	expect    *mainNode[S]
	next      *rootRef[S]
	committed atomic.Bool
}

// readRoot returns the root I-node, completing a pending descriptor first;
// with abort set it rolls the descriptor back instead of completing it.
func (t *Trie[S]) readRoot(abort bool) *iNode[S] {
	if r := t.root.Load(); r.desc == nil {
		return r.in
	}
	return t.rdcssComplete(abort)
}

func (t *Trie[S]) rdcssComplete(abort bool) *iNode[S] {
	for {
		r := t.root.Load()
		if r.desc == nil {
			return r.in
		}
		d := r.desc
		if abort {
			// Invariant: an aborted descriptor leaves exactly the root it
			// found, as if the snapshot had not been attempted.
			if t.root.CompareAndSwap(r, d.old) {
				return d.old.in
			}
			continue
		}
		if t.gcasRead(d.old.in) == d.expect {
			// Invariant: the root moves to the new generation only while
			// the old root's main node is the one the snapshot copied, so
			// the snapshot and the live trie start from the same state.
			if t.root.CompareAndSwap(r, d.next) {
				d.committed.Store(true)
				return d.next.in
			}
			continue
		}
		if t.root.CompareAndSwap(r, d.old) {
			return d.old.in
		}
	}
}

// rdcssRoot swaps the root from old to next if old's I-node still holds
// expect, and reports whether it did.
func (t *Trie[S]) rdcssRoot(old *rootRef[S], expect *mainNode[S], next *rootRef[S]) bool {
	d := &rdcss[S]{old: old, expect: expect, next: next}
	// Invariant: a descriptor is only installed over the exact root value
	// it describes as old.
	if t.root.CompareAndSwap(old, &rootRef[S]{desc: d}) {
		t.rdcssComplete(false)
		return d.committed.Load()
	}
	return false
}
