package jetstream

import (
	"container/heap"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/skiffmq/skiff/store"
)

// Per-message TTLs (ADR-43): on a stream with allow_msg_ttl, a message
// with a Nats-TTL header is removed that long after it was stored, whatever
// the stream's limits say, unless max_age removes it first. The header is
// a Go duration of at least a second ("90s", "1h") or a number of seconds;
// "never" exempts the message from expiry. On a stream with max_age and
// no delete markers, "never" is refused: there the store applies max_age,
// to the oldest messages first, and knows no exemptions.
//
// Subject delete markers (subject_delete_marker_ttl): when max_age or a
// TTL removes the last message of a subject, a marker takes its place, a
// rollup on the subject with Nats-Marker-Reason: MaxAge and a TTL of its
// own, so that watchers (key-value buckets) see the key go. On such a
// stream the stream, not the store, applies max_age: every message gets an
// expiry at its time plus max_age as well.
//
// The stream keeps a min-heap of (expiry, sequence) and one timer for the
// earliest; after a restart the heap is rebuilt from the stored messages
// (their headers and times).

const ttlHeader = "Nats-TTL"

func errTTLInvalid() *APIError  { return apiErr(400, 10165, "invalid per-message TTL") }
func errTTLDisabled() *APIError { return apiErr(400, 10166, "per-message TTL is disabled") }

// ttlNever is the parsed "never".
const ttlNever = -1

// parseTTL reads a Nats-TTL value as the reference server does: "never"
// (-1), a duration of at least a second, or whole seconds; 0 is no TTL.
func parseTTL(v string) (int64, bool) {
	if strings.EqualFold(v, "never") {
		return ttlNever, true
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d < time.Second {
			return 0, false
		}
		return int64(d / time.Second), true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// ttlOf checks a message's Nats-TTL header against the stream and returns
// its TTL in seconds (0: none, ttlNever).
func ttlOf(hdr headers, cfg *StreamConfig) (int64, *APIError) {
	v, ok := hdr.get(ttlHeader)
	if !ok {
		return 0, nil
	}
	ttl, ok := parseTTL(v)
	switch {
	case !ok:
		return 0, errTTLInvalid()
	case ttl == 0:
		return 0, nil
	case !cfg.AllowMsgTTL:
		return 0, errTTLDisabled()
	case ttl == ttlNever && cfg.MaxAge > 0 && cfg.SubjectDeleteMarkerTTL == 0:
		return 0, apiErr(400, 10165, "invalid per-message TTL: \"never\" on a stream with max_age and without subject delete markers is not supported by Skiff")
	}
	return ttl, nil
}

// schedule sets the expiries of a message stored at ts with ttl: its own
// TTL, raised to the marker TTL on a stream with markers (so that a marker
// is not outlived by what it replaced, as in the reference server), and on
// a stream with markers its max_age.
func (st *stream) schedule(seq uint64, ts, ttl int64, cfg *StreamConfig) {
	sdm := cfg.SubjectDeleteMarkerTTL
	if ttl > 0 {
		if sdm > 0 && cfg.MaxMsgsPerSubject != 1 {
			ttl = max(ttl, int64(sdm/time.Second))
		}
		st.expireAt(seq, ts+ttl*int64(time.Second))
	}
	if sdm > 0 && cfg.MaxAge > 0 && ttl != ttlNever {
		st.expireAt(seq, ts+int64(cfg.MaxAge))
	}
}

// isMarker reports whether headers are a delete marker's: a subject delete
// marker, or a key-value purge (which markers do not replace).
func isMarker(h headers) bool {
	if _, ok := h.get("Nats-Marker-Reason"); ok {
		return true
	}
	v, _ := h.get("KV-Operation")
	return v == "PURGE"
}

// ttls is a stream's pending expiries. mu guards every other field.
type ttls struct {
	mu        sync.Mutex
	heap      deadlineHeap // by expiry, as a consumer's ack deadlines
	timer     *time.Timer
	next      int64 // when timer fires; 0: not set
	compactAt int   // heap size past which it drops removed messages
	closed    bool
}

// expireAt schedules seq's removal at (unix nanoseconds).
func (st *stream) expireAt(seq uint64, at int64) {
	t := &st.ttl
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	heap.Push(&t.heap, deadlineEntry{at: time.Unix(0, at), seq: seq})
	// Entries of messages removed otherwise (limits, purges, acks) stay
	// until due. Once the heap doubled since it was last compacted, drop
	// them: the heap stays bounded by the stream (two entries a message at
	// most), not by publish rate times TTL, and each entry is looked at
	// once per doubling.
	if len(t.heap) > max(t.compactAt, ttlCompactMin) {
		live := t.heap[:0]
		for _, e := range t.heap {
			if st.store.Has(e.seq) {
				live = append(live, e)
			}
		}
		clear(t.heap[len(live):])
		t.heap = live
		heap.Init(&t.heap)
		t.compactAt = 2 * len(live)
	}
	st.armLocked()
}

// ttlCompactMin is the heap size below which it is never compacted.
const ttlCompactMin = 4096

// armLocked sets the timer for the earliest expiry. ttl.mu held.
func (st *stream) armLocked() {
	t := &st.ttl
	if len(t.heap) == 0 {
		return
	}
	at := t.heap[0].at.UnixNano()
	if t.next != 0 && t.next <= at {
		return // fires early enough
	}
	t.next = at
	d := time.Until(time.Unix(0, at))
	if t.timer == nil {
		t.timer = time.AfterFunc(d, st.expireDue)
	} else {
		t.timer.Reset(d)
	}
}

// expireDue removes every message whose TTL ran out and sets the timer for
// the next.
func (st *stream) expireDue() {
	t := &st.ttl
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	now := time.Now().UnixNano()
	var due []uint64
	for len(t.heap) > 0 && t.heap[0].at.UnixNano() <= now {
		due = append(due, heap.Pop(&t.heap).(deadlineEntry).seq)
	}
	t.next = 0
	st.armLocked()
	t.mu.Unlock()

	cfg := st.config()
	removed := 0
	for _, seq := range due {
		if cfg.SubjectDeleteMarkerTTL > 0 {
			if st.expireOrMark(seq, &cfg) {
				removed++
			}
			continue
		}
		if st.remove(seq) {
			removed++
		}
	}
	if removed > 0 {
		st.changed()
	}
}

// remove removes an expired message; gone already (limits, a purge, a
// delete) is fine.
func (st *stream) remove(seq uint64) bool {
	err := st.store.Remove(seq)
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrClosed) {
		st.js.log.Warn("message expiry failed", "stream", st.name, "seq", seq, "err", err)
	}
	return err == nil
}

// expireOrMark removes an expired message of a stream with delete markers:
// the last message of its subject (not a marker itself) is replaced by a
// marker, others just go. The look and the marker are one step under
// ingestMu, so that a message published meanwhile is not rolled up.
func (st *stream) expireOrMark(seq uint64, cfg *StreamConfig) bool {
	st.ingestMu.Lock()
	m, err := st.store.Get(seq)
	if err != nil {
		st.ingestMu.Unlock()
		return false
	}
	subj := strings.Clone(m.Subject) // m's buffer goes back to a pool
	marker := len(m.Header) > 0 && isMarker(parseHeaders(m.Header))
	m.Release()
	// A marker replaces the subject's only message, not its newest: older
	// ones without a TTL stay, as in the reference server.
	if marker || st.store.Subjects(subj)[subj] != 1 {
		st.ingestMu.Unlock()
		return st.remove(seq)
	}
	hb := headerBuilder{}
	hdr := hb.status(0, "").add("Nats-Marker-Reason", "MaxAge").
		add(ttlHeader, (cfg.SubjectDeleteMarkerTTL/time.Second*time.Second).String()).add(rollupHeader, "sub").bytes()
	mseq, ts, err := st.store.Append(subj, hdr, nil)
	if err != nil {
		st.ingestMu.Unlock()
		st.js.log.Warn("subject delete marker not stored", "stream", st.name, "subject", subj, "err", err)
		return st.remove(seq)
	}
	st.ingestMu.lastMsgID = ""
	if err := st.rollLocked(rollupSubject, mseq, subj); err != nil {
		st.js.log.Warn("subject delete marker rollup failed", "stream", st.name, "subject", subj, "err", err)
	}
	st.schedule(mseq, ts, int64(cfg.SubjectDeleteMarkerTTL/time.Second), cfg)
	st.ingestMu.Unlock()
	if err := st.store.WaitDurable(mseq); err != nil {
		st.js.log.Warn("subject delete marker sync failed", "stream", st.name, "err", err)
	}
	st.arrived(subj, mseq, *cfg)
	return true
}

// stopTTLs stops the timer; the stream is closing.
func (st *stream) stopTTLs() {
	t := &st.ttl
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	if t.timer != nil {
		t.timer.Stop()
	}
}

// rebuildTTLs schedules the expiries of every stored message after a
// restart (or a change of who applies max_age, or of max_age on a stream
// with markers), replacing those it had. Those already due go at once.
func (st *stream) rebuildTTLs() {
	// Under ingestMu, which ingest schedules under: an append meanwhile is
	// either scanned here or scheduled after, by the current config.
	st.ingestMu.Lock()
	defer st.ingestMu.Unlock()
	cfg := st.config()
	t := &st.ttl
	t.mu.Lock()
	t.heap = t.heap[:0]
	t.mu.Unlock()
	for seq := st.store.State().FirstSeq; ; {
		m, err := st.store.Next(seq, "")
		if err != nil {
			return
		}
		seq = m.Seq + 1
		var ttl int64
		if len(m.Header) > 0 {
			if v, ok := parseHeaders(m.Header).get(ttlHeader); ok {
				ttl, _ = parseTTL(v)
			}
		}
		st.schedule(m.Seq, m.Timestamp, ttl, &cfg)
		m.Release()
	}
}
