package broker

import (
	"fmt"
	"log/slog"
	"os"
	"time"
)

// LevelTrace is the level of protocol traces (nats-server's trace), below
// slog.LevelDebug.
const LevelTrace = slog.LevelDebug - 4

// logSink is the broker's logger and the file it writes to, if any.
type logSink struct {
	logger *slog.Logger
	file   *os.File // nil when writing to LogOptions.Output
}

// openLog builds the logger LogOptions describe.
func openLog(o LogOptions) (*logSink, error) {
	s := &logSink{}
	w := o.Output
	if w == nil {
		w = os.Stderr
	}
	if o.File != "" {
		f, err := os.OpenFile(o.File, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
		if err != nil {
			return nil, fmt.Errorf("broker: log_file: %w", err)
		}
		s.file, w = f, f
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
	if s.file == nil {
		return nil
	}
	return s.file.Close()
}
