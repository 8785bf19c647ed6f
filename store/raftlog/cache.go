package raftlog

import pb "go.etcd.io/raft/v3/raftpb"

// The entry cache keeps the entries each group most recently appended, as
// raft gave them, so that a leader sends its followers new entries without
// reading them back from the segments. A group's cache is a suffix of its
// log with no hole, at most Options.CacheBytes; all groups' together are
// at most Options.MaxCacheBytes, evicting from the group that appended
// least recently first (LRU). Only the writer goroutine adds to or evicts
// from a cache, under the group's lock; raft's Entries reads it under the
// same lock.

// entrySize is what an entry costs the cache: its data and the Entry.
func entrySize(e *pb.Entry) int64 { return int64(len(e.Data)) + 64 }

// cacheEntry caches e, just appended at the end of the log, and keeps the
// group's cache within Options.CacheBytes. The caller holds the group's
// lock; it calls Log.touch and Log.trimCache afterwards.
func (st *groupState) cacheEntry(e *pb.Entry, l *Log) {
	st.cache = append(st.cache, e)
	n := entrySize(e)
	st.cacheBytes += n
	l.cacheBytes.Add(n)
	drop := 0
	for c := st.cacheBytes; drop < len(st.cache) && c > l.opts.CacheBytes; drop++ {
		c -= entrySize(st.cache[drop])
	}
	st.dropCache(drop, l)
}

// dropCache drops the first n cached entries.
func (st *groupState) dropCache(n int, l *Log) {
	if n == 0 {
		return
	}
	for _, e := range st.cache[:n] {
		st.cacheBytes -= entrySize(e)
		l.cacheBytes.Add(-entrySize(e))
	}
	clear(st.cache[:n])
	st.cache = st.cache[n:]
	if len(st.cache) == 0 {
		st.cache = nil
	}
}

// touch moves g to the most recently used end of the LRU list. Writer
// goroutine only.
func (l *Log) touch(g *Group) {
	if g.lru.in {
		if l.lru.tail == g {
			return
		}
		l.unlink(g)
	}
	g.lru.prev, g.lru.next, g.lru.in = l.lru.tail, nil, true
	if l.lru.tail != nil {
		l.lru.tail.lru.next = g
	} else {
		l.lru.head = g
	}
	l.lru.tail = g
}

func (l *Log) unlink(g *Group) {
	if g.lru.prev != nil {
		g.lru.prev.lru.next = g.lru.next
	} else {
		l.lru.head = g.lru.next
	}
	if g.lru.next != nil {
		g.lru.next.lru.prev = g.lru.prev
	} else {
		l.lru.tail = g.lru.prev
	}
	g.lru.prev, g.lru.next, g.lru.in = nil, nil, false
}

// trimCache evicts the oldest entries of the least recently appended
// groups until all caches together are within Options.MaxCacheBytes.
// Writer goroutine only; the caller holds no group's lock.
func (l *Log) trimCache() {
	for l.cacheBytes.Load() > l.opts.MaxCacheBytes && l.lru.head != nil {
		g := l.lru.head
		g.mu.Lock()
		st := &g.mu.st
		drop := 0
		for over := l.cacheBytes.Load() - l.opts.MaxCacheBytes; drop < len(st.cache) && over > 0; drop++ {
			over -= entrySize(st.cache[drop])
		}
		st.dropCache(drop, l)
		empty := len(st.cache) == 0
		g.mu.Unlock()
		if empty {
			l.unlink(g)
		}
	}
}
