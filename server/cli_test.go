package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/server"
)

// cliTimeout bounds every run of the nats CLI, background ones included.
const cliTimeout = 30 * time.Second

// TestNATSCLI drives Skiff with the real `nats` CLI (natscli, pinned in
// tools/nats and built into tools/bin by `make tools`), as a user of
// `make run` would.
func TestNATSCLI(t *testing.T) {
	bin := natsCLIPath(t)

	t.Run("pub/sub", func(t *testing.T) {
		s := RunServer(t, server.Options{})
		cli := newNATSCLI(t, bin, s)
		sub := cli.Start("sub", "cli.demo", "--count", "1")
		waitForSubs(t, s, 1)
		out := cli.Run("pub", "cli.demo", "hello")
		require.Contains(t, out, `Published 5 bytes to "cli.demo"`)
		out = sub.Wait()
		require.Contains(t, out, `Received on "cli.demo"`)
		require.Contains(t, out, "hello")
	})

	t.Run("hash wildcard", func(t *testing.T) {
		// '#' (zero or more tokens) is Skiff's; the CLI passes it through.
		s := RunServer(t, server.Options{})
		cli := newNATSCLI(t, bin, s)
		sub := cli.Start("sub", "orders.#", "--count", "2")
		waitForSubs(t, s, 1)
		cli.Run("pub", "orders", "zero")
		cli.Run("pub", "orders.eu.created", "two")
		out := sub.Wait()
		require.Contains(t, out, `Received on "orders"`)
		require.Contains(t, out, `Received on "orders.eu.created"`)
	})

	t.Run("queue group", func(t *testing.T) {
		const msgs = 10
		s := RunServer(t, server.Options{})
		cli := newNATSCLI(t, bin, s)
		// `sub --count` does not auto-unsubscribe, so the members run
		// until stopped, dumping one JSON file per message.
		dirs := []string{filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")}
		var members []*cliProc
		for _, d := range dirs {
			members = append(members, cli.Start("sub", "cli.work", "--queue", "workers", "--dump", d))
		}
		waitForSubs(t, s, len(dirs))
		cli.Run("pub", "cli.work", "job {{Count}}", "--count", strconv.Itoa(msgs))
		files := func() (all []string) {
			for _, d := range dirs {
				m, _ := filepath.Glob(filepath.Join(d, "*.json"))
				all = append(all, m...)
			}
			return all
		}
		require.Eventually(t, func() bool { return len(files()) >= msgs },
			10*time.Second, 10*time.Millisecond, "queue members did not receive %d messages", msgs)
		for _, m := range members {
			m.Stop()
		}
		var got []string
		for _, f := range files() {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			var m struct{ Subject, Data string } // Data is base64, as JSON encodes []byte
			require.NoError(t, json.Unmarshal(b, &m), "%s: %s", f, b)
			data, err := base64.StdEncoding.DecodeString(m.Data)
			require.NoError(t, err)
			got = append(got, string(data))
		}
		var want []string
		for i := 1; i <= msgs; i++ {
			want = append(want, fmt.Sprintf("job %d", i))
		}
		require.ElementsMatch(t, want, got, "each message goes to exactly one member")
	})

	t.Run("request/reply", func(t *testing.T) {
		s := RunServer(t, server.Options{})
		cli := newNATSCLI(t, bin, s)
		reply := cli.Start("reply", "cli.svc", "pong", "--count", "1")
		waitForSubs(t, s, 1)
		out := cli.Run("request", "cli.svc", "ping")
		require.Contains(t, out, "Received with rtt")
		require.Contains(t, out, "pong")
		// natscli v0.4.0 ends `reply --count` with log.Fatalf("Exiting"),
		// so it exits 1 on success, against nats-server too.
		out, code := reply.Exit()
		require.Equal(t, 1, code, "nats reply:\n%s", out)
		require.Contains(t, out, "Exiting")
		require.Contains(t, out, `Received on subject "cli.svc"`)
		require.Contains(t, out, "ping")
	})

	t.Run("headers", func(t *testing.T) {
		s := RunServer(t, server.Options{})
		cli := newNATSCLI(t, bin, s)
		nc := Connect(t, s)
		sub, err := nc.SubscribeSync("cli.hdr")
		require.NoError(t, err)
		require.NoError(t, nc.Flush())
		cli.Run("pub", "cli.hdr", "hello", "-H", "k:v", "-H", "X-Trace:abc")
		m, err := sub.NextMsg(5 * time.Second)
		require.NoError(t, err)
		require.Equal(t, "hello", string(m.Data))
		require.Equal(t, "v", m.Header.Get("k"), "headers: %v", m.Header)
		require.Equal(t, "abc", m.Header.Get("X-Trace"), "headers: %v", m.Header)
	})

	t.Run("bench pub/sub", func(t *testing.T) {
		const msgs, clients = 10_000, 2
		s := RunServer(t, server.Options{})
		cli := newNATSCLI(t, bin, s)
		dir := t.TempDir()
		subCSV, pubCSV := filepath.Join(dir, "sub.csv"), filepath.Join(dir, "pub.csv")
		n := strconv.Itoa(msgs)
		sub := cli.Start("bench", "sub", "cli.bench", "--msgs", n, "--size", "16",
			"--clients", strconv.Itoa(clients), "--no-progress", "--csv", subCSV)
		waitForSubs(t, s, clients)
		out := cli.Run("bench", "pub", "cli.bench", "--msgs", n, "--size", "16",
			"--clients", strconv.Itoa(clients), "--no-progress", "--csv", pubCSV)
		require.Contains(t, out, "publisher aggregated stats")
		out = sub.Wait()
		require.Contains(t, out, "subscriber aggregated stats")
		require.Contains(t, out, "(10,000 msgs)")
		// Publishers split the messages; every subscriber gets them all.
		require.Equal(t, []int{msgs / clients, msgs / clients}, benchCSVCounts(t, pubCSV))
		require.Equal(t, []int{msgs, msgs}, benchCSVCounts(t, subCSV))
	})

	t.Run("bench service", func(t *testing.T) {
		const msgs = 2_000
		s := RunServer(t, server.Options{})
		cli := newNATSCLI(t, bin, s)
		// serve runs until interrupted; it is ready once it answers.
		serve := cli.Start("bench", "service", "serve", "cli.service", "--no-progress")
		nc := Connect(t, s)
		require.Eventually(t, func() bool {
			m, err := nc.Request("cli.service", nil, 200*time.Millisecond)
			return err == nil && string(m.Data) == "ok"
		}, 10*time.Second, 50*time.Millisecond, "bench service serve never answered")
		csvPath := filepath.Join(t.TempDir(), "req.csv")
		out := cli.Run("bench", "service", "request", "cli.service", "--msgs", strconv.Itoa(msgs),
			"--size", "16", "--no-progress", "--csv", csvPath)
		require.Contains(t, out, "service requester stats")
		// The requester counts each request and its reply (as against
		// nats-server).
		require.Equal(t, []int{2 * msgs}, benchCSVCounts(t, csvPath))
		// micro discovery: $SRV.PING answered through an inbox.
		require.Contains(t, cli.Run("micro", "ls"), "nats-bench-service")
		require.Contains(t, cli.Run("micro", "info", "nats-bench-service"), "Subject: cli.service")
		require.Contains(t, serve.Stop(), "Starting Core NATS service server")
	})

	t.Run("server check connection", func(t *testing.T) {
		s := RunServer(t, server.Options{})
		out := newNATSCLI(t, bin, s).Run("server", "check", "connection")
		require.True(t, strings.HasPrefix(out, "OK Connection OK:connected to "+s.ClientURL()), "got %q", out)
	})

	t.Run("rtt", func(t *testing.T) {
		s := RunServer(t, server.Options{})
		out := newNATSCLI(t, bin, s).Run("rtt")
		require.Contains(t, out, s.ClientURL()+": ")
	})
}

// natsCLIPath returns tools/bin/nats under the module root. It fails
// rather than skips when the binary is missing: `make test` builds it
// first, and a plain `go test` should say what is missing, not pass
// with the CLI untested.
func natsCLIPath(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, dir, parent, "no go.mod above the test's directory")
		dir = parent
	}
	bin := filepath.Join(dir, "tools", "bin", "nats")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the nats CLI is not built (%v): run `make tools` (`make test` does it first)", err)
	}
	return bin
}

// natsCLI runs the nats CLI against one server, with no user context:
// --no-context, a private HOME and no NATS_* variables from the caller.
type natsCLI struct {
	t   *testing.T
	bin string
	url string
	env []string
}

func newNATSCLI(t *testing.T, bin string, s *server.Server) *natsCLI {
	home := t.TempDir()
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config")}
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "NATS_"), strings.HasPrefix(kv, "HOME="), strings.HasPrefix(kv, "XDG_CONFIG_HOME="):
		default:
			env = append(env, kv)
		}
	}
	return &natsCLI{t: t, bin: bin, url: s.ClientURL(), env: env}
}

// cliProc is one nats CLI process; its output holds stdout and stderr
// interleaved, and is read only after the process has exited.
type cliProc struct {
	t      *testing.T
	args   []string
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	out    bytes.Buffer
	err    error
}

// Start runs the CLI in the background; it is interrupted when the test
// ends if it has not exited by then.
func (c *natsCLI) Start(args ...string) *cliProc {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	p := &cliProc{t: c.t, args: args, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	cmd := exec.CommandContext(ctx, c.bin, append([]string{"--no-context", "--server", c.url}, args...)...)
	cmd.Env = c.env
	cmd.Stdout, cmd.Stderr = &p.out, &p.out
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		cancel()
		c.t.Fatalf("nats %s: %v", strings.Join(args, " "), err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	c.t.Cleanup(func() { p.Stop() })
	return p
}

// Run runs the CLI to completion and returns its output, failing the test
// unless it exits 0.
func (c *natsCLI) Run(args ...string) string {
	c.t.Helper()
	return c.Start(args...).Wait()
}

// Wait waits for the process to exit and returns its output, failing the
// test unless it exited 0.
func (p *cliProc) Wait() string {
	p.t.Helper()
	out, code := p.Exit()
	require.Zero(p.t, code, "nats %s:\n%s", strings.Join(p.args, " "), out)
	return out
}

// Exit waits for the process to exit and returns its output and exit
// code, failing the test if it was cut off at cliTimeout or did not run.
func (p *cliProc) Exit() (string, int) {
	p.t.Helper()
	<-p.done
	timedOut := p.ctx.Err() != nil
	p.cancel()
	out := p.out.String()
	if timedOut {
		p.t.Fatalf("nats %s: still running after %v: %v\n%s", strings.Join(p.args, " "), cliTimeout, p.err, out)
	}
	if p.err == nil {
		return out, 0
	}
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) || !ee.Exited() {
		p.t.Fatalf("nats %s: %v\n%s", strings.Join(p.args, " "), p.err, out)
	}
	return out, ee.ExitCode()
}

// Stop interrupts the process if it is still running and returns its
// output, whatever its exit status.
func (p *cliProc) Stop() string {
	p.cancel()
	<-p.done
	return p.out.String()
}

// waitForSubs waits until the server holds at least n subscriptions, so a
// CLI subscriber started in the background is ready to receive.
func waitForSubs(t *testing.T, s *server.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.NumSubscriptions() < n {
		if time.Now().After(deadline) {
			t.Fatalf("want %d subscriptions, have %d after 10s", n, s.NumSubscriptions())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// benchCSVCounts returns the MsgCount column of a `nats bench --csv` file,
// one entry per client.
func benchCSVCounts(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	r := csv.NewReader(bytes.NewReader(b))
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	require.NoError(t, err)
	require.NotEmpty(t, rows)
	require.Equal(t, "MsgCount", rows[0][2], "header %v", rows[0])
	var counts []int
	for _, row := range rows[1:] {
		n, err := strconv.Atoi(row[2])
		require.NoError(t, err, "row %v", row)
		counts = append(counts, n)
	}
	return counts
}
