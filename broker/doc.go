// Package broker is a whole Skiff broker as a library: the configuration
// file's meaning (Config, LoadConfig) and the lifecycle of the NATS server
// with JetStream on it (Start, Shutdown). `skiff serve` is a thin command
// over it; tests and programs that embed Skiff use it the same way.
//
//	cfg, err := broker.LoadConfig("skiff.conf") // or broker.DefaultConfig()
//	if err != nil {
//		return err // config: skiff.conf:12: accounts: not supported by Skiff: ...
//	}
//	b, err := broker.Start(cfg)
//	if err != nil { ... }
//	defer b.Shutdown(context.Background())
//	nc, _ := nats.Connect(b.ClientURL())
//
// # Configuration files
//
// The syntax is nats-server's, read by nats-server's own parser
// (github.com/nats-io/nats-server/v2/conf): includes, variables and
// environment references, sizes (1MB = 1,048,576; 1K = 1,000), durations
// quoted in Go syntax ("2s") or as bare seconds. The keys are nats-server's
// (docs/config.md lists them), with the same meanings, which a
// differential test checks against nats-server's own reading.
//
// # Fail closed
//
// Every key is either applied or refused. A key nats-server knows that
// Skiff does not implement (accounts, operators, gateways, an nkey user, a
// TLS option, a storage quota, ...) is an error wrapping ErrUnsupported
// that names the key and its line, and LoadConfig returns no Config: a
// security setting silently ignored would be a server silently open. A
// key neither knows is ErrUnknownKey; a bad value ErrInvalidValue. All of
// a file's problems are reported at once, as *ConfigError values joined
// with errors.Join.
//
// # Concurrency
//
// LoadConfig and ParseConfig may be called from any goroutine. A Broker's
// methods are safe for concurrent use.
package broker
