package store

import (
	"container/heap"
	"time"
)

// The log clock (Options.LogClock). A replica of a replicated stream
// applies its group's log to its store; expiring messages by the wall
// clock, each replica would remove them at another place in the log, and
// removals interleaved differently with appends can leave the replicas
// with different messages (a TTL removal before or after an append that
// a limit answers by evicting the oldest). Under the log clock the
// stream's time is the log's: the timestamp of the last message AppendAt
// stored, or the time AdvanceTime was given, which the leader proposes
// when nothing is published and something is due (NextExpiry). MaxAge and
// TTLs expire only inside those two calls, so every replica removes the
// same messages at the same place. Reads apply MaxAge by the same time.
//
// On a stream with delete markers the log's time moves the same way, but
// expires nothing by itself: a marker takes a sequence, which only the
// log's leader may give out, so the leader plans each round and every
// replica applies the plan (expiryplan.go).

// logClock is the stream's clock under Options.LogClock.
func (s *Stream) logClock() time.Time { return time.Unix(0, s.logNow.Load()) }

// AdvanceTime moves a log-clock stream's time on to now (never back) and
// removes what MaxAge and TTLs expire by then, returning how many
// messages went; on a stream with delete markers it removes nothing
// (planned rounds do: ApplyExpiry). Applied again (a log replayed) it
// removes nothing more. Without Options.LogClock it does nothing.
func (s *Stream) AdvanceTime(now int64) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return 0, ErrClosed
	}
	before := s.mu.msgs
	s.advanceLocked(now)
	return int(before - s.mu.msgs), nil
}

// advanceLocked moves a log-clock stream's time on to now. Without
// markers what MaxAge and TTLs expire by then goes; with them, the
// expiries of messages already gone are dropped and the MaxAge walk moves
// past them, while what is still stored and due waits for a planned
// round. Without Options.LogClock it does nothing. Write lock held.
func (s *Stream) advanceLocked(now int64) {
	if !s.mu.opts.LogClock {
		return
	}
	if s.mu.opts.SubjectDeleteMarkerTTL > 0 {
		s.settleLocked(now)
	} else {
		s.expireTTLsLocked(now)
		s.expireLocked(now)
	}
	if now > s.logNow.Load() {
		s.logNow.Store(now)
	}
}

// NextExpiry returns when, in Unix nanoseconds, the first message may
// expire by MaxAge or its TTL (math.MaxInt64 when none can). Under the
// log clock, a leader asks its replicas to AdvanceTime, or plans a round
// (PlanExpiry) on a stream with markers, once that passes.
func (s *Stream) NextExpiry() int64 {
	next := s.nextExpiry.Load()
	s.mu.RLock()
	next = min(next, s.nextDueLocked())
	s.mu.RUnlock()
	return next
}

// expireTTLsLocked removes the messages whose TTL ran out by now (the
// log clock's expiry of TTLs, without markers). Write lock held.
func (s *Stream) expireTTLsLocked(now int64) {
	t := &s.mu.ttl
	for len(t.heap) > 0 && t.heap[0].at <= now {
		e := heap.Pop(&t.heap).(ttlEntry)
		if s.storedLocked(e.seq) {
			s.removeLocked(e.seq, true)
		}
	}
	s.updateExpiryLocked()
}
