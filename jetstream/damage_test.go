package jetstream_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// One corrupt record in a sealed segment (bytes flipped on disk, its index
// intact) must not stop consumers: it is skipped, removed, counted in
// /metrics and /jsz, and everything after it, a whole second segment
// included, is delivered (issue: 700 x 100 KB, record 336 damaged, a new
// consumer delivered 1-335 and then nothing).
func TestCorruptRecordInSealedSegmentIsSkipped(t *testing.T) {
	const (
		n      = 700
		size   = 100 << 10
		damage = 336
	)
	dir := t.TempDir()
	b := startBrokerMonitored(t, jetstream.Options{StoreDir: dir}, 0)
	_, js := connect(t, b.srv.ClientURL())
	_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "BIG", Subjects: []string{"big"}})
	require.NoError(t, err)
	payload := func(i int) []byte {
		p := bytes.Repeat([]byte{byte(i)}, size)
		copy(p, fmt.Sprintf("<msg %06d>", i))
		return p
	}
	for i := 1; i <= n; i++ {
		_, err := js.Publish(ctx(t), "big", payload(i))
		require.NoError(t, err)
	}
	b.stop()

	segs, err := filepath.Glob(filepath.Join(dir, "streams", "BIG", "*", "*.log"))
	if len(segs) == 0 {
		segs, err = filepath.Glob(filepath.Join(dir, "streams", "BIG", "*.log"))
	}
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(segs), 2, "the messages span a sealed segment and the active one")
	first := segs[0]
	raw, err := os.ReadFile(first)
	require.NoError(t, err)
	at := bytes.Index(raw, []byte(fmt.Sprintf("<msg %06d>", damage)))
	require.Positive(t, at, "message %d is in the first segment", damage)
	for i := at + 1000; i < at+1016; i++ {
		raw[i] ^= 0xff
	}
	require.NoError(t, os.WriteFile(first, raw, 0o644))

	b = startBrokerMonitored(t, jetstream.Options{StoreDir: dir}, server.RandomPort)
	_, js = connect(t, b.srv.ClientURL())
	c, err := js.CreateOrUpdateConsumer(ctx(t), "BIG", njs.ConsumerConfig{Durable: "C", AckPolicy: njs.AckNonePolicy})
	require.NoError(t, err)
	got := 0
	var last uint64
	for got < n-1 {
		batch, err := c.Fetch(100, njs.FetchMaxWait(5*time.Second))
		require.NoError(t, err)
		k := 0
		for m := range batch.Messages() {
			meta, err := m.Metadata()
			require.NoError(t, err)
			require.NotEqual(t, uint64(damage), meta.Sequence.Stream)
			require.True(t, bytes.HasPrefix(m.Data(), []byte(fmt.Sprintf("<msg %06d>", meta.Sequence.Stream))))
			last = meta.Sequence.Stream
			got++
			k++
		}
		require.Positive(t, k, "delivery stopped after stream sequence %d (%d delivered)", last, got)
	}
	require.Equal(t, uint64(n), last)

	s, err := js.Stream(ctx(t), "BIG")
	require.NoError(t, err)
	info, err := s.Info(ctx(t))
	require.NoError(t, err)
	require.Equal(t, uint64(n-1), info.State.Msgs, "the damaged message is gone, as deleted")

	metrics := httpGet(t, "http://"+b.srv.MonitorAddr().String()+"/metrics")
	require.Contains(t, metrics, `skiff_jetstream_stream_corrupt_records_total{stream="BIG"} 1`)
	jsz := httpGet(t, "http://"+b.srv.MonitorAddr().String()+"/jsz?streams=1")
	require.Contains(t, jsz, `"skiff_corrupt_records": 1`)
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// A flipped byte in the last segment, with good records after it, loses
// only that record: recovery keeps the later acknowledged messages and
// never gives their sequences again (issue: 79 good records went and new
// publishes reused their sequences).
func TestDamageInLastSegmentKeepsLaterRecords(t *testing.T) {
	const n, damage = 200, 120
	dir := t.TempDir()
	b := startBroker(t, dir)
	_, js := connect(t, b.srv.ClientURL())
	_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "L", Subjects: []string{"l"}})
	require.NoError(t, err)
	for i := 1; i <= n; i++ {
		_, err := js.Publish(ctx(t), "l", []byte(fmt.Sprintf("<msg %06d> %s", i, strings.Repeat("x", 1000))))
		require.NoError(t, err)
	}
	b.stop()
	segs, err := filepath.Glob(filepath.Join(dir, "streams", "L", "*", "*.log"))
	if len(segs) == 0 {
		segs, err = filepath.Glob(filepath.Join(dir, "streams", "L", "*.log"))
	}
	require.NoError(t, err)
	require.Len(t, segs, 1)
	raw, err := os.ReadFile(segs[0])
	require.NoError(t, err)
	at := bytes.Index(raw, []byte(fmt.Sprintf("<msg %06d>", damage)))
	require.Positive(t, at)
	raw[at+500] ^= 0x01
	require.NoError(t, os.WriteFile(segs[0], raw, 0o644))

	b = startBroker(t, dir)
	_, js = connect(t, b.srv.ClientURL())
	s, err := js.Stream(ctx(t), "L")
	require.NoError(t, err)
	info, err := s.Info(ctx(t))
	require.NoError(t, err)
	require.Equal(t, uint64(n-1), info.State.Msgs, "only the damaged message is lost")
	require.Equal(t, uint64(n), info.State.LastSeq)
	for _, seq := range []uint64{damage - 1, damage + 1, n} {
		m, err := s.GetMsg(ctx(t), seq)
		require.NoError(t, err, "seq %d", seq)
		require.True(t, bytes.HasPrefix(m.Data, []byte(fmt.Sprintf("<msg %06d>", seq))))
	}
	_, err = s.GetMsg(ctx(t), damage)
	require.Error(t, err)
	ack, err := js.Publish(ctx(t), "l", []byte("new"))
	require.NoError(t, err)
	require.Equal(t, uint64(n+1), ack.Sequence, "no sequence used again")
}

// One consumer whose state is unreadable (a corrupt snapshot) must not keep
// the broker from starting: it is reported and not served, the other
// consumers and the stream serve, and deleting it starts it over.
func TestCorruptConsumerSnapshotFailsOnlyThatConsumer(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir)
	_, js := connect(t, b.srv.ClientURL())
	_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "S", Subjects: []string{"s"}})
	require.NoError(t, err)
	for _, name := range []string{"GOOD", "BAD"} {
		_, err := js.CreateOrUpdateConsumer(ctx(t), "S", njs.ConsumerConfig{Durable: name, AckPolicy: njs.AckExplicitPolicy})
		require.NoError(t, err)
	}
	_, err = js.Publish(ctx(t), "s", []byte("1"))
	require.NoError(t, err)
	b.stop()
	snap := filepath.Join(dir, "streams", "S", "consumers", "BAD", "state", "consumer.snap")
	require.NoError(t, os.WriteFile(snap, []byte("not a snapshot at all, certainly not a valid one"), 0o644))

	b = startBrokerMonitored(t, jetstream.Options{StoreDir: dir}, server.RandomPort)
	nc, js := connect(t, b.srv.ClientURL())
	good, err := js.Consumer(ctx(t), "S", "GOOD")
	require.NoError(t, err)
	batch, err := good.Fetch(1, njs.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	n := 0
	for range batch.Messages() {
		n++
	}
	require.Equal(t, 1, n, "the other consumer serves")
	_, err = js.Consumer(ctx(t), "S", "BAD")
	require.Equal(t, njs.ErrorCode(10014), apiCode(err))
	m, err := nc.Request("$JS.API.CONSUMER.INFO.S.BAD", nil, 5*time.Second)
	require.NoError(t, err)
	require.Contains(t, string(m.Data), "could not be recovered", "the reason is told")
	_, err = js.CreateConsumer(ctx(t), "S", njs.ConsumerConfig{Durable: "BAD", AckPolicy: njs.AckExplicitPolicy})
	require.Error(t, err, "its files are kept until it is deleted")
	require.FileExists(t, snap)

	metrics := httpGet(t, "http://"+b.srv.MonitorAddr().String()+"/metrics")
	require.Contains(t, metrics, `skiff_jetstream_stream_consumers_failed{stream="S"} 1`)
	jsz := httpGet(t, "http://"+b.srv.MonitorAddr().String()+"/jsz?streams=1")
	require.Contains(t, jsz, `"BAD"`)

	require.NoError(t, js.DeleteConsumer(ctx(t), "S", "BAD"))
	require.NoFileExists(t, snap)
	_, err = js.CreateConsumer(ctx(t), "S", njs.ConsumerConfig{Durable: "BAD", AckPolicy: njs.AckExplicitPolicy})
	require.NoError(t, err, "deleted, it starts over")
}

// A durable consumer's log gone from its directory is logged at start:
// its progress is lost and it delivers again (issue: ack floor fell to 0
// with no log line).
func TestMissingConsumerLogIsLogged(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir)
	_, js := connect(t, b.srv.ClientURL())
	_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "S", Subjects: []string{"s"}})
	require.NoError(t, err)
	c, err := js.CreateOrUpdateConsumer(ctx(t), "S", njs.ConsumerConfig{Durable: "C", AckPolicy: njs.AckExplicitPolicy})
	require.NoError(t, err)
	_, err = js.Publish(ctx(t), "s", []byte("1"))
	require.NoError(t, err)
	batch, err := c.Fetch(1, njs.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	for m := range batch.Messages() {
		require.NoError(t, m.DoubleAck(ctx(t)))
	}
	b.stop()
	require.NoError(t, os.Remove(filepath.Join(dir, "streams", "S", "consumers", "C", "state", "consumer.log")))

	var logged syncBuffer
	b = startBrokerWith(t, jetstream.Options{StoreDir: dir, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	require.Contains(t, logged.String(), "consumer state missing")
	require.Contains(t, logged.String(), "consumer.log")
}

// syncBuffer is a bytes.Buffer safe for a logger's concurrent writes.
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
