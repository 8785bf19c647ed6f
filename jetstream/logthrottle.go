package jetstream

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// warnEvery is how often a repeated warning is logged: a full disk
// refuses every publish, and one line each would flood the log.
const warnEvery = 10 * time.Second

// logThrottle logs the first of a run of warnings, then at most one every
// warnEvery, saying how many it left out meanwhile. One per kind of
// warning of a stream or consumer. The zero value is ready; safe for
// concurrent use.
type logThrottle struct {
	mu struct {
		sync.Mutex
		last       time.Time
		suppressed int
	}
}

// log logs msg at level unless one was logged less than warnEvery ago.
func (lt *logThrottle) log(l *slog.Logger, level slog.Level, msg string, args ...any) {
	now := time.Now()
	lt.mu.Lock()
	if !lt.mu.last.IsZero() && now.Sub(lt.mu.last) < warnEvery {
		lt.mu.suppressed++
		lt.mu.Unlock()
		return
	}
	n := lt.mu.suppressed
	lt.mu.last, lt.mu.suppressed = now, 0
	lt.mu.Unlock()
	if n > 0 {
		args = append(args, "repeated", n)
	}
	l.Log(context.Background(), level, msg, args...)
}
