package corebench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// ClusterScenarios are the comparisons of docs/benchmarks/cluster.md, each
// on three servers joined by routes: server 1 publishes (or requests),
// servers 2 and 3 subscribe (or respond), so every message crosses a
// route.
func ClusterScenarios() []Scenario {
	return append([]Scenario{
		{Name: "cluster-fanout", Config: bigPending, ClusterSize: 3, Unit: "msgs/s", Goal: 1,
			Title: "fan-out across servers: publisher on server 1 -> a subscriber on each of servers 2 and 3, 128 B (delivered msgs/s, both subscribers)",
			RunCluster: func(ctx context.Context, o *Options, c *Cluster) (float64, error) {
				return o.clusterFanOut(ctx, c, 128)
			}},
		{Name: "cluster-request-reply", Config: bigPending, ClusterSize: 3, Unit: "req/s", Goal: 1,
			Title: "queue-group request/reply across servers: 4 requesters on server 1, 2 responders (one queue group) on each of servers 2 and 3, 128 B (req/s)",
			RunCluster: func(ctx context.Context, o *Options, c *Cluster) (float64, error) {
				return o.clusterService(ctx, c, 4, 128)
			}},
		{Name: "cluster-churn", ClusterSize: 3, Unit: "msgs/s", Goal: 1.5,
			Title: "churn across servers: 10,000 wildcard subscriptions over servers 2 and 3, 1,000 subscribes and 1,000 unsubscribes/s on servers 2 and 3, publishing 128 B on server 1 (delivered msgs/s)",
			RunCluster: func(ctx context.Context, o *Options, c *Cluster) (float64, error) {
				r, err := churnOn(ctx, churnSetup{Pub: c.URL(0), Subs: []string{c.URL(1), c.URL(2)},
					Churners: []string{c.URL(1), c.URL(2)}}, 10000, 1000, 128, o.Duration)
				if err == nil {
					fmt.Fprintf(o.Log, "%-18s churn handled: %.0f subscribes/s (and as many unsubscribes)\n", "cluster-churn", r.changes)
				}
				return r.delivered, err
			}},
	}, jsClusterScenarios()...)
}

// waitRemoteInterest subscribes a probe to subject on each of the servers
// subs and publishes from server pub until every probe got a message: the
// subscribers' servers' interest in subject has then reached pub's server,
// and a real subscriber that subscribes there next shares it at once.
// It returns the probes, to unsubscribe once the real subscribers are in
// place (so that the interest stays).
func waitRemoteInterest(c *Cluster, pub int, subs []int, subject string, d time.Duration) (func(), error) {
	var conns []*nats.Conn
	done := func() {
		for _, nc := range conns {
			nc.Close()
		}
	}
	p, err := nats.Connect(c.URL(pub), nats.NoReconnect())
	if err != nil {
		return done, err
	}
	conns = append(conns, p)
	var probes []*nats.Subscription
	for _, i := range subs {
		nc, err := nats.Connect(c.URL(i), nats.NoReconnect())
		if err != nil {
			return done, err
		}
		conns = append(conns, nc)
		s, err := nc.SubscribeSync(subject)
		if err != nil {
			return done, err
		}
		if err := nc.Flush(); err != nil {
			return done, err
		}
		probes = append(probes, s)
	}
	deadline := time.Now().Add(d)
	for _, s := range probes {
		for {
			if time.Now().After(deadline) {
				return done, fmt.Errorf("interest in %q did not reach server %d in %v", subject, pub+1, d)
			}
			if err := p.Publish(subject, nil); err != nil {
				return done, err
			}
			if _, err := s.NextMsg(50 * time.Millisecond); err == nil {
				break
			}
		}
	}
	return done, nil
}

// clusterFanOut runs a `nats bench sub` on each of servers 2 and 3 and a
// `nats bench pub` on server 1, and returns the two subscribers' rates
// added up.
func (o *Options) clusterFanOut(ctx context.Context, c *Cluster, size int) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	const subject = "bench.fan"
	closeProbes, err := waitRemoteInterest(c, 0, []int{1, 2}, subject, 20*time.Second)
	defer closeProbes()
	if err != nil {
		return 0, err
	}
	msgs, sizeArg := strconv.Itoa(o.Msgs), strconv.Itoa(size)
	type subProc struct {
		out  *lockedBuffer
		wait chan error
	}
	var subs []subProc // cancel (deferred) kills any still running
	for _, i := range []int{1, 2} {
		cmd := o.natsBench(ctx, c.URL(i), "sub", subject, "--msgs", msgs, "--size", sizeArg, "--clients", "1", "--no-progress")
		out := &lockedBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		s := subProc{out: out, wait: make(chan error, 1)}
		go func() { s.wait <- cmd.Wait() }()
		subs = append(subs, s)
		if err := waitFor(out, "Starting Core NATS subscriber", 1, 10*time.Second); err != nil {
			cancel()
			return 0, err
		}
	}
	time.Sleep(100 * time.Millisecond)
	closeProbes() // the subscribers hold the interest now
	pub := o.natsBench(ctx, c.URL(0), "pub", subject, "--msgs", msgs, "--size", sizeArg, "--no-progress")
	if out, err := pub.CombinedOutput(); err != nil {
		cancel()
		return 0, fmt.Errorf("nats bench pub: %w\n%s", err, out)
	}
	var total float64
	for k, s := range subs {
		select {
		case err := <-s.wait:
			if err != nil {
				cancel()
				return 0, fmt.Errorf("nats bench sub on server %d: %w\n%s", k+2, err, s.out.String())
			}
		case <-time.After(2 * time.Minute):
			cancel()
			return 0, fmt.Errorf("nats bench sub on server %d did not get every message (a slow consumer cut off?):\n%s", k+2, s.out.String())
		}
		r, err := parseRate(subRate, []byte(s.out.String()))
		if err != nil {
			return 0, err
		}
		total += r
	}
	return total, nil
}

// clusterService runs `nats bench service serve` (2 responders) on each of
// servers 2 and 3 and `nats bench service request` on server 1, and
// returns the requesters' aggregate requests/sec.
func (o *Options) clusterService(ctx context.Context, c *Cluster, requesters, size int) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	const subject = "bench.svc"
	for _, i := range []int{1, 2} {
		serve := o.natsBench(ctx, c.URL(i), "service", "serve", subject, "--clients", "2", "--no-progress")
		out := &lockedBuffer{}
		serve.Stdout, serve.Stderr = out, out
		if err := serve.Start(); err != nil {
			return 0, err
		}
		defer func() {
			_ = serve.Process.Kill()
			_ = serve.Wait()
		}()
	}
	// Requests from server 1 are answered once the responders' interest
	// has reached it; then give the second server's a moment too.
	nc, err := nats.Connect(c.URL(0), nats.NoReconnect())
	if err != nil {
		return 0, err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := nc.Request(subject, []byte(strings.Repeat("x", size)), 200*time.Millisecond); err == nil {
			break
		}
		if time.Now().After(deadline) {
			nc.Close()
			return 0, fmt.Errorf("no responder answered from server 1 in 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	nc.Close()
	time.Sleep(300 * time.Millisecond)
	n := strconv.Itoa(max(o.Msgs/20, 1000))
	req := o.natsBench(ctx, c.URL(0), "service", "request", subject, "--msgs", n, "--size", strconv.Itoa(size),
		"--clients", strconv.Itoa(requesters), "--no-progress")
	out, err := req.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("nats bench service request: %w\n%s", err, out)
	}
	return parseRate(requestRate, out)
}
