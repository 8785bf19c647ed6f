package bench_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/bench"
	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// startSkiffStreams starts an in-process Skiff with streams whose default
// sync policy is sync, and returns its jetstream:// URL (without query).
func startSkiffStreams(t *testing.T, sync jetstream.SyncPolicy) string {
	t.Helper()
	return strings.Replace(startSkiff(t, server.Options{}, &jetstream.Options{Sync: sync}), "nats://", "jetstream://", 1)
}

// TestTargetJetStreamSkiff runs the jetstream target against Skiff: file
// storage with an fsync before every acknowledgement, and memory.
func TestTargetJetStreamSkiff(t *testing.T) {
	t.Run("file-always", func(t *testing.T) {
		url := startSkiffStreams(t, jetstream.SyncAlways)
		targetSuite(t, url+"?storage=file", 2_000)
		requireNoStreams(t, url)
	})
	t.Run("until-ack", func(t *testing.T) {
		url := startSkiffStreams(t, jetstream.SyncAlways)
		tgt, err := bench.OpenTarget(url + "?until=ack")
		require.NoError(t, err)
		res, err := bench.RunLatency(context.Background(), tgt, bench.LatencyOptions{
			Rate: 200, Size: 64, Duration: 500 * time.Millisecond, Warmup: 100 * time.Millisecond})
		require.NoError(t, err)
		require.EqualValues(t, 100, res.Sent)
		require.Zero(t, res.Lost())
		requireNoStreams(t, url)
	})
	t.Run("stream", func(t *testing.T) {
		// stream=: every topic into the caller's stream, left in place.
		url := startSkiffStreams(t, jetstream.SyncInterval)
		nc, err := nats.Connect(strings.Replace(url, "jetstream://", "nats://", 1))
		require.NoError(t, err)
		defer nc.Close()
		js, err := nc.JetStream()
		require.NoError(t, err)
		_, err = js.AddStream(&nats.StreamConfig{Name: "MINE", Subjects: []string{"bench.>"}})
		require.NoError(t, err)
		tgt, err := bench.OpenTarget(url + "?until=ack&stream=MINE")
		require.NoError(t, err)
		res, err := bench.RunLatency(context.Background(), tgt, bench.LatencyOptions{
			Rate: 200, Size: 64, Connections: 2, Duration: 500 * time.Millisecond, Warmup: 100 * time.Millisecond})
		require.NoError(t, err)
		require.EqualValues(t, 100, res.Sent)
		require.Zero(t, res.Lost())
		si, err := js.StreamInfo("MINE")
		require.NoError(t, err)
		require.EqualValues(t, 120, si.State.Msgs, "warm-up and measured publishes, in the caller's stream")
		none, err := bench.OpenTarget(url + "?until=ack&stream=NONE")
		require.NoError(t, err)
		_, err = none.Open(context.Background(), "bench.x", func([]byte) {})
		require.Error(t, err, "a stream= that does not exist")
	})
	t.Run("memory", func(t *testing.T) {
		url := startSkiffStreams(t, jetstream.SyncInterval)
		targetSuite(t, url+"?storage=memory", 5_000)
		requireNoStreams(t, url)
	})
}

// TestTargetJetStreamServer runs the jetstream target against an embedded
// nats-server with JetStream, file storage. Its log goes to the test's.
func TestTargetJetStreamServer(t *testing.T) {
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, NoSigs: true,
		JetStream: true, StoreDir: t.TempDir()})
	require.NoError(t, err)
	ns.SetLogger(newTestLogger(t), false, false)
	go ns.Start()
	t.Cleanup(ns.Shutdown)
	require.True(t, ns.ReadyForConnections(10*time.Second), "nats-server did not start")
	url := strings.Replace(ns.ClientURL(), "nats://", "jetstream://", 1)
	targetSuite(t, url, 2_000)
	requireNoStreams(t, url)
}

// requireNoStreams checks that the target deleted every stream it made.
func requireNoStreams(t *testing.T, url string) {
	t.Helper()
	nc, err := nats.Connect(strings.Replace(url, "jetstream://", "nats://", 1))
	require.NoError(t, err)
	defer nc.Close()
	m, err := nc.Request("$JS.API.STREAM.NAMES", nil, 5*time.Second)
	require.NoError(t, err)
	require.Contains(t, string(m.Data), `"total":0`)
}

// testLogger sends an embedded nats-server's log to the test's, shown
// only when the test fails. It drops what comes after the test ends.
type testLogger struct {
	t    *testing.T
	mu   sync.Mutex
	done bool
}

// newTestLogger returns a logger for t; it stops at t's last cleanup.
func newTestLogger(t *testing.T) *testLogger {
	l := &testLogger{t: t}
	t.Cleanup(func() {
		l.mu.Lock()
		l.done = true
		l.mu.Unlock()
	})
	return l
}

func (l *testLogger) logf(level, format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.t.Logf(level+" "+format, v...)
	}
}

func (l *testLogger) Noticef(format string, v ...any) { l.logf("[INF]", format, v...) }
func (l *testLogger) Warnf(format string, v ...any)   { l.logf("[WRN]", format, v...) }
func (l *testLogger) Fatalf(format string, v ...any)  { l.logf("[FTL]", format, v...) }
func (l *testLogger) Errorf(format string, v ...any)  { l.logf("[ERR]", format, v...) }
func (l *testLogger) Debugf(string, ...any)           {}
func (l *testLogger) Tracef(string, ...any)           {}
