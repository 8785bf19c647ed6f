package broker

import (
	"io"

	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// Config is everything a broker is configured with: the NATS server,
// JetStream on top of it, logging, and the process's files. Start from
// DefaultConfig (LoadConfig does); a zero Config has JetStream off and
// monitoring off.
type Config struct {
	// Server configures the NATS server: listeners, limits, auth, TLS,
	// monitoring. Its zero fields mean server.DefaultOptions' values.
	Server server.Options
	// JetStreamEnabled turns streams on (DefaultConfig: on), with the
	// options in JetStream (zero fields mean jetstream's defaults).
	JetStreamEnabled bool
	JetStream        jetstream.Options
	// Log says what is logged and where. Server.Logger, if an embedder
	// sets it, takes precedence and Log is ignored.
	Log LogOptions
	// PIDFile, if set, is written with the process ID at Start and
	// removed at Shutdown (nats-server's pid_file).
	PIDFile string
	// ProfPort, if not 0, serves Go's pprof endpoints on
	// 127.0.0.1:ProfPort (nats-server's prof_port).
	ProfPort int
}

// LogOptions configure the broker's log. The zero value logs at INFO to
// Output with local timestamps.
type LogOptions struct {
	// Debug and Trace lower the level to DEBUG and to protocol traces.
	Debug, Trace bool
	// NoTime leaves timestamps out (nats-server's logtime: false), and
	// UTC writes them in UTC (logtime_utc).
	NoTime, UTC bool
	// File, if set, is appended to instead of writing to Output
	// (nats-server's log_file).
	File string
	// Output receives the log when File is empty (default os.Stderr).
	Output io.Writer
}

// DefaultConfig is what `skiff serve` runs with and no file: the server's
// defaults with monitoring on port 8222, and JetStream on with its
// defaults. LoadConfig starts from it with monitoring off: a file turns it
// on, as nats-server's does.
func DefaultConfig() Config {
	return Config{Server: server.DefaultOptions(), JetStreamEnabled: true}
}
