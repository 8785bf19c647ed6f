package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func init() {
	Register("kafka", openKafka)
}

// kafkaTarget uses Apache Kafka through franz-go: one single-partition
// topic per bench topic, created on first use and deleted when the last of
// the target's connections to it closes. A receiving connection consumes
// that partition directly (no consumer group), from the end offset it had
// when the connection opened; every connection also produces to it.
//
// Produces are acknowledged by the partition leader alone (acks=1, without
// idempotence, which needs acks=all), as in the classic commit-log
// benchmarks, and are not batched on purpose (linger 0). By default Kafka
// leaves fsync to the operating system and relies on replication for
// durability; with ?flush=always the topic is created with
// flush.messages=1, so that the broker fsyncs every append before it acks
// it: Kafka's equivalent of an fsync per message, for comparison with
// stores that sync each write. (An append is one produce request's batch
// for the partition: a single message, unless several queued in the
// client while a request was in flight.)
type kafkaTarget struct {
	brokers     []string
	flushAlways bool
	mu          struct {
		sync.Mutex
		topics map[string]*kafkaTopic // by Kafka topic name
	}
}

// kafkaTopic counts a target's open connections to one topic.
type kafkaTopic struct {
	refs    int
	created bool // by this target, which then deletes it
}

// kafkaWait bounds a wait on the broker (a topic's creation, deletion or
// leader) when the caller's context has no deadline.
const kafkaWait = 10 * time.Second

// kafkaFetchMaxWait is how long the broker holds a fetch that has nothing
// to return. With fetch.min.bytes at its default of 1, a fetch returns as
// soon as a record is appended, so this bounds only empty fetches: it
// costs no latency, and 500 ms (the Java consumer's default) keeps idle
// consumers from polling the broker busily.
const kafkaFetchMaxWait = 500 * time.Millisecond

// kafkaMaxBytes bounds a record batch: the topic's max.message.bytes,
// the producer's batches and the consumer's fetches (8 MiB).
const kafkaMaxBytes = 8 << 20

// openKafka builds the target for kafka://host:port[?flush=always].
func openKafka(u *url.URL) (Target, error) {
	if u.Host == "" {
		return nil, fmt.Errorf("kafka: %q has no broker address", u.Redacted())
	}
	t := &kafkaTarget{}
	for _, b := range strings.Split(u.Host, ",") {
		if !strings.Contains(b, ":") {
			b += ":9092"
		}
		t.brokers = append(t.brokers, b)
	}
	for k, v := range u.Query() {
		switch {
		case k == "flush" && len(v) == 1 && v[0] == "always":
			t.flushAlways = true
		default:
			return nil, fmt.Errorf("kafka: unknown option %s=%s (known: flush=always)", k, strings.Join(v, ","))
		}
	}
	t.mu.topics = map[string]*kafkaTopic{}
	return t, nil
}

func (t *kafkaTarget) Name() string { return "kafka" }

func (t *kafkaTarget) Open(ctx context.Context, topic string, deliver func([]byte)) (Conn, error) {
	name, err := kafkaTopicName(topic)
	if err != nil {
		return nil, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, kafkaWait)
		defer cancel()
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(t.brokers...),
		kgo.ClientID("skiff-bench"),
		kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.DisableIdempotentWrite(),
		kgo.ProducerLinger(0),
		// franz-go compresses batches with snappy by default; no other
		// target compresses, and the payloads are random anyway.
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.FetchMaxWait(kafkaFetchMaxWait),
		kgo.ProducerBatchMaxBytes(kafkaMaxBytes),
		kgo.FetchMaxPartitionBytes(kafkaMaxBytes),
		kgo.FetchMaxBytes(2*kafkaMaxBytes),
	)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	adm := kadm.NewClient(cl)
	if err := t.acquire(ctx, adm, name); err != nil {
		cl.Close()
		return nil, err
	}
	c := &kafkaConn{t: t, cl: cl, adm: adm, topic: name}
	// Waiting for the end offset waits for the partition to have a leader,
	// which a new topic takes a moment to get, so publishers wait too.
	end, err := endOffset(ctx, adm, name)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	if deliver == nil {
		return c, nil
	}
	// Consuming from the offset the partition ended at when this
	// connection opened, rather than from "the end" resolved at the first
	// fetch, is what makes every record produced from now on arrive.
	c.failed, c.done = make(chan struct{}), make(chan struct{})
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{name: {0: kgo.NewOffset().At(end)}})
	go c.consume(deliver)
	return c, nil
}

// acquire counts a connection to topic, creating the topic for the first.
func (t *kafkaTarget) acquire(ctx context.Context, adm *kadm.Client, topic string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.mu.topics[topic]; e != nil {
		e.refs++
		return nil
	}
	// Kafka refuses records over about 1 MB by default; the harness
	// sends up to 1 MiB of payload plus its framing.
	configs := map[string]*string{"max.message.bytes": kadm.StringPtr(fmt.Sprint(kafkaMaxBytes))}
	if t.flushAlways {
		configs["flush.messages"] = kadm.StringPtr("1")
	}
	_, err := adm.CreateTopic(ctx, 1, 1, configs, topic)
	created := err == nil
	// Another target (another process) may have created it first.
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("kafka: create topic %s: %w", topic, err)
	}
	t.mu.topics[topic] = &kafkaTopic{refs: 1, created: created}
	return nil
}

// release uncounts a connection to topic and deletes the topic after the
// last, if this target created it. adm must still be open.
func (t *kafkaTarget) release(adm *kadm.Client, topic string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.mu.topics[topic]
	if e == nil {
		return nil
	}
	if e.refs--; e.refs > 0 {
		return nil
	}
	delete(t.mu.topics, topic)
	if !e.created {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), kafkaWait)
	defer cancel()
	if _, err := adm.DeleteTopic(ctx, topic); err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("kafka: delete topic %s: %w", topic, err)
	}
	return nil
}

// endOffset returns the end offset of topic's partition 0, retrying while
// the partition has no leader yet.
func endOffset(ctx context.Context, adm *kadm.Client, topic string) (int64, error) {
	for {
		offs, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			o, ok := offs.Lookup(topic, 0)
			switch {
			case !ok:
				err = fmt.Errorf("partition 0 missing from the broker's answer")
			case o.Err == nil:
				return o.Offset, nil
			default:
				err = o.Err
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("kafka: end offset of %s: %w (%w)", topic, err, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// kafkaTopicName maps a bench topic to a legal Kafka topic name: at most
// 249 characters of [a-zA-Z0-9._-]. Bench topics (bench.latency.<run>.<n>)
// are legal as they are; another character becomes '-', not '_', which
// Kafka counts as colliding with '.'.
func kafkaTopicName(topic string) (string, error) {
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '-'
	}, topic)
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return "", fmt.Errorf("kafka: %q cannot be a topic name", topic)
	}
	return name, nil
}

type kafkaConn struct {
	t      *kafkaTarget
	cl     *kgo.Client
	adm    *kadm.Client
	topic  string
	closed atomic.Bool // set by Close: fetch errors from then on are its doing

	failed chan struct{} // receivers only: closed at the first fetch error
	done   chan struct{} // receivers only: closed when consume returns
	once   sync.Once
	mu     struct {
		sync.Mutex
		produceErr error // the first failed produce
		fetchErr   error // why failed was closed
	}
}

var (
	_ Flusher = (*kafkaConn)(nil)
	_ Failer  = (*kafkaConn)(nil)
)

// consume delivers records until Close closes the client.
func (c *kafkaConn) consume(deliver func([]byte)) {
	defer close(c.done)
	for {
		fs := c.cl.PollFetches(context.Background())
		if fs.IsClientClosed() {
			return
		}
		fs.EachError(func(_ string, _ int32, err error) {
			// Data loss is informational: the client resets and goes on.
			var loss *kgo.ErrDataLoss
			if !errors.As(err, &loss) && !c.closed.Load() {
				c.fail(err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) { deliver(r.Value) })
	}
}

// fail records a fetch error the client reports as one it cannot retry.
// Kafka never drops a slow consumer, which fetches at its own pace, so
// this is the only way a receiver fails.
func (c *kafkaConn) fail(err error) {
	c.mu.Lock()
	if c.mu.fetchErr == nil {
		c.mu.fetchErr = err
	}
	c.mu.Unlock()
	c.once.Do(func() { close(c.failed) })
}

// Failed is closed at a receiving connection's first fetch error; it is
// nil, never ready, for a publishing one.
func (c *kafkaConn) Failed() <-chan struct{} { return c.failed }

func (c *kafkaConn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.fetchErr != nil {
		return fmt.Errorf("kafka: fetch: %w", c.mu.fetchErr)
	}
	return nil
}

func (c *kafkaConn) produceErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.produceErr
}

// produced is the promise of every produce, called from a goroutine of
// the client's.
func (c *kafkaConn) produced(_ *kgo.Record, err error) {
	if err == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.produceErr == nil {
		c.mu.produceErr = err
	}
}

// Send hands a copy of p to the client, which sends it on its own and
// keeps the payload until the broker acks it; the harness reuses p. It
// waits only when the client's buffer (50,000 records by default) is full,
// and returns the first produce that failed, if any did.
func (c *kafkaConn) Send(p []byte) error {
	if err := c.produceErr(); err != nil {
		return fmt.Errorf("kafka: produce: %w", err)
	}
	c.cl.Produce(context.Background(), &kgo.Record{Topic: c.topic, Partition: 0, Value: bytes.Clone(p)}, c.produced)
	return nil
}

// Flush waits until the broker has acked every record sent so far, and
// returns the first produce that failed.
func (c *kafkaConn) Flush(ctx context.Context) error {
	if err := c.cl.Flush(ctx); err != nil {
		return fmt.Errorf("kafka: flush: %w", err)
	}
	if err := c.produceErr(); err != nil {
		return fmt.Errorf("kafka: produce: %w", err)
	}
	return nil
}

// Close deletes the topic if this is the target's last connection to it
// and the target created it, then closes the client, failing records not
// yet acked.
func (c *kafkaConn) Close() error {
	c.closed.Store(true)
	err := c.t.release(c.adm, c.topic)
	c.cl.Close()
	if c.done != nil {
		<-c.done
	}
	return err
}
