package cstrie

// remove deletes (queue, sub) for the pattern toks below in, the I-node of
// the path toks[:lev], and prunes every level it leaves empty. startGen
// and the retry rule are as for insert.
func (t *Trie[S]) remove(in *iNode[S], toks []string, lev int, queue string, sub S, startGen *generation) status {
	for {
		m := t.gcasRead(in)
		if m.kind == kindT {
			return tombed
		}
		if lev == len(toks) {
			set, removed := m.cn.set.Minus(queue, sub)
			if !removed {
				return unneeded
			}
			nm := m.cn.withSet(set)
			if nm.cn.empty() {
				nm = newTomb[S]()
			}
			if t.gcas(in, m, nm) {
				if nm.kind == kindT {
					return emptied
				}
				return done
			}
			if t.moved(startGen) {
				return restart
			}
			continue
		}
		c := m.cn.child(toks[lev])
		if c == nil {
			return unneeded
		}
		if c.gen != startGen {
			if !t.renew(in, m, c, startGen) && t.moved(startGen) {
				return restart
			}
			continue
		}
		switch s := t.remove(c, toks, lev+1, queue, sub, startGen); s {
		case tombed:
			// c was already dead, so it held nothing: cut it and look again.
			t.cut(in, m, c.tok, lev)
			if t.moved(startGen) {
				return restart
			}
		case emptied:
			if t.compress(in, c, lev, startGen) {
				return emptied
			}
			return done
		default:
			return s
		}
	}
}

// compress cuts child, which the caller's removal just tombed, out of in,
// and reports whether that tombed in as well, in which case the caller's
// caller goes on one level up. It stops when in no longer leads to child
// (someone else cut it), when in is dead (whoever killed it carries on
// upwards, or restarts and meets it), or when a snapshot moved the root
// (in is then frozen; Unsubscribe prunes the live copy).
func (t *Trie[S]) compress(in, child *iNode[S], lev int, startGen *generation) bool {
	for {
		m := t.gcasRead(in)
		if m.kind == kindT || m.cn.child(child.tok) != child {
			return false
		}
		if committed, tombedIn := t.cut(in, m, child.tok, lev); committed {
			return tombedIn
		}
		if t.moved(startGen) {
			return false
		}
	}
}

// prune walks the live trie along toks and cuts every dead I-node it meets,
// until the path has none. Unsubscribe calls it when a snapshot moved the
// root during the removal, since compress cannot finish its work on nodes
// the snapshot froze.
func (t *Trie[S]) prune(toks []string) {
	for {
		root := t.readRoot(false)
		if t.prunePath(root, toks, 0, root.gen) != restart {
			return
		}
	}
}

func (t *Trie[S]) prunePath(in *iNode[S], toks []string, lev int, gen *generation) status {
	for {
		m := t.gcasRead(in)
		if m.kind == kindT {
			return tombed
		}
		if lev == len(toks) {
			return done
		}
		c := m.cn.child(toks[lev])
		if c == nil {
			return done
		}
		if c.gen != gen {
			if !t.renew(in, m, c, gen) {
				return restart
			}
			continue
		}
		if s := t.prunePath(c, toks, lev+1, gen); s != tombed {
			return s
		}
		t.cut(in, m, c.tok, lev)
		return restart
	}
}
