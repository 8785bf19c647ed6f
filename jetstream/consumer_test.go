package jetstream_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// setup starts a broker with a stream S on s.> holding n messages, s.0 to
// s.<n-1>, with data "0" to "<n-1>".
func setup(t *testing.T, n int, cfg ...njs.StreamConfig) (*broker, *nats.Conn, njs.JetStream, njs.Stream) {
	t.Helper()
	b := startBroker(t, "")
	nc, js := connect(t, b.srv.ClientURL())
	scfg := njs.StreamConfig{Name: "S", Subjects: []string{"s.>"}}
	if len(cfg) > 0 {
		scfg = cfg[0]
	}
	s, err := js.CreateStream(ctx(t), scfg)
	require.NoError(t, err)
	publishN(t, js, 0, n)
	return b, nc, js, s
}

// publishN publishes s.<i> with data "<i>" for i in [from, from+n).
func publishN(t *testing.T, js njs.JetStream, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		_, err := js.Publish(ctx(t), fmt.Sprintf("s.%d", i), []byte(fmt.Sprint(i)))
		require.NoError(t, err)
	}
}

// fetch pulls up to n messages and returns their data.
func fetch(t *testing.T, c njs.Consumer, n int, opts ...njs.FetchOpt) ([]string, []njs.Msg) {
	t.Helper()
	opts = append([]njs.FetchOpt{njs.FetchMaxWait(time.Second)}, opts...)
	batch, err := c.Fetch(n, opts...)
	require.NoError(t, err)
	var data []string
	var msgs []njs.Msg
	for m := range batch.Messages() {
		data = append(data, string(m.Data()))
		msgs = append(msgs, m)
	}
	require.NoError(t, batch.Error())
	return data, msgs
}

func seqStrings(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprint(i))
	}
	return out
}

func TestPullFetch(t *testing.T) {
	_, _, js, s := setup(t, 10)
	c, err := s.CreateConsumer(ctx(t), njs.ConsumerConfig{Durable: "D", AckPolicy: njs.AckExplicitPolicy})
	require.NoError(t, err)
	got, msgs := fetch(t, c, 4)
	require.Equal(t, seqStrings(0, 4), got)
	md, err := msgs[3].Metadata()
	require.NoError(t, err)
	require.Equal(t, uint64(4), md.Sequence.Stream)
	require.Equal(t, uint64(4), md.Sequence.Consumer)
	require.Equal(t, uint64(1), md.NumDelivered)
	require.Equal(t, uint64(6), md.NumPending)
	require.Equal(t, "S", md.Stream)
	require.Equal(t, "D", md.Consumer)
	for _, m := range msgs {
		require.NoError(t, m.Ack())
	}
	got, _ = fetch(t, c, 100, njs.FetchMaxWait(300*time.Millisecond))
	require.Equal(t, seqStrings(4, 10), got)

	info, err := c.Info(ctx(t))
	require.NoError(t, err)
	require.Equal(t, uint64(10), info.Delivered.Consumer)
	require.Equal(t, uint64(10), info.Delivered.Stream)
	require.Equal(t, uint64(4), info.AckFloor.Stream)
	require.Equal(t, 6, info.NumAckPending)
	require.Zero(t, info.NumPending)

	// New messages reach a waiting request.
	done := make(chan []string)
	go func() {
		got, _ := fetch(t, c, 2, njs.FetchMaxWait(3*time.Second))
		done <- got
	}()
	time.Sleep(100 * time.Millisecond)
	publishN(t, js, 10, 2)
	require.Equal(t, seqStrings(10, 12), <-done)
}

func TestPullNoWaitAndExpiry(t *testing.T) {
	_, nc, _, s := setup(t, 3)
	c, err := s.CreateConsumer(ctx(t), njs.ConsumerConfig{Durable: "D", AckPolicy: njs.AckNonePolicy})
	require.NoError(t, err)

	batch, err := c.FetchNoWait(10)
	require.NoError(t, err)
	n := 0
	for range batch.Messages() {
		n++
	}
	require.NoError(t, batch.Error())
	require.Equal(t, 3, n)

	// Nothing left: the raw statuses.
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	require.NoError(t, err)
	next := "$JS.API.CONSUMER.MSG.NEXT.S.D"
	require.NoError(t, nc.PublishRequest(next, inbox, []byte(`{"batch":1,"no_wait":true}`)))
	m, err := sub.NextMsg(time.Second)
	require.NoError(t, err)
	require.Equal(t, "404", m.Header.Get("Status"))
	require.Equal(t, "No Messages", m.Header.Get("Description"))

	require.NoError(t, nc.PublishRequest(next, inbox, []byte(`{"batch":5,"expires":100000000}`)))
	m, err = sub.NextMsg(time.Second)
	require.NoError(t, err)
	require.Equal(t, "408", m.Header.Get("Status"))
	require.Equal(t, "Request Timeout", m.Header.Get("Description"))
	require.Equal(t, "5", m.Header.Get("Nats-Pending-Messages"))

	require.NoError(t, nc.PublishRequest(next, inbox, []byte(`{"batch":1,"expires":1000000000,"idle_heartbeat":100000000}`)))
	m, err = sub.NextMsg(time.Second)
	require.NoError(t, err)
	require.Equal(t, "100", m.Header.Get("Status"))

	require.NoError(t, nc.PublishRequest(next, inbox, []byte(`{"batch":1,"expires":100000000,"idle_heartbeat":100000000}`)))
	m, err = sub.NextMsg(time.Second)
	require.NoError(t, err)
	require.Equal(t, "400", m.Header.Get("Status"))

	require.NoError(t, nc.PublishRequest(next, inbox, []byte(`{"batch":`)))
	m, err = sub.NextMsg(time.Second)
	require.NoError(t, err)
	require.Equal(t, "400", m.Header.Get("Status"))

	// A request to a consumer that does not exist: no responders.
	_, err = nc.Request("$JS.API.CONSUMER.MSG.NEXT.S.NOPE", nil, time.Second)
	require.ErrorIs(t, err, nats.ErrNoResponders)
}

func TestPullMaxBytes(t *testing.T) {
	_, nc, _, s := setup(t, 0)
	_, js := connect(t, nc.ConnectedUrl())
	for range 5 {
		_, err := js.Publish(ctx(t), "s.big", make([]byte, 1000))
		require.NoError(t, err)
	}
	c, err := s.CreateConsumer(ctx(t), njs.ConsumerConfig{Durable: "D", AckPolicy: njs.AckNonePolicy})
	require.NoError(t, err)
	batch, err := c.FetchBytes(2500, njs.FetchMaxWait(time.Second))
	require.NoError(t, err)
	n := 0
	for range batch.Messages() {
		n++
	}
	require.NoError(t, batch.Error())
	require.Equal(t, 2, n)

	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	require.NoError(t, err)
	require.NoError(t, nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.S.D", inbox, []byte(`{"batch":5,"max_bytes":10,"expires":1000000000}`)))
	m, err := sub.NextMsg(time.Second)
	require.NoError(t, err)
	require.Equal(t, "409", m.Header.Get("Status"))
	require.Equal(t, "Message Size Exceeds MaxBytes", m.Header.Get("Description"))
}

func TestPullLimitsOfRequests(t *testing.T) {
	_, nc, _, s := setup(t, 0)
	_, err := s.CreateConsumer(ctx(t), njs.ConsumerConfig{
		Durable: "D", MaxWaiting: 1, MaxRequestBatch: 10, MaxRequestExpires: time.Second, MaxRequestMaxBytes: 1000,
	})
	require.NoError(t, err)
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	require.NoError(t, err)
	next := "$JS.API.CONSUMER.MSG.NEXT.S.D"
	for _, tt := range []struct{ body, desc string }{
		{`{"batch":11}`, "Exceeded MaxRequestBatch of 10"},
		{`{"batch":1,"expires":2000000000}`, "Exceeded MaxRequestExpires of 1s"},
		{`{"batch":1,"max_bytes":2000}`, "Exceeded MaxRequestMaxBytes of 1000"},
	} {
		require.NoError(t, nc.PublishRequest(next, inbox, []byte(tt.body)))
		m, err := sub.NextMsg(time.Second)
		require.NoError(t, err)
		require.Equal(t, "409", m.Header.Get("Status"))
		require.Equal(t, tt.desc, m.Header.Get("Description"))
	}
	require.NoError(t, nc.PublishRequest(next, inbox, []byte(`{"batch":1,"expires":900000000}`)))
	require.NoError(t, nc.PublishRequest(next, inbox, []byte(`{"batch":1,"expires":900000000}`)))
	m, err := sub.NextMsg(time.Second)
	require.NoError(t, err)
	require.Equal(t, "409", m.Header.Get("Status"))
	require.Equal(t, "Exceeded MaxWaiting", m.Header.Get("Description"))
}

func TestDeliverPolicies(t *testing.T) {
	_, _, js, s := setup(t, 10)
	start := time.Now()
	time.Sleep(20 * time.Millisecond)
	publishN(t, js, 10, 2)
	tests := []struct {
		name string
		cfg  njs.ConsumerConfig
		want []string
	}{
		{"all", njs.ConsumerConfig{DeliverPolicy: njs.DeliverAllPolicy}, seqStrings(0, 12)},
		{"last", njs.ConsumerConfig{DeliverPolicy: njs.DeliverLastPolicy}, []string{"11"}},
		{"last filtered", njs.ConsumerConfig{DeliverPolicy: njs.DeliverLastPolicy, FilterSubject: "s.3"}, []string{"3"}},
		{"new", njs.ConsumerConfig{DeliverPolicy: njs.DeliverNewPolicy}, nil},
		{"by sequence", njs.ConsumerConfig{DeliverPolicy: njs.DeliverByStartSequencePolicy, OptStartSeq: 9}, seqStrings(8, 12)},
		{"by time", njs.ConsumerConfig{DeliverPolicy: njs.DeliverByStartTimePolicy, OptStartTime: &start}, seqStrings(10, 12)},
		{"last per subject", njs.ConsumerConfig{DeliverPolicy: njs.DeliverLastPerSubjectPolicy, FilterSubject: "s.*"}, seqStrings(0, 12)},
		{"filter *", njs.ConsumerConfig{FilterSubject: "s.1*"}, nil},
		{"filter literal", njs.ConsumerConfig{FilterSubject: "s.1"}, []string{"1"}},
		{"filters", njs.ConsumerConfig{FilterSubjects: []string{"s.2", "s.7"}}, []string{"2", "7"}},
		{"filter #", njs.ConsumerConfig{FilterSubject: "s.#"}, seqStrings(0, 12)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.AckPolicy = njs.AckNonePolicy
			c, err := s.CreateConsumer(ctx(t), tt.cfg)
			require.NoError(t, err)
			got, _ := fetch(t, c, 100, njs.FetchMaxWait(300*time.Millisecond))
			require.Equal(t, tt.want, got)
		})
	}
}

func TestLastPerSubject(t *testing.T) {
	b := startBroker(t, "")
	_, js := connect(t, b.srv.ClientURL())
	s, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "KV", Subjects: []string{"kv.>"}})
	require.NoError(t, err)
	for i, kv := range [][2]string{{"a", "1"}, {"b", "1"}, {"a", "2"}, {"c", "1"}, {"b", "2"}} {
		_, err := js.Publish(ctx(t), "kv."+kv[0], []byte(kv[0]+kv[1]))
		require.NoError(t, err, i)
	}
	c, err := s.CreateConsumer(ctx(t), njs.ConsumerConfig{DeliverPolicy: njs.DeliverLastPerSubjectPolicy, FilterSubject: "kv.>", AckPolicy: njs.AckNonePolicy})
	require.NoError(t, err)
	got, _ := fetch(t, c, 10, njs.FetchMaxWait(300*time.Millisecond))
	require.Equal(t, []string{"a2", "c1", "b2"}, got)
}

func TestConsumerConfigErrors(t *testing.T) {
	_, _, js, s := setup(t, 0)
	tests := []struct {
		name string
		cfg  njs.ConsumerConfig
		code njs.ErrorCode
	}{
		{"start seq with deliver all", njs.ConsumerConfig{OptStartSeq: 5}, 10094},
		{"by sequence without seq", njs.ConsumerConfig{DeliverPolicy: njs.DeliverByStartSequencePolicy}, 10094},
		{"last per subject without filter", njs.ConsumerConfig{DeliverPolicy: njs.DeliverLastPerSubjectPolicy}, 10094},
		{"overlapping filters", njs.ConsumerConfig{FilterSubjects: []string{"s.*", "s.a"}}, 10138},
		{"both filter forms", njs.ConsumerConfig{FilterSubject: "s.a", FilterSubjects: []string{"s.b"}}, 10136},
		{"heartbeat on pull", njs.ConsumerConfig{IdleHeartbeat: time.Second}, 10088},
		{"backoff longer than max deliver", njs.ConsumerConfig{MaxDeliver: 2, BackOff: []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}, AckPolicy: njs.AckExplicitPolicy}, 10116},
		{"max ack pending above limit", njs.ConsumerConfig{MaxAckPending: 1_000_000, AckPolicy: njs.AckExplicitPolicy}, 10121},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := s.CreateConsumer(ctx(t), tt.cfg)
			require.Error(t, err)
			require.Equal(t, tt.code, apiCode(err), "%v", err)
		})
	}
	_, err := js.CreateConsumer(ctx(t), "NOPE", njs.ConsumerConfig{})
	require.ErrorIs(t, err, njs.ErrStreamNotFound)
}

func TestConsumerCreateUpdateDelete(t *testing.T) {
	_, _, js, s := setup(t, 3)
	c := ctx(t)
	cons, err := s.CreateConsumer(c, njs.ConsumerConfig{Durable: "D", AckPolicy: njs.AckExplicitPolicy, Description: "first"})
	require.NoError(t, err)
	require.Equal(t, "D", cons.CachedInfo().Name)
	require.Equal(t, 30*time.Second, cons.CachedInfo().Config.AckWait)
	require.Equal(t, 1000, cons.CachedInfo().Config.MaxAckPending)
	require.Equal(t, 512, cons.CachedInfo().Config.MaxWaiting)
	require.Equal(t, 3, int(cons.CachedInfo().NumPending))

	// Create with the same configuration is idempotent; a different one
	// is refused; update changes what may change.
	_, err = s.CreateConsumer(c, njs.ConsumerConfig{Durable: "D", AckPolicy: njs.AckExplicitPolicy, Description: "first"})
	require.NoError(t, err)
	_, err = s.CreateConsumer(c, njs.ConsumerConfig{Durable: "D", AckPolicy: njs.AckExplicitPolicy, Description: "second"})
	require.ErrorIs(t, err, njs.ErrConsumerExists)
	cons, err = s.UpdateConsumer(c, njs.ConsumerConfig{Durable: "D", AckPolicy: njs.AckExplicitPolicy, Description: "second"})
	require.NoError(t, err)
	require.Equal(t, "second", cons.CachedInfo().Config.Description)
	_, err = s.UpdateConsumer(c, njs.ConsumerConfig{Durable: "D", AckPolicy: njs.AckAllPolicy})
	require.Equal(t, njs.ErrorCode(10012), apiCode(err))
	_, err = s.UpdateConsumer(c, njs.ConsumerConfig{Durable: "NEW"})
	require.ErrorIs(t, err, njs.ErrConsumerDoesNotExist)

	// Ephemeral consumers get a name.
	eph, err := s.CreateConsumer(c, njs.ConsumerConfig{})
	require.NoError(t, err)
	require.Len(t, eph.CachedInfo().Name, 8)

	var names []string
	for n := range s.ConsumerNames(c).Name() {
		names = append(names, n)
	}
	require.ElementsMatch(t, []string{"D", eph.CachedInfo().Name}, names)
	n := 0
	for range s.ListConsumers(c).Info() {
		n++
	}
	require.Equal(t, 2, n)

	require.NoError(t, js.DeleteConsumer(c, "S", "D"))
	require.ErrorIs(t, js.DeleteConsumer(c, "S", "D"), njs.ErrConsumerNotFound)
	_, err = s.Consumer(c, "D")
	require.ErrorIs(t, err, njs.ErrConsumerNotFound)
}

func TestConsumerDeletedWhileWaiting(t *testing.T) {
	_, nc, js, s := setup(t, 0)
	_, err := s.CreateConsumer(ctx(t), njs.ConsumerConfig{Durable: "D"})
	require.NoError(t, err)
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	require.NoError(t, err)
	require.NoError(t, nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.S.D", inbox, []byte(`{"batch":1,"expires":5000000000}`)))
	require.Eventually(t, func() bool {
		ci, err := js.Consumer(ctx(t), "S", "D")
		return err == nil && ci.CachedInfo().NumWaiting == 1
	}, 2*time.Second, 10*time.Millisecond)
	require.NoError(t, js.DeleteConsumer(ctx(t), "S", "D"))
	m, err := sub.NextMsg(time.Second)
	require.NoError(t, err)
	require.Equal(t, "409", m.Header.Get("Status"))
	require.Equal(t, "Consumer Deleted", m.Header.Get("Description"))
}

func TestAckKinds(t *testing.T) {
	_, _, _, s := setup(t, 5)
	c, err := s.CreateConsumer(ctx(t), njs.ConsumerConfig{Durable: "D", AckPolicy: njs.AckExplicitPolicy, AckWait: 300 * time.Millisecond})
	require.NoError(t, err)
	_, msgs := fetch(t, c, 5)
	require.Len(t, msgs, 5)
	require.NoError(t, msgs[0].DoubleAck(ctx(t))) // synchronous ack
	require.NoError(t, msgs[1].Nak())             // redelivered at once
	require.NoError(t, msgs[2].Term())            // never again
	require.NoError(t, msgs[3].InProgress())      // more time
	// msgs[4] is left to time out.

	got, again := fetch(t, c, 5, njs.FetchMaxWait(200*time.Millisecond))
	require.Equal(t, []string{"1"}, got)
	md, err := again[0].Metadata()
	require.NoError(t, err)
	require.Equal(t, uint64(2), md.NumDelivered)
	require.Equal(t, uint64(6), md.Sequence.Consumer)
	require.NoError(t, again[0].Ack())
	require.NoError(t, msgs[3].Ack())

	got, again = fetch(t, c, 1, njs.FetchMaxWait(time.Second))
	require.Equal(t, []string{"4"}, got)
	require.NoError(t, again[0].Ack())

	require.Eventually(t, func() bool {
		info, err := c.Info(ctx(t))
		return err == nil && info.AckFloor.Stream == 5 && info.NumAckPending == 0
	}, 2*time.Second, 10*time.Millisecond)
	info, err := c.Info(ctx(t))
	require.NoError(t, err)
	require.Equal(t, 0, info.NumRedelivered)
}

func TestNakWithDelay(t *testing.T) {
	_, _, _, s := setup(t, 1)
	c, err := s.CreateConsumer(ctx(t), njs.ConsumerConfig{Durable: "D", AckPolicy: njs.AckExplicitPolicy})
	require.NoError(t, err)
	_, msgs := fetch(t, c, 1)
	start := time.Now()
	require.NoError(t, msgs[0].NakWithDelay(300*time.Millisecond))
	got, _ := fetch(t, c, 1, njs.FetchMaxWait(2*time.Second))
	require.Equal(t, []string{"0"}, got)
	require.GreaterOrEqual(t, time.Since(start), 250*time.Millisecond)
}

func TestAckAll(t *testing.T) {
	_, _, _, s := setup(t, 5)
	c, err := s.CreateConsumer(ctx(t), njs.ConsumerConfig{Durable: "D", AckPolicy: njs.AckAllPolicy})
	require.NoError(t, err)
	_, msgs := fetch(t, c, 5)
	require.NoError(t, msgs[3].Ack())
	require.Eventually(t, func() bool {
		info, err := c.Info(ctx(t))
		return err == nil && info.AckFloor.Stream == 4 && info.NumAckPending == 1
	}, 2*time.Second, 10*time.Millisecond)
}

func TestMaxDeliverAndBackoff(t *testing.T) {
	_, _, _, s := setup(t, 1)
	c, err := s.CreateConsumer(ctx(t), njs.ConsumerConfig{
		Durable: "D", AckPolicy: njs.AckExplicitPolicy, MaxDeliver: 3,
		BackOff: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond},
	})
	require.NoError(t, err)
	var deliveries []uint64
	var at []time.Time
	for range 4 {
		batch, err := c.Fetch(1, njs.FetchMaxWait(600*time.Millisecond))
		require.NoError(t, err)
		for m := range batch.Messages() {
			md, err := m.Metadata()
			require.NoError(t, err)
			deliveries = append(deliveries, md.NumDelivered)
			at = append(at, time.Now())
		}
	}
	require.Equal(t, []uint64{1, 2, 3}, deliveries)
	require.GreaterOrEqual(t, at[2].Sub(at[1]), 90*time.Millisecond)
	// After max_deliver the message leaves the pending set.
	require.Eventually(t, func() bool {
		info, err := c.Info(ctx(t))
		return err == nil && info.NumAckPending == 0 && info.AckFloor.Stream == 1
	}, 2*time.Second, 10*time.Millisecond)
}

func TestMaxAckPending(t *testing.T) {
	_, _, _, s := setup(t, 10)
	c, err := s.CreateConsumer(ctx(t), njs.ConsumerConfig{Durable: "D", AckPolicy: njs.AckExplicitPolicy, MaxAckPending: 3})
	require.NoError(t, err)
	got, msgs := fetch(t, c, 10, njs.FetchMaxWait(300*time.Millisecond))
	require.Equal(t, seqStrings(0, 3), got)
	require.NoError(t, msgs[0].Ack())
	got, _ = fetch(t, c, 10, njs.FetchMaxWait(300*time.Millisecond))
	require.Equal(t, []string{"3"}, got)
	info, err := c.Info(ctx(t))
	require.NoError(t, err)
	require.Equal(t, 3, info.NumAckPending)
	require.Equal(t, uint64(6), info.NumPending)
}

func TestConsume(t *testing.T) {
	_, _, js, s := setup(t, 100)
	c, err := s.CreateConsumer(ctx(t), njs.ConsumerConfig{Durable: "D", AckPolicy: njs.AckExplicitPolicy})
	require.NoError(t, err)
	var mu sync.Mutex
	var got []string
	done := make(chan struct{})
	cc, err := c.Consume(func(m njs.Msg) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, string(m.Data()))
		_ = m.Ack()
		if len(got) == 150 {
			close(done)
		}
	}, njs.PullMaxMessages(20), njs.PullHeartbeat(time.Second))
	require.NoError(t, err)
	defer cc.Stop()
	publishN(t, js, 100, 50)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("not all messages consumed")
	}
	require.Equal(t, seqStrings(0, 150), got)
}

func TestOrderedConsumer(t *testing.T) {
	_, _, js, _ := setup(t, 50)
	oc, err := js.OrderedConsumer(ctx(t), "S", njs.OrderedConsumerConfig{FilterSubjects: []string{"s.>"}})
	require.NoError(t, err)
	it, err := oc.Messages()
	require.NoError(t, err)
	defer it.Stop()
	for i := range 50 {
		m, err := it.Next()
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(i), string(m.Data()))
	}
}

func TestPushConsumer(t *testing.T) {
	_, nc, js, s := setup(t, 20)
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	require.NoError(t, err)
	_, err = s.CreateOrUpdatePushConsumer(ctx(t), njs.ConsumerConfig{
		Durable: "P", DeliverSubject: inbox, AckPolicy: njs.AckExplicitPolicy, IdleHeartbeat: 200 * time.Millisecond,
	})
	require.NoError(t, err)
	for i := range 20 {
		m, err := sub.NextMsg(time.Second)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprint(i), string(m.Data))
		require.Equal(t, fmt.Sprintf("s.%d", i), m.Subject)
		require.NoError(t, m.Ack())
	}
	// Idle: heartbeats.
	m, err := sub.NextMsg(time.Second)
	require.NoError(t, err)
	require.Equal(t, "100", m.Header.Get("Status"))
	require.Equal(t, "20", m.Header.Get("Nats-Last-Consumer"))
	require.Equal(t, "20", m.Header.Get("Nats-Last-Stream"))

	// A pull request to a push consumer is refused.
	resp, err := nc.Request("$JS.API.CONSUMER.MSG.NEXT.S.P", nil, time.Second)
	require.NoError(t, err)
	require.Equal(t, "409", resp.Header.Get("Status"))
	_ = js
}

func TestPushConsumerNewAPI(t *testing.T) {
	_, _, js, s := setup(t, 30)
	pc, err := s.CreateOrUpdatePushConsumer(ctx(t), njs.ConsumerConfig{
		Durable: "P", DeliverSubject: nats.NewInbox(), AckPolicy: njs.AckExplicitPolicy,
		FlowControl: true, IdleHeartbeat: time.Second,
	})
	require.NoError(t, err)
	var mu sync.Mutex
	var got []string
	done := make(chan struct{})
	cc, err := pc.Consume(func(m njs.Msg) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, string(m.Data()))
		_ = m.Ack()
		if len(got) == 40 {
			close(done)
		}
	})
	require.NoError(t, err)
	defer cc.Stop()
	publishN(t, js, 30, 10)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("not all messages consumed")
	}
	require.Equal(t, seqStrings(0, 40), got)
}

func TestPushFlowControl(t *testing.T) {
	b := startBroker(t, "")
	nc, js := connect(t, b.srv.ClientURL())
	s, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	require.NoError(t, err)
	payload := make([]byte, 64<<10)
	for range 100 { // 6.4 MB: more than the consumer sends before flow control
		_, err := js.PublishAsync("s.x", payload)
		require.NoError(t, err)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(10 * time.Second):
		t.Fatal("publishes not acknowledged")
	}
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	require.NoError(t, err)
	_, err = s.CreateOrUpdatePushConsumer(ctx(t), njs.ConsumerConfig{
		Durable: "P", DeliverSubject: inbox, AckPolicy: njs.AckNonePolicy, FlowControl: true, IdleHeartbeat: time.Second,
	})
	require.NoError(t, err)
	// Read without answering flow control: the consumer stalls.
	var data, fc int
	var fcReply string
	for {
		m, err := sub.NextMsg(500 * time.Millisecond)
		if errors.Is(err, nats.ErrTimeout) {
			break
		}
		require.NoError(t, err)
		if m.Header.Get("Status") == "100" {
			if m.Reply != "" {
				fc++
				fcReply = m.Reply
			}
			continue
		}
		data++
	}
	require.Equal(t, 1, fc)
	require.Less(t, data, 100)
	// Answer: it resumes.
	require.NoError(t, nc.Publish(fcReply, nil))
	for data < 100 {
		m, err := sub.NextMsg(2 * time.Second)
		require.NoError(t, err)
		if m.Header.Get("Status") == "100" {
			if m.Reply != "" {
				require.NoError(t, nc.Publish(m.Reply, nil))
			}
			continue
		}
		data++
	}
}

func TestInactiveEphemeral(t *testing.T) {
	_, _, js, s := setup(t, 1)
	c, err := s.CreateConsumer(ctx(t), njs.ConsumerConfig{InactiveThreshold: 200 * time.Millisecond})
	require.NoError(t, err)
	name := c.CachedInfo().Name
	require.Eventually(t, func() bool {
		_, err := js.Consumer(ctx(t), "S", name)
		return errors.Is(err, njs.ErrConsumerNotFound)
	}, 3*time.Second, 20*time.Millisecond)
}

func TestWorkQueue(t *testing.T) {
	_, _, js, s := setup(t, 0, njs.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Retention: njs.WorkQueuePolicy})
	c := ctx(t)
	_, err := s.CreateConsumer(c, njs.ConsumerConfig{Durable: "A", AckPolicy: njs.AckNonePolicy})
	require.Equal(t, njs.ErrorCode(10084), apiCode(err))
	a, err := s.CreateConsumer(c, njs.ConsumerConfig{Durable: "A", AckPolicy: njs.AckExplicitPolicy, FilterSubject: "s.a.>"})
	require.NoError(t, err)
	_, err = s.CreateConsumer(c, njs.ConsumerConfig{Durable: "B", AckPolicy: njs.AckExplicitPolicy})
	require.Equal(t, njs.ErrorCode(10099), apiCode(err))
	_, err = s.CreateConsumer(c, njs.ConsumerConfig{Durable: "B", AckPolicy: njs.AckExplicitPolicy, FilterSubject: "s.*.x"})
	require.Equal(t, njs.ErrorCode(10100), apiCode(err))
	_, err = s.CreateConsumer(c, njs.ConsumerConfig{Durable: "B", AckPolicy: njs.AckExplicitPolicy, FilterSubject: "s.b.>"})
	require.NoError(t, err)

	for i := range 4 {
		_, err := js.Publish(c, fmt.Sprintf("s.a.%d", i), nil)
		require.NoError(t, err)
	}
	_, msgs := fetch(t, a, 4)
	require.Len(t, msgs, 4)
	for _, m := range msgs[:3] {
		require.NoError(t, m.DoubleAck(c))
	}
	info, err := s.Info(c)
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Msgs)
}

func TestInterestRetention(t *testing.T) {
	_, _, js, s := setup(t, 0, njs.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Retention: njs.InterestPolicy})
	c := ctx(t)
	a, err := s.CreateConsumer(c, njs.ConsumerConfig{Durable: "A", AckPolicy: njs.AckExplicitPolicy})
	require.NoError(t, err)
	bc, err := s.CreateConsumer(c, njs.ConsumerConfig{Durable: "B", AckPolicy: njs.AckExplicitPolicy, FilterSubject: "s.b"})
	require.NoError(t, err)
	_, err = js.Publish(c, "s.a", nil)
	require.NoError(t, err)
	_, err = js.Publish(c, "s.b", nil)
	require.NoError(t, err)

	_, msgs := fetch(t, a, 2)
	for _, m := range msgs {
		require.NoError(t, m.DoubleAck(c))
	}
	// s.a was wanted by A only; s.b waits for B.
	info, err := s.Info(c)
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Msgs)
	_, msgs = fetch(t, bc, 1)
	require.NoError(t, msgs[0].DoubleAck(c))
	info, err = s.Info(c)
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs)

	// Deleting the only interested consumer frees what it had not acked.
	_, err = js.Publish(c, "s.b", nil)
	require.NoError(t, err)
	require.NoError(t, js.DeleteConsumer(c, "S", "A"))
	info, err = s.Info(c)
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.State.Msgs)
	require.NoError(t, js.DeleteConsumer(c, "S", "B"))
	info, err = s.Info(c)
	require.NoError(t, err)
	require.Zero(t, info.State.Msgs)
}

func TestHeadersOnlyAndReplayOriginal(t *testing.T) {
	_, _, js, s := setup(t, 0)
	c := ctx(t)
	_, err := js.Publish(c, "s.a", []byte("hello"))
	require.NoError(t, err)
	time.Sleep(200 * time.Millisecond)
	_, err = js.Publish(c, "s.b", []byte("world"))
	require.NoError(t, err)

	ho, err := s.CreateConsumer(c, njs.ConsumerConfig{HeadersOnly: true, AckPolicy: njs.AckNonePolicy})
	require.NoError(t, err)
	_, msgs := fetch(t, ho, 1)
	require.Empty(t, msgs[0].Data())
	require.Equal(t, "5", msgs[0].Headers().Get("Nats-Msg-Size"))

	ro, err := s.CreateConsumer(c, njs.ConsumerConfig{ReplayPolicy: njs.ReplayOriginalPolicy, AckPolicy: njs.AckNonePolicy})
	require.NoError(t, err)
	start := time.Now()
	got, _ := fetch(t, ro, 2, njs.FetchMaxWait(2*time.Second))
	require.Equal(t, []string{"hello", "world"}, got)
	require.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)
}

func TestDurableSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir)
	_, js := connect(t, b.srv.ClientURL())
	c := ctx(t)
	s, err := js.CreateStream(c, njs.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	require.NoError(t, err)
	publishN(t, js, 0, 10)
	cons, err := s.CreateConsumer(c, njs.ConsumerConfig{Durable: "D", AckPolicy: njs.AckExplicitPolicy})
	require.NoError(t, err)
	_, msgs := fetch(t, cons, 6)
	for _, m := range msgs[:4] {
		require.NoError(t, m.DoubleAck(c))
	}
	before, err := cons.Info(c)
	require.NoError(t, err)
	b.stop()

	b = startBroker(t, dir)
	_, js = connect(t, b.srv.ClientURL())
	cons, err = js.Consumer(c, "S", "D")
	require.NoError(t, err)
	after := cons.CachedInfo()
	require.Equal(t, before.AckFloor.Stream, after.AckFloor.Stream)
	require.Equal(t, before.AckFloor.Consumer, after.AckFloor.Consumer)
	require.Equal(t, before.Delivered.Stream, after.Delivered.Stream)
	require.Equal(t, before.Delivered.Consumer, after.Delivered.Consumer)
	require.Equal(t, 2, after.NumAckPending)

	// The two unacknowledged messages come back once their ack wait
	// passes; here, after a NAK-free restart, they are redelivered after
	// the ack wait, so look at the new ones first.
	got, _ := fetch(t, cons, 4, njs.FetchMaxWait(500*time.Millisecond))
	require.Equal(t, seqStrings(6, 10), got)
	s, err = js.Stream(c, "S")
	require.NoError(t, err)
	require.Equal(t, uint64(10), s.CachedInfo().State.Msgs)
}

// TestConsumerPastStreamEnd: a machine crash under sync interval can cost
// the stream its last messages while the consumer's state kept having seen
// them. After the restart the consumer goes back to the stream's end, and
// the new messages that reuse those sequences reach it.
func TestConsumerPastStreamEnd(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir)
	_, js := connect(t, b.srv.ClientURL())
	c := ctx(t)
	s, err := js.CreateStream(c, njs.StreamConfig{Name: "S", Subjects: []string{"s.>"}})
	require.NoError(t, err)
	publishN(t, js, 0, 5) // five records of the same size
	cons, err := s.CreateConsumer(c, njs.ConsumerConfig{Durable: "D", AckPolicy: njs.AckExplicitPolicy})
	require.NoError(t, err)
	_, msgs := fetch(t, cons, 5)
	for _, m := range msgs {
		require.NoError(t, m.DoubleAck(c))
	}
	b.stop()

	// Lose the last two records, as a crash before their fsync would.
	var logs []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && filepath.Base(filepath.Dir(p)) == "msgs" && strings.HasSuffix(p, ".log") {
			logs = append(logs, p)
		}
		return err
	}))
	require.Len(t, logs, 1)
	fi, err := os.Stat(logs[0])
	require.NoError(t, err)
	require.NoError(t, os.Truncate(logs[0], fi.Size()*3/5))

	b = startBroker(t, dir)
	_, js = connect(t, b.srv.ClientURL())
	s, err = js.Stream(c, "S")
	require.NoError(t, err)
	require.Equal(t, uint64(3), s.CachedInfo().State.LastSeq)
	publishN(t, js, 5, 2) // sequences 4 and 5 again
	cons, err = js.Consumer(c, "S", "D")
	require.NoError(t, err)
	require.Equal(t, uint64(3), cons.CachedInfo().AckFloor.Stream)
	got, _ := fetch(t, cons, 2, njs.FetchMaxWait(2*time.Second))
	require.Equal(t, []string{"5", "6"}, got)
}

// TestMaxMsgSizeCountsHeadersAndData: as in the reference server, the
// subject does not count towards max_msg_size.
func TestMaxMsgSizeCountsHeadersAndData(t *testing.T) {
	_, _, js, _ := setup(t, 0, njs.StreamConfig{Name: "S", Subjects: []string{"s.>"}, MaxMsgSize: 10})
	_, err := js.Publish(ctx(t), "s.a.rather.long.subject", []byte("0123456789"))
	require.NoError(t, err)
	_, err = js.Publish(ctx(t), "s.a", []byte("0123456789A"))
	require.Equal(t, njs.ErrorCode(10054), apiCode(err))
}

// A pull request waiting when the server stops hears 409 Server Shutdown,
// as from nats-server, rather than waiting out its expiry.
func TestPullRequestsHearServerShutdown(t *testing.T) {
	b := startBroker(t, "")
	nc, js := connect(t, b.srv.ClientURL())
	_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "S", Subjects: []string{"s"}})
	require.NoError(t, err)
	c, err := js.CreateOrUpdateConsumer(ctx(t), "S", njs.ConsumerConfig{Durable: "C", AckPolicy: njs.AckExplicitPolicy})
	require.NoError(t, err)
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	require.NoError(t, err)
	require.NoError(t, nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.S.C", inbox, []byte(`{"batch":5,"expires":30000000000}`)))
	require.Eventually(t, func() bool {
		info, err := c.Info(ctx(t))
		return err == nil && info.NumWaiting == 1
	}, 5*time.Second, 10*time.Millisecond)

	stopped := make(chan struct{})
	go func() { b.stop(); close(stopped) }()
	m, err := sub.NextMsg(5 * time.Second)
	<-stopped
	require.NoError(t, err)
	require.Equal(t, "409", m.Header.Get("Status"))
	require.Equal(t, "Server Shutdown", m.Header.Get("Description"))
	require.Equal(t, "5", m.Header.Get("Nats-Pending-Messages"))
}

// An ordered consumer carries on after the server restarts: the client
// reconnects, finds its consumer gone and makes a new one from where it
// was.
func TestOrderedConsumerAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir)
	url := b.srv.ClientURL()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := njs.New(nc)
	require.NoError(t, err)
	_, err = js.CreateStream(ctx(t), njs.StreamConfig{Name: "O", Subjects: []string{"o.>"}})
	require.NoError(t, err)
	oc, err := js.OrderedConsumer(ctx(t), "O", njs.OrderedConsumerConfig{})
	require.NoError(t, err)
	got := make(chan string, 100)
	cc, err := oc.Consume(func(m njs.Msg) { got <- string(m.Data()) })
	require.NoError(t, err)
	t.Cleanup(cc.Stop)
	for i := 1; i <= 3; i++ {
		_, err := js.Publish(ctx(t), "o.x", []byte(strconv.Itoa(i)))
		require.NoError(t, err)
	}
	for i := 1; i <= 3; i++ {
		require.Equal(t, strconv.Itoa(i), <-got)
	}

	b.stop()
	port := strings.TrimPrefix(url[strings.LastIndex(url, ":"):], ":")
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	opts := server.DefaultOptions()
	opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", p, 0
	s, err := server.New(opts)
	require.NoError(t, err)
	js2, err := jetstream.New(s, jetstream.Options{StoreDir: dir})
	require.NoError(t, err)
	require.NoError(t, s.Start())
	t.Cleanup(func() { _ = s.Shutdown(context.Background()); _ = js2.Close() })

	require.Eventually(t, nc.IsConnected, 10*time.Second, 20*time.Millisecond)
	for i := 4; i <= 6; i++ {
		_, err := js.Publish(ctx(t), "o.x", []byte(strconv.Itoa(i)))
		require.NoError(t, err)
	}
	for i := 4; i <= 6; i++ {
		select {
		case m := <-got:
			require.Equal(t, strconv.Itoa(i), m)
		case <-time.After(15 * time.Second):
			t.Fatalf("message %d not delivered after the restart", i)
		}
	}
}

// A reset is durable: after a restart the consumer starts where the reset
// put it, although its ack floor moved back.
func TestConsumerResetSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	b := startBroker(t, dir)
	nc, js := connect(t, b.srv.ClientURL())
	_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "S", Subjects: []string{"s"}})
	require.NoError(t, err)
	for i := 1; i <= 5; i++ {
		_, err := js.Publish(ctx(t), "s", []byte(strconv.Itoa(i)))
		require.NoError(t, err)
	}
	c, err := js.CreateOrUpdateConsumer(ctx(t), "S", njs.ConsumerConfig{Durable: "C", AckPolicy: njs.AckExplicitPolicy})
	require.NoError(t, err)
	batch, err := c.Fetch(3, njs.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	for m := range batch.Messages() {
		require.NoError(t, m.DoubleAck(ctx(t)))
	}
	info, err := c.Info(ctx(t))
	require.NoError(t, err)
	require.Equal(t, uint64(3), info.AckFloor.Stream)

	m, err := nc.Request("$JS.API.CONSUMER.RESET.S.C", []byte(`{"seq":2}`), 5*time.Second)
	require.NoError(t, err)
	require.Contains(t, string(m.Data), `"reset_seq":2`)
	b.stop()

	b = startBroker(t, dir)
	_, js = connect(t, b.srv.ClientURL())
	c, err = js.Consumer(ctx(t), "S", "C")
	require.NoError(t, err)
	info, err = c.Info(ctx(t))
	require.NoError(t, err)
	require.Equal(t, uint64(1), info.AckFloor.Stream)
	require.Equal(t, uint64(4), info.NumPending)
	batch, err = c.Fetch(1, njs.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	for m := range batch.Messages() {
		require.Equal(t, "2", string(m.Data()))
	}
}
