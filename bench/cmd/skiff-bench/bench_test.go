package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/broker"
	"github.com/skiffmq/skiff/server"
)

// startSkiff runs an in-process Skiff on a random port of 127.0.0.1 and
// returns its URL.
func startSkiff(t *testing.T) string { return startSkiffWith(t, false) }

// startSkiffStreams is startSkiff with streams, stored in a temporary
// directory.
func startSkiffStreams(t *testing.T) string { return startSkiffWith(t, true) }

func startSkiffWith(t *testing.T, streams bool) string {
	t.Helper()
	cfg := broker.Config{
		// Logs discarded, as server.New's default.
		Server:           server.Options{Host: "127.0.0.1", Port: server.RandomPort, Logger: slog.New(slog.DiscardHandler)},
		JetStreamEnabled: streams,
	}
	if streams {
		cfg.JetStream.StoreDir = t.TempDir()
	}
	b, err := broker.Start(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = b.Shutdown(ctx)
	})
	return b.ClientURL()
}

// TestBenchLatencyCmd runs `skiff bench latency` against Skiff for one
// second and checks every file it writes.
func TestBenchLatencyCmd(t *testing.T) {
	url := startSkiff(t)
	dir := t.TempDir()
	out, jsonFile := filepath.Join(dir, "out"), filepath.Join(dir, "latency.json")
	var stdout, stderr bytes.Buffer
	code := benchCmd([]string{"latency", "--target", url, "--duration", "1s", "--warmup", "200ms",
		"--rate", "200", "--out", out, "--json", jsonFile}, &stdout, &stderr)
	require.Equal(t, 0, code, "stderr: %s", stderr.String())
	require.Contains(t, stdout.String(), "256B-200rps-1conn "+url+"  sent 200 lost 0")
	require.Contains(t, stdout.String(), "harness p99.99=")

	label := "nats-" + url[strings.LastIndex(url, ":")+1:]
	for _, name := range []string{"256B-200rps-1conn-" + label + "-corrected.hgrm", "256B-200rps-1conn-" + label + "-uncorrected.hgrm"} {
		b, err := os.ReadFile(filepath.Join(out, name))
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(string(b), " Value\tPercentile\tTotalCount\t1/(1-Percentile)"), name)
		require.Contains(t, string(b), "Total count    =          200", name)
	}
	f, err := os.Open(filepath.Join(out, "256B-200rps-1conn.png"))
	require.NoError(t, err)
	_, err = png.Decode(f)
	require.NoError(t, f.Close())
	require.NoError(t, err)

	b, err := os.ReadFile(jsonFile)
	require.NoError(t, err)
	var rep struct {
		Target      string             `json:"target"`
		URL         string             `json:"url"`
		Rate        float64            `json:"rate"`
		Size        int                `json:"size"`
		Corrected   map[string]float64 `json:"corrected"`
		Uncorrected map[string]float64 `json:"uncorrected"`
		Overhead    map[string]float64 `json:"harness_overhead"`
	}
	require.NoError(t, json.Unmarshal(b, &rep), "one run writes one object")
	require.Equal(t, "nats", rep.Target)
	require.Equal(t, url, rep.URL)
	require.EqualValues(t, 200, rep.Rate)
	require.Equal(t, 256, rep.Size)
	for _, m := range []map[string]float64{rep.Corrected, rep.Uncorrected, rep.Overhead} {
		require.Len(t, m, 8)
		require.Positive(t, m["50"])
		require.GreaterOrEqual(t, m["100"], m["99.9999"])
	}
	var counts struct{ Sent, Received, Lost int64 }
	require.NoError(t, json.Unmarshal(b, &counts))
	require.EqualValues(t, 200, counts.Sent)
	require.EqualValues(t, 200, counts.Received)
	require.Zero(t, counts.Lost)
}

// TestBenchThroughputCmd runs `skiff bench throughput` against Skiff with
// two publishers and two subscribers.
func TestBenchThroughputCmd(t *testing.T) {
	url := startSkiff(t)
	jsonFile := filepath.Join(t.TempDir(), "throughput.json")
	var stdout, stderr bytes.Buffer
	code := benchCmd([]string{"throughput", "--target", url, "--pub", "2", "--sub", "2", "--msgs", "5000",
		"--size", "1KB", "--timeout", "1m", "--json", jsonFile}, &stdout, &stderr)
	require.Equal(t, 0, code, "stderr: %s", stderr.String())
	require.Contains(t, stdout.String(), "2 publisher(s) x 5000 msgs of 1KB, 2 subscriber(s)")
	require.Contains(t, stdout.String(), "received 20000 of 20000")

	b, err := os.ReadFile(jsonFile)
	require.NoError(t, err)
	var res map[string]any
	require.NoError(t, json.Unmarshal(b, &res))
	require.Equal(t, "nats", res["target"])
	require.EqualValues(t, 10000, res["sent"])
	require.EqualValues(t, 20000, res["expected"])
	require.EqualValues(t, 20000, res["received"])
	require.Len(t, res["per_publisher"], 2)
	require.Len(t, res["per_subscriber"], 2)
	require.Positive(t, res["pub_rate"])
	require.Positive(t, res["sub_rate"])
}

// TestBenchCompareGivenURLs runs `skiff bench compare` on servers it is
// given rather than starts, with runs short enough for a test, and checks
// the report it writes.
func TestBenchCompareGivenURLs(t *testing.T) {
	a, b := startSkiff(t), startSkiff(t)
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := benchCmd([]string{"compare", "--peers", "skiff,other", "--url", "skiff=" + a, "--url", "other=" + b,
		"--duration", "200ms", "--warmup", "100ms", "--out", out, "--name", "smoke"}, &stdout, &stderr)
	require.Equal(t, 0, code, "stderr: %s", stderr.String())
	require.Contains(t, stdout.String(), filepath.Join(out, "smoke.md"))
	md, err := os.ReadFile(filepath.Join(out, "smoke.md"))
	require.NoError(t, err)
	for _, want := range []string{
		"# Latency: published suite",
		"| 256B-3000rps-1conn | other |",
		"## 1KB at 20000 requests/s over 25 connection(s)",
		"| harness alone (no-op target) |",
		"![1MB-100rps-1conn](smoke-1MB-100rps-1conn.png)",
	} {
		require.Contains(t, string(md), want)
	}
	pngs, err := filepath.Glob(filepath.Join(out, "smoke-*.png"))
	require.NoError(t, err)
	require.Len(t, pngs, 5, "one plot per configuration")
}

func TestBenchUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	require.Equal(t, 2, benchCmd([]string{"latency", "--size", "1GB"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), `bad size "1GB"`)
	stderr.Reset()
	require.Equal(t, 2, benchCmd([]string{"latency", "--target", "mqtt://127.0.0.1:1883", "--overhead=false"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), "no target for this URL scheme")
	stderr.Reset()
	require.Equal(t, 2, benchCmd([]string{"latency", "--suite", "nope"}, &stdout, &stderr))
	require.Contains(t, stderr.String(), `unknown suite "nope"`)
}

// TestBenchStreamsGivenURLs runs `skiff bench streams` against an
// in-process Skiff with streams and an embedded nats-server with
// JetStream, with runs short enough for a test, and checks the report.
func TestBenchStreamsGivenURLs(t *testing.T) {
	sk := startSkiffStreams(t)
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: t.TempDir()})
	require.NoError(t, err)
	go ns.Start()
	t.Cleanup(ns.Shutdown)
	require.True(t, ns.ReadyForConnections(10*time.Second))
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := benchCmd([]string{"streams", "--peers", "skiff,nats-server", "--url", "skiff=" + sk, "--url", "nats-server=" + ns.ClientURL(),
		"--modes", "memory,file", "--sizes", "256B", "--rate", "200", "--duration", "200ms", "--ack-duration", "200ms", "--warmup", "100ms",
		"--tp-sizes", "16B,1KB", "--msgs", "2000", "--tp-runs", "1", "--out", out, "--name", "smoke"}, &stdout, &stderr)
	require.Equal(t, 0, code, "stderr: %s", stderr.String())
	md, err := os.ReadFile(filepath.Join(out, "smoke.md"))
	require.NoError(t, err)
	for _, want := range []string{
		"# Streams: Skiff against nats-server JetStream and Kafka",
		"| async publish ≥ 1.5× | file | 16B |",
		"| sync publish p99 ≤ | memory | 256B |",
		"## Mode file",
		"### Latency, publish to acknowledgement",
		"| 1KB | 2000 | nats-server |",
		"![256B-200rps-1conn](smoke-file-deliver-256B-200rps-1conn.png)",
	} {
		require.Contains(t, string(md), want)
	}
	pngs, err := filepath.Glob(filepath.Join(out, "smoke-*.png"))
	require.NoError(t, err)
	require.Len(t, pngs, 4, "one plot per mode, kind and size")
}
