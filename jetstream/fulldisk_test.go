package jetstream_test

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/store"
)

// noSpaceFS is the operating system's file system with a switch: while
// full is set, every write, truncation and new directory fails with
// ENOSPC, for messages and consumers' state alike.
type noSpaceFS struct {
	store.FS
	full atomic.Bool
}

var errNoSpace = &os.PathError{Op: "write", Path: "file", Err: syscall.ENOSPC}

func (d *noSpaceFS) OpenFile(name string, flag int, perm os.FileMode) (store.File, error) {
	f, err := d.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &noSpaceFile{File: f, d: d}, nil
}

func (d *noSpaceFS) Create(name string) (store.File, error) {
	if d.full.Load() {
		return nil, errNoSpace
	}
	f, err := d.FS.Create(name)
	if err != nil {
		return nil, err
	}
	return &noSpaceFile{File: f, d: d}, nil
}

func (d *noSpaceFS) MkdirAll(path string, perm os.FileMode) error {
	if d.full.Load() {
		return errNoSpace
	}
	return d.FS.MkdirAll(path, perm)
}

type noSpaceFile struct {
	store.File
	d *noSpaceFS
}

func (f *noSpaceFile) Write(b []byte) (int, error) {
	if f.d.full.Load() {
		return 0, errNoSpace
	}
	return f.File.Write(b)
}

// logBuffer collects a broker's log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.buf.String(), s)
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// TestFullDiskAckRequest: an acknowledgement sent as a request while the
// consumer's state cannot be written gets an error answer naming the
// cause, at once, instead of no answer; once space returns, the retried
// ack is confirmed.
func TestFullDiskAckRequest(t *testing.T) {
	disk := &noSpaceFS{FS: store.OSFS}
	b := startBrokerWith(t, jetstream.Options{FS: disk})
	nc, js := connect(t, b.srv.ClientURL())
	c := ctx(t)
	_, err := js.CreateStream(c, njs.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	require.NoError(t, err)
	publishN(t, js, 0, 1)
	cons, err := js.CreateOrUpdateConsumer(c, "S", njs.ConsumerConfig{Durable: "D", AckPolicy: njs.AckExplicitPolicy})
	require.NoError(t, err)
	_, msgs := fetch(t, cons, 1)
	require.Len(t, msgs, 1)
	reply := msgs[0].Reply()

	disk.full.Store(true)
	m, err := nc.Request(reply, []byte("+ACK"), 5*time.Second)
	require.NoError(t, err, "an ack request on a full disk is answered")
	require.Contains(t, string(m.Data), `"err_code":10077`)
	require.Contains(t, string(m.Data), "no space left on device")

	disk.full.Store(false)
	m, err = nc.Request(reply, []byte("+ACK"), 5*time.Second)
	require.NoError(t, err)
	require.Empty(t, m.Data, "confirmed")
}

// TestFullDiskWarnsOnce: a full disk refusing publish after publish logs
// one warning for the run, not one per publish.
func TestFullDiskWarnsOnce(t *testing.T) {
	disk := &noSpaceFS{FS: store.OSFS}
	var logs logBuffer
	b := startBrokerWith(t, jetstream.Options{FS: disk, Logger: logs.logger()})
	_, js := connect(t, b.srv.ClientURL())
	c := ctx(t)
	_, err := js.CreateStream(c, njs.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	require.NoError(t, err)
	disk.full.Store(true)
	for range 50 {
		_, err := js.Publish(c, "s.x", []byte("refused"))
		require.Equal(t, njs.ErrorCode(10077), apiCode(err))
	}
	require.Equal(t, 1, logs.count("stream append failed"))
}

// TestFailedStreamCreateLeavesNothing: a stream create that fails in the
// store (a full disk) leaves no directory behind, so the stream does not
// appear at the next start and the name can be created again; an empty
// directory left by an older version is removed at start, one with files
// is kept.
func TestFailedStreamCreateLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	disk := &noSpaceFS{FS: store.OSFS}
	b := startBrokerWith(t, jetstream.Options{StoreDir: dir, FS: disk})
	_, js := connect(t, b.srv.ClientURL())
	disk.full.Store(true)
	_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "F", Subjects: []string{"f"}})
	require.Error(t, err)
	require.NoDirExists(t, filepath.Join(dir, "streams", "F"))
	disk.full.Store(false)
	b.stop()

	require.NoError(t, os.MkdirAll(filepath.Join(dir, "streams", "OLD", "consumers"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "streams", "OLD", "meta.json.tmp"), nil, 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "streams", "KEEP", "msgs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "streams", "KEEP", "msgs", "1.log"), []byte("x"), 0o644))
	var logs logBuffer
	b = startBrokerWith(t, jetstream.Options{StoreDir: dir, Logger: logs.logger()})
	_, js = connect(t, b.srv.ClientURL())
	_, err = js.Stream(ctx(t), "F")
	require.ErrorIs(t, err, njs.ErrStreamNotFound)
	_, err = js.CreateStream(ctx(t), njs.StreamConfig{Name: "F", Subjects: []string{"f"}})
	require.NoError(t, err)
	require.NoDirExists(t, filepath.Join(dir, "streams", "OLD"))
	require.DirExists(t, filepath.Join(dir, "streams", "KEEP"))
	require.Equal(t, 1, logs.count("ignoring a stream directory without metadata"))
}

// TestFailedConsumerCreateLeavesNothing: a durable consumer create that
// fails once its meta.json is written (a full disk refuses its state)
// removes the consumer's directory, so that it does not turn up at the
// next start as a consumer whose state is missing, and the name can be
// created again.
func TestFailedConsumerCreateLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	disk := &noSpaceFS{FS: store.OSFS}
	var logs logBuffer
	b := startBrokerWith(t, jetstream.Options{StoreDir: dir, FS: disk, Logger: logs.logger()})
	_, js := connect(t, b.srv.ClientURL())
	_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "S", Subjects: []string{"s"}})
	require.NoError(t, err)
	disk.full.Store(true)
	_, err = js.CreateConsumer(ctx(t), "S", njs.ConsumerConfig{Durable: "D", AckPolicy: njs.AckExplicitPolicy})
	require.Equal(t, njs.ErrorCode(10104), apiCode(err), "%v", err)
	require.NoDirExists(t, filepath.Join(dir, "streams", "S", "consumers", "D"))
	disk.full.Store(false)
	b.stop()

	b = startBrokerWith(t, jetstream.Options{StoreDir: dir, Logger: logs.logger()})
	_, js = connect(t, b.srv.ClientURL())
	_, err = js.Consumer(ctx(t), "S", "D")
	require.ErrorIs(t, err, njs.ErrConsumerNotFound)
	require.Zero(t, logs.count("consumer state missing"))
	_, err = js.CreateConsumer(ctx(t), "S", njs.ConsumerConfig{Durable: "D", AckPolicy: njs.AckExplicitPolicy})
	require.NoError(t, err)
}
