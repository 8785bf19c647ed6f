package cstrie

import (
	"github.com/skiffmq/skiff/match"
	"github.com/skiffmq/skiff/subject"
)

// Lookup implements match.Matcher. It takes no lock and writes nothing to
// the trie: it reads each I-node once (finishing a half-done GCAS proposal
// if it meets one) and treats a dead I-node as empty, which it is. With a
// reused Result it allocates nothing for subjects of up to 32 tokens.
func (t *Trie[S]) Lookup(subj string, r *match.Result[S]) error {
	r.Reset()
	var buf [32]string
	toks, err := subject.SplitSubject(buf[:0], subj)
	if err != nil {
		return err
	}
	t.lookup(t.readRoot(false), toks, 0, r)
	return nil
}

// lookup adds the entries below in that match toks[i:].
func (t *Trie[S]) lookup(in *iNode[S], toks []string, i int, r *match.Result[S]) {
	m := t.gcasRead(in)
	if m.kind != kindC {
		return
	}
	cn := &m.cn
	if b := cn.any; b != nil {
		// "#" absorbs zero or more tokens: try every split.
		for j := i; j <= len(toks); j++ {
			t.follow(b, toks, j, r)
		}
	}
	if i == len(toks) {
		return
	}
	if b := cn.lits.get(toks[i]); b != nil {
		t.follow(b, toks, i+1, r)
	}
	if b := cn.one; b != nil {
		t.follow(b, toks, i+1, r)
	}
	if b := cn.rest; b != nil {
		r.Add(b.set) // ">" absorbs toks[i:], at least one token
	}
}

// follow continues the match after branch b has consumed toks[:j].
func (t *Trie[S]) follow(b *branch[S], toks []string, j int, r *match.Result[S]) {
	if j == len(toks) {
		r.Add(b.set)
	}
	if b.in != nil {
		t.lookup(b.in, toks, j, r)
	}
}
