package jetstream

import (
	"time"

	"github.com/skiffmq/skiff/store"
)

// Per-message TTLs (ADR-43): on a stream with allow_msg_ttl, a message
// with a Nats-TTL header is removed that long after it was stored, whatever
// the stream's limits say, unless max_age removes it first. The header is
// a Go duration of at least a second ("90s", "1h") or a number of seconds;
// "never" exempts the message from expiry.
//
// Subject delete markers (subject_delete_marker_ttl): when max_age or a
// TTL removes the last message of a subject, a marker takes its place, a
// rollup on the subject with Nats-Marker-Reason: MaxAge and a TTL of its
// own, so that watchers (key-value buckets) see the key go.
//
// The store applies all three (store.Options.AllowMsgTTL,
// SubjectDeleteMarkerTTL, MaxAge; "Expiry" in its package documentation),
// so that every copy of a stream expires alike. Here a publish's header is
// checked and its TTL handed to Append; the store tells the stream what
// expired (stream.expired), and the stream tells the consumers. A
// replicated stream's leader plans the rounds instead, and its replicas
// apply them in log order (replica_clock.go).

func errTTLInvalid() *APIError  { return apiErr(400, 10165, "invalid per-message TTL") }
func errTTLDisabled() *APIError { return apiErr(400, 10166, "per-message TTL is disabled") }

// ttlOf checks a message's Nats-TTL header against the stream and returns
// its TTL (0: none, store.TTLNever).
func ttlOf(hdr headers, cfg *StreamConfig) (time.Duration, *APIError) {
	v, ok := hdr.get(store.TTLHeader)
	if !ok {
		return 0, nil
	}
	ttl, ok := store.ParseTTL(v)
	switch {
	case !ok:
		return 0, errTTLInvalid()
	case ttl == 0:
		return 0, nil
	case !cfg.AllowMsgTTL:
		return 0, errTTLDisabled()
	case ttl == store.TTLNever && cfg.MaxAge > 0 && cfg.SubjectDeleteMarkerTTL == 0:
		// The store would keep such a message past max_age, as the
		// reference server does; Skiff refuses it, as it always has.
		return 0, apiErr(400, 10165, "invalid per-message TTL: \"never\" on a stream with max_age and without subject delete markers is not supported by Skiff")
	}
	return ttl, nil
}
