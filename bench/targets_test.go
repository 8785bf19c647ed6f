package bench_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"

	"github.com/skiffmq/skiff/bench"
	"github.com/skiffmq/skiff/broker"
	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// targetSuite is what every target must pass against a real server on
// 127.0.0.1: a short latency run with nothing lost and sane percentiles,
// and a throughput run in which every message reaches every subscriber.
// Loads are bounded: 500 requests, and 2 × msgs messages.
func targetSuite(t *testing.T, url string, msgs int) {
	t.Run("latency", func(t *testing.T) {
		tgt, err := bench.OpenTarget(url)
		require.NoError(t, err)
		// 500 req/s over 2 connections: one request per connection every
		// 4 ms, 1 s measured after 200 ms of warm-up, so exactly 500.
		start := time.Now()
		res, err := bench.RunLatency(context.Background(), tgt, bench.LatencyOptions{
			Rate: 500, Size: 256, Connections: 2, Duration: time.Second, Warmup: 200 * time.Millisecond,
			Drain: 10 * time.Second,
		})
		elapsed := time.Since(start)
		require.NoError(t, err)
		require.EqualValues(t, 500, res.Sent)
		require.Zero(t, res.Lost(), "requests that never came back")
		require.EqualValues(t, 500, res.Corrected.Count())
		require.EqualValues(t, 500, res.Uncorrected.Count())
		requireSanePercentiles(t, res, elapsed)
		t.Logf("%s: corrected p50=%v p99=%v p100=%v, behind schedule at worst %v", url,
			res.Corrected.Percentile(50), res.Corrected.Percentile(99), res.Corrected.Percentile(100), res.Behind)
	})
	t.Run("throughput", func(t *testing.T) {
		tgt, err := bench.OpenTarget(url)
		require.NoError(t, err)
		res, err := bench.RunThroughput(context.Background(), tgt, bench.ThroughputOptions{
			Publishers: 2, Subscribers: 2, Msgs: msgs, Size: 128, Timeout: time.Minute,
		})
		require.NoError(t, err)
		require.EqualValues(t, 2*msgs, res.Sent)
		require.EqualValues(t, 4*msgs, res.Expected, "every subscriber gets every message")
		require.Equal(t, res.Expected, res.Received, "messages lost")
		require.Len(t, res.PerPublisher, 2)
		require.Len(t, res.PerSubscriber, 2)
		require.Positive(t, res.PubRate)
		require.Positive(t, res.SubRate)
		t.Logf("%s: publishers %.0f msgs/s, subscribers %.0f msgs/s", url, res.PubRate, res.SubRate)
	})
}

// requireSanePercentiles checks what holds for any real round trip, however
// loaded the machine: latencies rise with the percentile; each request's
// response time is at least its service time, so the corrected
// distribution is at or above the uncorrected one; and no latency is
// longer than the run that measured it (a unit mistake would be).
func requireSanePercentiles(t *testing.T, res *bench.LatencyResult, elapsed time.Duration) {
	t.Helper()
	var prev time.Duration
	for _, p := range bench.Percentiles {
		c, u := res.Corrected.Percentile(p), res.Uncorrected.Percentile(p)
		require.GreaterOrEqual(t, c, prev, "corrected p%v below the previous percentile", p)
		require.GreaterOrEqual(t, c, u, "corrected p%v below uncorrected", p)
		require.GreaterOrEqual(t, u, time.Microsecond)
		prev = c
	}
	require.LessOrEqual(t, res.Corrected.Percentile(100), elapsed)
}

// TestTargetNATSSkiff runs the nats target against an in-process Skiff.
func TestTargetNATSSkiff(t *testing.T) {
	targetSuite(t, startSkiff(t, server.Options{}, nil), 10_000)
}

// startSkiff starts an in-process Skiff on a random port of 127.0.0.1,
// with streams if js is not nil (stored in a temporary directory when
// js.StoreDir is empty), stops it when the test ends, and returns its URL.
// Its logs are discarded, as server.New's default.
func startSkiff(t *testing.T, opts server.Options, js *jetstream.Options) string {
	t.Helper()
	opts.Host, opts.Port = "127.0.0.1", server.RandomPort
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	cfg := broker.Config{Server: opts}
	if js != nil {
		if js.StoreDir == "" {
			js.StoreDir = t.TempDir()
		}
		cfg.JetStreamEnabled, cfg.JetStream = true, *js
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

// TestTargetNATSDropIsReported floods a Skiff that cuts off a subscriber
// 4 KB behind: a run that loses messages must say which subscriber the
// broker dropped, and end long before its timeout.
func TestTargetNATSDropIsReported(t *testing.T) {
	tgt, err := bench.OpenTarget(startSkiff(t, server.Options{MaxPayload: 4 << 10, MaxPending: 4 << 10}, nil))
	require.NoError(t, err)
	start := time.Now()
	res, err := bench.RunThroughput(context.Background(), tgt, bench.ThroughputOptions{
		Publishers: 4, Subscribers: 2, Msgs: 20_000, Size: 1 << 10, Timeout: time.Minute})
	require.NoError(t, err)
	require.Less(t, time.Since(start), 30*time.Second, "waited out the timeout")
	if res.Received < res.Expected {
		require.NotEmpty(t, res.Failures, "messages lost without a reason")
	}
	t.Logf("received %d of %d; dropped: %q", res.Received, res.Expected, res.Failures)
}

// TestTargetNATSServer runs the nats target against an embedded
// nats-server, the reference implementation.
func TestTargetNATSServer(t *testing.T) {
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	require.NoError(t, err)
	go ns.Start()
	t.Cleanup(ns.Shutdown)
	require.True(t, ns.ReadyForConnections(10*time.Second), "nats-server did not start")
	targetSuite(t, ns.ClientURL(), 10_000)
}

// TestTargetRedis runs the redis target against a redis-server of its
// own, on a free port of 127.0.0.1 and without persistence.
func TestTargetRedis(t *testing.T) {
	targetSuite(t, startRedis(t), 5_000)
}

// TestTargetAMQP runs the amqp target against the RabbitMQ that
// SKIFF_AMQP_URL names; `make bench-peers` starts one and sets it.
func TestTargetAMQP(t *testing.T) {
	url := os.Getenv("SKIFF_AMQP_URL")
	if url == "" {
		t.Skip("SKIFF_AMQP_URL is not set: `make bench-peers` starts RabbitMQ and runs this test")
	}
	targetSuite(t, url, 5_000)
}

// startRedis starts redis-server on a free port and stops it when the
// test ends. It returns the server's URL.
func startRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redis-server is not installed: run `make test`, which installs it (scripts/peers.sh install redis)")
	}
	port := clustertest.FreePorts(t, 1)[0]
	var out bytes.Buffer
	cmd := exec.Command(bin, "--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--save", "", "--appendonly", "no")
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			_ = c.Close()
			return "redis://" + addr
		}
		select {
		case <-exited:
			t.Fatalf("redis-server exited: %s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not listen on %s: %s", addr, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
