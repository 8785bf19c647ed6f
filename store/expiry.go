package store

import (
	"cmp"
	"container/heap"
	"errors"
	"math"
	"slices"
	"time"
)

// Expired is what one expiry round of a Stream did, as Options.OnExpire
// hears it.
type Expired struct {
	// Removed are the messages the round removed, in the order it did:
	// those whose TTL ran out and, on a stream with delete markers, those
	// MaxAge removed, the ones markers replaced included.
	Removed []uint64
	// Markers are the subject delete markers the round appended, in
	// order. They are as durable as the sync policy makes an Append
	// confirmed by WaitDurable.
	Markers []Marker
}

// Marker is a subject delete marker an expiry round appended, or one a
// planned round appends (ExpiryPlan).
type Marker struct {
	// Seq is the marker's sequence.
	Seq uint64
	// Subject is its subject, the one whose last message it replaced.
	Subject string
	// Replaced is the sequence of that message.
	Replaced uint64
	// Timestamp is the marker's time, in Unix nanoseconds.
	Timestamp int64
	// TTL is its time to live, the value of its Nats-TTL header
	// (MarkerHeader): the stream's SubjectDeleteMarkerTTL when the round
	// ran, in whole seconds.
	TTL time.Duration
}

// ttlState is a stream's expiry bookkeeping beyond MaxAge's prefix of the
// stream. s.mu guards it.
type ttlState struct {
	heap ttlHeap // messages with a TTL, by expiry
	// compactAt is the heap size past which it drops removed messages.
	compactAt int
	// never holds the messages exempt from MaxAge (TTLNever); a removal
	// deletes its sequence.
	never map[uint64]struct{}
	// ageFrom is where the MaxAge walk resumes: below it every live
	// message is exempt or, on a stream with markers, was handed to a
	// round already.
	ageFrom uint64
	// started is set once rounds may run (Open, or StartExpiry under
	// HoldExpiry).
	started bool
}

// ttlEntry is a message's expiry by TTL.
type ttlEntry struct {
	at  int64 // Unix nanoseconds
	seq uint64
	ttl time.Duration // as appended, for when the markers' rule changes
}

// ttlHeap orders expiries by time, then sequence.
type ttlHeap []ttlEntry

func (h ttlHeap) Len() int           { return len(h) }
func (h ttlHeap) Less(i, j int) bool { return compareTTL(h[i], h[j]) < 0 }
func (h ttlHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *ttlHeap) Push(x any)        { *h = append(*h, x.(ttlEntry)) }
func (h *ttlHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// compareTTL orders expiries by time, then sequence.
func compareTTL(a, b ttlEntry) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.seq, b.seq)) }

// ttlCompactMin is the heap size below which it is never compacted.
const ttlCompactMin = 4096

// StartExpiry lets expiry rounds run on a stream opened with HoldExpiry:
// those already due run at once. It is a no-op otherwise.
func (s *Stream) StartExpiry() {
	s.mu.Lock()
	s.mu.ttl.started = !s.mu.opts.LogClock // expiry moves with the log's time there
	s.mu.Unlock()
	s.wake()
}

// ttlFloor is the shortest TTL of a stream: on a stream with markers, the
// marker TTL (so that a marker is not outlived by what it replaced, as in
// the reference server), unless a subject keeps one message only.
func (o *Options) ttlFloor() time.Duration {
	if o.MaxMsgsPerSubject == 1 {
		return 0
	}
	return o.SubjectDeleteMarkerTTL.Truncate(time.Second)
}

// effectiveTTL is when a message with ttl expires after its timestamp.
func (o *Options) effectiveTTL(ttl time.Duration) time.Duration { return max(ttl, o.ttlFloor()) }

// expiryAt adds a TTL to a timestamp, saturating.
func expiryAt(ts int64, ttl time.Duration) int64 {
	if int64(ttl) > math.MaxInt64-ts {
		return math.MaxInt64
	}
	return ts + int64(ttl)
}

// scheduleLocked records the TTL of message seq stored at ts.
func (s *Stream) scheduleLocked(seq uint64, ts int64, ttl time.Duration) {
	t := &s.mu.ttl
	if ttl == TTLNever {
		if t.never == nil {
			t.never = map[uint64]struct{}{}
		}
		t.never[seq] = struct{}{}
		return
	}
	at := expiryAt(ts, s.mu.opts.effectiveTTL(ttl))
	heap.Push(&t.heap, ttlEntry{at: at, seq: seq, ttl: ttl})
	// Entries of messages removed otherwise (limits, purges, acks) stay
	// until due. Once the heap doubled since it was last compacted, drop
	// them: the heap stays bounded by the stream, not by publish rate
	// times TTL, and each entry is looked at once per doubling.
	if len(t.heap) > max(t.compactAt, ttlCompactMin) {
		t.heap = slices.DeleteFunc(t.heap, func(e ttlEntry) bool { return !s.storedLocked(e.seq) })
		heap.Init(&t.heap)
		t.compactAt = 2 * len(t.heap)
	}
	if t.started && at < s.roundAt.Load() {
		s.wake() // earlier than the background goroutine waits for
	}
}

// storedLocked reports whether seq is a live message.
func (s *Stream) storedLocked(seq uint64) bool {
	return seq >= s.mu.first && seq <= s.mu.last && s.entLocked(seq).subj != nil
}

// retimeLocked recomputes the TTL expiries after ttlFloor changed,
// dropping those of removed messages.
func (s *Stream) retimeLocked() {
	t := &s.mu.ttl
	t.heap = slices.DeleteFunc(t.heap, func(e ttlEntry) bool { return !s.storedLocked(e.seq) })
	for i := range t.heap {
		e := &t.heap[i]
		e.at = expiryAt(s.entLocked(e.seq).ts, s.mu.opts.effectiveTTL(e.ttl))
	}
	heap.Init(&t.heap)
	t.compactAt = 2 * len(t.heap)
}

// rebuildTTLsLocked schedules the TTLs of the stored messages, read from
// their headers: a TTL is stored nowhere else. Corrupt records it meets
// are added to bad, for the caller to remove once it lets go of the lock.
func (s *Stream) rebuildTTLsLocked(bad *[]uint64) {
	for seq := s.mu.first; seq <= s.mu.last; seq++ {
		if s.entLocked(seq).subj == nil {
			continue
		}
		m, _, err := s.readSkipping(seq, bad)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				s.log.Warn("store: message TTL not read", "seq", seq, "err", err)
			}
			continue
		}
		if ttl := HeaderTTL(m.Header); ttl != 0 {
			s.scheduleLocked(seq, m.Timestamp, ttl)
		}
		m.Release()
	}
}

// walkAgeLocked calls due for every live message, from where the last
// walk stopped, that is older than cutoff and not exempt (TTLNever), and
// moves the walk on past them and the exempt ones. due may remove the
// message.
func (s *Stream) walkAgeLocked(cutoff int64, due func(seq uint64)) {
	s.mu.ttl.ageFrom = s.scanAgeLocked(cutoff, func(seq uint64) bool {
		due(seq)
		return true
	})
}

// scanAgeLocked calls due for every live message, from where the last
// walk stopped, that is older than cutoff and not exempt (TTLNever), until
// due returns false, and returns where it stopped: the first message
// not older than cutoff, the one due refused, or last+1. due may remove
// the message. Read lock held (write lock if due removes).
func (s *Stream) scanAgeLocked(cutoff int64, due func(seq uint64) bool) uint64 {
	seq := s.ageStartLocked()
	for ; seq <= s.mu.last; seq = max(seq+1, s.mu.first) {
		e := s.entLocked(seq)
		if e.ts > cutoff {
			break
		}
		if e.subj == nil {
			continue
		}
		if _, exempt := s.mu.ttl.never[seq]; !exempt && !due(seq) {
			break
		}
	}
	return seq
}

// ageStartLocked is the first message the MaxAge walk has yet to look
// at, or last+1.
func (s *Stream) ageStartLocked() uint64 { return max(s.mu.ttl.ageFrom, s.mu.first) }

// nextRoundLocked returns when the next expiry round is due, or
// math.MaxInt64.
func (s *Stream) nextRoundLocked() int64 {
	if !s.mu.ttl.started {
		return math.MaxInt64
	}
	return s.nextDueLocked()
}

// nextDueLocked returns when the first expiry an expiry round applies
// is due (a TTL, or MaxAge on a stream with markers), or math.MaxInt64.
func (s *Stream) nextDueLocked() int64 {
	t := &s.mu.ttl
	next := int64(math.MaxInt64)
	if len(t.heap) > 0 {
		next = t.heap[0].at
	}
	o := &s.mu.opts
	if o.SubjectDeleteMarkerTTL > 0 && o.MaxAge > 0 {
		if seq := s.ageStartLocked(); seq <= s.mu.last {
			next = min(next, expiryAt(s.entLocked(seq).ts, o.MaxAge))
		}
	}
	return next
}

// dueLocked takes out the expiries due at now (peekDueLocked): the heap
// loses them, and the MaxAge walk moves past them.
func (s *Stream) dueLocked(now int64) []uint64 {
	due := s.peekDueLocked(now)
	t := &s.mu.ttl
	for len(t.heap) > 0 && t.heap[0].at <= now {
		heap.Pop(&t.heap)
	}
	if o := &s.mu.opts; o.SubjectDeleteMarkerTTL > 0 && o.MaxAge > 0 {
		s.walkAgeLocked(now-int64(o.MaxAge), func(uint64) {})
	}
	return due
}

// peekDueLocked returns the expiries due at now: TTLs from the heap and,
// on a stream with markers, MaxAge's from where the walk stands, in the
// order of their times (then sequences). A message may be due twice.
// Nothing changes. Read lock held.
func (s *Stream) peekDueLocked(now int64) []uint64 {
	t := &s.mu.ttl
	var due []ttlEntry
	// The entries due by now are a subtree at the heap's root.
	for stack := []int{0}; len(stack) > 0; {
		i := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if i < len(t.heap) && t.heap[i].at <= now {
			due = append(due, t.heap[i])
			stack = append(stack, 2*i+1, 2*i+2)
		}
	}
	if len(due) > 1 {
		slices.SortFunc(due, compareTTL)
	}
	o := &s.mu.opts
	if age := o.MaxAge; o.SubjectDeleteMarkerTTL > 0 && age > 0 {
		n := len(due)
		s.scanAgeLocked(now-int64(age), func(seq uint64) bool {
			due = append(due, ttlEntry{at: s.entLocked(seq).ts + int64(age), seq: seq})
			return true
		})
		if n > 0 && n < len(due) {
			slices.SortFunc(due, compareTTL)
		}
	}
	seqs := make([]uint64, len(due))
	for i, e := range due {
		seqs[i] = e.seq
	}
	return seqs
}

// expireRound removes the messages whose TTL ran out and, on a stream
// with markers, those MaxAge removes, leaving a marker where one was the
// last of its subject (and not a marker itself: a marker replaces a
// subject's only message, not its newest, and markers are not replaced by
// markers). It runs on the background goroutine, holding AppendLock, and
// ends by telling OnExpire.
//
// A marker is made durable before what it replaces is deleted, as a
// rollup's purge waits for its rollup: a crash in between leaves both
// (the message goes again after the restart, without a second marker),
// never neither.
func (s *Stream) expireRound() {
	if l := s.appendLock; l != nil {
		l.Lock()
		defer l.Unlock()
	}
	var ev Expired
	var replaced []uint64 // by a marker: deleted once the markers are durable
	var pending map[uint64]bool
	s.mu.Lock()
	if s.mu.closed || !s.mu.ttl.started {
		s.mu.Unlock()
		return
	}
	sdm := s.mu.opts.SubjectDeleteMarkerTTL.Truncate(time.Second)
	for _, seq := range s.dueLocked(s.clock().UnixNano()) {
		if !s.storedLocked(seq) || pending[seq] {
			continue // removed otherwise, or due twice
		}
		ss := s.entLocked(seq).subj
		if sdm > 0 && ss.n == 1 && !s.markerLocked(seq) {
			mseq, mts, err := s.appendLocked(ss.name, MarkerHeader(sdm), nil, sdm)
			if err == nil {
				ev.Markers = append(ev.Markers, Marker{Seq: mseq, Subject: ss.name, Replaced: seq, Timestamp: mts, TTL: sdm})
				replaced = append(replaced, seq)
				if pending == nil {
					pending = map[uint64]bool{}
				}
				pending[seq] = true
				continue
			}
			s.log.Warn("store: subject delete marker not stored", "subject", ss.name, "err", err)
		}
		s.removeLocked(seq, true)
		ev.Removed = append(ev.Removed, seq)
	}
	s.mu.Unlock()
	if len(ev.Markers) > 0 {
		ev.Removed = s.deleteReplaced(ev.Markers[len(ev.Markers)-1].Seq, replaced, ev.Removed)
	}
	if s.onExpire != nil && (len(ev.Removed) > 0 || len(ev.Markers) > 0) {
		s.onExpire(ev)
	}
}

// markerLocked reports whether the live message seq is a delete marker;
// one that cannot be read is taken as not one.
func (s *Stream) markerLocked(seq uint64) bool {
	m, err := s.readLocked(seq)
	if err != nil {
		return false
	}
	defer m.Release()
	return len(m.Header) > 0 && isDeleteMarker(m.Header)
}

// deleteReplaced makes the markers up to last durable, then deletes the
// messages they replaced (the limits may have taken some already) and
// adds them to removed.
func (s *Stream) deleteReplaced(last uint64, replaced, removed []uint64) []uint64 {
	if err := s.Sync(last); err != nil {
		if !errors.Is(err, ErrClosed) {
			s.log.Warn("store: subject delete marker sync failed; what it replaces stays", "seq", last, "err", err)
		}
		return removed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return removed
	}
	replaced = slices.DeleteFunc(replaced, func(seq uint64) bool { return !s.storedLocked(seq) })
	slices.Sort(replaced)
	n, err := s.be.persistDeletes(replaced)
	for _, seq := range replaced[:n] {
		s.removeLocked(seq, false)
		removed = append(removed, seq)
	}
	if err != nil {
		s.log.Warn("store: message replaced by a delete marker not removed", "err", err)
	}
	return removed
}
