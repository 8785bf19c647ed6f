package cstrie

import "github.com/skiffmq/skiff/match"

// insert adds (queue, sub) for the pattern toks below in, the I-node of the
// path toks[:lev]. startGen is the root's generation when the operation
// started; every I-node it changes belongs to it.
//
// A GCAS lost to another writer is retried on the same I-node as long as
// the root is still in startGen: an I-node of the current generation that
// is not dead is still reachable (only dead I-nodes are cut out, and only
// renewal, which needs a new generation, replaces live ones), so there is
// no need to walk down from the root again.
func (t *Trie[S]) insert(in *iNode[S], toks []string, lev int, queue string, sub S, startGen *generation) status {
	for {
		m := t.gcasRead(in)
		if m.kind == kindT {
			return tombed
		}
		var nm *mainNode[S]
		if lev == len(toks) {
			set, added := m.cn.set.Plus(queue, sub)
			if !added {
				return unneeded
			}
			nm = m.cn.withSet(set)
		} else {
			c := m.cn.child(toks[lev])
			switch {
			case c == nil:
				// Nothing below yet: build the rest of the path privately
				// and publish it with one GCAS.
				nm = m.cn.withChild(chain(toks[lev:], newSet(queue, sub), startGen))
			case c.gen != startGen:
				if !t.renew(in, m, c, startGen) && t.moved(startGen) {
					return restart
				}
				continue
			default:
				s := t.insert(c, toks, lev+1, queue, sub, startGen)
				if s != tombed {
					return s
				}
				t.cut(in, m, c.tok, lev)
				if t.moved(startGen) {
					return restart
				}
				continue
			}
		}
		if t.gcas(in, m, nm) {
			return done
		}
		if t.moved(startGen) {
			return restart
		}
	}
}

// cut replaces in's C-node m with one without the dead child for tok. If
// that leaves in (not the root, lev > 0) with no entry and no child, in is
// tombed in turn. Any update that meets a dead I-node cuts it from the
// parent, so a remover that stalls never leaves the trie uncompressed for
// long. It reports whether the GCAS committed and whether it tombed in.
func (t *Trie[S]) cut(in *iNode[S], m *mainNode[S], tok string, lev int) (committed, tombedIn bool) {
	nm := m.cn.withoutChild(tok)
	if lev > 0 && nm.cn.empty() {
		nm = newTomb[S]()
	}
	if !t.gcas(in, m, nm) {
		return false, false
	}
	return true, nm.kind == kindT
}

// moved reports whether the root has left generation gen since an
// operation started, which makes every I-node the operation holds frozen.
func (t *Trie[S]) moved(gen *generation) bool {
	return t.readRoot(false).gen != gen
}

func newSet[S comparable](queue string, sub S) match.Set[S] {
	set, _ := (*match.Set[S])(nil).Plus(queue, sub)
	return set
}
