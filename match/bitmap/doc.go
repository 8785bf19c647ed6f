// Package bitmap is the inverted-bitmap subscription index: every topic of
// a topic space has a Roaring bitmap of the patterns that match it, so a
// lookup is one map access and a walk over the bitmap's set bits.
//
// Each pattern with subscribers has a small integer id; a new pattern takes
// the lowest free one, so ids stay dense. With patterns 0 forex.*,
// 1 stock.nyse, 2 *.* and 3 stock.*, the index over six topics is
//
//	topic           0 1 2 3
//	forex.usd       1 0 1 0
//	forex.gbp       1 0 1 0
//	forex.jpy       1 0 1 0
//	forex.eur       1 0 1 0
//	stock.nasdaq    0 0 1 1
//	stock.nyse      0 1 1 1
//
// and Lookup("stock.nyse") adds the subscribers of patterns 1, 2 and 3.
//
// Usage:
//
//	m, err := bitmap.New[*client](bitmap.Options{Topics: []string{"forex.usd", "stock.nyse"}})
//	...
//	err = m.Subscribe("stock.*", "", c)
//	var r match.Result[*client]
//	err = m.Lookup("stock.nyse", &r)
//
// # Trade-offs
//
// The engine moves work from lookups to writes. A Lookup in the space is
// O(matching patterns) whatever the number of patterns, and with a reused
// Result it allocates nothing. Subscribing a new
// wildcard pattern tests it against every topic, O(topics), and
// unsubscribing its last subscriber clears its bit from every topic,
// O(topics); a literal pattern touches only its own topic. Subscribing to
// a pattern that already has subscribers touches no bitmap.
//
// # The topic space
//
// The space starts as Options.Topics and grows. Subscribing a literal
// pattern outside it, or looking up a subject outside it, adds that topic
// and re-indexes it against every pattern, O(patterns), with the write lock
// held: the first lookup of each new subject is slow and stalls every other
// caller. The space never shrinks, so Options.MaxTopics bounds it. Once the
// space holds MaxTopics topics, a lookup outside it tests every pattern, as
// package naive does, and indexes nothing; a literal pattern outside a full
// space is put in no bitmap and is found by that scan.
//
// The engine therefore suits a small topic space known in advance and
// traffic dominated by lookups. For an open-ended space, see package
// posbitmap or the trie engines.
//
// # Concurrency
//
// A Matcher is safe for concurrent use. A sync.RWMutex guards the index:
// lookups of subjects in the space, and lookups that scan because the
// space is full, share the read lock; Subscribe, Unsubscribe and a lookup
// that adds a topic take the write lock.
package bitmap
