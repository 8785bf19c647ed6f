package server_test

import (
	"bytes"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/natscli"
	"github.com/skiffmq/skiff/server"
)

// TestNATSCLI drives Skiff with the real `nats` CLI (natscli, pinned in
// tools/nats and built into tools/bin by `make tools`), as a user of
// `make run` would.
func TestNATSCLI(t *testing.T) {
	bin := natscli.Path(t)

	t.Run("pub/sub", func(t *testing.T) {
		s := RunServer(t, server.Options{})
		cli := natscli.New(t, bin, s.ClientURL())
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
		cli := natscli.New(t, bin, s.ClientURL())
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
		cli := natscli.New(t, bin, s.ClientURL())
		// `sub --count` does not auto-unsubscribe, so the members run
		// until stopped, dumping one JSON file per message.
		dirs := []string{filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")}
		var members []*natscli.Proc
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
		cli := natscli.New(t, bin, s.ClientURL())
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
		cli := natscli.New(t, bin, s.ClientURL())
		nc := Connect(t, s)
		sub, err := nc.SubscribeSync("cli.hdr")
		require.NoError(t, err)
		require.NoError(t, nc.Flush())
		cli.Run("pub", "cli.hdr", "hello", "-H", "k:v", "-H", "X-Trace:abc")
		m := requireNext(t, sub, "hello")
		require.Equal(t, "v", m.Header.Get("k"), "headers: %v", m.Header)
		require.Equal(t, "abc", m.Header.Get("X-Trace"), "headers: %v", m.Header)
	})

	t.Run("bench pub/sub", func(t *testing.T) {
		const msgs, clients = 10_000, 2
		s := RunServer(t, server.Options{})
		cli := natscli.New(t, bin, s.ClientURL())
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
		cli := natscli.New(t, bin, s.ClientURL())
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
		out := natscli.New(t, bin, s.ClientURL()).Run("server", "check", "connection")
		require.True(t, strings.HasPrefix(out, "OK Connection OK:connected to "+s.ClientURL()), "got %q", out)
	})

	t.Run("rtt", func(t *testing.T) {
		s := RunServer(t, server.Options{})
		out := natscli.New(t, bin, s.ClientURL()).Run("rtt")
		require.Contains(t, out, s.ClientURL()+": ")
	})
}

// waitForSubs waits until the server holds at least n subscriptions, so a
// CLI subscriber started in the background is ready to receive.
func waitForSubs(t *testing.T, s *server.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for clientSubs(s) < n {
		if time.Now().After(deadline) {
			t.Fatalf("want %d subscriptions, have %d after 10s", n, clientSubs(s))
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
