package store

import (
	"errors"
	"fmt"
)

// Skip moves the stream on past sequences that hold nothing: after it the
// last sequence is to, the next message goes at to+1, and the sequences
// after the old last sequence up to to are gaps (NumDeleted counts them
// while messages before them remain). A sequence at or below the last
// does nothing. ts, if later than the last timestamp, becomes it.
//
// It is how a replica catching up from a peer (a snapshot of its stream)
// takes the peer's last sequence when the peer's last messages were
// removed: what the log applies next then goes at the sequence the
// leader gave it.
//
// File storage persists it before it takes effect: an empty stream's new
// floor in the meta file, else a delete record of to in the last
// segment's deletes, which recovery reads as a last sequence of at least
// to. Both are fsynced under SyncAlways (the floor unless SyncNever). An
// error wrapping ErrSync means it took effect but may be undone by an
// operating system crash.
func (s *Stream) Skip(to uint64, ts int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return ErrClosed
	}
	return s.skipLocked(to, ts)
}

// skipLocked is Skip on an open stream. Write lock held.
func (s *Stream) skipLocked(to uint64, ts int64) error {
	switch {
	case to <= s.mu.last:
		return nil
	case to == ^uint64(0):
		return fmt.Errorf("%w: skip to sequence %d", ErrInvalidConfig, to)
	}
	// The staged tail starts at the last sequence + 1, inside what the
	// skip takes (stage.go).
	if err := s.unstageLocked(s.mu.last + 1); err != nil {
		return err
	}
	var err error
	if s.mu.msgs == 0 {
		_, err = s.purgePrefixLocked(to + 1)
	} else {
		err = s.be.persistSkip(to)
		if err == nil || errors.Is(err, ErrSync) {
			s.padLocked(to+1, ts)
			s.mu.last = to
		}
	}
	if err == nil || errors.Is(err, ErrSync) {
		s.mu.lastTS = max(s.mu.lastTS, ts)
	}
	return err
}
