package raftlog

import (
	"errors"
	"fmt"
	"io"
)

// Carrying idle groups forward.
//
// GC removes segments oldest first, and only once no group has an entry in
// them. A group whose last few entries sit in an old segment and that is
// not written to again (the meta group between two changes; a stream no
// one publishes to, whose layer above keeps some entries behind its
// snapshot for followers) would keep that segment, and every one after
// it, for good: the log would grow with every other group's traffic. So
// GC first copies such a group's entries, all of them, to the end of the
// active segment. Raft's conflict rule, which replay applies (an entry
// record at (g, i) replaces g's entries from i on written earlier), makes
// the copies replace the originals while both exist, and stand alone once
// the old segments are gone; the copies are fsynced before any segment is
// removed (gc).
//
// Only a group whose entries take at most SegmentBytes/16 is carried, and
// at most SegmentBytes/4 in one GC: a group that is written to compacts
// on its own, and copying it would only double its writes.

// carry copies to the active segment the entries of every group whose
// entries start two segments or more before it and are small enough.
func (l *Log) carry() {
	a := l.active()
	if a == nil || l.degraded || len(l.segs) < 3 {
		return
	}
	limit, budget := l.opts.SegmentBytes/16, l.opts.SegmentBytes/4
	type moved struct {
		g    *Group
		locs []entryLoc
	}
	var (
		moves []moved
		buf   []byte
	)
	for _, g := range l.groups() {
		g.mu.Lock()
		st := &g.mu.st
		if st.removed || st.damaged != nil || st.failed != nil || len(st.locs) == 0 || st.locs[0].seg.num+1 >= a.num {
			g.mu.Unlock()
			continue
		}
		var n int64
		for _, loc := range st.locs {
			n += int64(loc.size)
		}
		if n > limit || int64(len(buf))+n > budget {
			g.mu.Unlock()
			continue
		}
		var locs []entryLoc
		var err error
		buf, locs, err = l.copyEntries(g, a, buf)
		g.mu.Unlock()
		if err != nil {
			l.log.Warn("raftlog: could not carry a group's entries forward; its segments stay", "group", g.id, "err", err)
			continue
		}
		moves = append(moves, moved{g, locs})
	}
	if len(moves) == 0 {
		return
	}
	if err := l.flush(a, buf, a.size, false); err != nil {
		l.log.Error("raftlog: carrying entries forward failed; their segments stay", "file", a.name, "err", err)
		return
	}
	var entries int64
	for _, m := range moves {
		m.g.mu.Lock()
		copy(m.g.mu.st.locs, m.locs) // the writer's alone to change: as copied
		m.g.mu.Unlock()
		entries += int64(len(m.locs))
	}
	l.count(func(s *Stats) {
		s.Records += entries
		s.Carried += entries
		s.Bytes += int64(len(buf))
	})
}

// copyEntries appends to buf a copy of each of g's entry records, checked
// and sealed again for the active segment a, whose end buf will be written
// at; it returns their locations there. The caller holds g's lock.
func (l *Log) copyEntries(g *Group, a *segment, buf []byte) ([]byte, []entryLoc, error) {
	st := &g.mu.st
	locs := make([]entryLoc, len(st.locs))
	start := len(buf)
	for k, loc := range st.locs {
		off := len(buf)
		buf = append(buf, make([]byte, loc.size)...)
		b := buf[off:]
		if _, err := loc.seg.f.ReadAt(b, loc.off); err != nil && !errors.Is(err, io.EOF) {
			return buf[:start], nil, fmt.Errorf("read %s offset %d: %w", loc.seg.name, loc.off, err)
		}
		i := st.last - uint64(len(st.locs)-1-k)
		r, err := decodeRecord(b, loc.seg.seed)
		if err == nil && (r.kind != kindEntry || r.group != g.id || r.index != i) {
			err = fmt.Errorf("%w: %s record of group %d index %d where entry %d of group %d was written",
				ErrCorrupt, r.kind, r.group, r.index, i, g.id)
		}
		if err != nil {
			return buf[:start], nil, fmt.Errorf("%s offset %d: %w", loc.seg.name, loc.off, err)
		}
		seal(b, a.seed)
		locs[k] = entryLoc{seg: a, off: a.size + int64(off), size: loc.size, term: loc.term}
	}
	return buf, locs, nil
}
