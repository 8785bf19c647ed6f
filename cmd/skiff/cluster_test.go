package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"

	"github.com/skiffmq/skiff/broker"
	"github.com/skiffmq/skiff/server"
)

// Multi-process cluster tests: three `skiff serve` processes (the binary
// buildSkiff builds) joined by routes on loopback, killed with SIGKILL or
// stopped with SIGSTOP while nats.go clients publish and subscribe through
// them.

// node is one `skiff serve` process of a test cluster.
type node struct {
	name                          string
	clientPort, routePort, httpPt int
	args                          []string
	cmd                           *exec.Cmd
	log                           string // its stderr
}

func (n *node) clientURL() string { return fmt.Sprintf("nats://127.0.0.1:%d", n.clientPort) }
func (n *node) routeURL() string  { return fmt.Sprintf("nats-route://127.0.0.1:%d", n.routePort) }

// newNodes returns n nodes with reserved ports, named s1...sn.
func newNodes(t *testing.T, n int) []*node {
	ports := clustertest.FreePorts(t, 3*n)
	nodes := make([]*node, n)
	for i := range nodes {
		nodes[i] = &node{name: fmt.Sprintf("s%d", i+1), clientPort: ports[i], routePort: ports[n+i], httpPt: ports[2*n+i]}
	}
	return nodes
}

// flagArgs are the arguments of a node configured by flags alone: every
// node lists every route (its own is recognised and dropped).
func flagArgs(n *node, all []*node, cluster string, extra ...string) []string {
	var routes []string
	for _, o := range all {
		routes = append(routes, o.routeURL())
	}
	return append([]string{"serve", "-js=false", "-p", strconv.Itoa(n.clientPort), "-m", strconv.Itoa(n.httpPt),
		"--server_name", n.name, "--cluster", fmt.Sprintf("nats://127.0.0.1:%d", n.routePort),
		"--routes", strings.Join(routes, ","), "--cluster_name", cluster}, extra...)
}

// start runs the node's process and waits for its listening line. The
// process is killed when the test ends, and its log shown if it failed.
func (n *node) start(t *testing.T, bin string) {
	t.Helper()
	n.log = filepath.Join(t.TempDir(), n.name+".log")
	logFile, err := os.Create(n.log)
	require.NoError(t, err)
	n.cmd = exec.Command(bin, n.args...)
	n.cmd.Stderr = logFile
	stdout, err := n.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, n.cmd.Start())
	cmd := n.cmd
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(n.log)
			lines := strings.Split(string(b), "\n")
			t.Logf("%s's log (last lines):\n%s", n.name, strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	})
	line := make(chan string, 1)
	go func() {
		l, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		require.Contains(t, l, n.clientURL(), "%s did not start", n.name)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not start in 30s", n.name)
	}
}

// signal sends the node's process sig.
func (n *node) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, n.cmd.Process.Signal(sig))
}

// routez returns the server names of the node's registered routes.
func (n *node) routez() ([]string, error) {
	client := http.Client{Timeout: time.Second}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/routez", n.httpPt))
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var rz struct {
		Routes []struct {
			RemoteName string `json:"remote_name"`
		} `json:"routes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rz); err != nil {
		return nil, err
	}
	var names []string
	for _, r := range rz.Routes {
		names = append(names, r.RemoteName)
	}
	slices.Sort(names)
	return names, nil
}

// waitMesh waits until each node of nodes has a route to exactly the
// others of nodes.
func waitMesh(t *testing.T, within time.Duration, nodes ...*node) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, n := range nodes {
			var want []string
			for _, o := range nodes {
				if o != n {
					want = append(want, o.name)
				}
			}
			got, err := n.routez()
			if err != nil || !slices.Equal(got, want) {
				return false
			}
		}
		return true
	}, within, 20*time.Millisecond, "the mesh of %d servers did not form", len(nodes))
}

// confNodes writes each node a configuration file, as nats-server users
// write one, and has it load that: its name and ports, top (the rest of
// the top level), and a cluster block of the given name listing every
// node's route, with clusterKeys in it.
func confNodes(t *testing.T, nodes []*node, cluster string, top func(n *node) string, clusterKeys string) {
	t.Helper()
	dir := t.TempDir()
	var routes []string
	for _, o := range nodes {
		routes = append(routes, strconv.Quote(o.routeURL()))
	}
	for _, n := range nodes {
		conf := fmt.Sprintf("server_name: %s\nport: %d\nhttp_port: %d\n%s\ncluster {\n  name: %s\n  listen: \"127.0.0.1:%d\"\n  routes: [%s]\n  %s\n}\n",
			n.name, n.clientPort, n.httpPt, top(n), cluster, n.routePort, strings.Join(routes, ", "), clusterKeys)
		path := filepath.Join(dir, n.name+".conf")
		require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
		n.args = []string{"serve", "-c", path}
	}
}

// startCluster builds the binary and starts every node.
func startCluster(t *testing.T, nodes []*node) {
	bin := buildSkiff(t)
	for _, n := range nodes {
		n.start(t, bin)
	}
	waitMesh(t, 15*time.Second, nodes...)
}

// delivery is a publisher's message: which publisher, its sequence, when
// it was published.
type delivery struct {
	pub  string
	seq  int
	sent time.Time
}

func parseDelivery(data []byte) (delivery, bool) {
	f := strings.Fields(string(data))
	if len(f) != 3 {
		return delivery{}, false
	}
	seq, err1 := strconv.Atoi(f[1])
	ns, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil {
		return delivery{}, false
	}
	return delivery{pub: f[0], seq: seq, sent: time.Unix(0, ns)}, true
}

// publisher publishes to subject in batches, each confirmed by a flush,
// until stopped; acked is what the server confirmed.
type publisher struct {
	name  string
	nc    *nats.Conn
	mu    sync.Mutex
	acked int
	err   error
	stop  chan struct{}
	done  chan struct{}
}

func startPublisher(t *testing.T, name, url, subject string) *publisher {
	t.Helper()
	nc, err := nats.Connect(url, nats.NoReconnect(), nats.Name(name))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	p := &publisher{name: name, nc: nc, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		seq := 0
		for {
			select {
			case <-p.stop:
				return
			default:
			}
			for range 10 {
				seq++
				if err := nc.Publish(subject, fmt.Appendf(nil, "%s %d %d", name, seq, time.Now().UnixNano())); err != nil {
					p.fail(err)
					return
				}
			}
			if err := nc.FlushTimeout(5 * time.Second); err != nil {
				p.fail(err)
				return
			}
			p.mu.Lock()
			p.acked = seq
			p.mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	return p
}

func (p *publisher) fail(err error) {
	p.mu.Lock()
	p.err = err
	p.mu.Unlock()
}

// finish stops the publisher and returns how many messages the server
// confirmed.
func (p *publisher) finish(t *testing.T) int {
	t.Helper()
	close(p.stop)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatalf("publisher %s did not stop", p.name)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	require.NoError(t, p.err, "publisher %s", p.name)
	return p.acked
}

// subscriber counts what it receives from each publisher, checking each
// publisher's order, and notes the first message published after a mark.
type subscriber struct {
	name string
	mu   sync.Mutex
	last map[string]int // publisher -> last sequence received
	got  map[string]int // publisher -> messages received
	bad  []string       // order violations and duplicates
	// mark and firstAfter: the first message published after mark, and
	// when it arrived.
	mark       time.Time
	firstAfter time.Time
}

func newSubscriber(name string) *subscriber {
	return &subscriber{name: name, last: map[string]int{}, got: map[string]int{}}
}

func (s *subscriber) handle(m *nats.Msg) {
	d, ok := parseDelivery(m.Data)
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok {
		s.bad = append(s.bad, fmt.Sprintf("garbled %q", m.Data))
		return
	}
	if d.seq <= s.last[d.pub] {
		s.bad = append(s.bad, fmt.Sprintf("%s: seq %d after %d", d.pub, d.seq, s.last[d.pub]))
	}
	s.last[d.pub] = d.seq
	s.got[d.pub]++
	if !s.mark.IsZero() && s.firstAfter.IsZero() && d.sent.After(s.mark) {
		s.firstAfter = now
	}
}

func (s *subscriber) setMark(t time.Time) {
	s.mu.Lock()
	s.mark = t
	s.mu.Unlock()
}

func (s *subscriber) received(pub string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[pub]
}

// requireComplete waits until s has every message each publisher had
// confirmed, each once and in order.
func (s *subscriber) requireComplete(t *testing.T, acked map[string]int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		done := true
		for pub, n := range acked {
			if s.received(pub) < n {
				done = false
			}
		}
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	require.Empty(t, s.bad, "subscriber %s: duplicates or order broken", s.name)
	for pub, n := range acked {
		lost := n - s.got[pub]
		t.Logf("subscriber %s: from %s %d confirmed, %d received, %d lost", s.name, pub, n, s.got[pub], max(lost, 0))
		require.Equal(t, n, s.got[pub], "subscriber %s lost messages of %s while its server lived", s.name, pub)
	}
}

// TestClusterProcessesKill: a three-process cluster configured by flags;
// one server is killed with SIGKILL while clients publish and subscribe
// through all three. Subscribers on the two live servers get every
// message their publishers had confirmed, once each and in order; the
// killed server's subscriber reconnects to another server (which it
// learned from connect_urls) and receives again, and the time from the
// kill to its first message published after the kill is measured.
func TestClusterProcessesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	nodes := newNodes(t, 3)
	for _, n := range nodes {
		n.args = flagArgs(n, nodes, "kill")
	}
	startCluster(t, nodes)

	var subs []*subscriber
	subscribe := func(n *node, opts ...nats.Option) (*subscriber, *nats.Conn) {
		s := newSubscriber(n.name)
		nc, err := nats.Connect(n.clientURL(), append([]nats.Option{nats.Name("sub-" + n.name)}, opts...)...)
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		_, err = nc.Subscribe("k.>", s.handle)
		require.NoError(t, err)
		require.NoError(t, nc.Flush())
		subs = append(subs, s)
		return s, nc
	}
	subscribe(nodes[0], nats.NoReconnect())
	subscribe(nodes[1], nats.NoReconnect())
	reconnected := make(chan time.Time, 1)
	victimSub, victimConn := subscribe(nodes[2], nats.MaxReconnects(-1),
		nats.ReconnectHandler(func(*nats.Conn) {
			select {
			case reconnected <- time.Now():
			default:
			}
		}))
	require.Eventually(t, func() bool { return len(victimConn.DiscoveredServers()) == 2 }, 5*time.Second, 10*time.Millisecond,
		"the killed server's client learns the others from connect_urls: %v", victimConn.DiscoveredServers())
	// Every server has every subscriber's interest before publishing.
	time.Sleep(200 * time.Millisecond)

	pubs := []*publisher{
		startPublisher(t, "p1", nodes[0].clientURL(), "k.p1"),
		startPublisher(t, "p2", nodes[1].clientURL(), "k.p2"),
	}
	time.Sleep(time.Second)
	killed := time.Now()
	victimSub.setMark(killed)
	nodes[2].signal(t, syscall.SIGKILL)
	_ = nodes[2].cmd.Wait()

	var reconnectAt time.Time
	select {
	case reconnectAt = <-reconnected:
	case <-time.After(10 * time.Second):
		t.Fatal("the killed server's client did not reconnect in 10s")
	}
	require.Eventually(t, func() bool {
		victimSub.mu.Lock()
		defer victimSub.mu.Unlock()
		return !victimSub.firstAfter.IsZero()
	}, 10*time.Second, 5*time.Millisecond, "the killed server's client did not receive again")
	victimSub.mu.Lock()
	resumed := victimSub.firstAfter.Sub(killed)
	victimSub.mu.Unlock()
	t.Logf("failover after SIGKILL: reconnected to %s in %v, first message received again %v after the kill",
		victimConn.ConnectedUrl(), reconnectAt.Sub(killed), resumed)
	require.LessOrEqual(t, resumed, 5*time.Second, "resumed within the bound (the goal is 2s)")

	time.Sleep(time.Second) // keep going on two servers
	waitMesh(t, 10*time.Second, nodes[0], nodes[1])
	acked := map[string]int{}
	for _, p := range pubs {
		acked[p.name] = p.finish(t)
		require.Positive(t, acked[p.name])
	}
	for _, s := range subs[:2] {
		s.requireComplete(t, acked)
	}
}

// TestClusterProcessesStopCont: a three-process cluster configured by
// files (with a short route ping_interval); one server is stopped with
// SIGSTOP. The other two keep serving each other, losing nothing, and
// drop the stopped one once its routes go stale; after SIGCONT it rejoins
// and interest converges both ways.
func TestClusterProcessesStopCont(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	nodes := newNodes(t, 3)
	confNodes(t, nodes, "stopcont", func(*node) string { return "jetstream: disabled" }, `ping_interval: "250ms"
  ping_max: 2`)
	startCluster(t, nodes)

	live := newSubscriber("s1")
	nc1, err := nats.Connect(nodes[0].clientURL(), nats.NoReconnect())
	require.NoError(t, err)
	t.Cleanup(nc1.Close)
	_, err = nc1.Subscribe("sc.>", live.handle)
	require.NoError(t, err)
	require.NoError(t, nc1.Flush())
	// A subscriber on the server to be stopped: the publisher's server
	// forwards to it, into the stopped process, until the route is stale.
	stopped := newSubscriber("s3")
	nc3, err := nats.Connect(nodes[2].clientURL(), nats.NoReconnect())
	require.NoError(t, err)
	t.Cleanup(nc3.Close)
	_, err = nc3.Subscribe("sc.>", stopped.handle)
	require.NoError(t, err)
	require.NoError(t, nc3.Flush())
	time.Sleep(200 * time.Millisecond)

	pub := startPublisher(t, "p2", nodes[1].clientURL(), "sc.p2")
	time.Sleep(500 * time.Millisecond)
	stoppedAt := time.Now()
	nodes[2].signal(t, syscall.SIGSTOP)
	waitMesh(t, 10*time.Second, nodes[0], nodes[1])
	t.Logf("the stopped server's routes dropped %v after SIGSTOP (ping_interval 250ms, ping_max 2)", time.Since(stoppedAt))
	time.Sleep(500 * time.Millisecond) // the two keep serving each other
	pub.mu.Lock()
	duringStop := pub.acked
	pub.mu.Unlock()

	nodes[2].signal(t, syscall.SIGCONT)
	contAt := time.Now()
	waitMesh(t, 15*time.Second, nodes...)
	t.Logf("rejoined %v after SIGCONT", time.Since(contAt))
	// Interest converges both ways: the old subscriber on s3 is known to
	// s2 again, and a new one on s1 is known to s3.
	after := newSubscriber("s1-after")
	_, err = nc1.Subscribe("after.>", after.handle)
	require.NoError(t, err)
	require.NoError(t, nc1.Flush())
	stopped.setMark(time.Now())
	pubAfter := startPublisher(t, "p3", nodes[2].clientURL(), "after.p3")
	require.Eventually(t, func() bool {
		stopped.mu.Lock()
		defer stopped.mu.Unlock()
		return !stopped.firstAfter.IsZero()
	}, 10*time.Second, 10*time.Millisecond, "s3's subscriber gets s2's messages again")
	require.Eventually(t, func() bool { return after.received("p3") > 0 }, 10*time.Second, 10*time.Millisecond,
		"s1's new subscriber gets s3's messages")
	pubAfter.finish(t)

	acked := pub.finish(t)
	require.Greater(t, acked, duringStop/2, "the publisher kept going")
	live.requireComplete(t, map[string]int{"p2": acked})
}

// TestClusterProcessesNoAdvertise: --no_advertise keeps a server's client
// URL out of its peers' connect_urls, and the cluster's out of its own
// clients' INFO.
func TestClusterProcessesNoAdvertise(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	nodes := newNodes(t, 3)
	for i, n := range nodes {
		var extra []string
		if i == 2 {
			extra = []string{"--no_advertise"}
		}
		n.args = flagArgs(n, nodes, "noadv", extra...)
	}
	startCluster(t, nodes)

	nc1, err := nats.Connect(nodes[0].clientURL(), nats.NoReconnect())
	require.NoError(t, err)
	t.Cleanup(nc1.Close)
	nc3, err := nats.Connect(nodes[2].clientURL(), nats.NoReconnect())
	require.NoError(t, err)
	t.Cleanup(nc3.Close)
	want := "127.0.0.1:" + strconv.Itoa(nodes[1].clientPort)
	require.Eventually(t, func() bool {
		return slices.ContainsFunc(nc1.DiscoveredServers(), func(u string) bool { return strings.HasSuffix(u, want) })
	}, 5*time.Second, 10*time.Millisecond, "s1's client learns s2: %v", nc1.DiscoveredServers())
	time.Sleep(200 * time.Millisecond)
	for _, u := range nc1.DiscoveredServers() {
		require.False(t, strings.HasSuffix(u, ":"+strconv.Itoa(nodes[2].clientPort)), "s3 is not advertised: %v", nc1.DiscoveredServers())
	}
	require.Empty(t, nc3.DiscoveredServers(), "s3's clients get no connect_urls")

	// Not advertised, still routed.
	sub, err := nc3.SubscribeSync("na")
	require.NoError(t, err)
	require.NoError(t, nc3.Flush())
	require.Eventually(t, func() bool {
		if err := nc1.Publish("na", []byte("x")); err != nil {
			return false
		}
		_, err := sub.NextMsg(20 * time.Millisecond)
		return err == nil
	}, 5*time.Second, 10*time.Millisecond)
}

// TestClusterFlags: --cluster, --routes, --cluster_name and --no_advertise
// become the cluster options, over a file's; bad values are refused.
func TestClusterFlags(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want server.ClusterOptions
		err  string
	}{
		{"listen", []string{"--cluster", "nats://127.0.0.1:6222"},
			server.ClusterOptions{Host: "127.0.0.1", Port: 6222}, ""},
		{"credentials and random port", []string{"--cluster", "nats://ru:rp@0.0.0.0:-1", "--cluster_name", "c1"},
			server.ClusterOptions{Host: "0.0.0.0", Port: server.RandomPort, Username: "ru", Password: "rp", Name: "c1"}, ""},
		{"bare host:port, routes, no_advertise", []string{"--cluster", "127.0.0.1:7000",
			"--routes", "nats-route://127.0.0.1:7001, nats://u:p@127.0.0.1:7002,127.0.0.1:7003", "--no_advertise"},
			server.ClusterOptions{Host: "127.0.0.1", Port: 7000, NoAdvertise: true,
				Routes: []string{"nats-route://127.0.0.1:7001", "nats://u:p@127.0.0.1:7002", "127.0.0.1:7003"}}, ""},
		{"bad port", []string{"--cluster", "nats://127.0.0.1:0"}, server.ClusterOptions{}, "bad port"},
		{"bad route", []string{"--cluster", "127.0.0.1:7000", "--routes", "http://x:1"}, server.ClusterOptions{}, "--routes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			var f serveFlags
			fs.StringVar(&f.cluster, "cluster", "", "")
			fs.StringVar(&f.routes, "routes", "", "")
			fs.StringVar(&f.clusterName, "cluster_name", "", "")
			fs.BoolVar(&f.noAdvertise, "no_advertise", false, "")
			require.NoError(t, fs.Parse(tc.args))
			cfg := broker.DefaultConfig()
			err := applyFlags(fs, &f, &cfg)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, cfg.Server.Cluster)
		})
	}
}
