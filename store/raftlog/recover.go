package raftlog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// recover replays every segment into the groups' state; see Recovery in
// doc.go.
func (l *Log) recover() error {
	names, err := l.opts.FS.ReadDir(l.opts.Dir)
	if err != nil {
		return fmt.Errorf("raftlog: read %s: %w", l.opts.Dir, err)
	}
	var nums []uint64
	for _, n := range names {
		if num, ok := parseSegmentName(n); ok {
			nums = append(nums, num)
		} else if strings.HasSuffix(n, freeExt) {
			l.free = append(l.free, n) // names sort as their numbers: oldest first
		} else if strings.HasSuffix(n, segExt) {
			l.log.Warn("raftlog: ignoring a file that is not a segment", "file", n)
		}
	}
	for len(l.free) > max(l.opts.RecycleSegments, 0) {
		if err := l.opts.FS.Remove(filepath.Join(l.opts.Dir, l.free[0])); err != nil {
			return fmt.Errorf("raftlog: remove %s: %w", l.free[0], err)
		}
		l.free = l.free[1:]
	}
	slices.Sort(nums)
	// GC removes segments oldest first: any before a gap in the numbering
	// are left over from a removal the crash did not let finish, and the
	// checkpoint after the gap covers them.
	for i := len(nums) - 1; i > 0; i-- {
		if nums[i-1]+1 != nums[i] {
			for _, num := range nums[:i] {
				l.log.Warn("raftlog: removing a segment left over before a gap", "file", segmentName(num))
				if err := l.opts.FS.Remove(filepath.Join(l.opts.Dir, segmentName(num))); err != nil {
					return fmt.Errorf("raftlog: remove %s: %w", segmentName(num), err)
				}
			}
			l.report.Leftovers = i
			nums = nums[i:]
			break
		}
	}
	for i, num := range nums {
		s := &segment{num: num, name: segmentName(num)}
		f, err := l.opts.FS.OpenFile(l.segPath(s), os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("raftlog: open %s: %w", s.name, err)
		}
		s.f = f
		l.segs = append(l.segs, s)
		if err := l.replaySegment(s, i == len(nums)-1); err != nil {
			return err
		}
	}
	if len(l.segs) > 0 {
		// After a process crash under SyncInterval or SyncNever the last
		// segment's tail may be in the page cache only. The new segment's
		// checkpoint will speak for what it holds, so it is fsynced
		// before that checkpoint is written (roll).
		l.segs[len(l.segs)-1].dirty = true
	}
	l.report.Segments = len(nums)
	l.finishRecovery()
	var total int64
	for _, s := range l.segs {
		total += s.size
	}
	l.mu.stats.Bytes, l.mu.stats.Segments = total, len(l.segs)
	return nil
}

// replaySegment replays s's records. A bad record with good ones after it
// is damage: the scan goes on after it. What is bad at the end of the
// last segment is a torn write, and cut off; at the end of an older one it
// is damage.
func (l *Log) replaySegment(s *segment, last bool) error {
	size, err := s.f.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("raftlog: size of %s: %w", s.name, err)
	}
	s.seed = detectSeed(s.f, s.num, size)
	off := int64(0)
	for {
		var bad error
		off, bad = l.scan(s, off, size)
		if bad == nil {
			break
		}
		if !errors.Is(bad, ErrCorrupt) {
			return fmt.Errorf("raftlog: read %s: %w", s.name, bad)
		}
		next, ok, err := findRecord(s.f, s.seed, off, size)
		if err != nil {
			return fmt.Errorf("raftlog: read %s: %w", s.name, err)
		}
		if !ok && last {
			l.log.Warn("raftlog: truncating the torn tail of the last segment",
				"file", s.name, "offset", off, "bytes", size-off, "err", bad)
			if err := s.f.Truncate(off); err != nil {
				return fmt.Errorf("raftlog: truncate %s: %w", s.name, err)
			}
			if err := s.f.Sync(); err != nil {
				return fmt.Errorf("raftlog: sync %s: %w", s.name, err)
			}
			l.report.TruncatedBytes += size - off
			size = off
			break
		}
		if !ok {
			next = size
		}
		l.damage(s, off, next, bad)
		off = next
	}
	s.size = size
	return nil
}

// scan replays the records of s from off until the end (size) or the first
// bad record, and returns where it stopped and why.
func (l *Log) scan(s *segment, off, size int64) (int64, error) {
	r := bufio.NewReaderSize(io.NewSectionReader(s.f, off, size-off), 256<<10)
	var head [recHeaderSize]byte
	var buf []byte
	for off < size {
		if size-off < recHeaderSize {
			return off, fmt.Errorf("%w: %d bytes at offset %d", errTorn, size-off, off)
		}
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return off, err
		}
		// The length is trusted, to allocate and read, only once the
		// header's own checksum has vouched for it.
		h, ok := decodeHeader(head[:], s.seed)
		if !ok {
			return off, fmt.Errorf("%w: bad record header at offset %d", ErrCorrupt, off)
		}
		n := h.size
		if int64(n) > size-off {
			return off, fmt.Errorf("%w: record of %d bytes at offset %d, %d left", errTorn, n, off, size-off)
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		b := buf[:n]
		copy(b, head[:])
		if _, err := io.ReadFull(r, b[recHeaderSize:]); err != nil {
			return off, err
		}
		rec, err := decodeRecord(b, s.seed)
		if err != nil {
			return off, err
		}
		if off == 0 && rec.kind != kindCheckpoint {
			return off, fmt.Errorf("%w: segment starts with a %s record", ErrCorrupt, rec.kind)
		}
		l.replay(s, off, rec)
		off += int64(n)
	}
	return off, nil
}

// findRecord looks for the first good record (sealed with seed) after the
// bad one at off, reading the file a window at a time so that memory
// stays bounded whatever the size of the damage.
func findRecord(f io.ReaderAt, seed uint32, off, size int64) (int64, bool, error) {
	const window = 1 << 20
	buf := make([]byte, min(window+recHeaderSize, size-off))
	var rec []byte
	for base := off + 1; base+recHeaderSize <= size; base += window {
		b := buf[:min(int64(len(buf)), size-base)]
		if _, err := f.ReadAt(b, base); err != nil && !errors.Is(err, io.EOF) {
			return 0, false, err
		}
		for p := 0; p < window && p+recHeaderSize <= len(b); p++ {
			h, ok := decodeHeader(b[p:], seed)
			at := base + int64(p)
			if !ok || int64(h.size) > size-at {
				continue
			}
			if cap(rec) < h.size {
				rec = make([]byte, h.size)
			}
			r := rec[:h.size]
			if _, err := f.ReadAt(r, at); err != nil && !errors.Is(err, io.EOF) {
				return 0, false, err
			}
			if _, err := decodeRecord(r, seed); err == nil {
				return at, true, nil
			}
		}
	}
	return 0, false, nil
}

// attribute walks the bad span [off, end) of s record by record, trusting
// each record's framing only if its header checksum matches, and returns
// the groups whose records the span held. ok is false if some of the span
// cannot be attributed: a header gone bad, or a checkpoint, which speaks
// for every group.
func attribute(f io.ReaderAt, seed uint32, off, end int64) (groups []uint64, ok bool) {
	var head [recHeaderSize]byte
	for off < end {
		if end-off < recHeaderSize {
			return groups, false
		}
		if _, err := f.ReadAt(head[:], off); err != nil {
			return groups, false
		}
		h, good := decodeHeader(head[:], seed)
		if !good || int64(h.size) > end-off || h.kind == kindCheckpoint || h.group == 0 {
			return groups, false
		}
		if !slices.Contains(groups, h.group) {
			groups = append(groups, h.group)
		}
		off += int64(h.size)
	}
	return groups, true
}

// damage records a span of bad records. If every record in it can be
// attributed to its group, those groups alone are marked damaged.
// Otherwise every group the log knows at this point is, and so is every
// group first seen later in the same segment: the records lost may have
// been any group's. (A group first seen in a later segment's checkpoint
// gets the state it had when that segment began, which is intact; its
// entries, if lost, show as a hole.)
func (l *Log) damage(s *segment, off, end int64, cause error) {
	groups, ok := attribute(s.f, s.seed, off, end)
	d := Damage{Segment: s.name, Offset: off, Bytes: end - off, Err: cause}
	mark := func(g *Group) {
		if g.mu.st.damaged == nil {
			g.mu.st.damaged = fmt.Errorf("%w: %s offset %d: %w", ErrCorrupt, s.name, off, cause)
		}
	}
	if ok {
		slices.Sort(groups)
		d.Groups = groups
		for _, id := range groups {
			mark(l.groupLocked(id))
		}
		l.log.Error("raftlog: damaged records; their groups are marked damaged",
			"file", s.name, "offset", off, "bytes", end-off, "groups", groups, "err", cause)
	} else {
		for _, g := range l.mu.groups {
			mark(g)
		}
		l.damagedSeg = s
		l.log.Error("raftlog: damaged records of unknown groups; every group written before them is marked damaged",
			"file", s.name, "offset", off, "bytes", end-off, "err", cause)
	}
	l.report.Damage = append(l.report.Damage, d)
}

// replayGroup returns the group a record names, creating it if it is new;
// a group first seen after damage that could not be attributed, in the
// same segment, is marked damaged.
func (l *Log) replayGroup(s *segment, id uint64) *Group {
	if g, ok := l.mu.groups[id]; ok {
		return g
	}
	g := l.groupLocked(id)
	if l.damagedSeg == s {
		g.mu.st.damaged = fmt.Errorf("%w: group %d first seen after damage in %s", ErrCorrupt, id, s.name)
	}
	return g
}

// replay applies one record at s, off to the groups' state.
func (l *Log) replay(s *segment, off int64, r record) {
	l.report.Records++
	if r.kind == kindCheckpoint {
		imgs, _ := decodeCheckpoint(r.body) // decodeRecord checked it
		for i := range imgs {
			if _, known := l.mu.groups[imgs[i].group]; !known {
				g := l.groupLocked(imgs[i].group)
				g.mu.st = fromImage(&imgs[i])
			}
		}
		return
	}
	g := l.replayGroup(s, r.group)
	st := &g.mu.st
	switch r.kind {
	case kindEntry:
		switch {
		case r.index < st.first:
		case r.index > st.last+1:
			if st.damaged == nil {
				st.damaged = fmt.Errorf("%w: %s offset %d: entry %d after the last index %d of group %d",
					ErrCorrupt, s.name, off, r.index, st.last, g.id)
			}
		default:
			st.appendEntry(r.index, entryLoc{seg: s, off: off, size: uint32(len(r.body) + recHeaderSize), term: r.term}, nil, l)
		}
	case kindHardState:
		st.hasHS, st.term, st.vote, st.commit = true, r.term, binary.LittleEndian.Uint64(r.body), r.index
	case kindSnapshot:
		n, k := binary.Uvarint(r.body)
		st.setSnapshot(r.index, r.term, r.body[k:k+int(n)], r.body[k+int(n):])
	case kindCompact:
		reset := r.body[0]&compactReset != 0
		st.compact(r.index, r.term, reset, l)
		if reset && r.index == 0 {
			st.damaged = nil // Reset: the group starts over
		}
	case kindRemove:
		delete(l.mu.groups, g.id)
	}
}

// finishRecovery checks every group once all records are replayed: a
// group whose entries from its first on are not all known lost a segment;
// a damaged group keeps the entries it has without a hole, and its commit
// index no further than them. A commit index below the first index is
// raised to it: compacted entries were applied, so committed, though
// under AsyncStorageWrites the HardState saying so may not have been
// written yet (raft refuses a commit index below its first index).
func (l *Log) finishRecovery() {
	for _, g := range l.mu.groups {
		st := &g.mu.st
		if from := st.last + 1 - uint64(len(st.locs)); from > st.first {
			if st.damaged == nil {
				st.damaged = fmt.Errorf("%w: entries %d to %d of group %d are missing", ErrCorrupt, st.first, from-1, g.id)
			}
			st.locs, st.last = nil, st.first-1
		}
		if st.commit > st.last {
			if st.damaged == nil {
				st.damaged = fmt.Errorf("%w: group %d commit index %d past its last index %d", ErrCorrupt, g.id, st.commit, st.last)
			}
			st.commit = st.last
		}
		st.commit = max(st.commit, st.first-1)
		if st.damaged != nil {
			l.report.DamagedGroups = append(l.report.DamagedGroups, g.id)
		}
	}
	slices.Sort(l.report.DamagedGroups)
}
