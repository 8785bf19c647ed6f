package store

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/skiffmq/skiff/internal/bufpool"
	"github.com/skiffmq/skiff/subject"
)

// Reads take the read lock and run in parallel with each other. Each first
// removes messages whose MaxAge has passed (taking the write lock briefly,
// only when the first message is due), and under the read lock treats any
// message that expired since as absent, so no read returns an expired
// message. That is MaxAge on a stream without markers; TTLs, and MaxAge
// with markers, are the expiry rounds' (expiry.go), and a message is
// there until its round removes it.

// cutoffLocked returns the newest expired timestamp at time now (0: no
// clock reading, so nothing expired), or math.MinInt64. A stream holding
// messages exempt from MaxAge has none: the exempt ones may sit among the
// expired, and the expiry at the start of the read took those.
func (s *Stream) cutoffLocked(now int64) int64 {
	if age := s.mu.opts.inlineAge(); age > 0 && now != 0 && len(s.mu.ttl.never) == 0 {
		return now - age
	}
	return math.MinInt64
}

// firstUnexpiredLocked returns the first sequence whose timestamp is after
// cutoff.
func (s *Stream) firstUnexpiredLocked(cutoff int64) uint64 {
	ents := &s.mu.ents
	if ents.len() == 0 || ents.at(0).ts > cutoff {
		return s.mu.first
	}
	return s.mu.first + uint64(sort.Search(ents.len(), func(i int) bool { return ents.at(i).ts > cutoff }))
}

// Get returns the message at seq, or ErrNotFound if it was never stored or
// has been deleted, purged or expired. A record that fails its checksum is
// not returned: the error wraps ErrCorrupt.
func (s *Stream) Get(seq uint64) (*Msg, error) {
	var bad []uint64
	defer func() { s.removeCorrupt(bad) }() // after the read lock
	now := s.expireIfDue()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed {
		return nil, ErrClosed
	}
	if seq < s.firstUnexpiredLocked(s.cutoffLocked(now)) || seq > s.mu.last || s.entLocked(seq).subj == nil {
		return nil, fmt.Errorf("%w: sequence %d", ErrNotFound, seq)
	}
	m, _, err := s.readSkipping(seq, &bad)
	return m, err
}

// Has reports whether seq is stored (and not expired), from the index
// alone: no read.
func (s *Stream) Has(seq uint64) bool {
	now := s.expireIfDue()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed || seq < s.firstUnexpiredLocked(s.cutoffLocked(now)) || seq > s.mu.last {
		return false
	}
	return s.entLocked(seq).subj != nil
}

// readLocked reads and decodes the live message seq.
func (s *Stream) readLocked(seq uint64) (*Msg, error) {
	e := s.entLocked(seq)
	buf, err := s.be.read(seq, e)
	if err != nil {
		return nil, err
	}
	rec, err := decodeRecord(buf)
	if err == nil && rec.seq != seq {
		err = fmt.Errorf("%w: record holds sequence %d", ErrCorrupt, rec.seq)
	}
	if err != nil {
		return nil, fmt.Errorf("store: sequence %d: %w", seq, err)
	}
	m := &Msg{Seq: seq, Timestamp: rec.ts, Subject: e.subj.name}
	if len(buf) > bufpool.MinSize {
		m.buf = buf // pooled: Release gives it back
	}
	if len(rec.hdr) > 0 {
		m.Header = rec.hdr[:len(rec.hdr):len(rec.hdr)]
	}
	if len(rec.data) > 0 {
		m.Data = rec.data
	}
	return m, nil
}

// Next returns the first message with a sequence at or after from whose
// subject matches filter (a pattern with *, > and # wildcards; "" matches
// every subject), or ErrNotFound if there is none yet. A literal filter is
// answered from the subject's own sequence list; a wildcard filter from
// the lists of the subjects it matches (cached per filter), after a short
// linear probe when it matches many subjects. No filter scans records it
// cannot return, beyond that probe and removed sequences.
func (s *Stream) Next(from uint64, filter string) (*Msg, error) {
	kind, err := classifyFilter(filter)
	if err != nil {
		return nil, err
	}
	var bad []uint64
	defer func() { s.removeCorrupt(bad) }() // after the read lock
	now := s.expireIfDue()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed {
		return nil, ErrClosed
	}
	from = max(from, s.firstUnexpiredLocked(s.cutoffLocked(now)))
	for {
		seq, ok := s.nextLocked(from, filter, kind)
		if !ok {
			return nil, fmt.Errorf("%w: no message from sequence %d on %q", ErrNotFound, from, filter)
		}
		m, skip, err := s.readSkipping(seq, &bad)
		if !skip {
			return m, err
		}
		from = seq + 1 // damage: go on past it
	}
}

// nextLocked finds the first live sequence >= from (from >= first)
// matching a classified filter.
func (s *Stream) nextLocked(from uint64, filter string, kind filterKind) (uint64, bool) {
	if from > s.mu.last {
		return 0, false
	}
	switch kind {
	case filterAllSubjects:
		for seq := from; seq <= s.mu.last; seq++ {
			if s.entLocked(seq).subj != nil {
				return seq, true
			}
		}
		return 0, false
	case filterLiteral:
		ss := s.mu.subjects[filter]
		if ss == nil {
			return 0, false
		}
		return s.nextInSubjectLocked(ss, from)
	}
	subs := s.fc.get(filter, s.mu.subjects)
	if len(subs) > 16 {
		// Many subjects match: a match is probably close by, and a short
		// scan is cheaper than a binary search per subject.
		end := min(s.mu.last, from+uint64(4*len(subs)))
		for seq := from; seq <= end; seq++ {
			if ss := s.entLocked(seq).subj; ss != nil && subject.Match(filter, ss.name) {
				return seq, true
			}
		}
		if from = end + 1; from > s.mu.last {
			return 0, false
		}
	}
	var best uint64
	for _, ss := range subs {
		if ss.n == 0 {
			continue
		}
		if seq, ok := s.nextInSubjectLocked(ss, from); ok && (best == 0 || seq < best) {
			best = seq
		}
	}
	return best, best != 0
}

// nextInSubjectLocked finds ss's first live sequence >= from.
func (s *Stream) nextInSubjectLocked(ss *subjectState, from uint64) (uint64, bool) {
	for i := ss.firstAtOrAfter(from); i < len(ss.seqs); i++ {
		if s.liveLocked(ss, ss.seqs[i]) {
			return ss.seqs[i], true
		}
	}
	return 0, false
}

// LastBySubject returns the newest message on a subject, or ErrNotFound.
// The subject is normally literal; a wildcard pattern returns the newest
// message on any matching subject.
func (s *Stream) LastBySubject(subj string) (*Msg, error) {
	// A corrupt newest record is removed (damage.go) and the one before
	// it is the newest: look again, a bounded number of times.
	for range 16 {
		var bad []uint64
		m, err := s.lastBySubject(subj, &bad)
		s.removeCorrupt(bad)
		if len(bad) == 0 || err == nil {
			return m, err
		}
	}
	return nil, fmt.Errorf("%w: no readable message on %q", ErrNotFound, subj)
}

// lastBySubject is LastBySubject's one look; corrupt records it met are
// added to bad.
func (s *Stream) lastBySubject(subj string, bad *[]uint64) (*Msg, error) {
	kind, err := classifyFilter(subj)
	if err != nil {
		return nil, err
	}
	now := s.expireIfDue()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed {
		return nil, ErrClosed
	}
	var seq uint64
	switch kind {
	case filterLiteral:
		if ss := s.mu.subjects[subj]; ss != nil {
			seq = ss.seqs[len(ss.seqs)-1] // trimSubjectLocked keeps both ends live
		}
	case filterAllSubjects:
		if s.mu.msgs > 0 {
			seq = s.mu.last
			for s.entLocked(seq).subj == nil {
				seq--
			}
		}
	default:
		for _, ss := range s.fc.get(subj, s.mu.subjects) {
			if ss.n > 0 {
				seq = max(seq, ss.seqs[len(ss.seqs)-1])
			}
		}
	}
	if seq == 0 || seq < s.firstUnexpiredLocked(s.cutoffLocked(now)) {
		return nil, fmt.Errorf("%w: no message on %q", ErrNotFound, subj)
	}
	m, _, err := s.readSkipping(seq, bad)
	return m, err
}

// SeqAtOrAfterTime returns the sequence of the first stored message with a
// timestamp at or after t, or LastSeq+1 if there is none (the sequence the
// next message will get), as deliver_policy by_start_time needs. It relies
// on timestamps never decreasing along the stream.
func (s *Stream) SeqAtOrAfterTime(t time.Time) uint64 {
	now := s.expireIfDue()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed {
		return 0
	}
	ns := t.UnixNano()
	start := s.firstUnexpiredLocked(s.cutoffLocked(now)) - s.mu.first
	ents := &s.mu.ents
	i := int(start) + sort.Search(ents.len()-int(start), func(i int) bool { return ents.at(int(start)+i).ts >= ns })
	for ; i < ents.len(); i++ {
		if ents.at(i).subj != nil {
			return s.mu.first + uint64(i)
		}
	}
	return s.mu.last + 1
}

// Subjects returns the number of stored messages on each subject that
// matches filter ("" for all). An invalid filter matches nothing.
func (s *Stream) Subjects(filter string) map[string]uint64 {
	kind, err := classifyFilter(filter)
	if err != nil {
		return map[string]uint64{}
	}
	s.expireIfDue()
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]uint64)
	switch kind {
	case filterLiteral:
		if ss := s.mu.subjects[filter]; ss != nil {
			out[filter] = uint64(ss.n)
		}
	default:
		for name, ss := range s.mu.subjects {
			if kind == filterAllSubjects || subject.Match(filter, name) {
				out[name] = uint64(ss.n)
			}
		}
	}
	return out
}

// Deleted returns, ascending, up to max sequences between the first and
// the last message that hold no message (State.NumDeleted counts them
// all).
func (s *Stream) Deleted(max int) []uint64 {
	s.expireIfDue()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.msgs == 0 || max <= 0 {
		return nil
	}
	n := min(int(s.mu.last-s.mu.first+1-s.mu.msgs), max)
	if n == 0 {
		return nil
	}
	out := make([]uint64, 0, n)
	for i := range s.mu.ents.len() {
		if s.mu.ents.at(i).subj == nil {
			if out = append(out, s.mu.first+uint64(i)); len(out) == n {
				break
			}
		}
	}
	return out
}

// State returns a summary of the stream.
func (s *Stream) State() State {
	s.expireIfDue()
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := State{
		Msgs:        s.mu.msgs,
		Bytes:       s.mu.bytes,
		FirstSeq:    s.mu.first,
		LastSeq:     s.mu.last,
		NumSubjects: len(s.mu.subjects),
	}
	if s.mu.msgs > 0 {
		st.FirstTime = time.Unix(0, s.mu.ents.at(0).ts).UTC()
		st.NumDeleted = int(s.mu.last - s.mu.first + 1 - s.mu.msgs)
	}
	if s.mu.lastTS != 0 {
		st.LastTime = time.Unix(0, s.mu.lastTS).UTC()
	}
	return st
}

func wrapFilterErr(f string, err error) error {
	return fmt.Errorf("%w %q: %w", ErrInvalidFilter, f, err)
}
