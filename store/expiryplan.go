package store

import (
	"container/heap"
	"errors"
	"fmt"
	"time"
)

// Planned expiry rounds: the log clock's rounds on a stream with subject
// delete markers (design 3.4 of docs/design/replicated-streams.md).
//
// A replica of a replicated stream cannot leave markers on its own: a
// marker takes a sequence, and only the group's leader gives sequences
// out, so that a marker and a message never get the same one. The leader
// plans each round on its store as applied, with the markers at the
// sequences after its last, and proposes the plan to the group; every
// replica applies it at the same place in the log. The plan names every
// message it removes and every marker it appends, so a replica decides
// nothing, and a plan applied again (the log replayed over a store that
// has it) changes nothing.
//
//	leader    PlanExpiry(now) ──► ExpiryPlan{Now, Removed, Markers} ──► the log
//	replicas  ApplyExpiry(plan): remove Removed; append each marker at its
//	          sequence and remove what it replaces; the log's time moves
//	          to Now

// ExpiryPlan is an expiry round decided before it is applied: what
// PlanExpiry found due at Now, and what the round does about it.
type ExpiryPlan struct {
	// Now is the round's time, in Unix nanoseconds: ApplyExpiry moves a
	// log-clock stream's time on to it.
	Now int64
	// Removed are the messages the round removes without a marker, in
	// the order of their expiry.
	Removed []uint64
	// Markers are the markers the round appends, at consecutive
	// sequences after the stream's last, each removing the message it
	// replaces (Marker.Replaced).
	Markers []Marker
}

// PlanExpiry plans the expiry round due at now (Unix nanoseconds) on the
// stream as it stands, and changes nothing. The round takes the messages
// whose TTL ran out by now and, on a stream with markers, those MaxAge
// expires, in the order of their expiry, and decides as a round on the
// stream's own clock does: a message that is the last of its subject,
// and not a delete marker itself, is replaced by a marker; the others are
// removed. The markers get the sequences after the last one, the time
// max(now, the last message's) and the stream's SubjectDeleteMarkerTTL; a
// marker the limits would refuse (DiscardNew) is not planned, and its
// message is removed without one. Nothing due gives an empty plan.
func (s *Stream) PlanExpiry(now int64) (ExpiryPlan, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed {
		return ExpiryPlan{}, ErrClosed
	}
	p := ExpiryPlan{Now: now}
	sdm := s.mu.opts.SubjectDeleteMarkerTTL.Truncate(time.Second)
	var hdr []byte
	if sdm > 0 {
		hdr = MarkerHeader(sdm)
	}
	next, ts := s.mu.last+1, max(now, s.mu.lastTS)
	// The stream as the round leaves it so far: its totals, for the
	// limits, and its subjects' counts where the round changed them, for
	// which message is the last of its subject.
	msgs, bytes := s.mu.msgs, s.mu.bytes
	live := map[*subjectState]int{}
	taken := map[uint64]bool{}
	for _, seq := range s.peekDueLocked(now) {
		if !s.storedLocked(seq) || taken[seq] {
			continue // removed since it was scheduled, or due twice
		}
		taken[seq] = true
		e := s.entLocked(seq)
		ss := e.subj
		n, ok := live[ss]
		if !ok {
			n = ss.n
		}
		if sdm > 0 && n == 1 && !s.markerLocked(seq) {
			size := recordSize(ss.name, hdr, nil)
			if s.mu.opts.admit(msgs, bytes, n, ss.name, size) == nil {
				p.Markers = append(p.Markers, Marker{Seq: next, Subject: ss.name, Replaced: seq, Timestamp: ts, TTL: sdm})
				next++
				msgs, bytes, live[ss] = msgs+1, bytes+uint64(size), n+1
				continue
			}
		}
		p.Removed = append(p.Removed, seq)
		msgs, bytes, live[ss] = msgs-1, bytes-uint64(e.size), n-1
	}
	return p, nil
}

// ApplyExpiry applies a planned expiry round (PlanExpiry's, on the log's
// leader) and returns what it did: it removes the plan's Removed
// messages, appends each marker at its sequence, with its time (raised to
// the last message's) and TTL, and removes the message the marker
// replaces; then a log-clock stream's time moves on to the plan's Now, as
// AdvanceTime moves it. Every step is idempotent: a message already gone
// is not removed again, and a marker at or below the last sequence is
// taken as stored (the log replayed), so a plan applied twice changes
// nothing the second time.
//
// A marker that would leave a gap, or that no plan could hold (an invalid
// subject, no TTL), is an error wrapping ErrDiverged, and the rest of the
// plan is not applied. A marker the limits refuse (the configuration
// changed between the plan and its apply) is not stored: its sequence is
// skipped, on every replica alike, and what it replaces is removed all
// the same. Removals are recorded on disk at the next sync point, as the
// limits' are: the log the plan came from is what a crash replays.
// Errors of the disk are returned as AppendAt returns them.
func (s *Stream) ApplyExpiry(p ExpiryPlan) (Expired, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return Expired{}, ErrClosed
	}
	var ev Expired
	remove := func(seq uint64) {
		if s.storedLocked(seq) {
			s.removeLocked(seq, true)
			ev.Removed = append(ev.Removed, seq)
		}
	}
	for _, seq := range p.Removed {
		remove(seq)
	}
	for _, m := range p.Markers {
		if m.Seq > s.mu.last {
			ts, stored, err := s.appendMarkerLocked(m)
			if err != nil {
				return ev, err
			}
			if stored {
				m.Timestamp = ts
				ev.Markers = append(ev.Markers, m)
			}
		}
		remove(m.Replaced)
	}
	s.advanceLocked(p.Now)
	return ev, nil
}

// appendMarkerLocked appends a planned marker at its sequence, the next
// one, or skips the sequence if the limits refuse the marker; it returns
// the marker's time and whether it was stored. Write lock held.
func (s *Stream) appendMarkerLocked(m Marker) (ts int64, stored bool, err error) {
	switch {
	case m.Seq != s.mu.last+1:
		return 0, false, fmt.Errorf("%w: marker at sequence %d after %d", ErrDiverged, m.Seq, s.mu.last)
	case m.TTL <= 0:
		return 0, false, fmt.Errorf("%w: marker at sequence %d without a TTL", ErrDiverged, m.Seq)
	}
	if err := divergedSubject(m.Subject); err != nil {
		return 0, false, err
	}
	ts = max(m.Timestamp, s.mu.lastTS)
	err = s.appendAtLocked(m.Seq, ts, ts, m.Subject, MarkerHeader(m.TTL), nil, m.TTL)
	switch {
	case isLimit(err):
		if err := s.skipLocked(m.Seq, ts); err != nil && !errors.Is(err, ErrSync) {
			return 0, false, err
		}
		return ts, false, nil
	case err != nil:
		return 0, false, err
	}
	if s.mu.opts.LogClock && ts > s.logNow.Load() {
		s.logNow.Store(ts)
	}
	return ts, true, nil
}

// settleLocked moves the expiry bookkeeping of a stream with markers on
// to now after a planned round: the expiries due by then of messages no
// longer stored are dropped, and the MaxAge walk moves past the removed
// and exempt messages older than now less MaxAge. A message still stored
// and due (none, when the plan was made on the same log) stays due, for
// the next round. Write lock held.
func (s *Stream) settleLocked(now int64) {
	t := &s.mu.ttl
	var keep []ttlEntry
	for len(t.heap) > 0 && t.heap[0].at <= now {
		if e := heap.Pop(&t.heap).(ttlEntry); s.storedLocked(e.seq) {
			keep = append(keep, e)
		}
	}
	for _, e := range keep {
		heap.Push(&t.heap, e)
	}
	if age := s.mu.opts.MaxAge; age > 0 {
		t.ageFrom = s.scanAgeLocked(now-int64(age), func(uint64) bool { return false })
	}
	s.updateExpiryLocked()
}
