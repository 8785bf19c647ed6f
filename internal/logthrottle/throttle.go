// Package logthrottle rate-limits a repeated log line: a full disk makes
// every publish, every sync round and every ack fail the same way, and one
// line each would flood the log and hide everything else.
//
//	var warn logthrottle.Throttle // one per kind of line, per stream
//	...
//	warn.Log(logger, slog.LevelError, "write failed; will retry", "err", err)
//
// The first line of a run is logged at once; after it at most one every
// Interval, carrying repeated=N, the lines left out since the last one.
// A Throttle is safe for concurrent use; its zero value is ready.
package logthrottle

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultInterval is how often a Throttle with no Interval logs a
// repeated line.
const DefaultInterval = 10 * time.Second

// Throttle logs the first of a run of log lines, then at most one every
// Interval, saying how many it left out meanwhile.
type Throttle struct {
	// Interval is the least time between two lines (0: DefaultInterval).
	// Set it before the first Log.
	Interval time.Duration

	now func() time.Time // time.Now unless a test sets it
	mu  struct {
		sync.Mutex
		last       time.Time
		suppressed int
	}
}

// Log logs msg with args at level on l, unless this Throttle logged less
// than Interval ago; then it only counts the line, and the next line
// logged carries the count as repeated=N. It reports whether it logged.
func (t *Throttle) Log(l *slog.Logger, level slog.Level, msg string, args ...any) bool {
	now := time.Now
	if t.now != nil {
		now = t.now
	}
	every := t.Interval
	if every <= 0 {
		every = DefaultInterval
	}
	at := now()
	t.mu.Lock()
	if !t.mu.last.IsZero() && at.Sub(t.mu.last) < every {
		t.mu.suppressed++
		t.mu.Unlock()
		return false
	}
	n := t.mu.suppressed
	t.mu.last, t.mu.suppressed = at, 0
	t.mu.Unlock()
	if n > 0 {
		args = append(args, "repeated", n)
	}
	l.Log(context.Background(), level, msg, args...)
	return true
}
