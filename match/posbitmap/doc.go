// Package posbitmap is the position-optimized inverted-bitmap subscription
// index: rather than one Roaring bitmap per topic of a known topic space,
// it keeps, for every token position up to Options.MaxTokens, one bitmap
// per literal token that patterns use there, and ANDs the rows a subject
// selects.
//
// Each pattern with subscribers has a small integer id; a new pattern takes
// the lowest free one, so ids stay dense. Besides the token rows, each
// position p has two more bitmaps: "other", the patterns that accept any
// token at p ("*", or a ">" or "#" at or before p), and "null", the
// patterns that accept a subject with no token at p (one that has ended).
// With MaxTokens 2 and patterns 0 forex.*, 1 stock.nyse, 2 index and
// 3 stock.*:
//
//	position 0     0 1 2 3        position 1     0 1 2 3
//	  forex        1 0 0 0          nyse         0 1 0 0
//	  stock        0 1 0 1          other        1 0 0 1
//	  index        0 0 1 0          null         0 0 1 0
//	  other        0 0 0 0
//	  null         0 0 0 0
//
//	Lookup("stock.nyse") = (stock ∪ other₀) ∩ (nyse ∪ other₁) = {1, 3}
//	Lookup("index")      = (index ∪ other₀) ∩ null₁           = {2}
//
// A subject of more than MaxTokens tokens is ANDed with one more bitmap,
// "longer": the patterns ending in ">" or "#" that accept it.
//
// Two kinds of pattern cannot be expressed position by position: one with
// more than MaxTokens tokens, and one with a "#" that is not its last token
// (a.#.b), whose later tokens have no fixed position. They go to a
// fallback list that every lookup scans, testing each with subject.Match,
// as package naive does.
//
// Usage:
//
//	m, err := posbitmap.New[*client](posbitmap.Options{MaxTokens: 8})
//	...
//	err = m.Subscribe("stock.*", "", c)
//	var r match.Result[*client]
//	err = m.Lookup("stock.nyse", &r)
//
// # Trade-offs
//
// Memory grows with the distinct (position, token) pairs patterns use, not
// with the topics published, and no topic needs to be known in advance.
// Subscribe and Unsubscribe of a pattern's first and last subscriber touch
// one bitmap per token, plus two per position after a trailing ">" or "#".
// Lookup ANDs at most MaxTokens+1 bitmaps and stops at the first empty
// intersection, so it is slower than package bitmap's single bitmap but
// does not depend on the topic space; the fallback list costs every lookup
// O(len(list)). Rows left empty by Unsubscribe are deleted, so an emptied
// index gives its memory back. A lookup's scratch bitmap and iterator are
// pooled, but the roaring operations still allocate containers: a lookup
// that gets past the first position allocates a handful of small objects.
//
// # Concurrency
//
// A Matcher is safe for concurrent use. A sync.RWMutex guards the index:
// lookups share the read lock, each with its own scratch state;
// Subscribe and Unsubscribe take the write lock.
package posbitmap
