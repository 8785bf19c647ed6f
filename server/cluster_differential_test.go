package server_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/server"
)

// diffCluster is three servers joined by routes: Skiff's or nats-server's.
type diffCluster struct {
	urls     []string
	interest func(i int, subject string) int // subscriptions server i matches for subject
}

func diffSkiffCluster(t *testing.T) *diffCluster {
	c := clustertest.Start(t, 3, server.Options{})
	d := &diffCluster{interest: func(i int, subject string) int { return c.Servers[i].NumInterest(subject) }}
	for i := range 3 {
		d.urls = append(d.urls, c.URL(i))
	}
	return d
}

func diffReferenceCluster(t *testing.T) *diffCluster {
	servers := startReferenceCluster(t, 3, (&diffConfig{}).referenceOptions)
	d := &diffCluster{interest: func(i int, subject string) int { return servers[i].GlobalAccount().Interest(subject) }}
	for _, ns := range servers {
		d.urls = append(d.urls, ns.ClientURL())
	}
	return d
}

// startReferenceCluster starts n nats-servers with the options opts
// returns (each call a fresh copy), joined by routes to the first, and
// waits for the full mesh.
func startReferenceCluster(t *testing.T, n int, opts func() *natsserver.Options) []*natsserver.Server {
	var servers []*natsserver.Server
	for i := range n {
		o := opts()
		o.ServerName = fmt.Sprintf("n%d", i+1)
		o.Cluster = natsserver.ClusterOpts{Name: "diff", Host: "127.0.0.1", Port: -1, PoolSize: -1}
		if i > 0 {
			o.Routes = natsserver.RoutesFromStr(fmt.Sprintf("nats-route://%s", servers[0].ClusterAddr()))
		}
		servers = append(servers, runReference(t, o))
	}
	require.Eventually(t, func() bool {
		for _, ns := range servers {
			if ns.NumRoutes() != n-1 {
				return false
			}
		}
		return true
	}, clustertest.Wait, 10*time.Millisecond, "the nats-server cluster did not form")
	return servers
}

// diffSub is a subscription of the scenario: on which server, what.
type diffSub struct {
	server         int
	subject, queue string
}

// waitInterest waits until every server matches subject with at least
// one subscription for each server that has some (itself included): a
// message is forwarded once per peer however many of its subscriptions
// match. The counts themselves differ (nats-server's Interest counts
// overlapping subscriptions of one client, or of one peer, once).
func (d *diffCluster) waitInterest(t *testing.T, subject string, subs []diffSub) {
	t.Helper()
	holders := map[int]bool{}
	for _, s := range subs {
		if subjectMatches(s.subject, subject) {
			holders[s.server] = true
		}
	}
	want := len(holders)
	for i := range d.urls {
		require.Eventually(t, func() bool { return d.interest(i, subject) >= want }, clustertest.Wait, 5*time.Millisecond,
			"server %d: want %d subscriptions matching %q, have %d", i, want, subject, d.interest(i, subject))
	}
}

// subjectMatches reports whether a pattern with * and > matches subject.
func subjectMatches(pattern, subject string) bool {
	p, s := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, tok := range p {
		if tok == ">" {
			return len(s) > i
		}
		if i >= len(s) || (tok != "*" && tok != s[i]) {
			return false
		}
	}
	return len(p) == len(s)
}

// diffRecorder records what each subscription of a scenario received.
type diffRecorder struct {
	mu  sync.Mutex
	got map[string][]string // subscription name -> payloads, in order
}

func (r *diffRecorder) handler(name string) nats.MsgHandler {
	return func(m *nats.Msg) {
		r.mu.Lock()
		r.got[name] = append(r.got[name], string(m.Data))
		r.mu.Unlock()
	}
}

func (r *diffRecorder) total(names ...string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, name := range names {
		n += len(r.got[name])
	}
	return n
}

// runClusterScenario runs the scenario on d and returns its outcome: what
// each subscriber received (per publisher, in order), what the queue
// group received (each message how many times), the replies and errors.
func runClusterScenario(t *testing.T, d *diffCluster) []string {
	var out []string
	rec := &diffRecorder{got: map[string][]string{}}
	conns := make([]*nats.Conn, 3)
	for i, u := range d.urls {
		nc, err := nats.Connect(u, nats.NoReconnect())
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		conns[i] = nc
	}
	subs := []diffSub{
		{0, "fan.>", ""}, {1, "fan.>", ""}, {1, "fan.*", ""}, {2, "fan.>", ""},
		{1, "work", "q"}, {1, "work", "q"}, {2, "work", "q"}, {2, "work", ""},
		{2, "svc.echo", ""},
	}
	names := make([]string, len(subs))
	for k, s := range subs {
		names[k] = fmt.Sprintf("s%d %s %s #%d", s.server+1, s.subject, s.queue, k)
		nc := conns[s.server]
		var err error
		switch {
		case s.subject == "svc.echo":
			_, err = nc.Subscribe(s.subject, func(m *nats.Msg) { _ = m.Respond(append([]byte("echo "), m.Data...)) })
		case s.queue != "":
			_, err = nc.QueueSubscribe(s.subject, s.queue, rec.handler(names[k]))
		default:
			_, err = nc.Subscribe(s.subject, rec.handler(names[k]))
		}
		require.NoError(t, err)
	}
	for _, nc := range conns {
		require.NoError(t, nc.Flush())
	}
	for _, subj := range []string{"fan.a", "work", "svc.echo"} {
		d.waitInterest(t, subj, subs)
	}

	// Fan-out from servers 1 and 3, and the queue group from server 1
	// (which has no member).
	const n = 200
	for k := range n {
		require.NoError(t, conns[0].Publish("fan.a", fmt.Appendf(nil, "p1-%d", k)))
		require.NoError(t, conns[2].Publish("fan.a", fmt.Appendf(nil, "p3-%d", k)))
		require.NoError(t, conns[0].Publish("work", fmt.Appendf(nil, "w-%d", k)))
	}
	for _, nc := range conns {
		require.NoError(t, nc.Flush())
	}
	fan := slices.DeleteFunc(slices.Clone(names), func(s string) bool { return !strings.Contains(s, "fan") })
	queue := []string{names[4], names[5], names[6]}
	require.Eventually(t, func() bool {
		return rec.total(fan...) == 2*n*len(fan) && rec.total(queue...) == n && rec.total(names[7]) == n
	}, clustertest.Wait, 10*time.Millisecond, "deliveries did not complete")
	time.Sleep(100 * time.Millisecond) // a duplicate would come now
	rec.mu.Lock()
	for _, name := range fan {
		var p1, p3 []string
		for _, m := range rec.got[name] {
			if strings.HasPrefix(m, "p1-") {
				p1 = append(p1, m)
			} else {
				p3 = append(p3, m)
			}
		}
		out = append(out, fmt.Sprintf("%s: from p1 %d first %s last %s in order %v; from p3 %d in order %v", name,
			len(p1), p1[0], p1[len(p1)-1], inOrder(p1), len(p3), inOrder(p3)))
	}
	times := map[string]int{}
	for _, name := range queue {
		for _, m := range rec.got[name] {
			times[m]++
		}
	}
	once := 0
	for _, c := range times {
		if c == 1 {
			once++
		}
	}
	out = append(out, fmt.Sprintf("queue group: %d distinct messages, %d delivered once", len(times), once),
		fmt.Sprintf("plain subscriber beside the group on server 3: %d, in order %v", len(rec.got[names[7]]), inOrder(rec.got[names[7]])))
	rec.mu.Unlock()

	// Request/reply across servers, and no responders.
	for _, from := range []int{0, 1} {
		for k := range 5 {
			m, err := conns[from].Request("svc.echo", fmt.Appendf(nil, "%d-%d", from, k), 2*time.Second)
			if err != nil {
				out = append(out, fmt.Sprintf("request from server %d: %v", from+1, err))
				continue
			}
			out = append(out, fmt.Sprintf("request from server %d: %s", from+1, m.Data))
		}
	}
	_, err := conns[1].Request("nobody.home", nil, 2*time.Second)
	out = append(out, fmt.Sprintf("request to nobody: %v", err))
	return out
}

// inOrder reports whether a publisher's messages ("x-N") came in order.
func inOrder(msgs []string) bool {
	last := -1
	for _, m := range msgs {
		var k int
		if _, err := fmt.Sscanf(m[strings.IndexByte(m, '-')+1:], "%d", &k); err != nil || k <= last {
			return false
		}
		last = k
	}
	return true
}

// TestDifferentialCluster: the same three-server scenario (fan-out from
// two servers with overlapping subscriptions, a queue group spread over
// two servers with a plain subscriber beside it, request/reply across
// servers, no responders) delivers the same against a Skiff cluster and a
// nats-server cluster: counts per subscriber, each queued message exactly
// once, each publisher's order.
func TestDifferentialCluster(t *testing.T) {
	ref := runClusterScenario(t, diffReferenceCluster(t))
	got := runClusterScenario(t, diffSkiffCluster(t))
	require.Equal(t, ref, got)
	t.Logf("outcome:\n%s", strings.Join(got, "\n"))
}

// TestDifferentialClusterQueueLocality records a deliberate difference: a
// message published on a server with a member of the queue group goes to
// a local member in Skiff (the rule), while nats-server (v2.15)
// chooses among all members cluster-wide, local and remote alike, in
// proportion to their weights. Both deliver each message exactly once.
func TestDifferentialClusterQueueLocality(t *testing.T) {
	share := func(d *diffCluster) (local, remote int) {
		var mu sync.Mutex
		count := func(n *int) nats.MsgHandler {
			return func(*nats.Msg) { mu.Lock(); *n++; mu.Unlock() }
		}
		nc := diffDial(t, d.urls[1])
		_, err := nc.QueueSubscribe("loc", "q", count(&local))
		require.NoError(t, err)
		require.NoError(t, nc.Flush())
		nc2 := diffDial(t, d.urls[2])
		_, err = nc2.QueueSubscribe("loc", "q", count(&remote))
		require.NoError(t, err)
		require.NoError(t, nc2.Flush())
		d.waitInterest(t, "loc", []diffSub{{1, "loc", "q"}, {2, "loc", "q"}})
		const n = 1000
		for range n {
			require.NoError(t, nc.Publish("loc", nil))
		}
		require.NoError(t, nc.Flush())
		require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return local+remote == n },
			clustertest.Wait, 10*time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		return local, remote
	}
	refLocal, refRemote := share(diffReferenceCluster(t))
	local, remote := share(diffSkiffCluster(t))
	t.Logf("publisher beside one member, another member on a peer: nats-server %d local / %d remote, Skiff %d / %d",
		refLocal, refRemote, local, remote)
	require.Positive(t, refRemote, "nats-server spreads over the cluster")
	require.Zero(t, remote, "Skiff keeps it local")
}
