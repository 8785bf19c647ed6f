package raftlog

import (
	"errors"
	"fmt"
	"sync"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/store"
)

// Payloads kept out of the log (issue 13's design, 2.1). A replicated
// stream's replica writes each message twice: to its raft log when the
// entry is appended, and to the stream's store when it applies. A group
// with a Payloads hook has the hook store an entry's payloads when the log
// takes the entry (the stream's store stages them, written once, at the
// end of its files), and keeps in the entry's record only what the hook
// returns in their place (a head: the entry's fields and where each
// payload is). Entries read back from the files (a cache miss: a lagging
// follower, the replay after a restart) are joined with their payloads
// again by the hook, so that raft and the state machine see whole entries.
//
// The hook's payloads must be as durable as the records that point at
// them: Flush writes them, once per batch, before the batch's records are
// written. A record whose payloads cannot be read back at the next Open
// (the hook's files lost a tail to a power loss that the log's records
// survived) ends the group's log there, as a torn tail would
// (SetPayloads).

// Payloads stores what a group's entries carry outside the log.
type Payloads interface {
	// Strip is called for each entry a save writes, on the log's writer
	// goroutine with the group's lock held, before the entry's record is
	// encoded. It may store what the entry carries elsewhere and return
	// what the record keeps in its place (head, read before the next
	// call), or false to keep the entry whole.
	Strip(e *pb.Entry) (head []byte, ok bool)
	// Flush makes what Strip stored since the last Flush as durable as a
	// record the log writes without an fsync: it is called once per batch
	// that stripped an entry, before the batch is written. On error the
	// group's writes of the batch fail, and the group with them.
	Flush() error
	// Sync makes what was flushed durable: it is called before every
	// fsync of the log that may cover records pointing at it, on the
	// log's writer or its background syncer. It may run concurrently
	// with Strip and Flush.
	Sync() error
	// Join returns the data of the entry at index, of term, that Strip
	// replaced with head. An error wrapping raft.ErrCompacted says the
	// payloads are gone for good (the entry's messages were removed since
	// it applied): Entries then answers raft.ErrCompacted, and raft sends
	// a follower that needs the entry a snapshot instead.
	Join(index, term uint64, head []byte) ([]byte, error)
}

// SetPayloads gives the group a Payloads hook, before raft reads its
// entries. It checks that the payloads of every stripped entry after index
// from (the entries its state machine may have to apply again; the others
// are read only for lagging followers) can be joined: at the first that
// cannot, the group's log ends, as at a torn tail, and cut is that entry's
// index (0 if none). A commit index past the new end marks the group
// damaged (Group.Damaged), as recovery does, unless the last run may have
// lost acknowledged writes to a power loss (Report.Unclean and Rebooted,
// under SyncInterval or SyncNever): then the records were as unsynced as
// their payloads, and the commit index is brought back to the new end, as
// for a torn tail (the layer above holds such groups until they catch up
// with a leader). A nil p takes the hook away
// (its owner closed): stripped entries cannot be read until the next.
func (g *Group) SetPayloads(p Payloads, from uint64) (cut uint64, err error) {
	g.mu.Lock()
	if old := g.payloads; old != nil && old != p {
		g.log.forgetHook(old)
	}
	if p == nil {
		g.payloads = nil
		g.mu.Unlock()
		return 0, nil
	}
	if err := g.usableLocked(); err != nil {
		g.mu.Unlock()
		return 0, err
	}
	st := &g.mu.st
	g.payloads = p
	lo := max(from+1, st.first, st.last+1-uint64(len(st.locs)))
	var locs []entryLoc
	for i := lo; i <= st.last; i++ {
		k, ok := st.locIndex(i)
		if !ok {
			continue
		}
		loc := st.locs[k]
		loc.seg.acquire()
		locs = append(locs, loc)
	}
	g.mu.Unlock()

	bad := uint64(0)
	var cause error
	for k, loc := range locs {
		i := lo + uint64(k)
		if bad == 0 {
			if _, err := g.readEntry(i, loc); err != nil {
				bad, cause = i, err
			}
		}
		loc.seg.release()
	}
	if bad == 0 {
		return 0, nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if bad > st.last {
		return 0, nil // cut meanwhile
	}
	st.truncate(bad-1, g.log)
	g.log.log.Warn("raftlog: an entry's payloads cannot be read; the group's log ends before it",
		"group", g.id, "index", bad, "err", cause)
	if st.commit > st.last {
		if !g.log.mayHaveLostTail() && st.damaged == nil {
			st.damaged = fmt.Errorf("%w: group %d commit index %d past entry %d, whose payloads are lost: %w",
				ErrCorrupt, g.id, st.commit, bad, cause)
		}
		st.commit = st.last
	}
	return bad, nil
}

// mayHaveLostTail reports whether the last run may have lost writes the
// log acknowledged: it did not close, the machine restarted since, and
// the policy acknowledges before fsyncing (Report). Then the payloads and
// the records that point at them are two files' unsynced tails, which a
// power loss may cut at different points: a record kept whose payloads
// were lost is a torn tail, not damage.
func (l *Log) mayHaveLostTail() bool {
	return l.report.Unclean && l.report.Rebooted && l.opts.Durability.Sync != store.SyncAlways
}

// strip has the group's hook, if any, strip e: it returns the record's
// body data and whether it is a head.
func (e *encoder) strip(ent *pb.Entry) ([]byte, bool) {
	p := e.g.payloads
	if p == nil || len(ent.GetData()) == 0 {
		return ent.GetData(), false
	}
	head, ok := p.Strip(ent)
	if !ok {
		return ent.GetData(), false
	}
	if !e.w.stripped {
		e.w.stripped = true
		if !containsHook(e.l.hooks, p) {
			e.l.hooks = append(e.l.hooks, p)
		}
	}
	return head, true
}

func containsHook(hooks []Payloads, p Payloads) bool {
	for _, h := range hooks {
		if h == p {
			return true
		}
	}
	return false
}

// flushPayloads flushes every hook that stripped an entry of the batch q,
// and fails the writes of q whose group's hook failed: their records
// would point at payloads not written.
func (l *Log) flushPayloads(q []*write) {
	if len(l.hooks) == 0 {
		return
	}
	var failed map[Payloads]error
	for _, p := range l.hooks {
		if err := p.Flush(); err != nil {
			if failed == nil {
				failed = make(map[Payloads]error)
			}
			failed[p] = fmt.Errorf("%w: payloads: %w", ErrWrite, err)
		}
	}
	for _, p := range l.hooks {
		if _, bad := failed[p]; !bad {
			l.noteUnsynced(p)
		}
	}
	clear(l.hooks)
	l.hooks = l.hooks[:0]
	for _, w := range q {
		if !w.stripped || w.err != nil {
			continue
		}
		w.g.mu.Lock()
		if err, ok := failed[w.g.payloads]; ok {
			w.err = err
			if w.g.mu.st.failed == nil {
				w.g.mu.st.failed = err
			}
		}
		w.g.mu.Unlock()
	}
}

// join rebuilds the data of a stripped entry i of term from its head.
func (g *Group) join(i, term uint64, head []byte) ([]byte, error) {
	g.mu.Lock()
	p := g.payloads
	g.mu.Unlock()
	if p == nil {
		return nil, fmt.Errorf("%w: entry %d of group %d keeps its payloads elsewhere, and the group has no Payloads", ErrCorrupt, i, g.id)
	}
	data, err := p.Join(i, term, head)
	if errors.Is(err, raft.ErrCompacted) {
		return nil, raft.ErrCompacted // raft compares it with ==
	}
	if err != nil {
		return nil, fmt.Errorf("raftlog: payloads of entry %d of group %d: %w", i, g.id, err)
	}
	return data, nil
}

// hookSet is the Payloads hooks whose flushed payloads a fsync of the log
// may have to cover: every hook that flushed since it was set (seen), for
// the writer's own fsyncs, and those flushed since the background syncer
// last took them (unsynced, the writer's), for its.
type hookSet struct {
	mu       sync.Mutex
	seen     map[Payloads]struct{}
	unsynced []Payloads
}

// noteUnsynced records that p flushed payloads. Writer goroutine.
func (l *Log) noteUnsynced(p Payloads) {
	if !containsHook(l.hks.unsynced, p) {
		l.hks.unsynced = append(l.hks.unsynced, p)
	}
	l.hks.mu.Lock()
	if l.hks.seen == nil {
		l.hks.seen = make(map[Payloads]struct{})
	}
	l.hks.seen[p] = struct{}{}
	l.hks.mu.Unlock()
}

// takeUnsynced returns the hooks flushed since the last call, for a
// background fsync. Writer goroutine.
func (l *Log) takeUnsynced() []Payloads {
	h := l.hks.unsynced
	l.hks.unsynced = nil
	return h
}

// forgetHook drops a hook its group no longer has.
func (l *Log) forgetHook(p Payloads) {
	l.hks.mu.Lock()
	delete(l.hks.seen, p)
	l.hks.mu.Unlock()
}

// syncAllHooks syncs every hook that flushed payloads, before an fsync of
// the writer's own (a batch's, a roll's, GC's, Close's): a background
// fsync may still be syncing the hooks it took.
func (l *Log) syncAllHooks() error {
	l.hks.mu.Lock()
	hooks := make([]Payloads, 0, len(l.hks.seen))
	for p := range l.hks.seen {
		hooks = append(hooks, p)
	}
	l.hks.mu.Unlock()
	return syncHooks(hooks)
}

// syncHooks syncs hooks, and returns the first error.
func syncHooks(hooks []Payloads) error {
	var first error
	for _, p := range hooks {
		if err := p.Sync(); err != nil && first == nil {
			first = fmt.Errorf("%w: payloads: %w", ErrSync, err)
		}
	}
	return first
}
