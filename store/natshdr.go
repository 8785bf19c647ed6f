package store

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"time"
)

// The store reads a few NATS headers of the messages it stores, and
// writes the delete markers it appends: the TTL (Nats-TTL, ADR-43), to
// rebuild expiries at Open, and what makes a message a delete marker.
// A header block is "NATS/1.0[ status]\r\n", "Name: Value\r\n" lines and
// "\r\n"; names compare exactly, as in the reference server.

// TTLHeader names the header that carries a message's TTL, in ParseTTL's
// syntax. Append takes the TTL parsed; Open reads it back from the header.
const TTLHeader = "Nats-TTL"

// TTLNever is the TTL of a message that never expires: exempt from
// MaxAge too. ParseTTL returns it for "never".
const TTLNever time.Duration = -1

// ParseTTL reads a Nats-TTL value as the reference server does: "never"
// (any case) is TTLNever; otherwise a Go duration of at least a second
// ("90s", "1h") or a number of whole seconds, truncated to whole seconds;
// 0 is no TTL. ok is false for anything else.
func ParseTTL(v string) (ttl time.Duration, ok bool) {
	if strings.EqualFold(v, "never") {
		return TTLNever, true
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d < time.Second {
			return 0, false
		}
		return d.Truncate(time.Second), true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	if n > math.MaxInt64/int64(time.Second) {
		return math.MaxInt64, true // expires after the stream, in effect
	}
	return time.Duration(n) * time.Second, true
}

// HeaderTTL returns the TTL a message's header block gives it, its
// TTLHeader as ParseTTL reads it, or 0 for none or an invalid one: the TTL
// Open schedules a stored message's expiry by, and one copying stored
// messages to another stream gives AppendAt.
func HeaderTTL(hdr []byte) time.Duration {
	v, ok := headerValue(hdr, TTLHeader)
	if !ok {
		return 0
	}
	ttl, _ := ParseTTL(v)
	return ttl
}

// headerValue returns the value of the first header named name in a raw
// header block, trimmed of spaces.
func headerValue(hdr []byte, name string) (string, bool) {
	_, rest, _ := bytes.Cut(hdr, crlf) // the NATS/1.0 status line
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, crlf)
		k, v, ok := bytes.Cut(line, []byte(":"))
		if ok && string(bytes.TrimSpace(k)) == name {
			return string(bytes.TrimSpace(v)), true
		}
	}
	return "", false
}

var crlf = []byte("\r\n")

// isDeleteMarker reports whether a header block is a delete marker's: a
// subject delete marker, or a key-value purge (which markers do not
// replace either).
func isDeleteMarker(hdr []byte) bool {
	if _, ok := headerValue(hdr, "Nats-Marker-Reason"); ok {
		return true
	}
	v, _ := headerValue(hdr, "KV-Operation")
	return v == "PURGE"
}

// MarkerHeader is the header block of a subject delete marker with ttl:
// Nats-Marker-Reason: MaxAge, Nats-TTL and a rollup of its subject, as the
// reference server writes it.
func MarkerHeader(ttl time.Duration) []byte {
	b := make([]byte, 0, 96)
	b = append(b, "NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\n"...)
	b = append(b, TTLHeader+": "...)
	b = append(b, ttl.String()...)
	b = append(b, "\r\nNats-Rollup: sub\r\n\r\n"...)
	return b
}
