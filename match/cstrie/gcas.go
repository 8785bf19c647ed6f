package cstrie

// GCAS, generation compare-and-swap (Prokopec et al., section 4): replace an
// I-node's main node only if, at the moment the change commits, the trie's
// root still belongs to the I-node's generation. A snapshot moves the root
// to a new generation, so a writer that read the old root before the
// snapshot cannot slip a change into the nodes the snapshot now shares.
//
// A GCAS first proposes: it links the new main node to the old one through
// prev and CASes it into the I-node. Then anyone who reads the I-node
// completes the proposal before using it (gcasRead): if the root's
// generation still matches, clear prev (commit); otherwise mark prev as
// failed and CAS the old main node back (abort).

// gcas proposes n in place of old at in and completes the proposal. It
// reports whether n was committed. n must be a fresh node no GCAS has used.
func (t *Trie[S]) gcas(in *iNode[S], old, n *mainNode[S]) bool {
	n.prev.Store(old)
	// Invariant: an I-node's main node only ever moves from a node a reader
	// saw committed (old) to a proposal linked to it (n.prev == old), so
	// whoever meets n can always commit it or roll back to old.
	if in.main.CompareAndSwap(old, n) {
		t.gcasComplete(in, n)
		return n.prev.Load() == nil
	}
	return false
}

// gcasRead returns in's committed main node, completing a pending proposal
// first.
func (t *Trie[S]) gcasRead(in *iNode[S]) *mainNode[S] {
	m := in.main.Load()
	if m.prev.Load() == nil {
		return m
	}
	return t.gcasComplete(in, m)
}

// gcasComplete drives the proposal m at in to a decision and returns the
// main node in holds once it is decided.
func (t *Trie[S]) gcasComplete(in *iNode[S], m *mainNode[S]) *mainNode[S] {
	for {
		prev := m.prev.Load()
		root := t.readRoot(true)
		if prev == nil {
			return m
		}
		if prev.kind == kindFailed {
			restored := prev.prev.Load()
			// Invariant: an aborted proposal is replaced by exactly the
			// node it was proposed over, so the I-node's history is as if
			// the proposal never happened.
			if in.main.CompareAndSwap(m, restored) {
				return restored
			}
			m = in.main.Load()
			if m.prev.Load() == nil {
				return m
			}
			continue
		}
		if root.gen == in.gen && !t.readOnly {
			// Invariant: a proposal commits only while the root is in the
			// I-node's generation, so no snapshot taken since the writer
			// started can observe it.
			if m.prev.CompareAndSwap(prev, nil) {
				return m
			}
			continue
		}
		failed := &mainNode[S]{kind: kindFailed}
		failed.prev.Store(prev)
		// Invariant: prev goes from the old node to a failure marker only
		// once; from then on the proposal can only be rolled back.
		m.prev.CompareAndSwap(prev, failed)
		m = in.main.Load()
		if m.prev.Load() == nil {
			return m
		}
	}
}

// copyToGen returns a new I-node in generation gen sharing in's committed
// main node. The main node is immutable, so sharing it is safe; changes
// made through the copy never reach in, which the snapshot keeps.
func (t *Trie[S]) copyToGen(in *iNode[S], gen *generation) *iNode[S] {
	return newINode(gen, in.tok, t.gcasRead(in))
}

// renew gives generation gen its own copy of child, an I-node of an older
// generation shared with a snapshot, by a GCAS on in (whose C-node is m).
// An update calls it before going down into an I-node of another
// generation, so it never changes an I-node a snapshot can see. Only the
// child on the update's path is renewed; the others keep their generation
// until an update passes through them.
func (t *Trie[S]) renew(in *iNode[S], m *mainNode[S], child *iNode[S], gen *generation) bool {
	return t.gcas(in, m, m.cn.withChild(t.copyToGen(child, gen)))
}
