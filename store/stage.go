package store

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/skiffmq/skiff/internal/bufpool"
)

// Staging (Options.Staging). A replica of a replicated stream takes each
// message twice: when its raft log takes the entry, and when the entry
// commits and applies. Written both times, a message's bytes go to two
// files, and the copies into the page cache are the largest item of a
// replica's CPU at 1 KiB messages. With staging, the store writes the
// message's record once, when the log takes the entry (Stage), at the end
// of the active segment but outside the index, and the log keeps only
// where it is (Place); the commit indexes it (Commit) without writing it
// again. Reads, limits, removals and State do not see a staged record.
//
// The staged records are the last records of the stream's files, after
// every committed one, with consecutive sequences from the last committed
// one + 1. Raft replaces uncommitted suffixes of its log: a Stage at a
// sequence already staged cuts the staged tail from there first, and
// Unstage cuts it without writing; the cut records are truncated from
// their files. Whatever moves the last sequence other than a commit
// (AppendAt of a message that came another way, Skip, a purge past the
// last sequence) cuts the staged tail first, where it would overlap.
//
// At Open, the records after Options.CommitThrough come back staged, for
// the replay of the log to commit or to cut: a replica passes the last
// sequence of its checkpoint, the point where its log and its store were
// fsynced together. Records between the checkpoint and a crash that were
// committed come back staged too, and the replay commits them again. The
// deletes recorded after CommitThrough are left to the replay as well.

// The directory of a stream that stages holds a marker file, written
// (and fsynced) the first time it is opened with Options.Staging, that
// holds the last sequence recovered then. A directory without it was
// written by a stream that did not stage, whose records are all
// committed: Open takes them so, whatever CommitThrough says, and the
// marker keeps them committed at the next Opens, whatever the caller's
// checkpoint says. So does a directory that lost it with everything else
// (a wiped store), whose CommitThrough describes what it no longer holds.
// Opened without Staging, a marked directory is refused: what it stages
// would be taken for committed.
const stagingMarker = "staging"

// markStaging writes the staging marker, with every record up to last
// committed.
func (fb *fileBackend) markStaging(last uint64) error {
	name := filepath.Join(fb.dir, stagingMarker)
	tmp := name + ".tmp"
	f, err := fb.fs.Create(tmp)
	if err == nil {
		_, err = f.Write(strconv.AppendUint(nil, last, 10))
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = fb.fs.Rename(tmp, name)
	}
	if err == nil {
		err = syncDir(fb.fs, fb.dir)
	}
	if err != nil {
		_ = fb.fs.Remove(tmp)
		return fmt.Errorf("store: write %s: %w", name, err)
	}
	return nil
}

// readStagingMarker returns the sequence the staging marker of dir holds.
func (fb *fileBackend) readStagingMarker() (uint64, error) {
	name := filepath.Join(fb.dir, stagingMarker)
	f, err := fb.fs.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("store: open %s: %w", name, err)
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, 32))
	if err != nil {
		return 0, fmt.Errorf("store: read %s: %w", name, err)
	}
	seq, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrCorrupt, name, err)
	}
	return seq, nil
}

// A replay commits again records committed before: after a crash, the
// records since the checkpoint; and raft may start a replay below the
// checkpoint, and serve lagging followers the entries it keeps behind it,
// which point at records (even those the replay then skips, below the
// floor). So with staging, a segment whose records are all removed is
// dropped only once the caller says no replay will need them
// (ReleaseThrough: its log compacted past them).

// Place is where a staged record is: what a log entry keeps of a message
// it no longer carries.
type Place struct {
	Seq uint64
	// TS is the record's timestamp: the message's, or the previous
	// record's where that is later.
	TS int64
	// Segment is the first sequence of the segment file (its name).
	Segment uint64
	Offset  uint32
	Size    uint32
	// CRC is the record's checksum, as in its framing.
	CRC uint32
}

// stagedRec is a staged record.
type stagedRec struct {
	seq  uint64
	ts   int64
	subj string // interned
	seg  *segment
	off  uint32
	size uint32
	crc  uint32 // the record's checksum, which AppendAt checks the message against
	key  StageKey
}

// A StageKey names the write that staged a record: for a replica of a
// replicated stream, the index and term of the raft entry whose message
// it is. Whatever one key staged at a sequence is the same message
// wherever it is read again (raft's entries of one index and term are
// the same), so AppendStaged, given the key a staged record has, commits
// it without checksumming the message a second time. Records recovered
// staged at Open have the zero key, which names nothing.
type StageKey struct {
	Index, Term uint64
}

// load reads the checksum of a record recovered staged. One of a sealed
// segment, recovered from its index, was not read at Open: it is read
// whole and checked (the last segment's records were, and checksummed).
func (r *stagedRec) load() error {
	n := 8
	if r.seg.indexed {
		n = int(r.size)
	}
	buf := bufpool.Get(n)[:n]
	defer bufpool.Put(buf)
	if _, err := r.seg.log.readAt(buf, int64(r.off)); err != nil {
		return fmt.Errorf("%w: read: %w", ErrCorrupt, err)
	}
	r.crc = binary.LittleEndian.Uint32(buf[4:])
	if !r.seg.indexed {
		return nil
	}
	rec, err := decodeRecord(buf)
	if err == nil && rec.seq != r.seq {
		err = fmt.Errorf("%w: record holds sequence %d", ErrCorrupt, rec.seq)
	}
	return err
}

// stagedTail is a stream's staged records, ascending and consecutive:
// recs[head:]. Commits take them from the front, cuts from the back.
type stagedTail struct {
	recs []stagedRec
	head int
	// n is len(), for Stream.HasStaged to read without the lock.
	n atomic.Int64
}

func (t *stagedTail) len() int { return len(t.recs) - t.head }

// first returns the first staged record, or nil.
func (t *stagedTail) first() *stagedRec {
	if t.len() == 0 {
		return nil
	}
	return &t.recs[t.head]
}

// last returns the last staged record, or nil.
func (t *stagedTail) last() *stagedRec {
	if t.len() == 0 {
		return nil
	}
	return &t.recs[len(t.recs)-1]
}

func (t *stagedTail) push(r stagedRec) {
	t.recs = append(t.recs, r)
	t.n.Add(1)
}

// pop removes and returns the first staged record. The room before head is
// taken back once it is half the slice, so that a tail that never empties
// (a busy replica's) does not grow without bound.
func (t *stagedTail) pop() stagedRec {
	r := t.recs[t.head]
	t.recs[t.head] = stagedRec{}
	t.head++
	t.n.Add(-1)
	switch {
	case t.head == len(t.recs):
		t.recs, t.head = t.recs[:0], 0
	case t.head >= 1024 && 2*t.head >= len(t.recs):
		n := copy(t.recs, t.recs[t.head:])
		clear(t.recs[n:])
		t.recs, t.head = t.recs[:n], 0
	}
	return r
}

// from returns the staged records of seq and after.
func (t *stagedTail) from(seq uint64) []stagedRec {
	f := t.first()
	switch {
	case f == nil:
		return nil
	case seq <= f.seq:
		return t.recs[t.head:]
	case seq > t.last().seq:
		return nil
	}
	return t.recs[t.head+int(seq-f.seq):]
}

// Stage writes the record of a message at seq without indexing it, and
// returns where it is. seq must follow the staged tail (its last sequence
// + 1, or the stream's last + 1 when nothing is staged), or fall inside
// it, which cuts the tail from seq first (raft replacing an uncommitted
// suffix of its log); any other sequence returns ErrNotStaged and writes
// nothing. ts becomes the previous record's timestamp where that is
// later. The record is written as Append writes one: with
// Options.WriteBuffer, buffered until Flush, which a caller that records
// the Place elsewhere calls first.
//
// key, if not zero, names the write (StageKey).
//
// Errors: ErrInvalidConfig without Options.Staging; ErrDiverged wrapping
// ErrInvalidSubject or ErrMaxMsgSize for a message no leader could have
// admitted; ErrWrite (nothing of the record remains).
func (s *Stream) Stage(key StageKey, seq uint64, ts int64, subj string, hdr, data []byte) (Place, error) {
	if err := divergedSubject(subj); err != nil {
		return Place{}, err
	}
	if n := len(subj) + len(hdr) + len(data); n > maxMsgSize {
		return Place{}, fmt.Errorf("%w: %w: %d bytes", ErrDiverged, ErrMaxMsgSize, n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.mu.closed:
		return Place{}, ErrClosed
	case !s.mu.opts.Staging:
		return Place{}, fmt.Errorf("%w: Stage without Options.Staging", ErrInvalidConfig)
	}
	fb := s.fb
	next := s.mu.last + 1
	if l := fb.stg.last(); l != nil {
		next = l.seq + 1
	}
	switch {
	case seq <= s.mu.last || seq > next:
		return Place{}, fmt.Errorf("%w: sequence %d after %d committed and %d staged", ErrNotStaged, seq, s.mu.last, fb.stg.len())
	case seq < next:
		if err := fb.unstage(seq); err != nil {
			return Place{}, err
		}
	}
	prevTS := s.mu.lastTS
	name := ""
	if l := fb.stg.last(); l != nil {
		prevTS = l.ts
		if l.subj == subj {
			name = l.subj
		}
	}
	if name == "" {
		if ss := s.mu.subjects[subj]; ss != nil {
			name = ss.name
		} else {
			name = strings.Clone(subj) // the caller's string may pin a larger buffer
		}
	}
	ts = max(ts, prevTS)
	off, crc, err := s.writeRecordLocked(seq, ts, name, hdr, data, true)
	if err != nil {
		return Place{}, err
	}
	r := fb.stg.last()
	r.crc, r.key = crc, key
	return Place{Seq: seq, TS: ts, Segment: r.seg.first, Offset: off, Size: r.size, CRC: crc}, nil
}

// commitLocked commits the first staged record, whose sequence is the
// last + 1, as AppendAt would append its message.
func (s *Stream) commitLocked(ttl time.Duration) error {
	r := s.fb.stg.first()
	if r.ts < s.mu.lastTS {
		return fmt.Errorf("%w: staged sequence %d goes back in time", ErrDiverged, r.seq)
	}
	s.beforeAppendAtLocked(r.ts)
	ss, err := s.admitAtLocked(r.ts, r.subj, int(r.size))
	if err != nil {
		return divergedLimit(err)
	}
	c := s.fb.commitStaged()
	s.indexLocked(c.seq, c.ts, ss, c.subj, int(c.size), c.off, ttl)
	s.afterAppendAtLocked(c.ts)
	return nil
}

// Unstage cuts the staged tail from seq from on: the records are removed
// from their files, as raft discards an uncommitted suffix of its log. A
// from at or below the last committed sequence cuts every staged record;
// one after the staged tail does nothing. On an error (ErrWrite) the
// records are gone all the same, and the file is cut again before the
// next write.
func (s *Stream) Unstage(from uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.mu.closed:
		return ErrClosed
	}
	return s.unstageLocked(from)
}

// unstageLocked cuts the staged tail from seq from on, if there is one.
func (s *Stream) unstageLocked(from uint64) error {
	if s.fb == nil || s.fb.stg.len() == 0 {
		return nil
	}
	return s.fb.unstage(from)
}

// SyncWritten fsyncs the records written to the stream's files since
// their last fsync, staged ones included, and the directory if a segment
// was created or removed since its last, and nothing else: no delete
// records, floor or index, which a sync round writes as well. A caller
// whose own log points at staged records (a replica's raft log,
// replica_payloads.go in package jetstream) runs it before each fsync of
// that log. It waits for a sync round running, and a round waits for it.
// A failed fsync seals the segment, as a round's does, and returns an
// error wrapping ErrSync.
func (s *Stream) SyncWritten() error {
	if s.fb == nil {
		return nil
	}
	s.gc.mu.Lock() // a round closes the files of dropped segments
	defer s.gc.mu.Unlock()
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	var err error
	var segs []*segment
	for _, seg := range s.fb.segs {
		if ferr := seg.log.flush(); ferr != nil && err == nil {
			err = fmt.Errorf("%w: %s: %w", ErrWrite, segmentBase(seg.first)+logExt, ferr)
		}
		if seg.dirty && !seg.poisoned {
			segs = append(segs, seg)
			seg.dirty = false
		}
	}
	// A segment created since the directory's last fsync could vanish in a
	// power loss, its records with it, however well fsynced.
	dir := s.fb.dirDirty
	s.fb.dirDirty = false
	s.mu.Unlock()
	if dir {
		if derr := syncDir(s.fb.fs, s.fb.dir); derr != nil {
			s.mu.Lock()
			s.fb.dirDirty = true
			s.mu.Unlock()
			if err == nil {
				err = fmt.Errorf("%w: %s: %w", ErrSync, s.fb.dir, derr)
			}
		}
	}
	var failed []*segment
	for _, seg := range segs {
		if serr := seg.log.f.Sync(); serr != nil {
			failed = append(failed, seg)
			if err == nil {
				err = fmt.Errorf("%w: %s: %w", ErrSync, segmentBase(seg.first)+logExt, serr)
			}
		}
	}
	if len(failed) > 0 {
		s.mu.Lock()
		for _, seg := range failed {
			seg.poisoned = true
			if seg == s.fb.active {
				s.fb.needRoll = true
			}
		}
		s.mu.Unlock()
	}
	return err
}

// HasStaged reports whether records are staged, without taking the
// stream's lock: for the writer of a log that must not wait on the
// stream's appends to learn that there is nothing to cut.
func (s *Stream) HasStaged() bool { return s.fb != nil && s.fb.stg.n.Load() > 0 }

// Staged returns the first and last sequences staged; first > last when
// none is.
func (s *Stream) Staged() (first, last uint64) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.fb == nil || s.fb.stg.len() == 0 {
		return s.mu.last + 1, s.mu.last
	}
	return s.fb.stg.first().seq, s.fb.stg.last().seq
}

// ReadPlace returns the message in the record at p, staged or committed,
// checked against p: its checksum, sequence and size. It returns an error
// wrapping ErrNotFound if the segment is gone, the file is shorter, or
// another good record is there, and one wrapping ErrCorrupt if the bytes
// there fail their checksum.
func (s *Stream) ReadPlace(p Place) (*Msg, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	switch {
	case s.mu.closed:
		return nil, ErrClosed
	case s.fb == nil:
		return nil, fmt.Errorf("%w: no record of sequence %d in memory storage", ErrNotFound, p.Seq)
	}
	segs := s.fb.segs
	i := sort.Search(len(segs), func(i int) bool { return segs[i].first >= p.Segment })
	if i == len(segs) || segs[i].first != p.Segment {
		return nil, fmt.Errorf("%w: segment %s of sequence %d", ErrNotFound, segmentBase(p.Segment), p.Seq)
	}
	seg := segs[i]
	if int64(p.Offset)+int64(p.Size) > seg.log.size || p.Size < recHeaderSize {
		return nil, fmt.Errorf("%w: record of sequence %d past the end of %s", ErrNotFound, p.Seq, segmentBase(p.Segment)+logExt)
	}
	buf := bufpool.Get(int(p.Size))[:p.Size]
	if c, ok := seg.cached(int64(p.Offset), int(p.Size)); ok {
		copy(buf, c)
	} else if _, err := seg.log.readAt(buf, int64(p.Offset)); err != nil {
		bufpool.Put(buf)
		return nil, fmt.Errorf("store: read sequence %d: %w", p.Seq, err)
	}
	rec, err := decodeRecord(buf)
	switch {
	case err != nil:
	case binary.LittleEndian.Uint32(buf[4:]) != p.CRC || rec.seq != p.Seq:
		// A good record, but another: the place's was cut and the bytes
		// written again.
		err = fmt.Errorf("%w: the record there holds sequence %d, checksum %08x; the place says %d, %08x",
			ErrNotFound, rec.seq, binary.LittleEndian.Uint32(buf[4:]), p.Seq, p.CRC)
	}
	if err != nil {
		bufpool.Put(buf)
		return nil, fmt.Errorf("store: place of sequence %d: %w", p.Seq, err)
	}
	m := &Msg{Seq: rec.seq, Timestamp: rec.ts, Subject: string(rec.subj)}
	if len(buf) > bufpool.MinSize {
		m.buf = buf
	}
	if len(rec.hdr) > 0 {
		m.Header = rec.hdr[:len(rec.hdr):len(rec.hdr)]
	}
	if len(rec.data) > 0 {
		m.Data = rec.data
	}
	return m, nil
}

// stagedSameLocked reports whether the first staged record, at seq, holds
// the message AppendAt was given (ts already raised to the last
// timestamp), by the key that staged it or else by its checksum: then
// AppendAt commits it rather than writing it again. A record staged for
// another message (an entry raft replaced, one of an earlier term) is
// not.
func (s *Stream) stagedSameLocked(key StageKey, seq uint64, ts int64, subj string, hdr, data []byte) bool {
	r := s.fb.stg.first()
	if r == nil || r.seq != seq || r.ts != ts || r.subj != subj || int(r.size) != recordSize(subj, hdr, data) {
		return false
	}
	if key != (StageKey{}) && r.key == key {
		return true
	}
	return r.crc == recordChecksum(seq, ts, subj, hdr, data)
}

// ReleaseThrough says that no replay will need the records up to seq
// again (a replica's raft log was compacted past them), and drops the
// segments that were kept for one.
func (s *Stream) ReleaseThrough(seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed || s.fb == nil || seq <= s.fb.released {
		return
	}
	fb := s.fb
	fb.released = seq
	for _, seg := range slices.Clone(fb.segs) {
		if seg != fb.segs[len(fb.segs)-1] && fb.droppable(seg) {
			fb.dropSegment(seg)
		}
	}
}

// droppable reports whether segment s may be removed for holding no
// message: none live, none staged, and, with staging, none a replay may
// need. (Without staging, the caller keeps the last segment, which
// carries the last sequence; with it, CommitThrough carries it as far as
// a segment is dropped.)
func (fb *fileBackend) droppable(s *segment) bool {
	if s.live > 0 || s.staged > 0 {
		return false
	}
	return !fb.staging || s.last <= fb.released
}

// stage writes a record as write does, without committing it: the
// segment counts it as staged, the stream's staged tail holds it.
func (fb *fileBackend) stage(seq uint64, ts int64, subj string, head, data []byte) (uint32, error) {
	off, s, err := fb.writeRecord(seq, ts, subj, head, data)
	if err != nil {
		return 0, err
	}
	s.staged++
	fb.stg.push(stagedRec{seq: seq, ts: ts, subj: subj, seg: s, off: off, size: uint32(len(head) + len(data))})
	return off, nil
}

// commitStaged makes the first staged record its segment's last committed
// one, and returns it.
func (fb *fileBackend) commitStaged() stagedRec {
	r := fb.stg.pop()
	s := r.seg
	s.staged--
	s.live++
	s.last = r.seq
	fb.high = max(fb.high, r.seq)
	return r
}

// unstage cuts the staged records of from and after out of their
// segments (cut).
func (fb *fileBackend) unstage(from uint64) error {
	return fb.cut(len(fb.stg.recs) - len(fb.stg.from(from)))
}

// cut cuts the staged records from recs[i] on out of their segments,
// newest first: a segment left with no record is removed, the others
// truncated. The staged tail loses them whatever happens; a truncate that
// fails leaves the file marked broken, cut again before the next write,
// and its error is returned.
func (fb *fileBackend) cut(i int) error {
	cut := fb.stg.recs[i:]
	var first error
	for i := len(cut); i > 0; {
		seg := cut[i-1].seg
		j := i - 1
		for j > 0 && cut[j-1].seg == seg {
			j--
		}
		if err := fb.cutSegment(seg, cut[j].off, i-j); err != nil && first == nil {
			first = err
		}
		i = j
	}
	clear(cut)
	fb.stg.recs = fb.stg.recs[:i]
	if i == fb.stg.head {
		fb.stg.recs, fb.stg.head = fb.stg.recs[:0], 0
	}
	fb.stg.n.Store(int64(fb.stg.len()))
	return first
}

// cutSegment removes s's last n records, staged, from offset off on.
func (fb *fileBackend) cutSegment(s *segment, off uint32, n int) error {
	if off == 0 && s.last < s.first {
		fb.dropSegment(s) // staged records only
		return nil
	}
	s.staged -= n
	if s.ents.len() >= n {
		s.ents.truncate(s.ents.len() - n)
	}
	if s.indexed {
		// Recovered with an index that held the cut records: without its
		// entries it is not written again, and recovery scans the log.
		fb.removeFile(fb.path(s.first, idxExt))
		s.indexed = false
	}
	if end := s.tailOff + int64(len(s.tail)); int64(off) < end {
		if int64(off) <= s.tailOff {
			s.tail, s.tailOff = s.tail[:0], int64(off)
		} else {
			s.tail = s.tail[:int64(off)-s.tailOff]
		}
	}
	fb.ra.forget(s) // blocks read ahead may hold the cut bytes
	err := s.log.truncate(int64(off))
	s.fileSize, s.dirty = s.log.size, true
	if err != nil {
		return fmt.Errorf("%w: cut the staged records of %s: %w", ErrWrite, segmentBase(s.first)+logExt, err)
	}
	return nil
}

// settleStaged makes the records recovered staged follow the last
// committed sequence, last, one after the other: from the first that does
// not (a segment file lost in between, or a lost end of the stream that
// took their sequences), they are cut.
//
// The records recovered from a sealed segment's index were not read at
// Open (the last segment's were, and checksummed): they are read now, and
// one that fails its checksum is reported damaged (RecoveryReport.Damaged,
// which a replica rebuilds from its group for) and cut with those after.
func (fb *fileBackend) settleStaged(last uint64, rep *RecoveryReport) {
	recs := fb.stg.recs[fb.stg.head:]
	i := 0
	for i < len(recs) && recs[i].seq == last+1+uint64(i) {
		r := &recs[i]
		if err := r.load(); err != nil {
			rep.Damaged = append(rep.Damaged, DamagedRange{File: segmentBase(r.seg.first) + logExt,
				Offset: int64(r.off), Bytes: int64(r.size), FirstLost: r.seq, Lost: 1, Err: err})
			fb.log.Error("store: a staged record fails its checksum; cut with the staged records after it",
				"file", segmentBase(r.seg.first)+logExt, "offset", r.off, "seq", r.seq, "err", err)
			break
		}
		i++
	}
	if i < len(recs) {
		first, n := recs[i].seq, len(recs)-i
		err := fb.cut(fb.stg.head + i)
		fb.log.Warn("store: staged records do not follow the last committed sequence; cut",
			"dir", fb.dir, "last", last, "first_cut", first, "records", n, "err", err)
	}
	rep.Staged = fb.stg.len()
}
