// Package natscli runs the real nats CLI (natscli, pinned in tools/nats and
// built into tools/bin by `make tools`) from tests, against one server and
// with no user context.
package natscli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Timeout bounds every run of the nats CLI, background ones included.
const Timeout = 30 * time.Second

// Path returns tools/bin/nats under the module root. It fails
// rather than skips when the binary is missing: `make test` builds it
// first, and a plain `go test` should say what is missing, not pass
// with the CLI untested.
func Path(t testing.TB) string {
	t.Helper()
	return toolPath(t, "nats")
}

// toolPath returns tools/bin/NAME under the module root, failing the
// test if it is not built.
func toolPath(t testing.TB, name string) string {
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
	bin := filepath.Join(dir, "tools", "bin", name)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is not built (%v): run `make tools` (`make test` does it first)", name, err)
	}
	return bin
}

// CLI runs the nats CLI against one server, with no user context:
// --no-context, a private HOME and no NATS_* variables from the caller.
type CLI struct {
	t   testing.TB
	bin string
	url string
	env []string
}

// New returns a CLI for the server at url, using the binary bin (see Path).
func New(t testing.TB, bin, url string) *CLI {
	home := t.TempDir()
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, ".config")}
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "NATS_"), strings.HasPrefix(kv, "HOME="), strings.HasPrefix(kv, "XDG_CONFIG_HOME="):
		default:
			env = append(env, kv)
		}
	}
	return &CLI{t: t, bin: bin, url: url, env: env}
}

// Proc is one nats CLI process; its output holds stdout and stderr
// interleaved, and is read only after the process has exited.
type Proc struct {
	t      testing.TB
	args   []string
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	out    bytes.Buffer
	err    error
}

// Start runs the CLI in the background; it is interrupted when the test
// ends if it has not exited by then.
func (c *CLI) Start(args ...string) *Proc {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	p := &Proc{t: c.t, args: args, ctx: ctx, cancel: cancel, done: make(chan struct{})}
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
func (c *CLI) Run(args ...string) string {
	c.t.Helper()
	return c.Start(args...).Wait()
}

// Wait waits for the process to exit and returns its output, failing the
// test unless it exited 0.
func (p *Proc) Wait() string {
	p.t.Helper()
	out, code := p.Exit()
	require.Zero(p.t, code, "nats %s:\n%s", strings.Join(p.args, " "), out)
	return out
}

// Exit waits for the process to exit and returns its output and exit
// code, failing the test if it was cut off at Timeout or did not run.
func (p *Proc) Exit() (string, int) {
	p.t.Helper()
	<-p.done
	timedOut := p.ctx.Err() != nil
	p.cancel()
	out := p.out.String()
	if timedOut {
		p.t.Fatalf("nats %s: still running after %v: %v\n%s", strings.Join(p.args, " "), Timeout, p.err, out)
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
func (p *Proc) Stop() string {
	p.cancel()
	<-p.done
	return p.out.String()
}
