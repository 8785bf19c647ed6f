package cstrie

import "github.com/skiffmq/skiff/match"

// insert adds (toks, queue, sub) below in, whose C-node holds the branch for
// toks[lev]. startGen is the root's generation when the operation started;
// every I-node it changes must belong to it.
func (t *Trie[S]) insert(in *iNode[S], toks []string, lev int, queue string, sub S, startGen *generation) status {
	for {
		m := t.gcasRead(in)
		if m.kind == kindT {
			return tombed
		}
		tok := toks[lev]
		br := m.cn.get(tok)
		if lev == len(toks)-1 {
			// The pattern ends here: add sub to this branch's set.
			var nb *branch[S]
			if br == nil {
				nb = &branch[S]{tok: tok, set: newSet(queue, sub)}
			} else {
				set, added := br.set.With(queue, sub)
				if !added {
					return unneeded
				}
				nb = &branch[S]{tok: tok, in: br.in, set: set}
			}
			if t.gcas(in, m, m.cn.with(nb)) {
				return done
			}
			return restart
		}
		if br == nil || br.in == nil {
			// Nothing below yet: build the rest of the path privately and
			// publish it with one GCAS.
			nb := &branch[S]{tok: tok, in: chain(toks[lev+1:], newSet(queue, sub), startGen)}
			if br != nil {
				nb.set = br.set
			}
			if t.gcas(in, m, m.cn.with(nb)) {
				return done
			}
			return restart
		}
		if br.in.gen != startGen {
			if !t.renew(in, m, br, startGen) {
				return restart
			}
			continue
		}
		switch s := t.insert(br.in, toks, lev+1, queue, sub, startGen); s {
		case tombed:
			t.cleanBranch(in, m, br, lev)
			return restart
		default:
			return s
		}
	}
}

// cleanBranch replaces in's C-node m with one where the dead I-node below
// br is gone: the branch keeps its set but loses the pointer, or goes
// altogether if it has no set. If that leaves in (not the root, lev > 0)
// with no branch, in is tombed in turn. Any update that meets a dead I-node
// calls it on the parent, so a remover that stalls never leaves the trie
// uncompressed for long. It reports whether the GCAS committed and whether
// it tombed in.
func (t *Trie[S]) cleanBranch(in *iNode[S], m *mainNode[S], br *branch[S], lev int) (committed, tombedIn bool) {
	var nm *mainNode[S]
	if br.set != nil {
		nm = m.cn.with(&branch[S]{tok: br.tok, set: br.set})
	} else {
		nm = m.cn.without(br.tok)
		if lev > 0 && nm.cn.empty() {
			nm = newTomb[S]()
		}
	}
	if !t.gcas(in, m, nm) {
		return false, false
	}
	return true, nm.kind == kindT
}

func newSet[S comparable](queue string, sub S) *match.Set[S] {
	set, _ := (*match.Set[S])(nil).With(queue, sub)
	return set
}
