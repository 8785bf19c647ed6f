package jetstream_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// BenchmarkReplicatedConsume is design 3.5's measurement: where a durable
// consumer of a replicated stream keeps its progress, in its stream's raft
// group (layout=stream, what Skiff does) or in a group of its own
// (layout=own, a prototype: jetstream.OwnConsumerGroups). An in-process
// R3 file stream holds b.N messages; each of the consumers (each a durable
// of its own, so each gets every message) fetches them 100 at a time and
// acknowledges every one synchronously, which waits for its ack to be
// committed. It reports acknowledgements per second over all consumers
// and the synchronous ack's median and 99th percentile.
//
//	go test ./jetstream -run '^$' -bench BenchmarkReplicatedConsume -benchtime 1000x -count 3
func BenchmarkReplicatedConsume(b *testing.B) {
	for _, layout := range []string{"stream", "own"} {
		for _, n := range []int{1, 10, 100} {
			b.Run(fmt.Sprintf("layout=%s/consumers=%d", layout, n), func(b *testing.B) {
				benchConsume(b, layout, n)
			})
		}
	}
}

func benchConsume(b *testing.B, layout string, consumers int) {
	jc := startReplicatedCluster(b, 3)
	_, js := jc.connectJS(b, 0)
	_, err := js.AddStream(&nats.StreamConfig{Name: "B", Subjects: []string{"b"}, Replicas: 3})
	require.NoError(b, err)
	jc.waitReplicated(b, "B", map[uint64]string{})
	for i := range b.N {
		_, err := js.PublishAsync("b", []byte(fmt.Sprint(i)))
		require.NoError(b, err)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("publishes not acknowledged")
	}
	names := make([]string, consumers)
	for k := range consumers {
		names[k] = fmt.Sprintf("C%d", k)
	}
	if layout == "own" {
		jc.mu.Lock()
		jetstream.OwnConsumerGroups(b, jc.js, server.GlobalAccountName, "B", names...)
		jc.mu.Unlock()
	}
	subs := make([]*nats.Subscription, consumers)
	for k, name := range names {
		_, err := js.AddConsumer("B", &nats.ConsumerConfig{Durable: name, AckPolicy: nats.AckExplicitPolicy,
			AckWait: time.Minute, MaxAckPending: 1000})
		require.NoError(b, err)
		subs[k], err = js.PullSubscribe("", name, nats.Bind("B", name))
		require.NoError(b, err)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		lats []time.Duration
	)
	b.ResetTimer()
	start := time.Now()
	for k := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := make([]time.Duration, 0, b.N)
			for len(mine) < b.N {
				msgs, err := subs[k].Fetch(100, nats.MaxWait(5*time.Second))
				if err != nil {
					b.Error(err)
					return
				}
				for _, m := range msgs {
					t0 := time.Now()
					if err := m.AckSync(nats.AckWait(5 * time.Second)); err != nil {
						b.Error(err)
						return
					}
					mine = append(mine, time.Since(t0))
				}
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lats)
	if len(lats) == 0 {
		return
	}
	b.ReportMetric(float64(len(lats))/elapsed.Seconds(), "acks/s")
	b.ReportMetric(float64(lats[len(lats)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lats[len(lats)*99/100].Microseconds()), "p99-µs")
}
