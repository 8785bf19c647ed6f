// Package match defines the subscription index that routes every message in
// Skiff: a Matcher holds (pattern, queue group, subscriber) entries and
// answers "who wants this subject?".
//
// Five engines implement it, each in its own package, so their trade-offs
// can be measured side by side (see docs/benchmarks/matching.md):
//
//	match/naive      map of pattern -> subscribers; lookup scans every pattern
//	match/bitmap     inverted Roaring bitmap per topic of a known topic space
//	match/posbitmap  one bitmap set per token position (position-optimized)
//	match/trie       a trie behind a sync.RWMutex, backtracking for wildcards
//	match/cstrie     the lock-free concurrent subscription trie (the broker's)
//
// Patterns and subjects follow package subject: "*" one token, ">" one or
// more trailing tokens, "#" zero or more tokens anywhere.
//
// # Semantics shared by every engine
//
// A Matcher is a set of entries. An entry is a (canonical pattern, queue,
// subscriber) triple; queue "" means a plain subscription. Subscribing an
// entry that is present is a no-op, and one Unsubscribe removes it. Patterns
// are stored in canonical form (runs of "#" collapsed, see
// subject.Canonical), so "a.#.#" and "a.#" name the same entry.
//
// Lookup(subject) fills a Result with every subscriber that has a plain
// entry matching the subject, each once, and for every queue group with a
// matching entry, the group's matching members, each once. A broker
// delivers to all of Result.Plain and to one member of each Result.Groups.
//
// A Result is reused across lookups by its owner; with a reused Result,
// lookups in the cstrie and trie engines allocate nothing.
//
// # Concurrency
//
// Every Matcher is safe for concurrent use. Lookup sees every entry whose
// Subscribe completed before the Lookup began and whose Unsubscribe had not
// begun before the Lookup ended. Snapshot returns the exact set of entries
// at one instant between its call and its return.
//
// Inside the engines that lock, a method whose caller must hold the
// Matcher's lock ends in Locked, and the fields the lock guards are
// grouped with it as mu struct { sync.RWMutex; ... }. The types inside
// that group (trie nodes, posbitmap's index, idtable.Table) are not safe
// for concurrent use and carry no suffix: their owner's lock covers every
// method.
package match
