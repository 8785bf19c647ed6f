package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"

	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// Broker is a running Skiff: the NATS server and, if enabled, JetStream
// on it. Start one with Start and stop it with Shutdown; its methods are
// safe for concurrent use.
type Broker struct {
	srv  *server.Server
	js   *jetstream.JetStream // nil when JetStream is off
	log  *slog.Logger
	cfg  Config
	logs *logSink
	prof *http.Server
	pid  bool // the PID file was written (and so is ours to remove)

	mu struct {
		sync.Mutex
		done bool
		err  error
	}
}

// Start builds the server and JetStream from cfg and starts listening. It
// recovers every stream before the listener opens, so no publish reaches
// a stream that is not open. On error nothing is left running.
func Start(cfg Config) (*Broker, error) {
	b := &Broker{cfg: cfg}
	if err := b.start(cfg); err != nil {
		b.abort()
		return nil, err
	}
	return b, nil
}

func (b *Broker) start(cfg Config) (err error) {
	if cfg.Server.Logger == nil {
		if b.logs, err = openLog(cfg.Log); err != nil {
			return err
		}
		cfg.Server.Logger = b.logs.logger
	}
	b.log = cfg.Server.Logger
	if b.srv, err = server.New(cfg.Server); err != nil {
		return err
	}
	if cfg.JetStreamEnabled {
		if cfg.JetStream.Logger == nil {
			cfg.JetStream.Logger = b.log
		}
		if b.js, err = jetstream.New(b.srv, cfg.JetStream); err != nil {
			return err
		}
	}
	if err = b.srv.Start(); err != nil {
		return err
	}
	if cfg.PIDFile != "" {
		if err = os.WriteFile(cfg.PIDFile, fmt.Appendf(nil, "%d", os.Getpid()), 0o644); err != nil {
			return fmt.Errorf("broker: pid_file: %w", err)
		}
		b.pid = true
	}
	if cfg.ProfPort != 0 {
		if b.prof, err = startProfiling(cfg.ProfPort); err != nil {
			return err
		}
		b.log.Info("profiling", "addr", "http://"+b.prof.Addr+"/debug/pprof/")
	}
	return nil
}

// abort undoes a Start that failed half-way.
func (b *Broker) abort() {
	if b.srv != nil {
		_ = b.srv.Shutdown(context.Background())
	}
	if b.js != nil {
		_ = b.js.Close()
	}
	if b.prof != nil {
		_ = b.prof.Close()
	}
	if b.pid {
		_ = os.Remove(b.cfg.PIDFile)
	}
	if b.logs != nil {
		_ = b.logs.close()
	}
}

// Server returns the NATS server.
func (b *Broker) Server() *server.Server { return b.srv }

// JetStream returns the stream layer, or nil when it is off.
func (b *Broker) JetStream() *jetstream.JetStream { return b.js }

// Logger returns the broker's logger.
func (b *Broker) Logger() *slog.Logger { return b.log }

// ClientURL returns nats://host:port of the client listener.
func (b *Broker) ClientURL() string { return b.srv.ClientURL() }

// LameDuck stops the broker in lame duck mode (server.Server.LameDuck:
// no new clients, clients told, then closed one by one over
// LameDuckDuration), then does the rest of Shutdown.
func (b *Broker) LameDuck(ctx context.Context) error {
	err := b.srv.LameDuck(ctx)
	return errors.Join(err, b.Shutdown(ctx))
}

// ReopenLog closes and reopens the log file (log_file), for log rotation
// (SIGUSR1 in `skiff serve`, as nats-server). Without a log file it does
// nothing.
func (b *Broker) ReopenLog() error {
	if b.logs == nil {
		return nil
	}
	return b.logs.reopen()
}

// Shutdown stops the broker gracefully: the server first (no more
// publishes or acks; queued messages are delivered, bounded by ctx or the
// server's ShutdownTimeout), then JetStream (streams flushed and, per
// policy, fsynced), then the process files. Calling it again returns the
// first call's result.
func (b *Broker) Shutdown(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mu.done {
		return b.mu.err
	}
	b.mu.done = true
	var errs []error
	if err := b.srv.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("broker: server shutdown: %w", err))
	}
	if b.js != nil {
		if err := b.js.Close(); err != nil {
			errs = append(errs, fmt.Errorf("broker: closing streams: %w", err))
		}
	}
	if b.prof != nil {
		_ = b.prof.Close()
	}
	if b.pid {
		if err := os.Remove(b.cfg.PIDFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("broker: pid_file: %w", err))
		}
	}
	if b.logs != nil {
		errs = append(errs, b.logs.close())
	}
	b.mu.err = errors.Join(errs...)
	return b.mu.err
}
