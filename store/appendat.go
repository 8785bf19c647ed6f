package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/skiffmq/skiff/subject"
)

// AppendAt appends a message at a sequence and a time its caller chose: a
// replica applying what its leader decided, the leader's stream having
// admitted the message and given it seq and ts.
//
//   - seq at or below the last sequence: the message is stored already
//     (the log replayed after a restart, or a snapshot newer than the
//     log): nothing happens and AppendAt returns nil.
//   - seq = last + 1: the message is appended at max(ts, the last
//     timestamp), with the limits applied as Append applies them, but with
//     ts as the time MaxAge expires from, not the clock, so that every
//     replica removes the same messages at the same place in the log.
//   - any other seq (a gap), and a message the limits refuse (DiscardNew,
//     a message larger than MaxBytes or MaxMsgSize): an error wrapping
//     ErrDiverged, and nothing changes.
//
// With Options.Staging, a staged record at seq (stage.go) that holds the
// same message is committed rather than written again; one that holds
// another cuts the staged tail from seq first.
//
// Errors of the disk (ErrWrite) are returned as Append returns them.
func (s *Stream) AppendAt(seq uint64, ts int64, subj string, hdr, data []byte, ttl time.Duration) error {
	return s.AppendStaged(StageKey{}, seq, ts, subj, hdr, data, ttl)
}

// AppendStaged is AppendAt for a message that Stage may have staged with
// key: a staged record at seq with the same key (not zero) is committed
// without the message's checksum being computed again.
func (s *Stream) AppendStaged(key StageKey, seq uint64, ts int64, subj string, hdr, data []byte, ttl time.Duration) error {
	if err := divergedSubject(subj); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.mu.closed:
		return ErrClosed
	case seq <= s.mu.last:
		return nil
	case seq != s.mu.last+1:
		return fmt.Errorf("%w: sequence %d after %d", ErrDiverged, seq, s.mu.last)
	}
	if err := s.checkTTLLocked(ttl); err != nil {
		return fmt.Errorf("%w: %w", ErrDiverged, err)
	}
	ts = max(ts, s.mu.lastTS)
	if s.fb != nil && s.fb.stg.len() > 0 {
		// A staged record holds seq (stage.go): the same message is
		// committed; another (a log that replaced it) is cut with the
		// rest of the tail by the append.
		if s.stagedSameLocked(key, seq, ts, subj, hdr, data) {
			return s.commitLocked(ttl)
		}
	}
	s.beforeAppendAtLocked(ts)
	if err := s.appendAtLocked(seq, ts, ts, subj, hdr, data, ttl); err != nil {
		return divergedLimit(err)
	}
	s.afterAppendAtLocked(ts)
	return nil
}

// checkTTLLocked refuses a TTL the stream does not allow.
func (s *Stream) checkTTLLocked(ttl time.Duration) error {
	if ttl != 0 && (!s.mu.opts.ttls() || (ttl < 0 && ttl != TTLNever)) {
		return fmt.Errorf("%w: TTL %v (AllowMsgTTL %v)", ErrInvalidConfig, ttl, s.mu.opts.AllowMsgTTL)
	}
	return nil
}

// beforeAppendAtLocked moves the log's time to ts (Options.LogClock)
// before a message stamped ts is appended: the TTLs due by then expire
// (MaxAge: in appendAtLocked). With markers, planned rounds expire
// (ApplyExpiry).
func (s *Stream) beforeAppendAtLocked(ts int64) {
	if s.mu.opts.LogClock && s.mu.opts.SubjectDeleteMarkerTTL == 0 {
		s.expireTTLsLocked(ts)
	}
}

// afterAppendAtLocked records the log's time once a message stamped ts
// is appended.
func (s *Stream) afterAppendAtLocked(ts int64) {
	if s.mu.opts.LogClock && ts > s.logNow.Load() {
		s.logNow.Store(ts)
	}
}

// divergedLimit wraps a refusal by the stream's limits in ErrDiverged: a
// replica's limits refused what its leader's admitted.
func divergedLimit(err error) error {
	if isLimit(err) {
		return fmt.Errorf("%w: %w", ErrDiverged, err)
	}
	return err
}

// divergedSubject refuses a subject no leader could have admitted, as
// ErrDiverged wrapping ErrInvalidSubject.
func divergedSubject(subj string) error {
	if len(subj) > maxSubjectLen {
		return fmt.Errorf("%w: %w: %d bytes", ErrDiverged, ErrInvalidSubject, len(subj))
	}
	if err := subject.ValidateSubject(subj); err != nil {
		return fmt.Errorf("%w: %w: %w", ErrDiverged, ErrInvalidSubject, err)
	}
	return nil
}

// isLimit reports whether err is a refusal by the stream's limits.
func isLimit(err error) bool {
	for _, l := range []error{ErrMaxMsgs, ErrMaxBytes, ErrMaxMsgsPerSubject, ErrMaxMsgSize} {
		if errors.Is(err, l) {
			return true
		}
	}
	return false
}
