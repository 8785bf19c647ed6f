// Package corebench compares the core broker with nats-server, both run as
// separate processes on loopback, with the real `nats bench` CLI and a few
// workloads it cannot express (subscription churn while publishing, memory
// per connection and per subscription). Every scenario runs against both
// servers in alternation, A B A B ..., and reports medians and ratios; the
// result is docs/benchmarks/core.md (see `skiff bench core`).
package corebench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/skiffmq/skiff/internal/portlock"
)

// Options configure a comparison. Binaries are paths; zero values of the
// numbers mean their defaults.
type Options struct {
	SkiffBin      string // `skiff` (serve)
	NATSServerBin string // the reference nats-server
	NATSBin       string // the nats CLI, for `nats bench`
	Runs          int    // alternations per scenario (default 5)
	Msgs          int    // messages per `nats bench` run (default 1,000,000)
	Duration      time.Duration
	// Scenarios limits the run to these names (default all).
	Scenarios []string
	Log       io.Writer // progress (default discard)

	home  string // the nats CLI's home directory, made on first use
	notes []note // what the measurement running now noted (Options.note)
}

// A note is a secondary measurement of a run, beside its figure: the CPU
// each message cost, for instance. The report gives each one's medians
// (WriteNotes).
type note struct {
	key string
	v   float64
}

// note records a secondary measurement of the run in progress.
func (o *Options) note(key string, v float64) { o.notes = append(o.notes, note{key, v}) }

func (o *Options) setDefaults() {
	if o.Runs <= 0 {
		o.Runs = 5
	}
	if o.Msgs <= 0 {
		o.Msgs = 1_000_000
	}
	if o.Duration <= 0 {
		o.Duration = 5 * time.Second
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
}

// Target is one server under test.
type Target struct {
	Name string
	bin  string
	args func(port int, conf string) []string
}

// Targets returns Skiff and nats-server with equivalent settings: loopback,
// no monitoring, and the same configuration file (both read nats-server's
// syntax).
func Targets(o *Options) []Target {
	return []Target{
		{Name: "skiff", bin: o.SkiffBin, args: func(p int, conf string) []string {
			return []string{"serve", "-c", conf, "-a", "127.0.0.1", "-p", strconv.Itoa(p), "-m", "0"}
		}},
		{Name: "nats-server", bin: o.NATSServerBin, args: func(p int, conf string) []string {
			return []string{"-c", conf, "-a", "127.0.0.1", "-p", strconv.Itoa(p)}
		}},
	}
}

// Proc is a running server.
type Proc struct {
	cmd  *exec.Cmd
	URL  string
	dir  string // the store directory made for STORE_DIR, removed at Stop
	logs bytes.Buffer

	// What Restart starts again: the target, its port and configuration
	// (with STORE_DIR replaced).
	target   Target
	port     int
	config   string
	reserved *portlock.Reservation // port's, released at Stop
}

// Start runs the target on a free loopback port with the given
// configuration text (nats-server syntax; "" for defaults) and waits until
// it accepts.
func (t Target) Start(ctx context.Context, config string) (*Proc, error) {
	port, err := portlock.Reserve(1)
	if err != nil {
		return nil, err
	}
	return t.startOn(ctx, port, config)
}

// startOn is Start on a given client port.
// The Proc holds the port's reservation until Stop.
func (t Target) startOn(ctx context.Context, port *portlock.Reservation, config string) (*Proc, error) {
	var err error
	p := &Proc{URL: fmt.Sprintf("nats://127.0.0.1:%d", port.Ports[0]), target: t, port: port.Ports[0], reserved: port}
	if strings.Contains(config, storeDirMark) {
		if p.dir, err = os.MkdirTemp("", "corebench-store-*"); err != nil {
			port.Release()
			return nil, err
		}
		config = strings.ReplaceAll(config, storeDirMark, p.dir)
	}
	p.config = config
	if err := p.launch(ctx); err != nil {
		p.removeDir()
		port.Release()
		return nil, err
	}
	return p, nil
}

// launch writes the configuration to a file and runs the server with it,
// and waits until it accepts.
func (p *Proc) launch(ctx context.Context) error {
	t := p.target
	conf, err := os.CreateTemp("", "corebench-*.conf")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(conf.Name()) }()
	if _, err := conf.WriteString(p.config + "\n"); err != nil {
		return err
	}
	if err := conf.Close(); err != nil {
		return err
	}
	p.logs.Reset()
	p.cmd = exec.CommandContext(ctx, t.bin, t.args(p.port, conf.Name())...)
	p.cmd.Stdout, p.cmd.Stderr = &p.logs, &p.logs
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", t.Name, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "nats://"))
		if err == nil {
			_ = c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	return fmt.Errorf("%s did not start: %s", t.Name, p.logs.String())
}

// Kill kills the server with SIGKILL (kill -9) and waits for it; its
// store stays, for Restart.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

// Restart starts a killed server again, on the same port, configuration
// and store.
func (p *Proc) Restart(ctx context.Context) error { return p.launch(ctx) }

// PID returns the server's process ID.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Stop terminates the server and waits for it.
func (p *Proc) Stop() {
	_ = p.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
	p.removeDir()
	p.reserved.Release()
}

func (p *Proc) removeDir() {
	if p.dir != "" {
		_ = os.RemoveAll(p.dir)
	}
}

// rssBytes reads a process's resident set size from /proc.
func rssBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("corebench: no VmRSS")
}
