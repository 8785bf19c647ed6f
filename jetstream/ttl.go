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
// "never" exempts the message from expiry, which Skiff supports only on a
// stream without max_age (max_age is applied by the store to the oldest
// messages first and knows no exemptions).
//
// The stream keeps a min-heap of (expiry, sequence) and one timer for the
// earliest; after a restart the heap is rebuilt from the stored messages'
// headers. Subject delete markers (subject_delete_marker_ttl) are not
// supported.

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
	case ttl == ttlNever && cfg.MaxAge > 0:
		return 0, apiErr(400, 10165, "invalid per-message TTL: \"never\" on a stream with max_age is not supported by Skiff")
	}
	return ttl, nil
}

// expiry is a message due to expire.
type expiry struct {
	at  int64 // unix nanoseconds
	seq uint64
}

type expiryHeap []expiry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// ttls is a stream's pending expiries.
type ttls struct {
	mu     sync.Mutex
	heap   expiryHeap
	timer  *time.Timer
	next   int64 // when timer fires; 0: not set
	closed bool
}

// expireAt schedules seq's removal at (unix nanoseconds).
func (st *stream) expireAt(seq uint64, at int64) {
	t := &st.ttl
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	heap.Push(&t.heap, expiry{at: at, seq: seq})
	st.armLocked()
}

// armLocked sets the timer for the earliest expiry. ttl.mu held.
func (st *stream) armLocked() {
	t := &st.ttl
	if len(t.heap) == 0 {
		return
	}
	at := t.heap[0].at
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
	for len(t.heap) > 0 && t.heap[0].at <= now {
		due = append(due, heap.Pop(&t.heap).(expiry).seq)
	}
	t.next = 0
	st.armLocked()
	t.mu.Unlock()

	removed := 0
	for _, seq := range due {
		// Gone already (limits, a purge, a delete) is fine.
		if err := st.store.Remove(seq); err == nil {
			removed++
		} else if !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrClosed) {
			st.js.log.Warn("message TTL removal failed", "stream", st.name, "seq", seq, "err", err)
		}
	}
	if removed > 0 {
		st.changed()
	}
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

// rebuildTTLs schedules the expiry of every stored message with a TTL,
// after a restart. Those already due go at once.
func (st *stream) rebuildTTLs() {
	for seq := st.store.State().FirstSeq; ; {
		m, err := st.store.Next(seq, "")
		if err != nil {
			return
		}
		seq = m.Seq + 1
		if len(m.Header) == 0 {
			continue
		}
		if v, ok := parseHeaders(m.Header).get(ttlHeader); ok {
			if ttl, ok := parseTTL(v); ok && ttl > 0 {
				st.expireAt(m.Seq, m.Timestamp+ttl*int64(time.Second))
			}
		}
	}
}
