package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"net/http"
	"os"
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

	"github.com/skiffmq/skiff/internal/chaosfs"
	"github.com/skiffmq/skiff/internal/faultproxy"
	"github.com/skiffmq/skiff/store"
)

// The multi-process fault suite of replicated streams (issue 13): three
// `skiff serve` processes hold an R3 file stream while publishers on every
// server publish with acks, and each round injects a fault into the real
// processes: kill -9 of the stream's leader or of the meta leader,
// SIGSTOP/SIGCONT of the stream's leader, a rolling restart, every server
// killed at once, network partitions (the servers' routes and raft links
// go through a fault proxy per ordered pair of servers,
// internal/faultproxy, and a partition cuts or black-holes every proxy
// between one server and the others, the stream's leader (the minority
// holds it) or a follower), and power losses: the binary is built with
// -tags chaosfs (chaosfs.go), so that after a kill -9 the suite cuts the
// power of the killed servers (internal/chaosfs: every file cut back to
// what its last fsync saw, and a new boot of the machine), of the
// stream's leader or of every server. After the last round the cluster
// heals and the checker reads the whole stream: every acknowledged
// message must be there, once, at the sequence its PubAck gave, with its
// payload, but where the sync policy allows a loss (chaosfs.Losses). One
// cluster per policy of -chaos.sync.
//
//	go test ./cmd/skiff -run TestChaosProcesses -chaos.rounds=30 -chaos.sync=interval,always,never -v
var (
	chaosRounds = flag.Int("chaos.rounds", 0, "rounds of faults per sync policy in TestChaosProcesses (0: each kind once, "+
		"but a power loss of a quorum only under always)")
	chaosSync = flag.String("chaos.sync", "interval", "the sync policies TestChaosProcesses runs, a cluster each: interval, always, never")
)

// chaosPolicies maps -chaos.sync's names to the store's durability and
// the configuration's sync_interval.
var chaosPolicies = map[string]struct {
	durability store.Durability
	conf       string
}{
	"interval": {store.Durability{Sync: store.SyncInterval, Interval: store.DefaultSyncInterval}, `"100ms"`},
	"always":   {store.Durability{Sync: store.SyncAlways}, "always"},
	"never":    {store.Durability{Sync: store.SyncNever}, "never"},
}

// chaosFault is one kind of fault; it returns what it did.
type chaosFault struct {
	name string
	do   func(c *chaosCluster) string
}

// lossyFaults are the power losses of a quorum, which the interval and
// never policies allow to take what was acknowledged within their bound:
// make test runs them under always only, make chaos under each policy.
var lossyFaults = map[string]bool{"power loss of every server": true}

// chaosRun returns the faults of a run under policy, in turn from a
// random start: -chaos.rounds of them, or each once (the short form).
func chaosRun(policy string) []chaosFault {
	first := rand.Intn(len(chaosFaults))
	var run []chaosFault
	for i := range len(chaosFaults) {
		if f := chaosFaults[(first+i)%len(chaosFaults)]; !lossyFaults[f.name] || policy == "always" {
			run = append(run, f)
		}
	}
	if *chaosRounds == 0 {
		return run
	}
	run = run[:0]
	for r := range *chaosRounds {
		run = append(run, chaosFaults[(first+r)%len(chaosFaults)])
	}
	return run
}

// powerLoss kills the nodes pick finds with SIGKILL, cuts their power
// (chaosfs.Cut), and boots them again a second later. A power loss of a
// quorum is recorded as one that may take what was acknowledged within
// the policy's bound before it.
func powerLoss(pick func(c *chaosCluster) []*node) func(c *chaosCluster) string {
	return func(c *chaosCluster) string {
		nodes := pick(c)
		from := time.Now()
		for _, n := range nodes {
			c.kill(n)
		}
		to := time.Now()
		var names []string
		for _, n := range nodes {
			rep, err := chaosfs.Cut(c.journal(n))
			require.NoError(c.t, err)
			c.t.Logf("power loss of %s: %v", n.name, rep)
			names = append(names, n.name)
		}
		if 2*len(nodes) > len(c.nodes) {
			c.losses.Add(from, to)
		}
		time.Sleep(time.Second)
		for _, n := range nodes {
			n.start(c.t, c.bin)
		}
		waitMesh(c.t, 30*time.Second, c.nodes...)
		return strings.Join(names, ",")
	}
}

// killLeader kills the node leader finds with SIGKILL, and restarts it a
// second later.
func killLeader(leader func(c *chaosCluster) *node) func(c *chaosCluster) string {
	return func(c *chaosCluster) string {
		n := leader(c)
		c.kill(n)
		time.Sleep(time.Second)
		c.restart(n)
		return n.name
	}
}

// partition splits the servers pick returns (a minority) from the others
// through the proxies (cut: connections closed, or black-holed: bytes
// dropped, nobody told) for partitionHold. Meanwhile the majority must
// acknowledge publishes (under leaders it elects if the minority held
// them) and the minority none; then the network heals.
func partition(pick func(c *chaosCluster) []*node, blackHole bool) func(c *chaosCluster) string {
	return func(c *chaosCluster) string {
		minority := pick(c)
		var side []int
		for _, n := range minority {
			side = append(side, slices.Index(c.nodes, n))
		}
		fault := (*faultproxy.Proxy).Cut
		if blackHole {
			fault = (*faultproxy.Proxy).BlackHole
		}
		// A client of the majority (the publishers may all have ended up
		// on the minority after earlier faults), and one of the minority.
		other := c.nodes[slices.IndexFunc(c.nodes, func(n *node) bool { return !slices.Contains(minority, n) })]
		nc, err := nats.Connect(other.clientURL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
		require.NoError(c.t, err)
		defer nc.Close()
		js, err := nc.JetStream(nats.MaxWait(time.Second))
		require.NoError(c.t, err)
		mc, err := nats.Connect(minority[0].clientURL(), nats.NoReconnect())
		require.NoError(c.t, err)
		defer mc.Close()
		mjs, err := mc.JetStream(nats.MaxWait(500 * time.Millisecond))
		require.NoError(c.t, err)
		on := nodeNames(minority)
		c.net.split(side, fault)
		start := time.Now()
		for k := 0; k < 10; {
			require.Less(c.t, time.Since(start), 30*time.Second,
				"the majority acknowledges nothing while %v is partitioned away", on)
			id := fmt.Sprintf("probe-%d-%d", len(c.probes), k)
			if ack, err := js.Publish("chaos.probe", chaosPayload(id), nats.MsgId(id)); err == nil {
				c.probes[id], c.probedAt[id] = ack.Sequence, time.Now()
				k++
			}
		}
		c.t.Logf("partition of %s: the majority acknowledged again after %v", on, time.Since(start).Round(time.Millisecond))
		// Nothing leads around the proxies: the minority's servers are
		// left with routes to each other only (a black hole is noticed by
		// the route pings).
		require.Eventually(c.t, func() bool {
			for _, n := range minority {
				routes, err := n.routez()
				want := slices.DeleteFunc(nodeNames(minority), func(name string) bool { return name == n.name })
				if err != nil || !slices.Equal(routes, want) {
					return false
				}
			}
			return true
		}, 15*time.Second, 50*time.Millisecond, "%s kept a route through the partition", on)
		// The minority acknowledges nothing: it cannot commit.
		for k := range 3 {
			id := fmt.Sprintf("minority-%d-%d", len(c.probes), k)
			if ack, err := mjs.Publish("chaos.minority", chaosPayload(id), nats.MsgId(id)); err == nil {
				c.t.Errorf("the minority %v acknowledged %s at %d", on, id, ack.Sequence)
			}
		}
		time.Sleep(partitionHold - min(partitionHold, time.Since(start)))
		c.net.heal()
		waitMesh(c.t, 30*time.Second, c.nodes...)
		return strings.Join(on, ",")
	}
}

// nodeNames returns the names of nodes, sorted.
func nodeNames(nodes []*node) []string {
	var names []string
	for _, n := range nodes {
		names = append(names, n.name)
	}
	slices.Sort(names)
	return names
}

// one adapts a pick of one node to partition's.
func one(pick func(c *chaosCluster) *node) func(c *chaosCluster) []*node {
	return func(c *chaosCluster) []*node { return []*node{pick(c)} }
}

// partitionHold is how long a partition lasts at least.
const partitionHold = 3 * time.Second

// follower returns a node that does not lead the stream.
func (c *chaosCluster) follower() *node {
	lead := c.streamLeader()
	return c.nodes[(slices.Index(c.nodes, lead)+1)%len(c.nodes)]
}

var chaosFaults = []chaosFault{
	{"partition the stream leader away (black hole)", partition(one((*chaosCluster).streamLeader), true)},
	{"partition a follower away (cut)", partition(one((*chaosCluster).follower), false)},
	{"kill -9 the stream leader", killLeader((*chaosCluster).streamLeader)},
	{"kill -9 the meta leader", killLeader((*chaosCluster).metaLeader)},
	{"SIGSTOP the stream leader", func(c *chaosCluster) string {
		n := c.streamLeader()
		n.signal(c.t, syscall.SIGSTOP)
		time.Sleep(3 * time.Second)
		n.signal(c.t, syscall.SIGCONT)
		return n.name
	}},
	{"rolling restart", func(c *chaosCluster) string {
		for _, n := range c.nodes {
			n.signal(c.t, syscall.SIGTERM)
			_ = n.cmd.Wait()
			c.restart(n)
			c.waitCurrent()
		}
		return "all"
	}},
	{"power loss of the stream leader", powerLoss(func(c *chaosCluster) []*node { return []*node{c.streamLeader()} })},
	{"power loss of every server", powerLoss(func(c *chaosCluster) []*node { return c.nodes })},
	{"kill -9 every server", func(c *chaosCluster) string {
		for _, n := range c.nodes {
			c.kill(n)
		}
		for _, n := range c.nodes {
			n.start(c.t, c.bin)
		}
		waitMesh(c.t, 30*time.Second, c.nodes...)
		return "all"
	}},
}

type chaosCluster struct {
	t     *testing.T
	bin   string
	nodes []*node
	net   *chaosNet
	ctl   nats.JetStreamContext
	store string // the nodes' store directories are in it, by name
	// probes are the publishes the partition faults had acknowledged
	// by the majority: id -> sequence, checked with the publishers'.
	probes   map[string]uint64
	probedAt map[string]time.Time
	// losses are the power losses that may have taken acknowledged
	// messages.
	losses *chaosfs.Losses
	faults int // injected so far
}

// journal is n's chaosfs journal (chaosfs.go: in its store directory).
func (c *chaosCluster) journal(n *node) string {
	return filepath.Join(c.store, n.name, "chaosfs.journal")
}

// chaosNet is the proxies the servers reach each other through: from[i][j]
// carries what server i dials to server j (routes and raft links), so
// that any pair can be cut. Every server advertises a dead address, so
// that gossip leads no server around the proxies.
type chaosNet struct {
	from [][]*faultproxy.Proxy
}

// startProxiedJetStreamNodes starts n JetStream servers of bin whose
// routes go through a chaosNet, with route pings every second so that a
// black-holed route is noticed in about three, their stores in the
// returned directory under sync (a sync_interval value).
func startProxiedJetStreamNodes(t *testing.T, bin string, n int, cluster, sync string) ([]*node, *chaosNet, string) {
	nodes := newNodes(t, n)
	dead := faultproxy.Start(t, "127.0.0.1:1")
	dead.Cut()
	cn := &chaosNet{from: make([][]*faultproxy.Proxy, len(nodes))}
	dir, store := t.TempDir(), t.TempDir()
	for i, n := range nodes {
		cn.from[i] = make([]*faultproxy.Proxy, len(nodes))
		var routes []string
		for j, o := range nodes {
			if j != i {
				cn.from[i][j] = faultproxy.Start(t, fmt.Sprintf("127.0.0.1:%d", o.routePort))
				routes = append(routes, strconv.Quote("nats-route://"+cn.from[i][j].Addr()))
			}
		}
		conf := fmt.Sprintf("server_name: %s\nport: %d\nhttp_port: %d\njetstream { store_dir: %q, sync_interval: %s }\n"+
			"cluster {\n  name: %s\n  listen: \"127.0.0.1:%d\"\n  advertise: %q\n  routes: [%s]\n  ping_interval: \"1s\"\n  ping_max: 2\n}\n",
			n.name, n.clientPort, n.httpPt, filepath.Join(store, n.name), sync, cluster, n.routePort, dead.Addr(), strings.Join(routes, ", "))
		path := filepath.Join(dir, n.name+".conf")
		require.NoError(t, os.WriteFile(path, []byte(conf), 0o600))
		n.args = []string{"serve", "-c", path}
	}
	for _, n := range nodes {
		n.start(t, bin)
	}
	waitMesh(t, 15*time.Second, nodes...)
	return nodes, cn, store
}

// split applies fault (Cut or BlackHole) to every proxy between the
// servers of side (by index) and the others, both ways.
func (cn *chaosNet) split(side []int, fault func(*faultproxy.Proxy)) {
	for _, i := range side {
		for j := range cn.from {
			if !slices.Contains(side, j) {
				fault(cn.from[i][j])
				fault(cn.from[j][i])
			}
		}
	}
}

// heal has every proxy forward again.
func (cn *chaosNet) heal() {
	for _, row := range cn.from {
		for _, p := range row {
			if p != nil {
				p.Heal()
			}
		}
	}
}

func (c *chaosCluster) kill(n *node) {
	n.signal(c.t, syscall.SIGKILL)
	_ = n.cmd.Wait()
}

// restart starts n again and waits for the routes to mesh.
func (c *chaosCluster) restart(n *node) {
	n.start(c.t, c.bin)
	waitMesh(c.t, 30*time.Second, c.nodes...)
}

func (c *chaosCluster) node(name string) *node {
	i := slices.IndexFunc(c.nodes, func(n *node) bool { return n.name == name })
	require.GreaterOrEqual(c.t, i, 0, "no server %q", name)
	return c.nodes[i]
}

// streamLeader returns the node leading the stream's group.
func (c *chaosCluster) streamLeader() *node {
	var lead string
	require.Eventually(c.t, func() bool {
		si, err := c.ctl.StreamInfo("CHAOS")
		if err != nil || si.Cluster == nil {
			return false
		}
		lead = si.Cluster.Leader
		return lead != ""
	}, 30*time.Second, 50*time.Millisecond, "the stream has no leader")
	return c.node(lead)
}

// metaLeader returns the meta group's leader, as a server's /jsz shows it.
func (c *chaosCluster) metaLeader() *node {
	var lead string
	require.Eventually(c.t, func() bool {
		for _, n := range c.nodes {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/jsz", n.httpPt))
			if err != nil {
				continue
			}
			var jsz struct {
				Meta *struct {
					Leader string `json:"leader"`
				} `json:"meta_cluster"`
			}
			err = json.NewDecoder(resp.Body).Decode(&jsz)
			_ = resp.Body.Close()
			if err == nil && jsz.Meta != nil && jsz.Meta.Leader != "" {
				lead = jsz.Meta.Leader
				return true
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond, "the meta group has no leader")
	return c.node(lead)
}

// waitCurrent waits until the stream, on every server, has a leader and
// its other replicas are current.
func (c *chaosCluster) waitCurrent() {
	var last string
	require.Eventually(c.t, func() bool {
		si, err := c.ctl.StreamInfo("CHAOS")
		if err != nil || si.Cluster == nil || si.Cluster.Leader == "" {
			last = fmt.Sprint(err)
			return false
		}
		current := 0
		for _, p := range si.Cluster.Replicas {
			if p.Current && p.Lag == 0 {
				current++
			}
		}
		last = fmt.Sprintf("leader %s, %d of %d replicas current", si.Cluster.Leader, current, len(si.Cluster.Replicas))
		return len(si.Cluster.Replicas) == len(c.nodes)-1 && current == len(c.nodes)-1
	}, 60*time.Second, 100*time.Millisecond, "the stream's replicas did not catch up: %s", func() string { return last }())
}

// chaosPublisher publishes chaos.<name> messages one at a time, each with
// a Nats-Msg-Id of its own, retrying a message whose ack did not come
// until it does: the duplicate window makes the retries safe. acked is
// each acknowledged id's sequence, ackedAt when its ack came.
type chaosPublisher struct {
	name    string
	js      nats.JetStreamContext
	mu      sync.Mutex
	acked   map[string]uint64
	ackedAt map[string]time.Time
	order   []string // ids in the order acknowledged
	last    uint64   // the last acknowledged sequence
	lastAt  time.Time
	err     error     // a sequence that went back
	errAt   time.Time // when the higher one was acknowledged: a power loss may have taken it
	gaveUp  int       // the id in flight when stopped: unknown outcome
	stop    chan struct{}
	done    chan struct{}
}

func startChaosPublisher(t *testing.T, name string, urls []string) *chaosPublisher {
	nc, err := nats.Connect(strings.Join(urls, ","), nats.Name(name), nats.DontRandomize(),
		nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := nc.JetStream(nats.MaxWait(2 * time.Second))
	require.NoError(t, err)
	p := &chaosPublisher{name: name, js: js, acked: map[string]uint64{}, ackedAt: map[string]time.Time{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

// chaosPayload is message id's payload. One in two is large enough
// for the replicas to stage it (written once, jetstream's
// replica_payloads.go), the others small enough to go whole through the
// raft log, so that the two ways alternate.
func chaosPayload(id string) []byte {
	n := len(id)
	if id[len(id)-1]%2 == 0 { // ids end in a counter
		n = 600
	}
	return []byte(id + ":" + strings.Repeat("x", n))
}

func (p *chaosPublisher) run() {
	defer close(p.done)
	for k := 0; ; k++ {
		id := fmt.Sprintf("%s-%d", p.name, k)
		for {
			select {
			case <-p.stop:
				p.gaveUp++
				return
			default:
			}
			ack, err := p.js.Publish("chaos."+p.name, chaosPayload(id), nats.MsgId(id))
			if err != nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			p.mu.Lock()
			now := time.Now()
			if ack.Sequence <= p.last && p.err == nil {
				p.err, p.errAt = fmt.Errorf("%s acknowledged at %d after %d", id, ack.Sequence, p.last), p.lastAt
			}
			p.last, p.lastAt = ack.Sequence, now
			p.acked[id], p.ackedAt[id] = ack.Sequence, now
			p.order = append(p.order, id)
			p.mu.Unlock()
			break
		}
	}
}

func (p *chaosPublisher) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

func (p *chaosPublisher) finish() {
	close(p.stop)
	<-p.done
}

// TestChaosProcesses runs the rounds (-chaos.rounds, each kind of fault
// in turn from a random start) on a cluster per sync policy, then checks:
// acked messages lost must be 0 but within the policy's bound
// (chaosfs.Losses), and duplicates, sequences out of order and bad
// payloads must be 0.
func TestChaosProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three processes")
	}
	for _, name := range strings.Split(*chaosSync, ",") {
		p, ok := chaosPolicies[name]
		require.True(t, ok, "-chaos.sync: unknown policy %q", name)
		t.Run("sync="+name, func(t *testing.T) { runChaosProcesses(t, name, p.durability, p.conf) })
	}
}

// TestChaosProcessesSplit: five `skiff serve` processes hold an R5
// stream while a publisher on every server publishes with acks, and
// partitions split them two against three: the stream's leader and the
// meta leader on the minority side (one more server with them if one
// leads both), the stream's leader and a follower (black-holed), two
// followers. The majority must elect the leaders it lacks and acknowledge
// publishes, the minority acknowledge none; healed, every replica is
// current and the checker of TestChaosProcesses reads the stream back.
func TestChaosProcessesSplit(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five processes")
	}
	p := chaosPolicies["interval"]
	c, pubs := startChaos(t, 5, p.durability, p.conf)
	c.runFaults(pubs, splitFaults)
	c.verify(pubs, "interval")
}

var splitFaults = []chaosFault{
	{"split the stream and meta leaders away (cut)", partition(func(c *chaosCluster) []*node {
		return c.two(c.streamLeader(), c.metaLeader())
	}, false)},
	{"split the stream leader and a follower away (black hole)", partition(func(c *chaosCluster) []*node {
		return c.two(c.streamLeader(), c.follower())
	}, true)},
	{"split two followers away (cut)", partition(func(c *chaosCluster) []*node {
		lead := c.streamLeader()
		i := slices.Index(c.nodes, lead)
		return c.two(c.nodes[(i+1)%len(c.nodes)], c.nodes[(i+2)%len(c.nodes)])
	}, false)},
}

// two returns a and b, or a and the node after it if they are one.
func (c *chaosCluster) two(a, b *node) []*node {
	if a == b {
		b = c.nodes[(slices.Index(c.nodes, a)+1)%len(c.nodes)]
	}
	return []*node{a, b}
}

func runChaosProcesses(t *testing.T, policy string, d store.Durability, conf string) {
	c, pubs := startChaos(t, 3, d, conf)
	c.runFaults(pubs, chaosRun(policy))
	c.verify(pubs, policy)
}

// startChaos starts n processes of the chaosfs binary behind a chaosNet,
// makes the stream CHAOS with a replica on each, and starts a publisher
// on each server.
func startChaos(t *testing.T, n int, d store.Durability, conf string) (*chaosCluster, []*chaosPublisher) {
	bin := buildSkiffTags(t, "chaosfs")
	nodes, cn, storeDir := startProxiedJetStreamNodes(t, bin, n, "chaos", conf)
	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.clientURL())
	}
	ctl, err := nats.Connect(strings.Join(urls, ","), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	require.NoError(t, err)
	t.Cleanup(ctl.Close)
	ctljs, err := ctl.JetStream(nats.MaxWait(2 * time.Second))
	require.NoError(t, err)
	c := &chaosCluster{t: t, bin: bin, nodes: nodes, net: cn, ctl: ctljs, store: storeDir,
		probes: map[string]uint64{}, probedAt: map[string]time.Time{}, losses: chaosfs.NewLosses(d)}
	require.Eventually(t, func() bool {
		_, err := ctljs.AddStream(&nats.StreamConfig{Name: "CHAOS", Subjects: []string{"chaos.>"},
			Storage: nats.FileStorage, Replicas: n, Duplicates: 5 * time.Minute})
		return err == nil
	}, 30*time.Second, 200*time.Millisecond, "the R%d stream was not created", n)
	c.waitCurrent()

	var pubs []*chaosPublisher
	for i := range nodes {
		// Each publisher starts on another server.
		order := append(slices.Clone(urls[i:]), urls[:i]...)
		pubs = append(pubs, startChaosPublisher(t, fmt.Sprintf("p%d", i+1), order))
	}
	return c, pubs
}

// ackedBy counts the publishes pubs had acknowledged.
func ackedBy(pubs []*chaosPublisher) int {
	n := 0
	for _, p := range pubs {
		n += p.count()
	}
	return n
}

// runFaults injects the faults of run in turn, a second of undisturbed
// publishing before each; after each the stream must be current again
// and publishes acknowledged.
func (c *chaosCluster) runFaults(pubs []*chaosPublisher, run []chaosFault) {
	t := c.t
	for round, f := range run {
		before := ackedBy(pubs)
		time.Sleep(time.Second) // publishing, undisturbed
		start := time.Now()
		on := f.do(c)
		c.faults++
		c.waitCurrent()
		// Publishing goes on after every fault.
		require.Eventually(t, func() bool { return ackedBy(pubs) > before+10 }, 30*time.Second, 20*time.Millisecond,
			"round %d (%s on %s): no publish acknowledged after the fault", round, f.name, on)
		t.Logf("round %d: %s (%s), healed in %v, acked %d", round, f.name, on, time.Since(start).Round(time.Millisecond), ackedBy(pubs))
	}
}

// verify stops the publishers and reads the stream back: every
// acknowledged message must be there, once, at its sequence, with its
// payload, but what the policy allows a power loss to take.
func (c *chaosCluster) verify(pubs []*chaosPublisher, policy string) {
	t, ctljs := c.t, c.ctl
	gaveUp := 0
	for _, p := range pubs {
		p.finish()
		if p.err != nil && c.losses.Allowed(p.errAt) {
			t.Logf("%s: %v (the later sequences taken by a power loss)", p.name, p.err)
		} else {
			require.NoError(t, p.err, p.name)
		}
		gaveUp += p.gaveUp
	}
	c.waitCurrent()

	// Read the whole stream back through an ordered consumer.
	si, err := ctljs.StreamInfo("CHAOS")
	require.NoError(t, err)
	sub, err := ctljs.SubscribeSync("chaos.>", nats.OrderedConsumer())
	require.NoError(t, err)
	stored := map[string][]uint64{}
	bad := 0
	for read := uint64(0); read < si.State.Msgs; read++ {
		m, err := sub.NextMsg(10 * time.Second)
		require.NoError(t, err, "read %d of %d", read, si.State.Msgs)
		md, err := m.Metadata()
		require.NoError(t, err)
		id, _, _ := strings.Cut(string(m.Data), ":")
		if string(m.Data) != string(chaosPayload(id)) || m.Header.Get(nats.MsgIdHdr) != id {
			bad++
		}
		stored[id] = append(stored[id], md.Sequence.Stream)
	}
	lost, allowed, duplicated, misplaced := 0, 0, 0, 0
	total := 0
	type ackedSet struct {
		seqs map[string]uint64
		at   map[string]time.Time
	}
	all := []ackedSet{{c.probes, c.probedAt}}
	for _, p := range pubs {
		all = append(all, ackedSet{p.acked, p.ackedAt})
	}
	for _, acked := range all {
		for id, seq := range acked.seqs {
			total++
			seqs := stored[id]
			switch {
			case len(seqs) == 0 && c.losses.Allowed(acked.at[id]):
				lost++
				allowed++
			case len(seqs) == 0:
				lost++
				t.Errorf("lost: %s acknowledged at %d at %s", id, seq, acked.at[id].Format(time.StampMicro))
			case seqs[0] != seq:
				misplaced++
				t.Errorf("%s acknowledged at %d, stored at %v", id, seq, seqs)
			}
		}
	}
	if allowed > 0 {
		t.Logf("lost within the bound of the %s policy (%v): %d", policy, c.losses, allowed)
	}
	for id, seqs := range stored {
		if len(seqs) > 1 {
			duplicated++
			t.Errorf("duplicated: %s at %v", id, seqs)
		}
	}
	t.Logf("chaos-processes: servers=%d sync=%s rounds=%d faults=%d acked=%d lost=%d lost_within_bound=%d duplicated=%d misplaced=%d bad_payloads=%d stored=%d unknown_outcome=%d",
		len(c.nodes), policy, c.faults, c.faults, total, lost, allowed, duplicated, misplaced, bad, si.State.Msgs, gaveUp)
	require.Zero(t, lost-allowed+duplicated+misplaced+bad)
	require.Positive(t, total)
}
