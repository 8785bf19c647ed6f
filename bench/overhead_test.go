package bench_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/bench"
)

// TestHarnessOverhead runs the no-op target at the published suite's
// heaviest schedule, 20,000 requests/s over 25 connections, and logs the
// harness's own corrected latency: how late the senders wake and what
// recording costs. It asserts no timing: that belongs to benchmarks and to
// docs/benchmarks/harness.md. It asserts that every request was sent on
// schedule's count and recorded once.
func TestHarnessOverhead(t *testing.T) {
	const (
		rate     = 20_000
		conns    = 25
		duration = 3 * time.Second
		warmup   = 500 * time.Millisecond
	)
	res, err := bench.RunLatency(context.Background(), bench.Noop{}, bench.LatencyOptions{
		Rate: rate, Size: 1 << 10, Connections: conns, Duration: duration, Warmup: warmup,
	})
	require.NoError(t, err)
	// Each connection sends every conns/rate = 1.25 ms: 2,800 requests,
	// of which the first 400 are warm-up.
	const want = conns * (2800 - 400)
	require.EqualValues(t, want, res.Sent)
	require.Zero(t, res.Lost())
	require.EqualValues(t, want, res.Corrected.Count())
	require.EqualValues(t, want, res.Uncorrected.Count())
	t.Logf("harness overhead at %d req/s over %d connections: corrected p50=%v p99=%v p99.99=%v max=%v; uncorrected p99.99=%v; behind schedule at worst %v",
		rate, conns, res.Corrected.Percentile(50), res.Corrected.Percentile(99), res.Corrected.Percentile(99.99),
		res.Corrected.Percentile(100), res.Uncorrected.Percentile(99.99), res.Behind)
}
