package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"github.com/skiffmq/skiff/broker"
	"github.com/skiffmq/skiff/internal/gctune"
	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// serveFlags are the flags of `skiff serve`, named as nats-server's.
type serveFlags struct {
	addr, config, user, pass, token, name, storeDir string
	logFile, pidFile, signal                        string
	cluster, routes, clusterName, clusterAdvertise  string
	port, httpPort, profPort                        int
	debug, trace, streams, noAdvertise              bool
}

// serveCmd runs the broker until SIGINT or SIGTERM, then shuts it down
// gracefully. What the configuration file means is package broker's; this
// command only reads flags, which win over the file, as in nats-server.
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
	fs.StringVar(&f.cluster, "cluster", "", "cluster listen URL, such as nats://127.0.0.1:6222 (see docs/cluster.md)")
	fs.StringVar(&f.routes, "routes", "", "comma-separated route URLs to join, such as nats-route://127.0.0.1:6222")
	fs.StringVar(&f.clusterName, "cluster_name", "", "cluster name (peers must have the same)")
	fs.BoolVar(&f.noAdvertise, "no_advertise", false, "do not advertise the cluster's client URLs to clients")
	fs.StringVar(&f.clusterAdvertise, "cluster_advertise", "", "host:port peers dial this server's routes at (default: the listen address)")
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
	for _, n := range []string{"l", "log"} {
		fs.StringVar(&f.logFile, n, "", "append the log to this file (SIGUSR1 reopens it)")
	}
	for _, n := range []string{"P", "pid"} {
		fs.StringVar(&f.pidFile, n, "", "write the process ID to this file")
	}
	for _, n := range []string{"sl", "signal"} {
		fs.StringVar(&f.signal, n, "", "send a running server SIGNAL[=PID] and exit: stop, quit, term, reopen, ldm (PID default: from -P or the config's pid_file)")
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	cfg := broker.DefaultConfig()
	if f.config != "" {
		var err error
		if cfg, err = broker.LoadConfig(f.config); err != nil {
			fmt.Fprintln(stderr, "skiff serve:", err)
			return 1
		}
	}
	if err := applyFlags(fs, &f, &cfg); err != nil {
		fmt.Fprintln(stderr, "skiff serve:", err)
		return 2
	}
	cfg.Log.Output = stderr
	if f.signal != "" {
		return signalCmd(f.signal, cfg.PIDFile, stderr)
	}
	if err := chaosFS(&cfg); err != nil {
		fmt.Fprintln(stderr, "skiff serve:", err)
		return 1
	}

	// Catch the signals before the listener is announced, so a supervisor
	// that signals as soon as it sees the address gets a clean shutdown
	// rather than the default action.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, serveSignals...)
	defer signal.Stop(sig)

	// The garbage collector paced from the live heap, not Go's default
	// (internal/gctune; an operator's GOGC wins).
	defer gctune.Start(gctune.Options{})()

	b, err := broker.Start(cfg)
	if err != nil {
		fmt.Fprintln(stderr, "skiff serve:", err)
		return 1
	}
	fmt.Fprintf(stdout, "skiff %s listening on %s", version, b.ClientURL())
	if a := b.Server().MonitorAddr(); a != nil {
		fmt.Fprintf(stdout, ", monitoring on http://%s", a)
	}
	if js := b.JetStream(); js != nil {
		fmt.Fprintf(stdout, ", streams in %s", js.StoreDir())
	}
	fmt.Fprintln(stdout)

	return waitForSignals(b, sig, stderr)
}

// waitForSignals runs the broker until a signal stops it: INT or TERM
// shut it down, USR2 puts it in lame duck mode (a second INT or TERM then
// cuts that short), USR1 reopens the log file.
func waitForSignals(b *broker.Broker, sig <-chan os.Signal, stderr io.Writer) int {
	var ldm chan error
	for {
		select {
		case s := <-sig:
			switch {
			case isReopen(s):
				if err := b.ReopenLog(); err != nil {
					fmt.Fprintln(stderr, "skiff serve: reopening the log:", err)
				}
				continue
			case isLameDuck(s):
				if ldm == nil {
					ldm = make(chan error, 1)
					go func() { ldm <- b.LameDuck(context.Background()) }()
				}
				continue
			}
			if err := b.Shutdown(context.Background()); err != nil {
				fmt.Fprintln(stderr, "skiff serve:", err)
				return 1
			}
			return 0
		case err := <-ldm:
			if err != nil {
				fmt.Fprintln(stderr, "skiff serve:", err)
				return 1
			}
			return 0
		}
	}
}

// signalCmd sends a running server the signal named by spec
// (NAME[=PID]); the PID is otherwise read from pidFile.
func signalCmd(spec, pidFile string, stderr io.Writer) int {
	name, pidText, hasPID := strings.Cut(spec, "=")
	if _, ok := commandSignals[name]; !ok {
		fmt.Fprintf(stderr, "skiff serve: --signal %q: want stop, quit, term, reopen or ldm (reload is not implemented)\n", name)
		return 2
	}
	if !hasPID {
		if pidFile == "" {
			fmt.Fprintln(stderr, "skiff serve: --signal needs =PID, -P PIDFILE or a config with pid_file")
			return 2
		}
		b, err := os.ReadFile(pidFile)
		if err != nil {
			fmt.Fprintln(stderr, "skiff serve:", err)
			return 1
		}
		pidText = strings.TrimSpace(string(b))
	}
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		fmt.Fprintf(stderr, "skiff serve: --signal: bad PID %q\n", pidText)
		return 2
	}
	if err := sendSignal(pid, name); err != nil {
		fmt.Fprintf(stderr, "skiff serve: signal %s to %d: %v\n", name, pid, err)
		return 1
	}
	return 0
}

// applyFlags sets what the command line gave over cfg: a flag given wins
// over the file, as in nats-server.
func applyFlags(fs *flag.FlagSet, f *serveFlags, cfg *broker.Config) error {
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	given := func(names ...string) bool {
		for _, n := range names {
			if set[n] {
				return true
			}
		}
		return false
	}
	opts := &cfg.Server
	if given("js", "jetstream") {
		cfg.JetStreamEnabled = f.streams
	}
	if given("sd", "store_dir") {
		cfg.JetStream.StoreDir = f.storeDir
	}
	if given("a", "addr", "net") {
		opts.Host = f.addr
	}
	if given("p", "port") {
		opts.Port = f.port
	}
	if given("m", "http_port") {
		opts.HTTPPort = f.httpPort
	}
	if given("n", "name", "server_name") {
		opts.ServerName = f.name
	}
	if given("profile") {
		cfg.ProfPort = f.profPort
	}
	if f.user != "" {
		opts.Username, opts.Password = f.user, f.pass
	}
	if f.token != "" {
		opts.Token = f.token
	}
	if f.debug {
		cfg.Log.Debug = true
	}
	if f.trace {
		cfg.Log.Trace = true
	}
	if f.logFile != "" {
		cfg.Log.File = f.logFile
	}
	if f.pidFile != "" {
		cfg.PIDFile = f.pidFile
	}
	return applyClusterFlags(set, f, &opts.Cluster)
}

// applyClusterFlags sets the cluster options the flags give.
func applyClusterFlags(set map[string]bool, f *serveFlags, c *server.ClusterOptions) error {
	if set["cluster"] {
		if err := clusterListen(f.cluster, c); err != nil {
			return fmt.Errorf("--cluster %q: %w", f.cluster, err)
		}
	}
	if set["routes"] {
		c.Routes = nil
		for _, r := range strings.Split(f.routes, ",") {
			if r = strings.TrimSpace(r); r == "" {
				continue
			}
			if _, err := server.ParseRouteURL(r); err != nil {
				return fmt.Errorf("--routes: %w", err)
			}
			c.Routes = append(c.Routes, r)
		}
	}
	if set["cluster_name"] {
		c.Name = f.clusterName
	}
	if set["no_advertise"] {
		c.NoAdvertise = f.noAdvertise
	}
	if set["cluster_advertise"] {
		if _, err := server.ParseRouteURL(f.clusterAdvertise); err != nil {
			return fmt.Errorf("--cluster_advertise: %w", err)
		}
		c.Advertise = f.clusterAdvertise
	}
	return nil
}

// clusterListen reads --cluster: [nats://][user:pass@]host:port, where
// port -1 picks a random one (which url.Parse refuses, so the URL is
// taken apart by hand).
func clusterListen(s string, c *server.ClusterOptions) error {
	if scheme, rest, ok := strings.Cut(s, "://"); ok {
		if scheme != "nats" && scheme != "nats-route" {
			return fmt.Errorf("scheme %q (want nats://)", scheme)
		}
		s = rest
	}
	var user *url.Userinfo
	if i := strings.LastIndex(s, "@"); i >= 0 {
		u, err := url.Parse("nats://" + s[:i] + "@h")
		if err != nil {
			return err
		}
		user, s = u.User, s[i+1:]
	}
	host, port, err := net.SplitHostPort(strings.TrimSuffix(s, "/"))
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < server.RandomPort || n == 0 || n > 65535 {
		return fmt.Errorf("bad port %q", port)
	}
	c.Host, c.Port = host, n
	if user != nil {
		c.Username = user.Username()
		c.Password, _ = user.Password()
	}
	return nil
}
