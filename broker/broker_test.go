package broker

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/server"
)

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testConfig is a Config for tests: random port, no monitoring, streams
// in a temporary directory, logs into a buffer.
func testConfig(t testing.TB) (Config, *syncBuffer) {
	cfg := DefaultConfig()
	cfg.Server.Port, cfg.Server.HTTPPort = server.RandomPort, 0
	cfg.JetStream.StoreDir = filepath.Join(t.TempDir(), "data")
	logs := &syncBuffer{}
	cfg.Log.Output = logs
	return cfg, logs
}

func TestStartShutdown(t *testing.T) {
	cfg, logs := testConfig(t)
	cfg.PIDFile = filepath.Join(t.TempDir(), "skiff.pid")
	cfg.Log.Debug = true
	b, err := Start(cfg)
	require.NoError(t, err)

	pid, err := os.ReadFile(cfg.PIDFile)
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(os.Getpid()), string(pid))

	nc, err := nats.Connect(b.ClientURL())
	require.NoError(t, err)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	require.NoError(t, err)
	_, err = js.Publish(ctx, "s.1", []byte("x"))
	require.NoError(t, err)
	nc.Close()

	require.NoError(t, b.Shutdown(context.Background()))
	require.NoError(t, b.Shutdown(context.Background()), "a second Shutdown returns the first's result")
	_, err = os.Stat(cfg.PIDFile)
	require.ErrorIs(t, err, os.ErrNotExist, "the pid file goes at shutdown")
	require.Contains(t, logs.String(), "level=DEBUG", "debug: true lowers the level")

	// The stream is there after a restart on the same directory.
	b, err = Start(cfg)
	require.NoError(t, err)
	defer func() { _ = b.Shutdown(context.Background()) }()
	nc, err = nats.Connect(b.ClientURL())
	require.NoError(t, err)
	defer nc.Close()
	js, err = jetstream.New(nc)
	require.NoError(t, err)
	s, err := js.Stream(ctx, "S")
	require.NoError(t, err)
	require.Equal(t, uint64(1), s.CachedInfo().State.Msgs)
}

func TestStartWithoutJetStream(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.JetStreamEnabled = false
	b, err := Start(cfg)
	require.NoError(t, err)
	defer func() { _ = b.Shutdown(context.Background()) }()
	require.Nil(t, b.JetStream())
	_, err = os.Stat(cfg.JetStream.StoreDir)
	require.ErrorIs(t, err, os.ErrNotExist, "no store directory without JetStream")
}

// TestStartFailsCleanly: a Start that fails leaves nothing listening and
// its store directory unlocked.
func TestStartFailsCleanly(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.PIDFile = filepath.Join(t.TempDir(), "skiff.pid")
	first, err := Start(cfg)
	require.NoError(t, err)
	// A second broker on the same store directory is refused, and leaves
	// the first one's PID file alone...
	_, err = Start(cfg)
	require.Error(t, err)
	require.FileExists(t, cfg.PIDFile)
	require.NoError(t, first.Shutdown(context.Background()))
	// ... and once the first is gone, one starts.
	b, err := Start(cfg)
	require.NoError(t, err)
	require.NoError(t, b.Shutdown(context.Background()))

	cfg.Server.MaxPayload = -5
	_, err = Start(cfg)
	require.ErrorIs(t, err, server.ErrInvalidOptions)
}

func TestLogFileAndTimes(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.Log.File = filepath.Join(t.TempDir(), "skiff.log")
	cfg.Log.NoTime = true
	b, err := Start(cfg)
	require.NoError(t, err)
	require.NoError(t, b.Shutdown(context.Background()))
	logs, err := os.ReadFile(cfg.Log.File)
	require.NoError(t, err)
	require.Contains(t, string(logs), "msg=listening")
	require.NotContains(t, string(logs), "time=", "logtime: false drops timestamps")

	cfg.Log.NoTime, cfg.Log.UTC = false, true
	b, err = Start(cfg)
	require.NoError(t, err)
	require.NoError(t, b.Shutdown(context.Background()))
	logs, err = os.ReadFile(cfg.Log.File)
	require.NoError(t, err)
	last := strings.TrimSpace(string(logs))
	last = last[strings.LastIndex(last, "\n")+1:]
	require.Regexp(t, `^time=\S+Z `, last, "logtime_utc writes UTC times")
}
