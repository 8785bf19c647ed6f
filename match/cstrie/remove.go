package cstrie

// remove deletes (toks, queue, sub) below in, whose C-node holds the branch
// for toks[lev], pruning every level it leaves empty. startGen is as for
// insert.
func (t *Trie[S]) remove(in *iNode[S], toks []string, lev int, queue string, sub S, startGen *generation) status {
	for {
		m := t.gcasRead(in)
		if m.kind == kindT {
			return tombed
		}
		tok := toks[lev]
		br := m.cn.get(tok)
		if br == nil {
			return unneeded
		}
		if lev == len(toks)-1 {
			set, removed := br.set.Without(queue, sub)
			if !removed {
				return unneeded
			}
			var nm *mainNode[S]
			if set != nil || (br.in != nil && !t.dead(br.in)) {
				nm = m.cn.with(&branch[S]{tok: tok, in: br.in, set: set})
			} else {
				nm = m.cn.without(tok)
				if lev > 0 && nm.cn.empty() {
					nm = newTomb[S]()
				}
			}
			if !t.gcas(in, m, nm) {
				return restart
			}
			if nm.kind == kindT {
				return emptied
			}
			return done
		}
		if br.in == nil {
			return unneeded
		}
		if br.in.gen != startGen {
			if !t.renew(in, m, br, startGen) {
				return restart
			}
			continue
		}
		switch s := t.remove(br.in, toks, lev+1, queue, sub, startGen); s {
		case tombed:
			t.cleanBranch(in, m, br, lev)
			return restart
		case emptied:
			if t.compress(in, br.in, tok, lev) {
				return emptied
			}
			return done
		default:
			return s
		}
	}
}

// compress removes the I-node child, which the caller's removal just
// tombed, from in's C-node, and reports whether that tombed in as well, in
// which case the caller's caller goes on one level up. It stops when the
// branch no longer leads to child (someone else compressed it), when in is
// dead (whoever killed it carries on upwards), or when a snapshot moved the
// root to a new generation (in is then frozen; the next update to pass by
// cleans the copy).
func (t *Trie[S]) compress(in, child *iNode[S], tok string, lev int) bool {
	for {
		m := t.gcasRead(in)
		if m.kind == kindT {
			return false
		}
		br := m.cn.get(tok)
		if br == nil || br.in != child {
			return false
		}
		if committed, tombedIn := t.cleanBranch(in, m, br, lev); committed {
			return tombedIn
		}
		if t.readRoot(false).gen != in.gen {
			return false
		}
	}
}

// dead reports whether in has been tombed.
func (t *Trie[S]) dead(in *iNode[S]) bool {
	return t.gcasRead(in).kind == kindT
}

// prune walks the live trie along toks and cleans every dead I-node it
// meets, until the path has none. Unsubscribe calls it when a snapshot
// moved the root during the removal, since compress cannot finish its work
// on nodes the snapshot froze.
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
		br := m.cn.get(toks[lev])
		if br == nil || br.in == nil || lev == len(toks)-1 {
			return done
		}
		if br.in.gen != gen {
			if !t.renew(in, m, br, gen) {
				return restart
			}
			continue
		}
		if s := t.prunePath(br.in, toks, lev+1, gen); s != tombed {
			return s
		}
		t.cleanBranch(in, m, br, lev)
		return restart
	}
}
