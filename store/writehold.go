package store

import "fmt"

// Holding writes (Stream.HoldWrites) keeps a file-backed stream's files as
// they are for a while: a replica of a replicated stream fsyncs them, for
// a checkpoint, as they were at one point of its raft log, while it goes
// on applying the entries after that point (design 3.6). Held, appends
// stay in the write buffer (past Options.WriteBuffer; a segment that rolls
// meanwhile keeps its buffer), removals made lazily stay pending, and a
// sync round writes nothing new, so it fsyncs what the files held when
// the hold began. Reads see everything. Delete, Purge and Skip still write
// at once: a caller that must keep them out waits for ReleaseWrites. A
// stream that stages (Options.Staging) holds its removals, not its
// appends: Open stages the records after Options.CommitThrough, so that
// they need no freezing.

// HoldWrites writes what is buffered or pending (appends, delete records,
// the floor) to the files, then holds later writes until ReleaseWrites. It
// needs Options.WriteBuffer (ErrInvalidConfig without one); a memory
// stream has nothing to hold.
func (s *Stream) HoldWrites() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.mu.closed:
		return ErrClosed
	case s.mu.opts.WriteBuffer == 0:
		return fmt.Errorf("%w: holding writes needs a WriteBuffer", ErrInvalidConfig)
	}
	return s.be.hold()
}

// ReleaseWrites ends HoldWrites: the appends held are written (not
// fsynced), the removals at the next sync round. On error the appends
// stay buffered, to be written by the next flush.
func (s *Stream) ReleaseWrites() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return ErrClosed
	}
	return s.be.release()
}

func (m *memBackend) hold() error                       { return nil }
func (m *memBackend) release() error                    { return nil }
func (m *memBackend) writtenThrough(last uint64) uint64 { return last }

// hold writes the pending delete records, the floor and the buffered
// appends, then holds what comes after.
func (fb *fileBackend) hold() error {
	if fb.held {
		return nil
	}
	for _, s := range fb.segs {
		if len(s.pending) > 0 {
			if err := fb.writeDel(s, s.pending); err != nil {
				return err
			}
			s.pending = s.pending[:0]
		}
		if err := s.log.flush(); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrWrite, segmentBase(s.first)+logExt, err)
		}
	}
	if fb.floor > fb.savedFloor {
		if err := fb.writeMeta(fb.floor); err != nil {
			return err
		}
	}
	fb.held, fb.heldFirst = true, 0
	if fb.holdsAppends() {
		for _, s := range fb.segs {
			s.log.held = true
		}
	}
	return nil
}

// holdsAppends reports whether appends are held: while writes are, unless
// the stream stages (Options.Staging), where every record after the
// committed ones comes back staged at Open, so that the files need not
// be frozen for them.
func (fb *fileBackend) holdsAppends() bool { return fb.held && !fb.staging }

// release writes the appends held, oldest segment first.
func (fb *fileBackend) release() error {
	if !fb.held {
		return nil
	}
	fb.held, fb.heldFirst = false, 0
	var first error
	for _, s := range fb.segs {
		s.log.held = false
		if len(s.log.buf) == 0 {
			continue
		}
		// A round while held may have fsynced the file and cleared dirty:
		// what is written now needs the next.
		s.dirty = true
		if err := s.log.flush(); err != nil && first == nil {
			first = fmt.Errorf("%w: %s: %w", ErrWrite, segmentBase(s.first)+logExt, err)
		}
	}
	return first
}

// writtenThrough is the last sequence whose record is in the files: last,
// or less while appends are held.
func (fb *fileBackend) writtenThrough(last uint64) uint64 {
	if fb.held && fb.heldFirst > 0 {
		return min(last, fb.heldFirst-1)
	}
	return last
}
