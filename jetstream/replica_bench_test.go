package jetstream_test

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
	"github.com/skiffmq/skiff/store"
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

// startBenchCluster starts three servers as `skiff serve` runs them: the
// raft log synced as the streams are, by default every 100 ms. (The test
// clusters give jscluster options of their own, whose durability
// defaults to fsyncing every write: measured against nats-server's
// defaults, that compared an fsync per batch with none.)
func startBenchCluster(b *testing.B) *jsCluster {
	b.Helper()
	jc := startJSClusterTuned(b, make([]string, 3), server.Options{}, nil, func(_ int, o *jetstream.Options) {
		o.Cluster.Durability = jetstream.DurabilityOf(jetstream.SyncInterval, store.DefaultSyncInterval)
	}, nil)
	jc.waitMeta(b)
	return jc
}

func benchConsume(b *testing.B, layout string, consumers int) {
	jc := startBenchCluster(b)
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

// BenchmarkReplicatedPublish measures an R3 publish, on Skiff and on
// nats-server alike: an in-process three-server cluster (every server, the
// client and the raft traffic in one process, so a CPU profile shows the
// whole path) holds an R3 file stream, and a nats.go client on a server
// that does not lead it publishes b.N messages as `nats bench js pub
// async` does (and so `skiff bench cluster`'s cluster-js-r3-* scenarios):
// batches of 500 asynchronous publishes, each batch's acknowledgements
// awaited before the next. It reports acknowledged messages per second and
// the CPU time the process spent per message, which the machine's other
// load does not change much; a refused publish fails the benchmark.
//
//	go test ./jetstream -run '^$' -bench BenchmarkReplicatedPublish -benchtime 200000x -cpuprofile cpu.out
func BenchmarkReplicatedPublish(b *testing.B) {
	for _, target := range []string{"skiff", "nats-server"} {
		for _, size := range []int{16, 1024} {
			b.Run(fmt.Sprintf("target=%s/size=%dB", target, size), func(b *testing.B) {
				var url string
				if target == "skiff" {
					jc := startBenchCluster(b)
					_, js := jc.connectJS(b, 0)
					_, err := js.AddStream(&nats.StreamConfig{Name: "P", Subjects: []string{"p"}, Replicas: 3})
					require.NoError(b, err)
					lead := jc.waitReplicated(b, "P", map[uint64]string{})
					url = jc.Servers[(lead+1)%3].ClientURL()
				} else {
					url = referenceR3(b, "P", "p")
				}
				benchPublish(b, url, size)
			})
		}
	}
}

// referenceR3 starts a three-node nats-server cluster with JetStream in
// process, makes an R3 file stream on subject, and returns the client URL
// of a server that does not lead it.
func referenceR3(b *testing.B, stream, subject string) string {
	ports := clustertest.FreePorts(b, 3)
	var routes []string
	for _, p := range ports {
		routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
	}
	var servers []*natsserver.Server
	for i := range 3 {
		o := &natsserver.Options{ServerName: fmt.Sprintf("n%d", i+1), Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
			JetStream: true, StoreDir: b.TempDir(), Routes: natsserver.RoutesFromStr(strings.Join(routes, ",")),
			Cluster: natsserver.ClusterOpts{Name: "bench", Host: "127.0.0.1", Port: ports[i]}}
		ns, err := natsserver.NewServer(o)
		require.NoError(b, err)
		ns.Start()
		b.Cleanup(func() {
			ns.Shutdown()
			ns.WaitForShutdown()
		})
		require.True(b, ns.ReadyForConnections(10*time.Second))
		servers = append(servers, ns)
	}
	nc, err := nats.Connect(servers[0].ClientURL())
	require.NoError(b, err)
	defer nc.Close()
	js, err := nc.JetStream(nats.MaxWait(2 * time.Second))
	require.NoError(b, err)
	lead := -1
	require.Eventually(b, func() bool {
		si, err := js.StreamInfo(stream)
		if err != nil {
			_, _ = js.AddStream(&nats.StreamConfig{Name: stream, Subjects: []string{subject}, Replicas: 3})
			return false
		}
		if si.Cluster == nil || si.Cluster.Leader == "" || len(si.Cluster.Replicas) != 2 {
			return false
		}
		for _, r := range si.Cluster.Replicas {
			if !r.Current {
				return false
			}
		}
		_, err = fmt.Sscanf(si.Cluster.Leader, "n%d", &lead)
		return err == nil
	}, time.Minute, 100*time.Millisecond, "nats-server's R3 stream has no leader")
	return servers[lead%3].ClientURL() // n<lead> is servers[lead-1]: the next one
}

// benchPublish publishes b.N messages of size bytes through url, in
// batches of 500 whose acknowledgements are awaited.
func benchPublish(b *testing.B, url string, size int) {
	nc, err := nats.Connect(url)
	require.NoError(b, err)
	b.Cleanup(nc.Close)
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
		timeout := time.NewTimer(time.Minute)
		for _, f := range futures {
			select {
			case <-f.Ok():
			case err := <-f.Err():
				b.Fatal(err)
			case <-timeout.C:
				b.Fatal("publish not acknowledged")
			}
		}
		timeout.Stop()
	}
	elapsed := time.Since(start)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/msg")
}

// cpuTime returns the CPU time (user and system) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReplicatedAckLatency is the publish-to-ack latency of an R3
// file stream at a fixed rate, on Skiff and on nats-server alike (as
// `skiff bench cluster`'s cluster-js-r3-ack-p99 across processes): 2,000
// publishes a second of 256 bytes through a server that does not lead the
// stream, each timed from when the schedule says it is due (not when it
// was sent, so that a stall counts for everything it delays). b.N is
// ignored: each run lasts -ack.seconds. It reports the median, 99th and
// 99.9th percentiles.
//
//	go test ./jetstream -run '^$' -bench BenchmarkReplicatedAckLatency -benchtime 1x
func BenchmarkReplicatedAckLatency(b *testing.B) {
	for _, target := range []string{"skiff", "nats-server"} {
		b.Run("target="+target, func(b *testing.B) {
			var url string
			if target == "skiff" {
				jc := startBenchCluster(b)
				_, js := jc.connectJS(b, 0)
				_, err := js.AddStream(&nats.StreamConfig{Name: "P", Subjects: []string{"p"}, Replicas: 3})
				require.NoError(b, err)
				lead := jc.waitReplicated(b, "P", map[uint64]string{})
				url = jc.Servers[(lead+1)%3].ClientURL()
			} else {
				url = referenceR3(b, "P", "p")
			}
			lats := ackLatencies(b, url, 2000, 256, time.Duration(*ackSeconds)*time.Second)
			slices.Sort(lats)
			q := func(p float64) float64 { return float64(lats[int(p*float64(len(lats)-1))].Microseconds()) }
			b.ReportMetric(q(0.5), "p50-µs")
			b.ReportMetric(q(0.99), "p99-µs")
			b.ReportMetric(q(0.999), "p99.9-µs")
		})
	}
}

var ackSeconds = flag.Int("ack.seconds", 10, "seconds of publishes per BenchmarkReplicatedAckLatency run")

// ackLatencies publishes rate messages a second of size bytes through url
// for d (after a second of warm-up) and returns each one's time from its
// scheduled send to its acknowledgement.
func ackLatencies(b *testing.B, url string, rate, size int, d time.Duration) []time.Duration {
	nc, err := nats.Connect(url)
	require.NoError(b, err)
	b.Cleanup(nc.Close)
	pub, err := nc.JetStream(nats.PublishAsyncMaxPending(1 << 20))
	require.NoError(b, err)
	data := make([]byte, size)
	interval := time.Second / time.Duration(rate)
	warm := time.Second
	n := int((d + warm) / interval)
	type sent struct {
		due time.Time
		f   nats.PubAckFuture
	}
	var (
		mu   sync.Mutex
		lats = make([]time.Duration, 0, n)
		wg   sync.WaitGroup
	)
	start := time.Now()
	b.ResetTimer()
	for i := range n {
		due := start.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(due))
		f, err := pub.PublishAsync("p", data)
		require.NoError(b, err)
		wg.Add(1)
		go func(s sent) {
			defer wg.Done()
			select {
			case <-s.f.Ok():
			case err := <-s.f.Err():
				b.Error(err)
				return
			}
			if lat := time.Since(s.due); s.due.Sub(start) >= warm {
				mu.Lock()
				lats = append(lats, lat)
				mu.Unlock()
			}
		}(sent{due, f})
	}
	wg.Wait()
	b.StopTimer()
	require.NotEmpty(b, lats)
	return lats
}
