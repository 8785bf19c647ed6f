package store

import (
	"errors"
	"fmt"
	"slices"

	"github.com/skiffmq/skiff/subject"
)

// entLocked returns the index entry of seq, s.mu.first <= seq <= s.mu.last.
func (s *Stream) entLocked(seq uint64) *entry { return s.mu.ents.at(int(seq - s.mu.first)) }

// liveLocked reports whether seq is a stored message of subject ss.
func (s *Stream) liveLocked(ss *subjectState, seq uint64) bool {
	return seq >= s.mu.first && seq <= s.mu.last && s.entLocked(seq).subj == ss
}

// removeLocked removes the live message seq. lazy asks the backend to
// record an interior removal at its next sync point (removals by limits,
// which recovery would redo anyway); Delete and Purge persist theirs first.
func (s *Stream) removeLocked(seq uint64, lazy bool) {
	e := s.entLocked(seq)
	ss := e.subj
	e.subj = nil
	if len(s.mu.ttl.never) > 0 {
		delete(s.mu.ttl.never, seq)
	}
	s.mu.msgs--
	s.mu.bytes -= uint64(e.size)
	ss.n--
	front := seq == s.mu.first
	s.be.removed(seq, lazy && !front)
	if front {
		s.advanceFirstLocked()
	}
	s.trimSubjectLocked(ss)
	if ss.n == 0 && s.mu.subjects[ss.name] == ss {
		delete(s.mu.subjects, ss.name)
		s.fc.subjectRemoved(ss)
	}
}

// advanceFirstLocked moves first past removed entries, dropping them.
func (s *Stream) advanceFirstLocked() {
	k := 0
	for k < s.mu.ents.len() && s.mu.ents.at(k).subj == nil {
		k++
	}
	s.mu.ents.trimFront(k) // an empty list holds no block
	s.mu.first += uint64(k)
	s.be.setFloor(s.mu.first)
	s.updateExpiryLocked()
}

// trimSubjectLocked drops dead sequences from both ends of ss.seqs, and
// compacts it when dead ones outnumber live ones.
func (s *Stream) trimSubjectLocked(ss *subjectState) {
	for len(ss.seqs) > 0 && !s.liveLocked(ss, ss.seqs[0]) {
		ss.seqs = ss.seqs[1:]
	}
	for len(ss.seqs) > 0 && !s.liveLocked(ss, ss.seqs[len(ss.seqs)-1]) {
		ss.seqs = ss.seqs[:len(ss.seqs)-1]
	}
	if len(ss.seqs) > 2*ss.n+16 {
		ss.seqs = slices.DeleteFunc(ss.seqs, func(q uint64) bool { return !s.liveLocked(ss, q) })
	}
	if ss.n == 0 {
		ss.seqs = nil
	}
}

// enforceSubjectLocked removes ss's oldest messages beyond MaxMsgsPerSubject.
func (s *Stream) enforceSubjectLocked(ss *subjectState) {
	limit := s.mu.opts.MaxMsgsPerSubject
	for limit > 0 && int64(ss.n) > limit {
		s.removeLocked(ss.seqs[0], true)
	}
}

// enforceTotalsLocked removes the oldest messages beyond MaxMsgs and
// MaxBytes.
func (s *Stream) enforceTotalsLocked() {
	o := &s.mu.opts
	for o.MaxMsgs > 0 && int64(s.mu.msgs) > o.MaxMsgs {
		s.removeLocked(s.mu.first, true)
	}
	for o.MaxBytes > 0 && int64(s.mu.bytes) > o.MaxBytes {
		s.removeLocked(s.mu.first, true)
	}
}

// enforceAllLocked applies every limit to the whole stream, as Open and
// UpdateConfig need.
func (s *Stream) enforceAllLocked(now int64) {
	s.expireLocked(now)
	if s.mu.opts.MaxMsgsPerSubject > 0 {
		for _, ss := range s.mu.subjects {
			s.enforceSubjectLocked(ss)
		}
	}
	s.enforceTotalsLocked()
}

// expireLocked removes the messages older than MaxAge at time now, but
// those exempt (TTLNever), on a stream without markers (where the expiry
// rounds apply MaxAge). Timestamps never decrease, so the expired
// messages are a prefix of the stream, with the exempt ones left in it.
func (s *Stream) expireLocked(now int64) {
	age := s.mu.opts.inlineAge()
	if age <= 0 {
		return
	}
	if seq := s.ageStartLocked(); seq > s.mu.last || s.entLocked(seq).ts > now-age {
		return
	}
	s.walkAgeLocked(now-age, func(seq uint64) { s.removeLocked(seq, true) })
	s.updateExpiryLocked()
}

// Delete removes one message; ErrNotFound if it is not stored. File storage
// records the delete before applying it (and, under SyncAlways, fsyncs the
// record). An error wrapping ErrSync means the delete took effect but may
// be undone by an operating system crash; any other error means nothing
// changed.
func (s *Stream) Delete(seq uint64) error { return s.removeOne(seq, true) }

// Remove removes one message the way the limits do: at once in memory,
// and on disk at the next sync point, with no write or fsync of its own,
// so that a crash before then may bring the message back. It suits
// removals that are safe to undo, such as a work-queue message once
// acknowledged (at worst it is delivered again). ErrNotFound if the
// message is not stored.
func (s *Stream) Remove(seq uint64) error { return s.removeOne(seq, false) }

// removeOne removes the live message seq: persisted first (Delete), or
// lazily at the next sync point (Remove).
func (s *Stream) removeOne(seq uint64, persist bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return ErrClosed
	}
	s.expireLocked(s.clock().UnixNano())
	if seq < s.mu.first || seq > s.mu.last || s.entLocked(seq).subj == nil {
		return fmt.Errorf("%w: sequence %d", ErrNotFound, seq)
	}
	if !persist {
		s.removeLocked(seq, true)
		return nil
	}
	n, err := s.be.persistDeletes([]uint64{seq})
	if n == 1 {
		s.removeLocked(seq, false)
	}
	return err
}

// Purge removes the messages req selects and returns how many it removed.
// As in JetStream: a request for every subject with neither Seq nor Keep
// empties the stream (LastSeq stays, FirstSeq becomes LastSeq+1); with Seq
// it removes everything below Seq, and a Seq beyond LastSeq+1 moves the
// stream on so that the next message gets Seq; Seq 1 removes nothing.
//
// File storage persists the purge before applying it: a purge from the
// front as the stream's floor in the meta file (fsynced unless SyncNever),
// one of chosen messages as delete records (fsynced under SyncAlways). An
// error wrapping ErrSync means the purge took effect but may be undone by an
// operating system crash; after another error, purged counts what was
// removed before it.
func (s *Stream) Purge(req PurgeRequest) (purged uint64, err error) {
	if req.Seq > 0 && req.Keep > 0 {
		return 0, fmt.Errorf("%w: Seq and Keep are exclusive", ErrInvalidPurge)
	}
	kind, err := classifyFilter(req.Subject)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return 0, ErrClosed
	}
	s.expireLocked(s.clock().UnixNano())
	switch {
	case req.Seq == 1:
		return 0, nil
	case kind == filterAllSubjects && req.Keep > 0:
		if s.mu.msgs <= req.Keep {
			return 0, nil
		}
		return s.purgePrefixLocked(s.keepFromLocked(req.Keep))
	case kind == filterAllSubjects && req.Seq > 0:
		return s.purgePrefixLocked(req.Seq)
	case kind == filterAllSubjects:
		return s.purgePrefixLocked(s.mu.last + 1)
	}
	seqs := s.matchingLocked(req.Subject, kind, req.Seq)
	if req.Keep > 0 {
		if uint64(len(seqs)) <= req.Keep {
			return 0, nil
		}
		seqs = seqs[:uint64(len(seqs))-req.Keep]
	}
	n, err := s.be.persistDeletes(seqs)
	for _, q := range seqs[:n] {
		s.removeLocked(q, false)
	}
	return uint64(n), err
}

// KeepBound returns the sequence below which a purge of the messages
// matching subject ("" for all) keeps the newest keep of them, as Purge
// with Keep would now; 0 if no more than keep match. A replica's leader
// turns a purge that keeps messages into this bound, which names what it
// removes wherever the log is applied.
func (s *Stream) KeepBound(subject string, keep uint64) (uint64, error) {
	kind, err := classifyFilter(subject)
	if err != nil {
		return 0, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	switch {
	case s.mu.closed:
		return 0, ErrClosed
	case keep == 0:
		return 0, fmt.Errorf("%w: Keep 0", ErrInvalidPurge)
	case kind == filterAllSubjects:
		if s.mu.msgs <= keep {
			return 0, nil
		}
		return s.keepFromLocked(keep), nil
	}
	seqs := s.matchingLocked(subject, kind, 0)
	if uint64(len(seqs)) <= keep {
		return 0, nil
	}
	return seqs[uint64(len(seqs))-keep], nil
}

// keepFromLocked returns the sequence of the keep-th newest message.
func (s *Stream) keepFromLocked(keep uint64) uint64 {
	seq := s.mu.last
	for n := uint64(0); ; seq-- {
		if s.entLocked(seq).subj != nil {
			if n++; n == keep {
				return seq
			}
		}
	}
}

// matchingLocked returns, ascending, the live sequences below bound (0: no
// bound) whose subject matches a literal or wildcard filter.
func (s *Stream) matchingLocked(filter string, kind filterKind, bound uint64) []uint64 {
	var seqs []uint64
	collect := func(ss *subjectState) {
		for _, q := range ss.seqs {
			if bound > 0 && q >= bound {
				break
			}
			if s.liveLocked(ss, q) {
				seqs = append(seqs, q)
			}
		}
	}
	if kind == filterLiteral {
		if ss := s.mu.subjects[filter]; ss != nil {
			collect(ss)
		}
		return seqs
	}
	for name, ss := range s.mu.subjects {
		if subject.Match(filter, name) {
			collect(ss)
		}
	}
	slices.Sort(seqs)
	return seqs
}

// purgePrefixLocked removes every message below newFirst, persisting the
// new floor first.
func (s *Stream) purgePrefixLocked(newFirst uint64) (uint64, error) {
	if newFirst <= s.mu.first {
		return 0, nil
	}
	if newFirst > s.mu.last+1 {
		// Past the last sequence: the staged tail, which starts at the last
		// + 1, is inside what the purge takes (stage.go).
		if err := s.unstageLocked(s.mu.last + 1); err != nil {
			return 0, err
		}
	}
	err := s.be.persistFloor(newFirst)
	if err != nil && !errors.Is(err, ErrSync) {
		return 0, err
	}
	var purged uint64
	if newFirst > s.mu.last {
		purged = s.mu.msgs
		s.mu.ents.reset()
		s.mu.msgs, s.mu.bytes = 0, 0
		s.mu.subjects = make(map[string]*subjectState)
		s.mu.ttl.never = nil
		s.fc.reset()
		s.be.dropAll()
		s.mu.first, s.mu.last = newFirst, newFirst-1
		s.be.setFloor(newFirst)
		s.updateExpiryLocked()
		return purged, err
	}
	for s.mu.msgs > 0 && s.mu.first < newFirst {
		s.removeLocked(s.mu.first, false)
		purged++
	}
	return purged, err
}
