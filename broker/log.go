package broker

import (
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// LevelTrace is the level of protocol traces (nats-server's trace), below
// slog.LevelDebug.
const LevelTrace = slog.LevelDebug - 4

// logSink is the broker's logger and the file it writes to, if any.
type logSink struct {
	logger *slog.Logger
	path   string // the log file; "" when writing to LogOptions.Output
	mu     struct {
		sync.Mutex
		file *os.File // reopen swaps it
	}
}

// Write implements io.Writer for the handler, on the current file.
func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.file.Write(p)
}

func openLogFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("broker: log_file: %w", err)
	}
	return f, nil
}

// reopen starts writing to a new file at the same path, for rotation.
func (s *logSink) reopen() error {
	if s.path == "" {
		return nil
	}
	f, err := openLogFile(s.path)
	if err != nil {
		return err
	}
	s.mu.Lock()
	old := s.mu.file
	s.mu.file = f
	s.mu.Unlock()
	return old.Close()
}

// openLog builds the logger LogOptions describe.
func openLog(o LogOptions) (*logSink, error) {
	s := &logSink{}
	w := o.Output
	if w == nil {
		w = os.Stderr
	}
	if o.File != "" {
		f, err := openLogFile(o.File)
		if err != nil {
			return nil, err
		}
		s.mu.file, s.path, w = f, o.File, s
	}
	level := slog.LevelInfo
	switch {
	case o.Trace:
		level = LevelTrace
	case o.Debug:
		level = slog.LevelDebug
	}
	ho := &slog.HandlerOptions{Level: level}
	if o.NoTime || o.UTC {
		ho.ReplaceAttr = func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) > 0 || a.Key != slog.TimeKey {
				return a
			}
			if o.NoTime {
				return slog.Attr{}
			}
			return slog.Time(slog.TimeKey, a.Value.Time().In(time.UTC))
		}
	}
	s.logger = slog.New(slog.NewTextHandler(w, ho))
	return s, nil
}

func (s *logSink) close() error {
	if s.path == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.file.Close()
}
