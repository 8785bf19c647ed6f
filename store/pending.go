package store

// NumPending returns how many stored messages at or after sequence from
// match filter (a pattern with *, > and # wildcards; "" for every subject),
// as a consumer's num_pending counts them. An invalid filter counts
// nothing. It costs the shorter of the two sides of from for every
// subject, and the matching subjects' lists otherwise.
func (s *Stream) NumPending(from uint64, filter string) uint64 {
	kind, err := classifyFilter(filter)
	if err != nil {
		return 0
	}
	now := s.expireIfDue()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed {
		return 0
	}
	from = max(from, s.firstUnexpiredLocked(s.cutoffLocked(now)), s.mu.first)
	if from > s.mu.last {
		return 0
	}
	switch kind {
	case filterAllSubjects:
		// Messages that expired but are not yet removed are below from:
		// count the live entries on the shorter side.
		lo, hi := from-s.mu.first, s.mu.last-s.mu.first+1
		if hi-lo <= lo {
			return s.liveBetweenLocked(lo, hi)
		}
		below := s.liveBetweenLocked(0, lo)
		return s.mu.msgs - min(below, s.mu.msgs)
	case filterLiteral:
		if ss := s.mu.subjects[filter]; ss != nil {
			return s.subjectPendingLocked(ss, from)
		}
		return 0
	}
	var n uint64
	for _, ss := range s.fc.get(filter, s.mu.subjects) {
		if ss.n > 0 {
			n += s.subjectPendingLocked(ss, from)
		}
	}
	return n
}

// liveBetweenLocked counts live entries with indexes in [lo, hi).
func (s *Stream) liveBetweenLocked(lo, hi uint64) uint64 {
	var n uint64
	for i := lo; i < hi; i++ {
		if s.mu.ents.at(int(i)).subj != nil {
			n++
		}
	}
	return n
}

// subjectPendingLocked counts ss's live messages at or after from.
func (s *Stream) subjectPendingLocked(ss *subjectState, from uint64) uint64 {
	i := ss.firstAtOrAfter(from)
	if i == 0 {
		return uint64(ss.n)
	}
	var n uint64
	for _, seq := range ss.seqs[i:] {
		if s.liveLocked(ss, seq) {
			n++
		}
	}
	return n
}
