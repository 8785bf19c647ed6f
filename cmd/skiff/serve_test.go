package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// TestServeBinary builds bin/skiff, runs `skiff serve` on a random port,
// uses it, and stops it with SIGTERM: it must exit 0 promptly.
func TestServeBinary(t *testing.T) {
	bin := buildSkiff(t)

	cmd, line := startServe(t, bin, 60*time.Second, "-p", "-1", "-m", "0", "--auth", "tok", "-sd", filepath.Join(t.TempDir(), "data"))
	url := clientURL.FindString(line)
	require.NotEmpty(t, url, "no URL in %q", line)

	nc, err := nats.Connect(url, nats.Token("tok"), nats.MaxReconnects(0))
	require.NoError(t, err)
	sub, err := nc.SubscribeSync("x")
	require.NoError(t, err)
	require.NoError(t, nc.Publish("x", []byte("y")))
	m, err := sub.NextMsg(2 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "y", string(m.Data))

	start := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "skiff serve must exit 0 on SIGTERM")
	require.Less(t, time.Since(start), 15*time.Second)
	nc.Close()
}

// built are the binaries the package's tests built, by build tags.
var built struct {
	sync.Mutex
	bins map[string]*builtBin
}

type builtBin struct {
	once sync.Once
	path string
	err  error
}

// buildSkiff builds bin/skiff once for the package's tests.
func buildSkiff(t *testing.T) string { return buildSkiffTags(t, "") }

// buildSkiffTags builds bin/skiff with the build tags (comma-separated;
// "" for none) once for the package's tests.
func buildSkiffTags(t *testing.T, tags string) string {
	built.Lock()
	if built.bins == nil {
		built.bins = map[string]*builtBin{}
	}
	b := built.bins[tags]
	if b == nil {
		b = &builtBin{}
		built.bins[tags] = b
	}
	built.Unlock()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "skiff-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, "skiff")
		build := exec.Command("go", "build", "-tags", tags, "-o", b.path, ".")
		build.Stderr = os.Stderr
		b.err = build.Run()
	})
	require.NoError(t, b.err)
	return b.path
}

// TestServeRefusesUnsupportedConfig: a file asking for something Skiff
// does not implement (here an export's latency tracking, a cluster option and a
// user's connection types) stops the binary before it listens, with every key named
// with its line, and a non-zero exit. Before, such a server started with
// a warning and no authentication at all.
func TestServeRefusesUnsupportedConfig(t *testing.T) {
	bin := buildSkiff(t)
	path := filepath.Join(t.TempDir(), "refused.conf")
	require.NoError(t, os.WriteFile(path, []byte(`port: -1
accounts {
  A: { users: [ {user: a, password: a} ], exports: [ {service: "x.>", latency: "lat"} ] }
}
cluster { listen: 127.0.0.1:-1, pool_size: 3 }
authorization {
  users: [ {user: a, password: b, allowed_connection_types: ["STANDARD"]} ]
}
`), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "-c", path, "-m", "0", "-sd", filepath.Join(t.TempDir(), "data"))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "stderr: %s", stderr.String())
	require.Equal(t, 1, exit.ExitCode())
	require.Empty(t, stdout.String(), "nothing listened")
	for _, want := range []string{
		"refused.conf:3: accounts.A.exports[0].latency: not supported by Skiff",
		"refused.conf:5: cluster.pool_size: not supported by Skiff",
		"refused.conf:7: authorization.users[0].allowed_connection_types: not supported by Skiff",
	} {
		require.Contains(t, stderr.String(), want)
	}
}

// TestServeFlagsOverFile: flags given win over the file, as in nats-server.
func TestServeFlagsOverFile(t *testing.T) {
	bin := buildSkiff(t)
	path := filepath.Join(t.TempDir(), "s.conf")
	require.NoError(t, os.WriteFile(path, []byte("port: 1\nauthorization { token: filetok }\njetstream: disabled\n"), 0o600))
	_, line := startServe(t, bin, 30*time.Second, "-c", path, "-p", "-1", "-m", "0", "--auth", "flagtok")
	require.NotContains(t, line, "streams in", "the file's jetstream: disabled holds")
	url := clientURL.FindString(line)
	require.NotContains(t, url, ":1\n")
	_, err := nats.Connect(url, nats.Token("filetok"), nats.MaxReconnects(0))
	require.Error(t, err, "the flag's token replaces the file's")
	nc, err := nats.Connect(url, nats.Token("flagtok"), nats.MaxReconnects(0))
	require.NoError(t, err)
	nc.Close()
}

// TestServeSignals: `skiff serve --signal reopen|ldm` reach a running
// server through its PID file: reopen starts a new log file where the old
// one was moved away, and ldm tells clients, closes them and exits 0.
func TestServeSignals(t *testing.T) {
	bin := buildSkiff(t)
	dir := t.TempDir()
	pidFile, logFile, conf := filepath.Join(dir, "skiff.pid"), filepath.Join(dir, "skiff.log"), filepath.Join(dir, "s.conf")
	require.NoError(t, os.WriteFile(conf, []byte("lame_duck_duration: \"2s\"\nlame_duck_grace_period: \"500ms\"\n"), 0o600))
	cmd, line := startServe(t, bin, 60*time.Second, "-c", conf, "-p", "-1", "-m", "0", "-js=false", "-P", pidFile, "-l", logFile)
	url := clientURL.FindString(line)

	signal := func(name string) {
		out, err := exec.Command(bin, "serve", "--signal", name, "-P", pidFile).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	require.NoError(t, os.Rename(logFile, logFile+".1"))
	signal("reopen")
	require.Eventually(t, func() bool { _, err := os.Stat(logFile); return err == nil }, 5*time.Second, 20*time.Millisecond)

	told := make(chan struct{})
	nc, err := nats.Connect(url, nats.MaxReconnects(0), nats.LameDuckModeHandler(func(*nats.Conn) { close(told) }))
	require.NoError(t, err)
	defer nc.Close()
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(logFile)
		return strings.Contains(string(b), "client connected")
	}, 5*time.Second, 20*time.Millisecond, "the reopened file takes the log")

	signal("ldm")
	select {
	case <-told:
	case <-time.After(10 * time.Second):
		t.Fatal("the client was not told of lame duck mode")
	}
	require.NoError(t, cmd.Wait(), "exit 0 after lame duck mode")
	_, err = os.Stat(pidFile)
	require.ErrorIs(t, err, os.ErrNotExist)
	b, err := os.ReadFile(logFile)
	require.NoError(t, err)
	require.Contains(t, string(b), "lame duck mode")

	out, err := exec.Command(bin, "serve", "--signal", "reload=1").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(out), "reload is not implemented")
}

// TestServeSignalStop: --signal quit and term shut the server down
// cleanly (exit 0, pid file removed); stop kills it, as nats-server's.
func TestServeSignalStop(t *testing.T) {
	bin := buildSkiff(t)
	for _, tc := range []struct {
		name  string
		clean bool
	}{
		{"quit", true},
		{"term", true},
		{"stop", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "skiff.pid")
			cmd, line := startServe(t, bin, 30*time.Second, "-p", "-1", "-m", "0", "-js=false", "-P", pidFile)
			nc, err := nats.Connect(clientURL.FindString(line), nats.MaxReconnects(0))
			require.NoError(t, err)
			defer nc.Close()

			out, err := exec.Command(bin, "serve", "--signal", tc.name, "-P", pidFile).CombinedOutput()
			require.NoError(t, err, "%s", out)
			err = cmd.Wait()
			if !tc.clean {
				var exit *exec.ExitError
				require.ErrorAs(t, err, &exit, "stop kills the server")
				ws, ok := exit.Sys().(syscall.WaitStatus)
				require.True(t, ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, "killed by SIGKILL: %v", err)
				return
			}
			require.NoError(t, err, "exit 0 after --signal %s", tc.name)
			_, err = os.Stat(pidFile)
			require.ErrorIs(t, err, os.ErrNotExist, "the pid file is removed")
			require.Eventually(t, nc.IsClosed, 5*time.Second, 10*time.Millisecond, "the client was disconnected")
		})
	}
}

// clientURL finds the client URL in the line `skiff serve` prints first.
var clientURL = regexp.MustCompile(`nats://[0-9.:]+`)

// startServe starts `bin serve args...`, bounded by limit, and returns
// the process and the first line it prints (with the client URL). The
// process is killed at the test's end if it still runs.
func startServe(t *testing.T, bin string, limit time.Duration, args ...string) (*exec.Cmd, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	cmd := exec.CommandContext(ctx, bin, append([]string{"serve"}, args...)...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		cancel()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	return cmd, line
}
