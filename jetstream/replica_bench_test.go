package jetstream_test

import (
	"fmt"
	"slices"
	"sync"
	"syscall"
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

// BenchmarkReplicatedPublish measures an R3 publish: an in-process
// three-server cluster (every server, the client and the raft traffic in
// one process, so a CPU profile shows the whole path) holds an R3 file
// stream, and a nats.go client on a server that does not lead it publishes
// b.N messages as `nats bench js pub async` does (and so `skiff bench
// cluster`'s cluster-js-r3-* scenarios): batches of 500 asynchronous
// publishes, each batch's acknowledgements awaited before the next. It
// reports acknowledged messages per second and the CPU time the process
// spent per message; a refused publish fails the benchmark.
//
//	go test ./jetstream -run '^$' -bench BenchmarkReplicatedPublish -benchtime 200000x -cpuprofile cpu.out
func BenchmarkReplicatedPublish(b *testing.B) {
	for _, size := range []int{16, 1024} {
		b.Run(fmt.Sprintf("size=%dB", size), func(b *testing.B) {
			jc := startReplicatedCluster(b, 3)
			_, js := jc.connectJS(b, 0)
			_, err := js.AddStream(&nats.StreamConfig{Name: "P", Subjects: []string{"p"}, Replicas: 3})
			require.NoError(b, err)
			lead := jc.waitReplicated(b, "P", map[uint64]string{})
			nc := jc.Connect(b, (lead+1)%3)
			pub, err := nc.JetStream()
			require.NoError(b, err)
			data := make([]byte, size)
			const batch = 500
			futures := make([]nats.PubAckFuture, 0, batch)
			b.SetBytes(int64(size))
			b.ResetTimer()
			start, cpu0 := time.Now(), cpuTime()
			for sent := 0; sent < b.N; {
				futures = futures[:0]
				for ; len(futures) < batch && sent < b.N; sent++ {
					f, err := pub.PublishAsync("p", data)
					if err != nil {
						b.Fatal(err)
					}
					futures = append(futures, f)
				}
				for _, f := range futures {
					select {
					case <-f.Ok():
					case err := <-f.Err():
						b.Fatal(err)
					case <-time.After(time.Minute):
						b.Fatal("publish not acknowledged")
					}
				}
			}
			elapsed := time.Since(start)
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/msg")
		})
	}
}

// cpuTime returns the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
