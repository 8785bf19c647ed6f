package cstrie

import (
	"errors"
	"sync/atomic"

	"github.com/skiffmq/skiff/match"
)

// ErrReadOnly is returned by Subscribe and Unsubscribe on a snapshot.
var ErrReadOnly = errors.New("cstrie: read-only snapshot")

// cacheLine is the padding that keeps the hot shared words of a Trie on
// cache lines of their own.
const cacheLine = 64

// Trie is the concurrent subscription trie. The zero value is not usable;
// call New.
type Trie[S comparable] struct {
	_        [cacheLine]byte
	root     atomic.Pointer[rootRef[S]] // read by every operation
	readOnly bool
	_        [cacheLine - 16]byte
	count    atomic.Int64 // written by every successful change
	_        [cacheLine - 8]byte
}

var _ match.Matcher[int] = (*Trie[int])(nil)

// New returns an empty trie.
func New[S comparable]() *Trie[S] {
	t := &Trie[S]{}
	t.root.Store(&rootRef[S]{in: newINode(new(generation), "", &mainNode[S]{kind: kindC})})
	return t
}

// status is the outcome of one attempt of an update below some I-node.
type status uint8

const (
	done     status = iota // the change was made
	unneeded               // nothing to do: present already, or absent
	restart                // a CAS lost or the root moved: start again from the root
	tombed                 // the I-node was found dead: its parent must clean up, then restart
	emptied                // the change was made and left this I-node dead
)

// Subscribe implements match.Matcher. It is lock-free.
func (t *Trie[S]) Subscribe(pattern, queue string, sub S) error {
	if t.readOnly {
		return ErrReadOnly
	}
	var buf [32]string
	toks, err := match.SplitPattern(buf[:0], pattern, queue)
	if err != nil {
		return err
	}
	for {
		root := t.readRoot(false)
		switch t.insert(root, toks, 0, queue, sub, root.gen) {
		case done:
			t.count.Add(1)
			return nil
		case unneeded:
			return nil
		}
	}
}

// Unsubscribe implements match.Matcher. It is lock-free.
func (t *Trie[S]) Unsubscribe(pattern, queue string, sub S) error {
	if t.readOnly {
		return ErrReadOnly
	}
	var buf [32]string
	toks, err := match.SplitPattern(buf[:0], pattern, queue)
	if err != nil {
		return err
	}
	for {
		root := t.readRoot(false)
		switch t.remove(root, toks, 0, queue, sub, root.gen) {
		case done, emptied:
			t.count.Add(-1)
			if t.readRoot(false).gen != root.gen {
				// A snapshot may have frozen a level this removal left
				// dead before it was pruned; prune the live copy.
				t.prune(toks)
			}
			return nil
		case unneeded:
			return match.ErrNotFound
		}
	}
}

// Count implements match.Matcher. On the live trie it is a counter kept by
// every change, exact whenever no change is in flight; on a snapshot it
// counts the snapshot's entries.
func (t *Trie[S]) Count() int {
	if t.readOnly {
		n := 0
		t.walk(func(_ string, set *match.Set[S]) { n += set.Len() })
		return n
	}
	return int(t.count.Load())
}
