package cstrie

import (
	"github.com/skiffmq/skiff/match"
	"github.com/skiffmq/skiff/subject"
)

// Lookup implements match.Matcher. It takes no lock and writes nothing to
// the trie: it reads each I-node it visits once (finishing a half-done
// GCAS proposal if it meets one) and treats a dead I-node as empty, which
// it is. With a reused Result it allocates nothing for subjects of up to
// 32 tokens.
func (t *Trie[S]) Lookup(subj string, r *match.Result[S]) error {
	r.Reset()
	var buf [32]string
	toks, err := subject.SplitSubject(buf[:0], subj)
	if err != nil {
		return err
	}
	t.visit(t.gcasRead(t.readRoot(false)), toks, 0, r)
	return nil
}

// visit adds the entries at and below main node m, reached by toks[:i],
// that match the whole of toks.
func (t *Trie[S]) visit(m *mainNode[S], toks []string, i int, r *match.Result[S]) {
	if m.kind != kindC {
		return
	}
	cn := &m.cn
	if i == len(toks) {
		r.Add(&cn.set)
	}
	if cn.solo != nil {
		t.step(cn.solo, toks, i, r)
		return
	}
	k := cn.kids
	if k == nil {
		return
	}
	if k.any != nil {
		t.step(k.any, toks, i, r)
	}
	if i == len(toks) {
		return
	}
	if c := k.lits.get(toks[i]); c != nil {
		t.visit(t.gcasRead(c), toks, i+1, r)
	}
	if k.one != nil {
		t.step(k.one, toks, i, r)
	}
	if k.rest != nil {
		t.step(k.rest, toks, i, r)
	}
}

// step continues the match into child c, whose token is to consume
// toks[i:] as its kind allows.
func (t *Trie[S]) step(c *iNode[S], toks []string, i int, r *match.Result[S]) {
	switch subject.KindOf(c.tok) {
	case subject.Any:
		// "#" absorbs zero or more tokens: try every split.
		mc := t.gcasRead(c)
		for j := i; j <= len(toks); j++ {
			t.visit(mc, toks, j, r)
		}
	case subject.One:
		if i < len(toks) {
			t.visit(t.gcasRead(c), toks, i+1, r)
		}
	case subject.Rest:
		// ">" absorbs toks[i:], at least one token; nothing follows it.
		if i < len(toks) {
			if mc := t.gcasRead(c); mc.kind == kindC {
				r.Add(&mc.cn.set)
			}
		}
	default:
		if i < len(toks) && toks[i] == c.tok {
			t.visit(t.gcasRead(c), toks, i+1, r)
		}
	}
}
