package store

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// A record that fails its checksum when read (bytes flipped on disk after
// it was written and indexed) is damage, not a torn tail: the reads that
// meet it skip it, the message is removed from the stream as if deleted
// (so consumers, counts and later reads move past it), it is counted
// (Stream.CorruptRecords) and logged once. Without this a consumer that
// reached the record would retry it forever and never deliver what
// follows. A stream with Options.OnCorrupt (a replica, whose peers hold
// the record) reports the record instead, keeps it, and its reads fail
// on it rather than step over it.

// damage is what the reads of a stream found corrupt since it was opened.
type damage struct {
	n    atomic.Uint64
	mu   sync.Mutex
	seen map[uint64]struct{} // sequences logged, not yet removed
}

// CorruptRecords returns how many records the stream's reads found corrupt
// (and removed) since it was opened.
func (s *Stream) CorruptRecords() uint64 { return s.damage.n.Load() }

// noteCorrupt records that seq failed to read with err, and reports
// whether this is the first time (the caller removes it once the read lock
// is released).
func (s *Stream) noteCorrupt(seq uint64, err error) bool {
	d := &s.damage
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.seen[seq]; ok {
		return false
	}
	if d.seen == nil {
		d.seen = map[uint64]struct{}{}
	}
	d.seen[seq] = struct{}{}
	d.n.Add(1)
	if s.onCorrupt != nil {
		s.log.Error("store: corrupt record; reported, not removed", "seq", seq,
			"segment", s.segmentName(seq), "err", err)
		return true
	}
	s.log.Error("store: corrupt record skipped and removed; the message is lost", "seq", seq,
		"segment", s.segmentName(seq), "err", err)
	return true
}

// removeCorrupt removes the sequences reads found corrupt, as deletions
// (persisted with the next sync, as Remove's), or reports them to
// Options.OnCorrupt, which keeps them.
func (s *Stream) removeCorrupt(seqs []uint64) {
	if len(seqs) == 0 {
		return
	}
	if s.onCorrupt != nil {
		s.onCorrupt(seqs)
		return
	}
	for _, seq := range seqs {
		if err := s.Remove(seq); err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrClosed) {
			s.log.Warn("store: corrupt record not removed", "seq", seq, "err", err)
		}
		s.damage.mu.Lock()
		delete(s.damage.seen, seq)
		s.damage.mu.Unlock()
	}
}

// readSkipping reads the live message seq; a corrupt record is noted in
// bad and reported as skip = true, for the caller to go on past it.
func (s *Stream) readSkipping(seq uint64, bad *[]uint64) (m *Msg, skip bool, err error) {
	m, err = s.readLocked(seq)
	if err == nil || !errors.Is(err, ErrCorrupt) {
		return m, false, err
	}
	if s.noteCorrupt(seq, err) {
		*bad = append(*bad, seq)
	}
	// Reported rather than removed (Options.OnCorrupt): the read fails
	// instead of stepping over a message that is still in the stream.
	return nil, s.onCorrupt == nil, fmt.Errorf("store: sequence %d: %w", seq, err)
}

// segmentName names the file holding seq, for logs ("memory" for memory
// storage). Read lock held.
func (s *Stream) segmentName(seq uint64) string {
	if s.fb == nil {
		return "memory"
	}
	if seg := s.fb.segFor(seq); seg != nil {
		return segmentBase(seg.first) + logExt
	}
	return "?"
}
