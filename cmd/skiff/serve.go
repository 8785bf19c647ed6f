package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// serveFlags are the flags of `skiff serve`, named as nats-server's.
type serveFlags struct {
	addr, config, user, pass, token, name, storeDir string
	port, httpPort, profPort                        int
	debug, trace, streams                           bool
}

// serveCmd runs the broker until SIGINT or SIGTERM, then shuts it down
// gracefully.
func serveCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("skiff serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f serveFlags
	for _, n := range []string{"a", "addr", "net"} {
		fs.StringVar(&f.addr, n, server.DefaultHost, "client listen address")
	}
	for _, n := range []string{"p", "port"} {
		fs.IntVar(&f.port, n, server.DefaultPort, "client port (-1 for a random one)")
	}
	for _, n := range []string{"m", "http_port"} {
		fs.IntVar(&f.httpPort, n, server.DefaultHTTPPort, "monitoring port (0 = off)")
	}
	for _, n := range []string{"c", "config"} {
		fs.StringVar(&f.config, n, "", "configuration file (see docs/config.md)")
	}
	for _, n := range []string{"n", "name", "server_name"} {
		fs.StringVar(&f.name, n, "", "server name (default: the server ID)")
	}
	for _, n := range []string{"js", "jetstream"} {
		fs.BoolVar(&f.streams, n, true, "enable streams (JetStream); -js=false turns them off")
	}
	for _, n := range []string{"sd", "store_dir"} {
		fs.StringVar(&f.storeDir, n, jetstream.DefaultStoreDir, "directory of the streams' files (created if missing)")
	}
	fs.IntVar(&f.profPort, "profile", 0, "serve Go's pprof profiles on this port (127.0.0.1; 0 = off)")
	fs.StringVar(&f.user, "user", "", "username required of clients")
	fs.StringVar(&f.pass, "pass", "", "password required of clients")
	fs.StringVar(&f.token, "auth", "", "token required of clients")
	for _, n := range []string{"D", "debug"} {
		fs.BoolVar(&f.debug, n, false, "debug logging")
	}
	for _, n := range []string{"V", "trace"} {
		fs.BoolVar(&f.trace, n, false, "protocol trace logging")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })

	cfg := defaultBrokerConfig()
	if f.config != "" {
		if err := loadConfig(f.config, &cfg); err != nil {
			fmt.Fprintln(stderr, "skiff serve:", err)
			return 1
		}
	}
	opts := &cfg.server
	if set["js"] || set["jetstream"] {
		cfg.streams = f.streams
	}
	if set["sd"] || set["store_dir"] {
		cfg.jetstream.StoreDir = f.storeDir
	}
	// Flags given on the command line win over the file, as in nats-server.
	if set["a"] || set["addr"] || set["net"] {
		opts.Host = f.addr
	}
	if set["p"] || set["port"] {
		opts.Port = f.port
	}
	if set["m"] || set["http_port"] {
		opts.HTTPPort = f.httpPort
	}
	if set["n"] || set["name"] || set["server_name"] {
		opts.ServerName = f.name
	}
	if f.user != "" {
		opts.Username, opts.Password = f.user, f.pass
	}
	if f.token != "" {
		opts.Token = f.token
	}
	level := slog.LevelInfo
	switch {
	case f.trace:
		level = slog.LevelDebug - 4
	case f.debug:
		level = slog.LevelDebug
	}
	opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	// Catch SIGINT and SIGTERM before the listener is announced, so a
	// supervisor that signals as soon as it sees the address gets a clean
	// shutdown rather than the default action.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)

	s, err := server.New(*opts)
	if err != nil {
		fmt.Fprintln(stderr, "skiff serve:", err)
		return 1
	}
	var js *jetstream.JetStream
	if cfg.streams {
		cfg.jetstream.Logger = opts.Logger
		if js, err = jetstream.New(s, cfg.jetstream); err != nil {
			fmt.Fprintln(stderr, "skiff serve:", err)
			return 1
		}
	}
	if err := s.Start(); err != nil {
		fmt.Fprintln(stderr, "skiff serve:", err)
		if js != nil {
			_ = js.Close()
		}
		return 1
	}
	fmt.Fprintf(stdout, "skiff %s listening on %s", version, s.ClientURL())
	if a := s.MonitorAddr(); a != nil {
		fmt.Fprintf(stdout, ", monitoring on http://%s", a)
	}
	if js != nil {
		fmt.Fprintf(stdout, ", streams in %s", js.StoreDir())
	}
	fmt.Fprintln(stdout)
	if f.profPort != 0 {
		startProfiling(f.profPort, stderr)
	}

	<-sig
	if err := s.Shutdown(context.Background()); err != nil {
		fmt.Fprintln(stderr, "skiff serve: shutdown:", err)
	}
	if js != nil {
		if err := js.Close(); err != nil {
			fmt.Fprintln(stderr, "skiff serve: closing streams:", err)
			return 1
		}
	}
	return 0
}
