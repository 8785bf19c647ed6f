package jetstream_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/store"
	"github.com/skiffmq/skiff/store/storetest"
)

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
// consumer's state cannot be written gets no answer: every client takes
// any answer, an error too, for the confirmation (nats.go's AckSync and
// DoubleAck do), so silence is the only refusal it understands. Once
// space returns, the retried ack is confirmed.
func TestFullDiskAckRequest(t *testing.T) {
	disk := storetest.NewFaultFS(store.OSFS)
	b := startBrokerWith(t, jetstream.Options{FS: disk})
	nc, js := connect(t, b.srv.ClientURL())
	c := ctx(t)
	_, err := js.CreateStream(c, njs.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	require.NoError(t, err)
	publishN(t, js, 0, 2)
	cons, err := js.CreateOrUpdateConsumer(c, "S", njs.ConsumerConfig{Durable: "D", AckPolicy: njs.AckExplicitPolicy})
	require.NoError(t, err)
	_, msgs := fetch(t, cons, 1)
	require.Len(t, msgs, 1)
	reply := msgs[0].Reply()

	disk.SetFull(true)
	_, err = nc.Request(reply, []byte("+ACK"), 500*time.Millisecond)
	require.ErrorIs(t, err, nats.ErrTimeout, "an ack request on a full disk is not confirmed")
	short, cancel := context.WithTimeout(c, 500*time.Millisecond)
	defer cancel()
	require.Error(t, msgs[0].DoubleAck(short), "nor is the client's DoubleAck")

	// Nothing is delivered while the consumer cannot record it.
	_, more := fetch(t, cons, 1, njs.FetchMaxWait(300*time.Millisecond))
	require.Empty(t, more, "no delivery the consumer cannot record")

	disk.SetFull(false)
	m, err := nc.Request(reply, []byte("+ACK"), 5*time.Second)
	require.NoError(t, err)
	require.Empty(t, m.Data, "confirmed")

	// The confirmed ack was written: after a restart the consumer goes on
	// with the second message, not the first again.
	dir := b.dir
	b.stop()
	b = startBrokerWith(t, jetstream.Options{StoreDir: dir})
	_, js = connect(t, b.srv.ClientURL())
	cons, err = js.Consumer(c, "S", "D")
	require.NoError(t, err)
	md, err := fetchOne(t, cons).Metadata()
	require.NoError(t, err)
	require.Equal(t, uint64(2), md.Sequence.Stream, "the acknowledged message is not delivered again")
}

// TestFullDiskWarnsOnce: a full disk refusing publish after publish logs
// one warning for the run, not one per publish.
func TestFullDiskWarnsOnce(t *testing.T) {
	disk := storetest.NewFaultFS(store.OSFS)
	var logs logBuffer
	b := startBrokerWith(t, jetstream.Options{FS: disk, Logger: logs.logger()})
	_, js := connect(t, b.srv.ClientURL())
	c := ctx(t)
	_, err := js.CreateStream(c, njs.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	require.NoError(t, err)
	disk.SetFull(true)
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
	disk := storetest.NewFaultFS(store.OSFS)
	b := startBrokerWith(t, jetstream.Options{StoreDir: dir, FS: disk})
	_, js := connect(t, b.srv.ClientURL())
	disk.SetFull(true)
	_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "F", Subjects: []string{"f"}})
	require.Error(t, err)
	require.NoDirExists(t, filepath.Join(globalStreams(dir), "F"))
	disk.SetFull(false)
	b.stop()

	require.NoError(t, os.MkdirAll(filepath.Join(globalStreams(dir), "OLD", "consumers"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(globalStreams(dir), "OLD", "meta.json.tmp"), nil, 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(globalStreams(dir), "KEEP", "msgs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(globalStreams(dir), "KEEP", "msgs", "1.log"), []byte("x"), 0o644))
	var logs logBuffer
	b = startBrokerWith(t, jetstream.Options{StoreDir: dir, Logger: logs.logger()})
	_, js = connect(t, b.srv.ClientURL())
	_, err = js.Stream(ctx(t), "F")
	require.ErrorIs(t, err, njs.ErrStreamNotFound)
	_, err = js.CreateStream(ctx(t), njs.StreamConfig{Name: "F", Subjects: []string{"f"}})
	require.NoError(t, err)
	require.NoDirExists(t, filepath.Join(globalStreams(dir), "OLD"))
	require.DirExists(t, filepath.Join(globalStreams(dir), "KEEP"))
	require.Equal(t, 1, logs.count("ignoring a stream directory without metadata"))
}

// TestFailedConsumerCreateLeavesNothing: a durable consumer create that
// fails once its meta.json is written (a full disk refuses its state)
// removes the consumer's directory, so that it does not turn up at the
// next start as a consumer whose state is missing, and the name can be
// created again.
func TestFailedConsumerCreateLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	disk := storetest.NewFaultFS(store.OSFS)
	var logs logBuffer
	b := startBrokerWith(t, jetstream.Options{StoreDir: dir, FS: disk, Logger: logs.logger()})
	_, js := connect(t, b.srv.ClientURL())
	_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "S", Subjects: []string{"s"}})
	require.NoError(t, err)
	disk.SetFull(true)
	_, err = js.CreateConsumer(ctx(t), "S", njs.ConsumerConfig{Durable: "D", AckPolicy: njs.AckExplicitPolicy})
	require.Equal(t, njs.ErrorCode(10104), apiCode(err), "%v", err)
	require.NoDirExists(t, filepath.Join(globalStreams(dir), "S", "consumers", "D"))
	disk.SetFull(false)
	b.stop()

	b = startBrokerWith(t, jetstream.Options{StoreDir: dir, Logger: logs.logger()})
	_, js = connect(t, b.srv.ClientURL())
	_, err = js.Consumer(ctx(t), "S", "D")
	require.ErrorIs(t, err, njs.ErrConsumerNotFound)
	require.Zero(t, logs.count("consumer state missing"))
	_, err = js.CreateConsumer(ctx(t), "S", njs.ConsumerConfig{Durable: "D", AckPolicy: njs.AckExplicitPolicy})
	require.NoError(t, err)
}
