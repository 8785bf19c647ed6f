package corebench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/skiffmq/skiff/bench"
)

// The replicated-stream comparisons of cluster.md: an R3 file stream on
// three servers of each kind, published to through a server that does not
// lead it (so that every publish crosses a route to the leader, as two of
// three clients' do), and the time a kill -9 of the leader stops
// acknowledgements for.

// jsAlwaysConfig is jsConfig with an fsync before every acknowledgement.
const jsAlwaysConfig = `jetstream { store_dir: "` + storeDirMark + `", sync_interval: always }`

// r3Msgs bounds the messages of one replicated publish run.
const r3Msgs = 200_000

// The fixed schedule of the publish-to-ack latency run.
const (
	ackLatencyRate = 2000 // msgs/s
	ackLatencySize = 256  // bytes
)

// failoverRounds is the kills of one failover run.
const failoverRounds = 5

func jsClusterScenarios() []Scenario {
	pub := func(size int) func(ctx context.Context, o *Options, c *Cluster) (float64, error) {
		return func(ctx context.Context, o *Options, c *Cluster) (float64, error) {
			return o.r3Publish(ctx, c, size)
		}
	}
	return []Scenario{
		{Name: "cluster-js-r3-16", Config: jsConfig, ConfigLabel: "jetstream, defaults", ClusterSize: 3, Unit: "msgs/s", Goal: 1.5,
			Title:      "R3 file stream, async publish through a server that does not lead it, 16 B (acknowledged msgs/s)",
			RunCluster: pub(16)},
		{Name: "cluster-js-r3-1k", Config: jsConfig, ConfigLabel: "jetstream, defaults", ClusterSize: 3, Unit: "msgs/s", Goal: 1.5,
			Title:      "R3 file stream, async publish through a server that does not lead it, 1 KiB (acknowledged msgs/s)",
			RunCluster: pub(1024)},
		{Name: "cluster-js-r3-16-always", Config: jsAlwaysConfig, ConfigLabel: "jetstream, `sync_interval: always`", ClusterSize: 3, Unit: "msgs/s", Goal: 1,
			Title:      "R3 file stream, fsync before every acknowledgement, async publish through a server that does not lead it, 16 B (acknowledged msgs/s)",
			RunCluster: pub(16)},
		{Name: "cluster-js-r3-ack-p99", Config: jsConfig, ConfigLabel: "jetstream, defaults", ClusterSize: 3, Unit: "µs", Goal: 1, LowerIsBetter: true,
			Title: fmt.Sprintf("R3 file stream, publish-to-ack latency at a fixed %d msgs/s of %d B through a server that does not lead it: "+
				"p99, corrected for coordinated omission (HDR histogram; p50 to max in the log)", ackLatencyRate, ackLatencySize),
			RunCluster: func(ctx context.Context, o *Options, c *Cluster) (float64, error) {
				return o.r3AckLatency(ctx, c)
			}},
		{Name: "cluster-js-failover", Config: jsConfig, ConfigLabel: "jetstream, defaults", ClusterSize: 3, Unit: "ms", Goal: 1, LowerIsBetter: true,
			Title: fmt.Sprintf("R3 failover: kill -9 of the stream's leader under a publisher of 200 msgs/s with retries, "+
				"time to the next acknowledged publish (median of %d kills per run, the killed server restarted and caught up between kills)", failoverRounds),
			RunCluster: func(ctx context.Context, o *Options, c *Cluster) (float64, error) {
				return o.failover(ctx, c)
			}},
	}
}

// r3Stream creates the R3 bench stream on subject through server 0,
// retrying while the cluster's JetStream forms, and returns the index of
// a server that does not lead it.
func (o *Options) r3Stream(ctx context.Context, c *Cluster, subject string) (int, error) {
	var last []byte
	deadline := time.Now().Add(60 * time.Second)
	for {
		add := o.nats(ctx, c.URL(0), "stream", "add", "benchstream", "--subjects", subject, "--storage", "file",
			"--replicas", "3", "--defaults")
		out, err := add.CombinedOutput()
		if err == nil {
			break
		}
		last = out
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, fmt.Errorf("nats stream add --replicas 3: %w\n%s", err, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
	lead, err := c.streamLeader(ctx, "benchstream", 30*time.Second)
	if err != nil {
		return 0, err
	}
	return (lead + 1) % len(c.Procs), nil
}

// streamLeader returns the index of the server leading stream, once it
// has a leader and every other replica is current.
func (c *Cluster) streamLeader(ctx context.Context, stream string, d time.Duration) (int, error) {
	var urls []string
	for _, p := range c.Procs {
		urls = append(urls, p.URL)
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := nc.JetStream(nats.MaxWait(time.Second))
	if err != nil {
		return 0, err
	}
	deadline := time.Now().Add(d)
	why := "no answer"
	for time.Now().Before(deadline) && ctx.Err() == nil {
		si, err := js.StreamInfo(stream)
		switch {
		case err != nil:
			why = err.Error()
		case si.Cluster == nil || si.Cluster.Leader == "":
			why = "no leader"
		default:
			current := 0
			for _, r := range si.Cluster.Replicas {
				if r.Current {
					current++
				}
			}
			why = fmt.Sprintf("leader %s, %d of %d replicas current", si.Cluster.Leader, current, len(si.Cluster.Replicas))
			i := -1
			if n, err := strconv.Atoi(strings.TrimPrefix(si.Cluster.Leader, "n")); err == nil {
				i = n - 1
			}
			if i >= 0 && i < len(c.Procs) && current == len(c.Procs)-1 && len(si.Cluster.Replicas) == len(c.Procs)-1 {
				return i, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0, fmt.Errorf("stream %s not current after %v: %s", stream, d, why)
}

// r3Publish publishes r3Msgs messages of size bytes with `nats bench js
// pub async` through a server that does not lead the stream.
func (o *Options) r3Publish(ctx context.Context, c *Cluster, size int) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	via, err := o.r3Stream(ctx, c, "bench.js")
	if err != nil {
		return 0, err
	}
	n := min(o.Msgs, r3Msgs)
	before, err := c.cpuTimes()
	if err != nil {
		return 0, err
	}
	rate, client, err := o.jsPubAsyncCPU(ctx, c.URL(via), size, n)
	if err != nil {
		return 0, err
	}
	after, err := c.cpuTimes()
	if err != nil {
		return 0, err
	}
	// The CPU each message cost, servers and publisher: on a machine the
	// load generator shares, the rate follows their sum
	// (docs/benchmarks/cluster-r3.md).
	k := len(c.Procs)
	lead, other := (via+k-1)%k, (via+1)%k
	var total time.Duration
	for i := range after {
		total += after[i] - before[i]
	}
	fmt.Fprintf(o.Log, "%-18s %s, %d B: servers' CPU per message %s (leader n%d %s, n%d published to %s, n%d %s), the publisher's %s\n",
		"cluster-js-r3", c.Procs[0].target.Name, size, perMsg(total, n), lead+1, perMsg(after[lead]-before[lead], n), via+1,
		perMsg(after[via]-before[via], n), other+1, perMsg(after[other]-before[other], n), perMsg(client, n))
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(n) }
	o.note("servers' CPU per message (µs)", us(total))
	o.note("the leader's (µs)", us(after[lead]-before[lead]))
	o.note("the server published to (µs)", us(after[via]-before[via]))
	o.note("the other follower (µs)", us(after[other]-before[other]))
	o.note("the publisher's CPU per message (µs)", us(client))
	return rate, nil
}

// failoverPublisher publishes to the stream 200 times a second, each
// message retried until acknowledged (with its own Nats-Msg-Id, so a retry
// is never stored twice), and records when each acknowledged publish was
// first sent and acknowledged.
type failoverPublisher struct {
	js   nats.JetStreamContext
	mu   sync.Mutex
	acks []failoverAck
	stop chan struct{}
	done chan struct{}
}

type failoverAck struct{ sent, acked time.Time }

func (p *failoverPublisher) run() {
	defer close(p.done)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for k := 0; ; k++ {
		select {
		case <-p.stop:
			return
		case <-tick.C:
		}
		id := "fo-" + strconv.Itoa(k)
		for {
			sent := time.Now()
			_, err := p.js.Publish("bench.fo", []byte(id), nats.MsgId(id), nats.AckWait(250*time.Millisecond))
			if err == nil {
				p.mu.Lock()
				p.acks = append(p.acks, failoverAck{sent: sent, acked: time.Now()})
				p.mu.Unlock()
				break
			}
			select {
			case <-p.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
}

// firstAckAfter returns when the first publish sent after t was
// acknowledged, if one was.
func (p *failoverPublisher) firstAckAfter(t time.Time) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.acks {
		if a.sent.After(t) {
			return a.acked, true
		}
	}
	return time.Time{}, false
}

// failover kills the stream's leader failoverRounds times under a
// publisher and returns the median time, in milliseconds, from a kill to
// the first acknowledgement of a publish sent after it.
func (o *Options) failover(ctx context.Context, c *Cluster) (float64, error) {
	via, err := o.r3Stream(ctx, c, "bench.fo")
	if err != nil {
		return 0, err
	}
	// The publisher prefers a server that does not lead, and fails over
	// to the others.
	urls := []string{c.URL(via)}
	for i := range c.Procs {
		if i != via {
			urls = append(urls, c.URL(i))
		}
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.DontRandomize(), nats.MaxReconnects(-1),
		nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		return 0, err
	}
	p := &failoverPublisher{js: js, stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	defer func() { close(p.stop); <-p.done }()

	var times []float64
	for round := range failoverRounds {
		time.Sleep(time.Second) // steady publishing
		lead, err := c.streamLeader(ctx, "benchstream", 30*time.Second)
		if err != nil {
			return 0, fmt.Errorf("round %d: %w", round, err)
		}
		killed := time.Now()
		c.Procs[lead].Kill()
		var at time.Time
		for deadline := killed.Add(30 * time.Second); ; time.Sleep(2 * time.Millisecond) {
			var ok bool
			if at, ok = p.firstAckAfter(killed); ok {
				break
			}
			if time.Now().After(deadline) {
				return 0, errors.New("no publish acknowledged within 30s of the leader's kill")
			}
		}
		ms := float64(at.Sub(killed)) / float64(time.Millisecond)
		times = append(times, ms)
		fmt.Fprintf(o.Log, "%-18s kill %d of n%d: next acknowledged publish after %.0f ms\n", "cluster-js-failover", round+1, lead+1, ms)
		if err := c.Procs[lead].Restart(ctx); err != nil {
			return 0, err
		}
		if _, err := c.streamLeader(ctx, "benchstream", 60*time.Second); err != nil {
			return 0, fmt.Errorf("after restarting n%d: %w", lead+1, err)
		}
	}
	slices.Sort(times)
	return times[len(times)/2], nil
}

// r3AckLatency publishes to the R3 stream at ackLatencyRate through a
// server that does not lead it, with the harness's open-loop schedule
// (bench.RunLatency: each publish's latency from when it was due, to its
// acknowledgement), for o.Duration after a second of warm-up, and returns
// the p99 in microseconds. A publish never acknowledged fails the run.
func (o *Options) r3AckLatency(ctx context.Context, c *Cluster) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	via, err := o.r3Stream(ctx, c, "bench.latency.>")
	if err != nil {
		return 0, err
	}
	tgt, err := bench.OpenTarget(strings.Replace(c.URL(via), "nats://", "jetstream://", 1) + "?until=ack&stream=benchstream")
	if err != nil {
		return 0, err
	}
	res, err := bench.RunLatency(ctx, tgt, bench.LatencyOptions{Rate: ackLatencyRate, Size: ackLatencySize,
		Duration: o.Duration, Warmup: time.Second})
	if err != nil {
		return 0, err
	}
	if res.Lost() > 0 {
		return 0, fmt.Errorf("%d of %d publishes never acknowledged", res.Lost(), res.Sent)
	}
	h := res.Corrected
	fmt.Fprintf(o.Log, "%-18s %d publishes: p50 %v, p90 %v, p99 %v, p99.9 %v, p99.99 %v, max %v (the sender fell %v behind at worst)\n",
		"cluster-js-r3-ack", res.Sent, h.Percentile(50), h.Percentile(90), h.Percentile(99), h.Percentile(99.9),
		h.Percentile(99.99), h.Percentile(100), res.Behind)
	return float64(h.Percentile(99)) / float64(time.Microsecond), nil
}
