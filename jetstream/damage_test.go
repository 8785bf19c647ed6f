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
	"syscall"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
	"github.com/skiffmq/skiff/store"
	"github.com/skiffmq/skiff/store/storetest"
)

// One corrupt record in a sealed segment (bytes flipped on disk) must not
// stop consumers, and must not cost the records after it (issue: 700 x
// 100 KB, record 336 damaged, a new consumer delivered 1-335 and then
// nothing). With the segment's index intact the damage is found when the
// record is read: it is skipped, removed, logged once and counted as a
// corrupt record. With the index gone, recovery scans the segment and
// finds it: the records after it are kept, it is logged and counted as a
// lost record. Either way everything after it, a whole second segment
// included, is delivered, and /metrics and /jsz say so.
func TestCorruptRecordInSealedSegmentIsSkipped(t *testing.T) {
	const (
		n      = 700
		size   = 100 << 10
		damage = 336
	)
	orig := t.TempDir()
	b := startBrokerMonitored(t, jetstream.Options{StoreDir: orig}, 0)
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

	for _, tc := range []struct {
		name        string
		removeIndex bool
		logLine     string
		metric      string
		jsz         string
	}{
		{"index intact", false, "corrupt record skipped and removed",
			`skiff_jetstream_stream_corrupt_records_total{stream="BIG"} 1`, `"skiff_corrupt_records": 1`},
		{"index missing", true, "corrupt records with good records after them",
			`skiff_jetstream_stream_lost_records_total{stream="BIG"} 1`, `"skiff_lost_records": 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.CopyFS(dir, os.DirFS(orig)))
			segs, err := filepath.Glob(filepath.Join(globalStreams(dir), "BIG", "msgs", "*.log"))
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
			if tc.removeIndex {
				require.NoError(t, os.Remove(strings.TrimSuffix(first, ".log")+".idx"))
			}

			var logs syncBuffer
			b := startBrokerMonitored(t, jetstream.Options{StoreDir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, server.RandomPort)
			_, js := connect(t, b.srv.ClientURL())
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
			_, err = s.GetMsg(ctx(t), damage) // once more: no second log line
			require.Error(t, err)
			ack, err := js.Publish(ctx(t), "big", []byte("new"))
			require.NoError(t, err)
			require.Equal(t, uint64(n+1), ack.Sequence)

			metrics := httpGet(t, "http://"+b.srv.MonitorAddr().String()+"/metrics")
			require.Contains(t, metrics, tc.metric)
			jsz := httpGet(t, "http://"+b.srv.MonitorAddr().String()+"/jsz?streams=1")
			require.Contains(t, jsz, tc.jsz)
			require.Equal(t, 1, strings.Count(logs.String(), tc.logLine), "logged once:\n%s", logs.String())
		})
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
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
	segs, err := filepath.Glob(filepath.Join(globalStreams(dir), "L", "*", "*.log"))
	if len(segs) == 0 {
		segs, err = filepath.Glob(filepath.Join(globalStreams(dir), "L", "*.log"))
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
	snap := filepath.Join(globalStreams(dir), "S", "consumers", "BAD", "state", "consumer.snap")
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
	require.NoError(t, os.Remove(filepath.Join(globalStreams(dir), "S", "consumers", "C", "state", "consumer.log")))

	var logged syncBuffer
	startBrokerWith(t, jetstream.Options{StoreDir: dir, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
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

// TestReadErrorDoesNotStallConsumer: a read of the stream that fails with
// an I/O error (not damage) is logged, once for the run, and retried: once
// reads work again a push consumer delivers what it could not, without a
// new message to wake it (it used to wait for one, or for its
// housekeeping: up to a minute).
func TestReadErrorDoesNotStallConsumer(t *testing.T) {
	// Reads of the message segments fail while FailReads is on.
	disk := storetest.NewFaultFS(store.OSFS)
	disk.Match = storetest.IsSegment
	var logs syncBuffer
	b := startBrokerWith(t, jetstream.Options{FS: disk, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	nc, js := connect(t, b.srv.ClientURL())
	_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "S", Subjects: []string{"s"}})
	require.NoError(t, err)
	big := bytes.Repeat([]byte("x"), 100<<10) // read from the file, not the tail cache
	for range 3 {
		_, err := js.Publish(ctx(t), "s", big)
		require.NoError(t, err)
	}
	sub, err := nc.SubscribeSync("deliver.here")
	require.NoError(t, err)
	require.NoError(t, nc.Flush())

	disk.FailReads(&os.PathError{Op: "read", Path: "segment", Err: syscall.EIO})
	_, err = js.CreateOrUpdateConsumer(ctx(t), "S", njs.ConsumerConfig{Durable: "C", AckPolicy: njs.AckNonePolicy,
		DeliverSubject: "deliver.here"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return disk.Injected() >= 3 }, 10*time.Second, 5*time.Millisecond,
		"the consumer retries the read")
	disk.FailReads(nil)
	for i := range 3 {
		_, err := sub.NextMsg(5 * time.Second)
		require.NoError(t, err, "message %d delivered once reads work again", i+1)
	}
	require.Equal(t, 1, strings.Count(logs.String(), "consumer cannot read the stream; will retry"), logs.String())
}

// consumerWithAcks makes stream S with n messages and a durable consumer
// C that acknowledged them all, one by one, and stops the broker. It
// returns the path of C's log.
func consumerWithAcks(t *testing.T, dir string, n int) string {
	t.Helper()
	b := startBroker(t, dir)
	_, js := connect(t, b.srv.ClientURL())
	_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	require.NoError(t, err)
	publishN(t, js, 0, n)
	c, err := js.CreateOrUpdateConsumer(ctx(t), "S", njs.ConsumerConfig{Durable: "C", AckPolicy: njs.AckExplicitPolicy})
	require.NoError(t, err)
	for acked := 0; acked < n; {
		_, msgs := fetch(t, c, min(100, n-acked))
		require.NotEmpty(t, msgs)
		for _, m := range msgs {
			require.NoError(t, m.DoubleAck(ctx(t)))
			acked++
		}
	}
	info, err := c.Info(ctx(t))
	require.NoError(t, err)
	require.Equal(t, uint64(n), info.AckFloor.Stream)
	b.stop()
	return filepath.Join(globalStreams(dir), "S", "consumers", "C", "state", "consumer.log")
}

// ackFloorAfterRestart starts a broker on dir and returns C's ack floor
// and what was logged.
func ackFloorAfterRestart(t *testing.T, dir string) (uint64, string) {
	t.Helper()
	var logs syncBuffer
	b := startBrokerWith(t, jetstream.Options{StoreDir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	_, js := connect(t, b.srv.ClientURL())
	c, err := js.Consumer(ctx(t), "S", "C")
	require.NoError(t, err)
	return c.CachedInfo().AckFloor.Stream, logs.String()
}

// TestEmptiedConsumerLogIsLogged: a durable consumer's log emptied on disk
// (truncated to 0 bytes) took its progress with it; the restart says so at
// error level, with the ack floor before and after, instead of silently
// starting over (issue: ack floor fell to 0 with no log line).
func TestEmptiedConsumerLogIsLogged(t *testing.T) {
	dir := t.TempDir()
	log := consumerWithAcks(t, dir, 40)
	require.NoError(t, os.Truncate(log, 0))
	floor, logged := ackFloorAfterRestart(t, dir)
	require.Zero(t, floor, "the progress went with the log")
	require.Contains(t, logged, "level=ERROR")
	require.Contains(t, logged, "consumer log is empty")
	require.Contains(t, logged, "consumer=C")
	require.Contains(t, logged, "ack_floor_before=0")
	require.Contains(t, logged, "ack_floor_after=0")
	require.Contains(t, logged, "snapshot_lsn=0")
}

// TestDamagedConsumerLogKeepsFloor: a flipped byte in the middle of a
// durable consumer's log, on real files, loses one record, not the ack
// floor: replay goes on past it (issue: floor from 600 to 300), and the
// damage is logged.
func TestDamagedConsumerLogKeepsFloor(t *testing.T) {
	dir := t.TempDir()
	log := consumerWithAcks(t, dir, 600)
	raw, err := os.ReadFile(log)
	require.NoError(t, err)
	require.Greater(t, len(raw), 1000, "not compacted: the acks are in the log")
	raw[len(raw)/2] ^= 0x40
	require.NoError(t, os.WriteFile(log, raw, 0o644))
	floor, logged := ackFloorAfterRestart(t, dir)
	require.Equal(t, uint64(600), floor)
	require.Contains(t, logged, "consumer log damaged")
	require.FileExists(t, log+".damaged")
}

// One stream that cannot be opened at start (its meta.json does not
// parse, or its store refuses to open) must not keep the broker down: it
// is reported and not served, its files are kept, the other streams
// serve, and deleting it lets the name be created again.
func TestBadStreamFailsOnlyThatStream(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string)
		reason string
	}{
		{"meta.json does not parse", func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "meta.json"), []byte("{not json"), 0o644))
		}, "meta.json"},
		{"store does not open", func(t *testing.T, dir string) {
			// A file where the messages' directory should be.
			require.NoError(t, os.RemoveAll(filepath.Join(dir, "msgs")))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "msgs"), []byte("x"), 0o644))
		}, "msgs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b := startBroker(t, dir)
			_, js := connect(t, b.srv.ClientURL())
			for _, name := range []string{"GOOD", "BAD"} {
				_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: name, Subjects: []string{strings.ToLower(name)}})
				require.NoError(t, err)
				_, err = js.Publish(ctx(t), strings.ToLower(name), []byte("1"))
				require.NoError(t, err)
			}
			b.stop()
			badDir := filepath.Join(globalStreams(dir), "BAD")
			tc.damage(t, badDir)

			var logs syncBuffer
			b = startBrokerMonitored(t, jetstream.Options{StoreDir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, server.RandomPort)
			nc, js := connect(t, b.srv.ClientURL())
			require.Contains(t, logs.String(), "stream not recovered")
			good, err := js.Stream(ctx(t), "GOOD")
			require.NoError(t, err, "the other stream serves")
			require.Equal(t, uint64(1), good.CachedInfo().State.Msgs)
			ack, err := js.Publish(ctx(t), "good", []byte("2"))
			require.NoError(t, err)
			require.Equal(t, uint64(2), ack.Sequence)

			_, err = js.Stream(ctx(t), "BAD")
			require.Equal(t, njs.ErrorCode(10059), apiCode(err))
			m, err := nc.Request("$JS.API.STREAM.INFO.BAD", nil, 5*time.Second)
			require.NoError(t, err)
			require.Contains(t, string(m.Data), "could not be recovered", "the reason is told")
			require.Contains(t, string(m.Data), tc.reason)
			_, err = js.CreateStream(ctx(t), njs.StreamConfig{Name: "BAD", Subjects: []string{"bad"}})
			require.Equal(t, njs.ErrorCode(10058), apiCode(err), "its files are kept until it is deleted")
			require.DirExists(t, badDir)

			metrics := httpGet(t, "http://"+b.srv.MonitorAddr().String()+"/metrics")
			require.Contains(t, metrics, "skiff_jetstream_streams_failed 1")
			jsz := httpGet(t, "http://"+b.srv.MonitorAddr().String()+"/jsz")
			require.Contains(t, jsz, `"skiff_failed_streams"`)
			require.Contains(t, jsz, `"BAD"`)

			require.NoError(t, js.DeleteStream(ctx(t), "BAD"))
			require.NoDirExists(t, badDir)
			_, err = js.CreateStream(ctx(t), njs.StreamConfig{Name: "BAD", Subjects: []string{"bad"}})
			require.NoError(t, err, "deleted, it starts over")
			metrics = httpGet(t, "http://"+b.srv.MonitorAddr().String()+"/metrics")
			require.Contains(t, metrics, "skiff_jetstream_streams_failed 0")
		})
	}
}
