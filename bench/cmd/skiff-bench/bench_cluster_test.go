package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBenchClusterCmd is a smoke run of `skiff bench cluster`: one run of
// each scenario, a few hundred milliseconds each, against three Skiff
// processes and three nats-server processes. It needs tools/bin/nats-server
// and tools/bin/nats (make tools), and builds skiff.
func TestBenchClusterCmd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six servers")
	}
	root, err := filepath.Abs("../../..")
	require.NoError(t, err)
	natsServer, natsCLI := filepath.Join(root, "tools/bin/nats-server"), filepath.Join(root, "tools/bin/nats")
	for _, bin := range []string{natsServer, natsCLI} {
		if _, err := os.Stat(bin); err != nil {
			t.Skipf("%v (make tools)", err)
		}
	}
	skiff := filepath.Join(t.TempDir(), "skiff")
	build := exec.Command("go", "build", "-o", skiff, "./cmd/skiff")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "%s", out)

	report := filepath.Join(t.TempDir(), "cluster.md")
	var stdout, stderr bytes.Buffer
	code := benchCmd([]string{"cluster", "--skiff", skiff, "--nats-server", natsServer, "--nats", natsCLI,
		"--runs", "1", "--msgs", "20000", "--duration", "300ms", "--out", report}, &stdout, &stderr)
	require.Equal(t, 0, code, "stderr: %s", stderr.String())
	md, err := os.ReadFile(report)
	require.NoError(t, err)
	require.Equal(t, stdout.String(), string(md))
	for _, want := range []string{"# Cluster against a nats-server cluster", "Machine", "fan-out across servers",
		"queue-group request/reply across servers", "churn across servers", "## How to read this"} {
		require.Contains(t, string(md), want)
	}
	require.NotContains(t, string(md), "no result", "every scenario measured on both clusters:\n%s\n%s", md, stderr.String())
	require.Contains(t, stderr.String(), "churn handled")
	t.Logf("%s", strings.TrimSpace(stderr.String()))
}
