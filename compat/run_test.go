package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeTest writes a shell script that stands in for a libtest binary.
func fakeTest(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fake-test")
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755))
	return path
}

func TestRunTest(t *testing.T) {
	dir := t.TempDir()
	t.Run("ok", func(t *testing.T) {
		bin := fakeTest(t, `echo "test $1 ... ok"`)
		o := runTest(bin, "a::b", dir, os.Environ(), 10*time.Second, filepath.Join(dir, "ok.log"))
		require.Equal(t, Passed, o.Status)
		log, err := os.ReadFile(o.Log)
		require.NoError(t, err)
		require.Contains(t, string(log), "test a::b ... ok")
	})
	t.Run("ok said, but the process failed", func(t *testing.T) {
		bin := fakeTest(t, `echo "test $1 ... ok"; exit 3`)
		o := runTest(bin, "a::b", dir, os.Environ(), 10*time.Second, filepath.Join(dir, "exit.log"))
		require.Equal(t, Failed, o.Status)
		require.Contains(t, o.Message, "exit status 3")
	})
	t.Run("hung: the test and what it started are killed", func(t *testing.T) {
		pidFile := filepath.Join(dir, "server.pid")
		// A "server" the test started, which outlives nothing.
		bin := fakeTest(t, "sleep 300 & echo $! > "+pidFile+"\nsleep 300\n")
		start := time.Now()
		o := runTest(bin, "a::b", dir, os.Environ(), 500*time.Millisecond, filepath.Join(dir, "hung.log"))
		require.Equal(t, TimedOut, o.Status)
		require.Less(t, time.Since(start), 30*time.Second)
		text, err := os.ReadFile(pidFile)
		require.NoError(t, err)
		pid, err := strconv.Atoi(strings.TrimSpace(string(text)))
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			return syscall.Kill(pid, 0) == syscall.ESRCH
		}, 10*time.Second, 20*time.Millisecond, "the test's child process survived")
	})
}

func TestHasStandIn(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "compat", "lenient"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "compat", "lenient", "jetstream.conf"), nil, 0o644))
	refused := func(cfg string) string {
		return `nats-server exited (exit status: 1) before listening: config "` + cfg +
			`"; output: skiff serve: config: x.conf:2: jetstream.strict: not supported by Skiff: no`
	}
	cases := []struct {
		name, msg string
		want      bool
	}{
		{"refused, with a stand-in", refused("tests/configs/jetstream.conf"), true},
		{"refused, no stand-in", refused("tests/configs/jwt.conf"), false},
		{"no configuration file", refused(""), false},
		{"not a refusal", `nats-server exited (exit status: 1) before listening: config "tests/configs/jetstream.conf"; output: clustering is not implemented by Skiff`, false},
		{"a test's own failure", "assertion failed", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { require.Equal(t, c.want, hasStandIn(root, c.msg)) })
	}
}
