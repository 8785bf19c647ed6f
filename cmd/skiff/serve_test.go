package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// TestServeBinary builds bin/skiff, runs `skiff serve` on a random port,
// uses it, and stops it with SIGTERM: it must exit 0 promptly.
func TestServeBinary(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "skiff")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	require.NoError(t, build.Run())

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "serve", "-p", "-1", "-m", "0", "--auth", "tok", "-sd", filepath.Join(t.TempDir(), "data"))
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	url := regexp.MustCompile(`nats://[0-9.:]+`).FindString(line)
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
