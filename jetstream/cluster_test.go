package jetstream_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/internal/jscluster"
	"github.com/skiffmq/skiff/internal/natscli"
	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
	"github.com/skiffmq/skiff/store"
)

// jsCluster is an in-process cluster whose servers run JetStream with the
// internal cluster option, each with a store directory that outlives its
// restarts.
type jsCluster struct {
	*clustertest.Cluster
	dirs []string
	mu   sync.Mutex
	js   []*jetstream.JetStream
	// power, if set, runs every server on a chaosfs file system whose
	// power the test can cut (replica_powerloss_test.go).
	power *power
}

func startJSCluster(t *testing.T, n int) *jsCluster {
	t.Helper()
	return startJSClusterWith(t, n, server.Options{})
}

// startJSClusterWith is startJSCluster with base as every server's
// options.
func startJSClusterWith(t *testing.T, n int, base server.Options) *jsCluster {
	t.Helper()
	return startJSClusterOn(t, make([]string, n), base)
}

// startJSClusterOn is startJSClusterWith with a server per directory of
// dirs (a fresh one for "").
func startJSClusterOn(t *testing.T, dirs []string, base server.Options) *jsCluster {
	t.Helper()
	return startJSClusterEach(t, dirs, base, nil)
}

// startJSClusterEach is startJSClusterOn with each changing server i's
// options.
func startJSClusterEach(t testing.TB, dirs []string, base server.Options, each func(i int, o *server.Options)) *jsCluster {
	t.Helper()
	return startJSClusterPowered(t, dirs, base, each, nil)
}

// startJSClusterPowered is startJSClusterEach with every server on a
// chaosfs file system under p's sync policy, if p is not nil.
func startJSClusterPowered(t testing.TB, dirs []string, base server.Options, each func(i int, o *server.Options), p *power) *jsCluster {
	t.Helper()
	return startJSClusterTuned(t, dirs, base, each, nil, p)
}

// startJSClusterTuned is startJSClusterPowered with tune, if set,
// changing server i's JetStream options.
func startJSClusterTuned(t testing.TB, dirs []string, base server.Options, each func(i int, o *server.Options),
	tune func(i int, o *jetstream.Options), p *power) *jsCluster {
	t.Helper()
	n := len(dirs)
	jc := &jsCluster{dirs: make([]string, n), js: make([]*jetstream.JetStream, n), power: p}
	for i := range n {
		jc.dirs[i] = cmp.Or(dirs[i], t.TempDir())
	}
	jc.Cluster = clustertest.StartEach(t, n, base, each, func(t testing.TB, i int, s *server.Server) func() {
		var logger *slog.Logger
		if os.Getenv("SKIFF_TEST_LOG") != "" {
			logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("server", s.Name())
		}
		o := jetstream.Options{StoreDir: jc.dirs[i], Logger: logger,
			Cluster: &jscluster.Options{Tick: 50 * time.Millisecond, BootstrapWait: 200 * time.Millisecond}}
		if jc.power != nil {
			jc.power.boot(t, i, jc.dirs[i], &o)
		}
		if tune != nil {
			tune(i, &o)
		}
		if os.Getenv("SKIFF_TEST_STAGE_ALL") != "" && jc.power == nil && o.Cluster != nil && o.Cluster.Durability.Sync == store.SyncAlways {
			// A run of the suite with every replica staging every message
			// (replica_payloads.go): the WAL under interval, no size floor.
			// (TestClusterReplicatedWALBounded then fails: its WAL takes
			// no megabytes to roll segments over.)
			o.Cluster.Durability = store.Durability{Sync: store.SyncInterval}
			jetstream.SetStripMinAvg(t, 0)
		}
		js, err := jetstream.New(s, o)
		require.NoError(t, err)
		jc.mu.Lock()
		jc.js[i] = js
		jc.mu.Unlock()
		return func() {
			err := js.Close()
			if jc.power == nil || !jc.power.shutDown(i) {
				require.NoError(t, err)
			}
		}
	})
	return jc
}

func (jc *jsCluster) raft(i int) *jscluster.Cluster {
	jc.mu.Lock()
	defer jc.mu.Unlock()
	return jetstream.RaftOf(jc.js[i])
}

// waitMeta waits until every running server is a voter of one meta group
// and agrees on its leader.
func (jc *jsCluster) waitMeta(t testing.TB) {
	t.Helper()
	require.Eventually(t, func() bool {
		var lead string
		for i, s := range jc.Servers {
			if s == nil {
				continue
			}
			r := jc.raft(i)
			m, err := r.Members()
			name, _ := r.Leader()
			if err != nil || len(m.Voters) != len(jc.Live()) || name == "" || (lead != "" && name != lead) {
				return false
			}
			lead = name
		}
		return true
	}, 2*clustertest.Wait, 20*time.Millisecond, "the meta group did not form")
}

// TestClusterOptionStartsMeta: JetStream on a clustered server with the
// internal cluster option runs the raft layer in StoreDir/raft, and the
// servers form one meta group, which a restarted server rejoins from its
// WAL.
func TestClusterOptionStartsMeta(t *testing.T) {
	jc := startJSCluster(t, 3)
	jc.waitMeta(t)
	for _, f := range []string{"node", "wal"} {
		_, err := os.Stat(filepath.Join(jc.dirs[1], "raft", f))
		require.NoError(t, err)
	}
	id := jc.raft(0).MetaID()
	jc.Stop(t, 1)
	jc.Restart(t, 1)
	require.Equal(t, id, jc.raft(1).MetaID(), "restarted from its WAL")
	jc.waitMeta(t)
}

// TestClusterOptionNeedsCluster: the cluster option on a server without a
// cluster is refused.
func TestClusterOptionNeedsCluster(t *testing.T) {
	s, err := server.New(server.Options{Host: "127.0.0.1", Port: server.RandomPort, ServerName: "s1"})
	require.NoError(t, err)
	_, err = jetstream.New(s, jetstream.Options{StoreDir: t.TempDir(), Cluster: &jscluster.Options{}})
	require.ErrorIs(t, err, jscluster.ErrNotClustered)
}

// TestClusterR1Streams: in a clustered JetStream, any server answers the
// API: a stream created through one server is placed on one of them and
// assigned in the meta group; publishes from clients of every server are
// stored and acknowledged; its info, listings, consumers and pull requests
// are answered through every server; a delete through another server
// removes it everywhere.
func TestClusterR1Streams(t *testing.T) {
	jc := startJSCluster(t, 3)
	jc.waitMeta(t)
	ctxs := make([]nats.JetStreamContext, 3)
	for i := range 3 {
		js, err := jc.Connect(t, i).JetStream(nats.MaxWait(clustertest.Wait))
		require.NoError(t, err)
		ctxs[i] = js
	}
	info, err := ctxs[0].AddStream(&nats.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	require.NoError(t, err)
	require.Equal(t, "ORDERS", info.Config.Name)
	placed := jc.placement(t, "ORDERS")
	t.Logf("ORDERS placed on %s", placed)

	// The same create again, through another server: the stream as it is.
	_, err = ctxs[2].AddStream(&nats.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	require.NoError(t, err)
	_, err = ctxs[1].AddStream(&nats.StreamConfig{Name: "OTHER", Subjects: []string{"orders.new"}})
	require.ErrorContains(t, err, "subjects overlap")

	jc.WaitInterest(t, "orders.x", jc.index(placed))
	for i := range 3 {
		for k := range 5 {
			ack, err := ctxs[i].Publish("orders.x", []byte(fmt.Sprintf("from %d #%d", i, k)))
			require.NoError(t, err)
			require.Equal(t, "ORDERS", ack.Stream)
		}
	}
	for i := range 3 {
		si, err := ctxs[i].StreamInfo("ORDERS")
		require.NoError(t, err)
		require.Equal(t, uint64(15), si.State.Msgs, "through server %d", i)
		names := ctxs[i].StreamNames()
		var got []string
		for n := range names {
			got = append(got, n)
		}
		require.Equal(t, []string{"ORDERS"}, got)
		var listed []string
		for si := range ctxs[i].Streams() {
			listed = append(listed, si.Config.Name)
		}
		require.Equal(t, []string{"ORDERS"}, listed)
	}

	_, err = ctxs[1].AddConsumer("ORDERS", &nats.ConsumerConfig{Durable: "work", AckPolicy: nats.AckExplicitPolicy})
	require.NoError(t, err)
	sub, err := ctxs[2].PullSubscribe("orders.>", "work", nats.Bind("ORDERS", "work"))
	require.NoError(t, err)
	got := 0
	for got < 15 {
		msgs, err := sub.Fetch(15-got, nats.MaxWait(clustertest.Wait))
		require.NoError(t, err)
		for _, m := range msgs {
			require.NoError(t, m.AckSync())
			got++
		}
	}
	ci, err := ctxs[0].ConsumerInfo("ORDERS", "work")
	require.NoError(t, err)
	require.Equal(t, uint64(15), ci.AckFloor.Consumer)

	require.NoError(t, ctxs[2].DeleteStream("ORDERS"))
	require.Eventually(t, func() bool {
		for i := range 3 {
			st, _ := jc.raft(i).State()
			if len(st.Streams) != 0 {
				return false
			}
		}
		return true
	}, clustertest.Wait, 10*time.Millisecond)
	for i := range 3 {
		_, err := ctxs[i].StreamInfo("ORDERS")
		require.ErrorIs(t, err, nats.ErrStreamNotFound, "through server %d", i)
	}
}

// index returns the index of the server called name.
func (jc *jsCluster) index(name string) int {
	for i, s := range jc.Servers {
		if s != nil && s.Name() == name {
			return i
		}
	}
	panic("no server " + name)
}

// placement returns the server the meta group placed a stream of the
// global account on, once every server applied it.
func (jc *jsCluster) placement(t *testing.T, name string) string {
	t.Helper()
	return jc.placementIn(t, server.GlobalAccountName, name)
}

// placementIn is placement for a stream of the named account.
func (jc *jsCluster) placementIn(t *testing.T, account, name string) string {
	t.Helper()
	var peer string
	require.Eventually(t, func() bool {
		peer = ""
		for i, s := range jc.Servers {
			if s == nil {
				continue
			}
			st, _ := jc.raft(i).State()
			sa := st.Streams[jscluster.StreamKey{Account: account, Name: name}]
			if sa == nil || len(sa.Peers) != 1 || (peer != "" && sa.Peers[0] != peer) {
				return false
			}
			peer = sa.Peers[0]
		}
		return true
	}, clustertest.Wait, 10*time.Millisecond, "stream %s not assigned everywhere", name)
	return peer
}

// TestClusterStreamErrors: the errors of a clustered create, as
// nats-server gives them.
func TestClusterStreamErrors(t *testing.T) {
	jc := startJSCluster(t, 3)
	jc.waitMeta(t)
	nc := jc.Connect(t, 1)
	tests := []struct {
		name, body string
		code       int
		errCode    int
		desc       string
	}{
		{"more replicas than servers", `{"name":"R","subjects":["r"],"num_replicas":5}`, 400, 10005, "no suitable peers for placement"},
		{"tags", `{"name":"T","subjects":["t"],"placement":{"tags":["ssd"]}}`, 400, 10005, "no suitable peers for placement, tags not matched ['ssd']"},
		{"another cluster", `{"name":"C","subjects":["c"],"placement":{"cluster":"elsewhere"}}`, 400, 10005, "no suitable peers for placement"},
		{"unknown preferred", `{"name":"P","subjects":["p"],"placement":{"preferred":"nobody"}}`, 400, 10005, "no suitable peers for placement, peer offline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := strings.TrimSuffix(strings.Split(tt.body, `"name":"`)[1][:1], `"`)
			m, err := nc.Request("$JS.API.STREAM.CREATE."+name, []byte(tt.body), clustertest.Wait)
			require.NoError(t, err)
			var r struct {
				Error struct {
					Code        int    `json:"code"`
					ErrCode     int    `json:"err_code"`
					Description string `json:"description"`
				} `json:"error"`
			}
			require.NoError(t, json.Unmarshal(m.Data, &r), string(m.Data))
			require.Equal(t, tt.code, r.Error.Code, string(m.Data))
			require.Equal(t, tt.errCode, r.Error.ErrCode)
			require.Equal(t, tt.desc, r.Error.Description)
		})
	}
	st, _ := jc.raft(0).State()
	require.Empty(t, st.Streams, "nothing assigned")
}

// startDeputyCluster starts three servers with the users admin and
// mallory (malloryPerms), and has admin create the stream OWN (own.>).
func startDeputyCluster(t *testing.T) (*jsCluster, nats.JetStreamContext) {
	t.Helper()
	base := server.Options{Users: []server.User{
		{Name: adminUser, Password: adminPass},
		{Name: malloryUser, Password: malloryPass, Permissions: malloryPerms},
	}}
	jc := startJSClusterWith(t, 3, base)
	jc.waitMeta(t)
	admin := jc.Connect(t, 0, nats.UserInfo(adminUser, adminPass))
	ajs, err := admin.JetStream(nats.MaxWait(clustertest.Wait))
	require.NoError(t, err)
	_, err = ajs.AddStream(&nats.StreamConfig{Name: "OWN", Subjects: []string{"own.>"}})
	require.NoError(t, err)
	return jc, ajs
}

// TestClusterForwardActsForRequester: a request forwarded to the stream's
// server acts there for the requester's user: mallory may not have a
// consumer deliver where she may not publish, admin may, whichever server
// they ask.
func TestClusterForwardActsForRequester(t *testing.T) {
	jc, _ := startDeputyCluster(t)
	at := jc.index(jc.placement(t, "OWN"))
	other := (at + 1) % 3

	mallory := jc.Connect(t, other, nats.UserInfo(malloryUser, malloryPass))
	mjs, err := mallory.JetStream(nats.MaxWait(clustertest.Wait))
	require.NoError(t, err)
	_, err = mjs.AddConsumer("OWN", &nats.ConsumerConfig{Durable: "push", DeliverSubject: "victim.injected"})
	var aerr nats.JetStreamError
	require.ErrorAs(t, err, &aerr)
	require.Equal(t, nats.ErrorCode(10112), aerr.APIError().ErrorCode, "judged as mallory on %s", jc.Servers[at].Name())

	admin2 := jc.Connect(t, other, nats.UserInfo(adminUser, adminPass))
	ajs2, err := admin2.JetStream(nats.MaxWait(clustertest.Wait))
	require.NoError(t, err)
	_, err = ajs2.AddConsumer("OWN", &nats.ConsumerConfig{Durable: "push", DeliverSubject: "victim.injected"})
	require.NoError(t, err, "admin may")
}

// TestClusterDeliveryCrossesRoute: a consumer's server delivers a pull
// request's messages for the requester; where they cross a route to a
// stream on another server, that stream judges them as the requester's,
// as a stream on the consumer's own server does: mallory may not have
// them stored where she may not publish. A plain subscriber there gets
// them (they did cross).
func TestClusterDeliveryCrossesRoute(t *testing.T) {
	jc, ajs := startDeputyCluster(t)
	_, err := ajs.AddStream(&nats.StreamConfig{Name: "VICTIM", Subjects: []string{"victim.>"}})
	require.NoError(t, err)
	own, victim := jc.index(jc.placement(t, "OWN")), jc.index(jc.placement(t, "VICTIM"))
	require.NotEqual(t, own, victim, "placed on the server with the fewest streams")
	_, err = ajs.AddConsumer("OWN", &nats.ConsumerConfig{Durable: "pull", AckPolicy: nats.AckNonePolicy})
	require.NoError(t, err)
	jc.WaitInterest(t, "own.x", own)
	for range 3 {
		_, err := ajs.Publish("own.x", []byte("payload"))
		require.NoError(t, err)
	}

	watcher := jc.Connect(t, victim, nats.UserInfo(adminUser, adminPass))
	seen, err := watcher.SubscribeSync("victim.injected")
	require.NoError(t, err)
	require.NoError(t, watcher.Flush())
	jc.WaitInterest(t, "victim.injected", victim)

	mallory := jc.Connect(t, 3-own-victim, nats.UserInfo(malloryUser, malloryPass))
	require.NoError(t, mallory.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.OWN.pull", "victim.injected", []byte(`{"batch":3,"no_wait":true}`)))
	require.NoError(t, mallory.Flush())
	for k := range 3 {
		_, err := seen.NextMsg(clustertest.Wait)
		require.NoError(t, err, "delivery %d crossed to %s", k, jc.Servers[victim].Name())
	}
	// A message admin may publish, stored after them if they were.
	_, err = ajs.Publish("victim.marker", nil)
	require.NoError(t, err)
	si, err := ajs.StreamInfo("VICTIM")
	require.NoError(t, err)
	require.Equal(t, uint64(1), si.State.Msgs, "VICTIM stored what mallory may not publish")
}

// TestClusterKV: a key-value bucket (a stream read by DIRECT.GET, watched
// by push consumers) works through every server.
func TestClusterKV(t *testing.T) {
	jc := startJSCluster(t, 3)
	jc.waitMeta(t)
	kvs := make([]nats.KeyValue, 3)
	js0, err := jc.Connect(t, 0).JetStream(nats.MaxWait(clustertest.Wait))
	require.NoError(t, err)
	kvs[0], err = js0.CreateKeyValue(&nats.KeyValueConfig{Bucket: "CFG", History: 3})
	require.NoError(t, err)
	jc.WaitInterest(t, "$KV.CFG.x", jc.index(jc.placement(t, "KV_CFG")))
	for i := 1; i < 3; i++ {
		js, err := jc.Connect(t, i).JetStream(nats.MaxWait(clustertest.Wait))
		require.NoError(t, err)
		kvs[i], err = js.KeyValue("CFG")
		require.NoError(t, err)
	}
	for i := range 3 {
		_, err := kvs[i].Put("k", []byte(fmt.Sprintf("v%d", i)))
		require.NoError(t, err)
		for j := range 3 {
			e, err := kvs[j].Get("k")
			require.NoError(t, err)
			require.Equal(t, fmt.Sprintf("v%d", i), string(e.Value()), "put through %d, read through %d", i, j)
		}
	}
	h, err := kvs[2].History("k")
	require.NoError(t, err)
	require.Len(t, h, 3)
	// A watch's deliveries keep the subject the message was stored under
	// when they cross a route (encoded in the ack reply, as nats-server
	// does): the key is read from it.
	for i := range 3 {
		keys, err := kvs[i].Keys()
		require.NoError(t, err)
		require.Equal(t, []string{"k"}, keys, "keys through %d", i)
	}
}

// TestClusterStreamServerDown: while the server a stream is placed on is
// down, requests about it fail with 10008 through the others, and the
// stream comes back with it; the meta leader's own loss does not stop
// creates for long.
func TestClusterStreamServerDown(t *testing.T) {
	jc := startJSCluster(t, 3)
	jc.waitMeta(t)
	nc0 := jc.Connect(t, 0)
	js0, err := nc0.JetStream(nats.MaxWait(clustertest.Wait))
	require.NoError(t, err)
	m, err := nc0.Request("$JS.API.STREAM.CREATE.S", []byte(`{"name":"S","subjects":["s.>"],"placement":{"preferred":"s3"}}`), clustertest.Wait)
	require.NoError(t, err)
	require.NotContains(t, string(m.Data), `"error"`)
	require.Equal(t, "s3", jc.placement(t, "S"))
	jc.WaitInterest(t, "s.x", 2)
	_, err = js0.Publish("s.x", []byte("one"))
	require.NoError(t, err)

	jc.Stop(t, 2)
	nc := jc.Connect(t, 1)
	m, err = nc.Request("$JS.API.STREAM.INFO.S", nil, clustertest.Wait)
	require.NoError(t, err)
	require.Contains(t, string(m.Data), `"err_code":10008`)

	jc.Restart(t, 2)
	jc.waitMeta(t)
	jc.WaitInterest(t, "s.x", 2)
	js1, err := nc.JetStream(nats.MaxWait(clustertest.Wait))
	require.NoError(t, err)
	_, err = js1.Publish("s.x", []byte("two"))
	require.NoError(t, err)
	si, err := js1.StreamInfo("S")
	require.NoError(t, err)
	require.Equal(t, uint64(2), si.State.Msgs)

	name, _ := jc.raft(0).Leader()
	l := jc.index(name)
	jc.Stop(t, l)
	js, err := jc.Connect(t, (l+1)%3).JetStream(nats.MaxWait(clustertest.Wait))
	require.NoError(t, err)
	_, err = js.AddStream(&nats.StreamConfig{Name: "AFTER", Subjects: []string{"after.>"}})
	require.NoError(t, err, "a create once another meta leader is elected")
}

// TestClusterStreamUpdate: an update through any server changes the
// stream on its server and the meta state.
func TestClusterStreamUpdate(t *testing.T) {
	jc := startJSCluster(t, 3)
	jc.waitMeta(t)
	js0, err := jc.Connect(t, 0).JetStream(nats.MaxWait(clustertest.Wait))
	require.NoError(t, err)
	_, err = js0.AddStream(&nats.StreamConfig{Name: "U", Subjects: []string{"u.>"}})
	require.NoError(t, err)
	js2, err := jc.Connect(t, 2).JetStream(nats.MaxWait(clustertest.Wait))
	require.NoError(t, err)
	si, err := js2.UpdateStream(&nats.StreamConfig{Name: "U", Subjects: []string{"u.>", "v.>"}, MaxMsgs: 10})
	require.NoError(t, err)
	require.Equal(t, int64(10), si.Config.MaxMsgs)
	require.Eventually(t, func() bool {
		for i := range 3 {
			st, _ := jc.raft(i).State()
			sa := st.Streams[jscluster.StreamKey{Account: server.GlobalAccountName, Name: "U"}]
			var cfg nats.StreamConfig
			if sa == nil || json.Unmarshal(sa.Config, &cfg) != nil || cfg.MaxMsgs != 10 || len(cfg.Subjects) != 2 {
				return false
			}
		}
		return true
	}, clustertest.Wait, 10*time.Millisecond, "the meta state did not take the update")
	// Scaled up: replicated from now on (TestClusterScaleUpFromOne).
	si, err = js2.UpdateStream(&nats.StreamConfig{Name: "U", Subjects: []string{"u.>"}, Replicas: 3})
	require.NoError(t, err)
	require.Equal(t, 3, si.Config.Replicas)
	_, err = js2.UpdateStream(&nats.StreamConfig{Name: "NONE", Subjects: []string{"n"}})
	require.ErrorIs(t, err, nats.ErrStreamNotFound)
}

// TestClusterNATSCLI drives a clustered JetStream with the real `nats`
// CLI, each command through another server.
func TestClusterNATSCLI(t *testing.T) {
	bin := natscli.Path(t)
	jc := startJSCluster(t, 3)
	jc.waitMeta(t)
	cli := func(i int) *natscli.CLI { return natscli.New(t, bin, jc.URL(i)) }

	out := cli(0).Run("stream", "add", "ORDERS", "--subjects", "orders.*", "--storage", "file", "--defaults")
	require.Contains(t, out, "Stream ORDERS was created")
	jc.WaitInterest(t, "orders.new", jc.index(jc.placement(t, "ORDERS")))
	out = cli(1).Run("pub", "--jetstream", "orders.new", "order {{Count}}", "--count", "5")
	require.Contains(t, out, `Published 7 bytes to "orders.new"`)
	out = cli(2).Run("stream", "info", "ORDERS")
	require.Contains(t, out, "Messages: 5")
	out = cli(2).Run("stream", "ls")
	require.Contains(t, out, "ORDERS")

	out = cli(1).Run("consumer", "add", "ORDERS", "WORKER", "--pull", "--ack", "explicit", "--deliver", "all", "--defaults")
	require.Contains(t, out, "Information for Consumer ORDERS > WORKER")
	out = cli(0).Run("consumer", "next", "ORDERS", "WORKER", "--count", "3")
	require.Contains(t, out, "order 3")

	out = cli(2).Run("kv", "add", "CFG")
	require.Contains(t, out, "CFG")
	jc.WaitInterest(t, "$KV.CFG.k", jc.index(jc.placement(t, "KV_CFG")))
	cli(0).Run("kv", "put", "CFG", "k", "v1")
	out = cli(1).Run("kv", "get", "CFG", "k", "--raw")
	require.Equal(t, "v1", strings.TrimSpace(out))

	out = cli(1).Run("stream", "rm", "ORDERS", "-f")
	require.NotContains(t, out, "error")
	out = cli(0).Run("stream", "ls", "--names")
	require.NotContains(t, out, "ORDERS")
	require.Contains(t, out, "KV_CFG")
}

// TestClusterAccountMaxStreams: an account's max_streams holds over the
// cluster, though its streams are placed on different servers.
func TestClusterAccountMaxStreams(t *testing.T) {
	base := server.Options{Accounts: []server.AccountConfig{{Name: "T",
		Users: []server.User{{Name: "t", Password: "t"}}, JetStream: &server.JetStreamLimits{MaxStreams: 2}}}}
	jc := startJSClusterWith(t, 3, base)
	jc.waitMeta(t)
	js, err := jc.Connect(t, 1, nats.UserInfo("t", "t")).JetStream(nats.MaxWait(clustertest.Wait))
	require.NoError(t, err)
	for _, name := range []string{"A", "B"} {
		_, err := js.AddStream(&nats.StreamConfig{Name: name, Subjects: []string{name}})
		require.NoError(t, err)
	}
	placed := map[string]bool{}
	for i := range 3 {
		st, _ := jc.raft(i).State()
		for _, sa := range st.Streams {
			placed[sa.Peers[0]] = true
		}
	}
	require.Len(t, placed, 2, "the streams are on two servers")
	_, err = js.AddStream(&nats.StreamConfig{Name: "C", Subjects: []string{"C"}})
	var aerr nats.JetStreamError
	require.ErrorAs(t, err, &aerr)
	require.Equal(t, nats.ErrorCode(10027), aerr.APIError().ErrorCode)
}

// TestClusterStreamDeletedWhileDown: a stream deleted while its server was
// down is removed there when it comes back, files and all; a stream of
// that server the meta group did not make is left alone.
func TestClusterStreamDeletedWhileDown(t *testing.T) {
	jc := startJSCluster(t, 3)
	jc.waitMeta(t)
	nc0 := jc.Connect(t, 0)
	m, err := nc0.Request("$JS.API.STREAM.CREATE.S", []byte(`{"name":"S","subjects":["s.>"],"placement":{"preferred":"s3"}}`), clustertest.Wait)
	require.NoError(t, err)
	require.NotContains(t, string(m.Data), `"error"`)
	require.Equal(t, "s3", jc.placement(t, "S"))
	dir := filepath.Join(jc.dirs[2], "accounts", server.GlobalAccountName, "streams", "S")
	require.Eventually(t, func() bool { _, err := os.Stat(dir); return err == nil }, clustertest.Wait, 10*time.Millisecond)

	jc.Stop(t, 2)
	js0, err := nc0.JetStream(nats.MaxWait(clustertest.Wait))
	require.NoError(t, err)
	require.NoError(t, js0.DeleteStream("S"))
	jc.Restart(t, 2)
	jc.waitMeta(t)
	require.Eventually(t, func() bool { _, err := os.Stat(dir); return os.IsNotExist(err) }, clustertest.Wait, 10*time.Millisecond,
		"the deleted stream's files are still on its server")
	js2, err := jc.Connect(t, 2).JetStream(nats.MaxWait(clustertest.Wait))
	require.NoError(t, err)
	_, err = js2.StreamInfo("S")
	require.ErrorIs(t, err, nats.ErrStreamNotFound)
}

// TestClusterAPIAudit: a request forwarded to another server is audited
// once, by the server that answers it (the meta leader for a create, the
// stream's server for its info), naming the requester's connection, and
// the advisory reaches a subscriber on any server.
func TestClusterAPIAudit(t *testing.T) {
	jc := startJSCluster(t, 3)
	jc.waitMeta(t)
	leader, _ := jc.raft(0).Leader()
	// The requester is on a server that leads nothing.
	from := (jc.index(leader) + 1) % 3
	watch := jc.Connect(t, (from+1)%3)
	audits, err := watch.SubscribeSync("$JS.EVENT.ADVISORY.API")
	require.NoError(t, err)
	require.NoError(t, watch.Flush())
	jc.WaitInterest(t, "$JS.EVENT.ADVISORY.API", (from+1)%3)

	nc, err := nats.Connect(jc.URL(from), nats.Name("requester"))
	require.NoError(t, err)
	defer nc.Close()
	js, err := nc.JetStream(nats.MaxWait(clustertest.Wait))
	require.NoError(t, err)
	_, err = js.AddStream(&nats.StreamConfig{Name: "AUDITED", Subjects: []string{"audited.>"}})
	require.NoError(t, err)
	placed := jc.placement(t, "AUDITED")
	_, err = js.StreamInfo("AUDITED")
	require.NoError(t, err)

	type audit struct {
		Server string `json:"server"`
		Client struct {
			Name string `json:"name"`
		} `json:"client"`
		Subject  string `json:"subject"`
		Response string `json:"response"`
	}
	for _, want := range []struct{ subject, server string }{
		{"$JS.API.STREAM.CREATE.AUDITED", leader},
		{"$JS.API.STREAM.INFO.AUDITED", placed},
	} {
		m, err := audits.NextMsg(clustertest.Wait)
		require.NoError(t, err)
		var a audit
		require.NoError(t, json.Unmarshal(m.Data, &a), string(m.Data))
		require.Equal(t, want.subject, a.Subject)
		require.Equal(t, want.server, a.Server, "audited by the server that answered")
		require.Equal(t, "requester", a.Client.Name)
		require.Contains(t, a.Response, `"AUDITED"`)
	}
	// Once each: a request forwarded is not audited by its forwarder.
	_, err = audits.NextMsg(300 * time.Millisecond)
	require.ErrorIs(t, err, nats.ErrTimeout)
}

// TestClusterAccountQuota: an account's max_store holds over the cluster.
// A stream's max_bytes must fit beside the account's other streams' on
// every server (10047), and a publish is refused (10002) once the
// account's streams on every server together would pass it, though the
// stream's own server holds little.
func TestClusterAccountQuota(t *testing.T) {
	const quota = 8192
	base := server.Options{Accounts: []server.AccountConfig{{Name: "T",
		Users: []server.User{{Name: "t", Password: "t"}}, JetStream: &server.JetStreamLimits{MaxStore: quota, MaxStreams: -1}}}}
	jc := startJSClusterWith(t, 3, base)
	jc.waitMeta(t)
	js, err := jc.Connect(t, 0, nats.UserInfo("t", "t")).JetStream(nats.MaxWait(clustertest.Wait))
	require.NoError(t, err)

	_, err = js.AddStream(&nats.StreamConfig{Name: "BIG", Subjects: []string{"big"}, MaxBytes: 6000})
	require.NoError(t, err)
	_, err = js.AddStream(&nats.StreamConfig{Name: "TOO", Subjects: []string{"too"}, MaxBytes: 3000})
	require.Equal(t, njs.ErrorCode(10047), apiCode(err), "6000 + 3000 reserved on two servers: %v", err)
	require.NoError(t, js.DeleteStream("BIG"))

	for _, name := range []string{"B", "C"} {
		_, err := js.AddStream(&nats.StreamConfig{Name: name, Subjects: []string{strings.ToLower(name)}})
		require.NoError(t, err)
	}
	onB, onC := jc.placementIn(t, "T", "B"), jc.placementIn(t, "T", "C")
	require.NotEqual(t, onB, onC, "the two streams are on two servers")
	for range 5 {
		_, err := js.Publish("b", make([]byte, 1000))
		require.NoError(t, err)
	}
	si, err := js.StreamInfo("B")
	require.NoError(t, err)
	jc.mu.Lock()
	cjs := jc.js[jc.index(onC)]
	jc.mu.Unlock()
	require.Eventually(t, func() bool { return jetstream.PeerFileUsed(cjs, "T") >= int64(si.State.Bytes) },
		clustertest.Wait, 10*time.Millisecond, "C's server hears what B's holds")

	// C's server holds nothing, but B's 5000 bytes and 4000 more pass 8192.
	_, err = js.Publish("c", make([]byte, 4000))
	require.Equal(t, njs.ErrorCode(10002), apiCode(err), "%v", err)
	_, err = js.Publish("c", make([]byte, 1000))
	require.NoError(t, err)
}

// TestClusterAdoptsStreams: servers that had streams before they joined a
// cluster have them adopted by the meta group, messages and all, and
// answered for by any server; of two streams of one name, or whose
// subjects overlap, one is adopted and the other marked failed on its
// server, its files kept.
func TestClusterAdoptsStreams(t *testing.T) {
	single := func(streams ...*nats.StreamConfig) string {
		b := startBroker(t, "")
		nc, err := nats.Connect(b.srv.ClientURL())
		require.NoError(t, err)
		js, err := nc.JetStream()
		require.NoError(t, err)
		for _, cfg := range streams {
			_, err := js.AddStream(cfg)
			require.NoError(t, err)
			for k := range 3 {
				_, err := js.Publish(cfg.Subjects[0], []byte(fmt.Sprintf("%s #%d", cfg.Name, k)))
				require.NoError(t, err)
			}
		}
		nc.Close()
		b.stop()
		return b.dir
	}
	d0 := single(&nats.StreamConfig{Name: "OLD", Subjects: []string{"old.>"}}, &nats.StreamConfig{Name: "DUP", Subjects: []string{"dup0"}})
	d1 := single(&nats.StreamConfig{Name: "DUP", Subjects: []string{"dup1"}}, &nats.StreamConfig{Name: "OVER", Subjects: []string{"old.x"}})
	jc := startJSClusterOn(t, []string{d0, d1, ""}, server.Options{})
	jc.waitMeta(t)

	// Whichever server asks first has its stream adopted; the other's is
	// failed where it is, with the reason, and its files stay.
	jc.mu.Lock()
	stores := []*jetstream.JetStream{jc.js[0], jc.js[1]}
	jc.mu.Unlock()
	failed := func() map[string]string {
		out := map[string]string{}
		for i, js := range stores {
			for name, why := range jetstream.FailedStreams(js, server.GlobalAccountName) {
				out[fmt.Sprintf("%s@%d", name, i)] = why
			}
		}
		return out
	}
	require.Eventually(t, func() bool { return len(failed()) == 2 }, clustertest.Wait, 10*time.Millisecond)
	onDup := jc.placement(t, "DUP")
	loser := 1 - jc.index(onDup)
	require.Contains(t, failed()[fmt.Sprintf("DUP@%d", loser)], "stream of this name on "+onDup)
	adopted, refused, dir := "OLD", "OVER@1", d1
	if failed()["OLD@0"] != "" {
		adopted, refused, dir = "OVER", "OLD@0", d0
	}
	require.Contains(t, failed()[refused], "overlap")
	refusedName, _, _ := strings.Cut(refused, "@")
	require.DirExists(t, filepath.Join(globalStreams(dir), refusedName))

	js2, err := jc.Connect(t, 2).JetStream(nats.MaxWait(clustertest.Wait))
	require.NoError(t, err)
	for _, name := range []string{adopted, "DUP"} {
		jc.placement(t, name)
		si, err := js2.StreamInfo(name)
		require.NoError(t, err, "%s through a server that had none", name)
		require.Equal(t, uint64(3), si.State.Msgs, name)
	}
	m, err := js2.GetMsg(adopted, 2)
	require.NoError(t, err)
	require.Equal(t, adopted+" #1", string(m.Data))
	_, err = js2.StreamInfo(refusedName)
	require.ErrorIs(t, err, nats.ErrStreamNotFound, "a stream not adopted is not the cluster's")

	// Adopted streams stay adopted over a restart: no second assignment.
	on := jc.index(jc.placement(t, adopted))
	key := jscluster.StreamKey{Account: server.GlobalAccountName, Name: adopted}
	st, _ := jc.raft(2).State()
	before := st.Streams[key].Group
	jc.Stop(t, on)
	jc.Restart(t, on)
	jc.waitMeta(t)
	require.Equal(t, jc.Servers[on].Name(), jc.placement(t, adopted))
	st, _ = jc.raft(2).State()
	require.Equal(t, before, st.Streams[key].Group)
	si, err := js2.StreamInfo(adopted)
	require.NoError(t, err)
	require.Equal(t, uint64(3), si.State.Msgs)
}

// TestClusterPlacementTags: a stream's placement tags choose among the
// servers by their server_tags (required, or excluded with "!"); a server
// tagged "!jetstream" gets no streams; a placement no server matches is
// refused with nats-server's reasons.
func TestClusterPlacementTags(t *testing.T) {
	tags := [][]string{{"az:1", "SSD"}, {"az:2"}, {"az:3", "!jetstream"}}
	jc := startJSClusterEach(t, make([]string, 3), server.Options{}, func(i int, o *server.Options) { o.Tags = tags[i] })
	jc.waitMeta(t)
	require.Equal(t, []string{"az:1", "ssd"}, jc.Servers[0].Tags(), "lowercased")
	nc := jc.Connect(t, 2)
	create := func(name, placement string) (string, string) {
		t.Helper()
		m, err := nc.Request("$JS.API.STREAM.CREATE."+name,
			[]byte(`{"name":"`+name+`","subjects":["`+strings.ToLower(name)+`"],"placement":`+placement+`}`), clustertest.Wait)
		require.NoError(t, err)
		var r struct {
			Error *struct {
				ErrCode     int    `json:"err_code"`
				Description string `json:"description"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(m.Data, &r), string(m.Data))
		if r.Error != nil {
			require.Equal(t, 10005, r.Error.ErrCode)
			return "", r.Error.Description
		}
		return jc.placement(t, name), ""
	}
	for _, tc := range []struct{ name, placement, on, refused string }{
		{"FAST", `{"tags":["ssd"]}`, "s1", ""},
		{"ZONE2", `{"tags":["AZ:2"]}`, "s2", ""},
		{"NOTSSD", `{"tags":["!ssd"]}`, "s2", ""},
		{"ZONE3", `{"tags":["az:3"]}`, "", "no suitable peers for placement, exclude tag set, tags not matched ['az:3']"},
		{"GPU", `{"tags":["gpu"]}`, "", "no suitable peers for placement, exclude tag set, tags not matched ['gpu']"},
		{"NONE", `{"tags":["!ssd","!az:2"]}`, "", "no suitable peers for placement, exclude tag set, tags excluded ['az:2', 'ssd']"},
		{"PREF", `{"preferred":"s3"}`, "", "no suitable peers for placement, exclude tag set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			on, refused := create(tc.name, tc.placement)
			require.Equal(t, tc.refused, refused)
			require.Equal(t, tc.on, on)
		})
	}
	// Without tags, streams go to s1 and s2 only.
	for i := range 4 {
		on, refused := create(fmt.Sprintf("ANY%d", i), `{}`)
		require.Empty(t, refused)
		require.NotEqual(t, "s3", on)
	}
}

// TestClusterConcurrentOverlappingCreates: creates of streams whose
// subjects overlap, sent at once through every server, leave one stream:
// the meta leader's checks and assignments are one step.
func TestClusterConcurrentOverlappingCreates(t *testing.T) {
	jc := startJSCluster(t, 3)
	jc.waitMeta(t)
	var wg sync.WaitGroup
	const n = 32
	created := make(chan string, n)
	start := make(chan struct{})
	for i := range n {
		nc := jc.Connect(t, i%3)
		wg.Go(func() {
			<-start
			name := fmt.Sprintf("S%d", i)
			m, err := nc.Request("$JS.API.STREAM.CREATE."+name, []byte(`{"name":"`+name+`","subjects":["same.>"]}`), clustertest.Wait)
			if err == nil && !strings.Contains(string(m.Data), `"error"`) {
				created <- name
			}
		})
	}
	close(start)
	wg.Wait()
	close(created)
	var names []string
	for n := range created {
		names = append(names, n)
	}
	require.Len(t, names, 1, "one stream captures same.>: %v", names)
	st, _ := jc.raft(0).State()
	require.Len(t, st.Streams, 1)
}

// TestClusterPlacementUniqueTag: under unique_tag "az:" the replicas of a
// stream go to servers of different az: tags, never to a server without
// one; a scale-up adds a server of a zone the stream is not in; a
// placement naming a zone turns the rule off, as in nats-server.
func TestClusterPlacementUniqueTag(t *testing.T) {
	tags := [][]string{{"az:1"}, {"AZ:1"}, {"az:2"}, {"ssd"}}
	jc := startJSClusterTuned(t, make([]string, 4), server.Options{}, func(i int, o *server.Options) { o.Tags = tags[i] },
		func(_ int, o *jetstream.Options) { o.UniqueTag = " AZ: " }, nil)
	jc.waitMeta(t)
	nc := jc.Connect(t, 0)
	zoneOf := map[string]string{"s1": "az:1", "s2": "az:1", "s3": "az:2"}
	request := func(subject, body string) string {
		t.Helper()
		m, err := nc.Request(subject, []byte(body), clustertest.Wait)
		require.NoError(t, err)
		var r struct {
			Error *struct {
				Description string `json:"description"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(m.Data, &r), string(m.Data))
		if r.Error != nil {
			return r.Error.Description
		}
		return ""
	}
	peers := func(name string, n int) []string {
		t.Helper()
		var p []string
		require.Eventually(t, func() bool {
			st, _ := jc.raft(0).State()
			sa := st.Streams[jscluster.StreamKey{Account: server.GlobalAccountName, Name: name}]
			if sa == nil || len(sa.Peers) != n {
				return false
			}
			p = slices.Clone(sa.Peers)
			return true
		}, clustertest.Wait, 20*time.Millisecond, "%s placed on %d servers", name, n)
		return p
	}
	zones := func(p []string) []string {
		var z []string
		for _, name := range p {
			z = append(z, zoneOf[name])
		}
		slices.Sort(z)
		return z
	}

	for i := range 3 {
		name := fmt.Sprintf("TWO%d", i)
		require.Empty(t, request("$JS.API.STREAM.CREATE."+name, `{"name":"`+name+`","subjects":["two`+fmt.Sprint(i)+`"],"num_replicas":2}`))
		require.Equal(t, []string{"az:1", "az:2"}, zones(peers(name, 2)), "one replica per zone, none on s4")
	}
	require.Equal(t, "no suitable peers for placement, server tag not unique",
		request("$JS.API.STREAM.CREATE.THREE", `{"name":"THREE","subjects":["three"],"num_replicas":3}`))
	require.Empty(t, request("$JS.API.STREAM.CREATE.ZONE1",
		`{"name":"ZONE1","subjects":["zone1"],"num_replicas":2,"placement":{"tags":["az:1"]}}`))
	require.Equal(t, []string{"az:1", "az:1"}, zones(peers("ZONE1", 2)), "a placement naming a zone turns the rule off")

	require.Empty(t, request("$JS.API.STREAM.CREATE.GROW", `{"name":"GROW","subjects":["grow"],"num_replicas":1}`))
	one := peers("GROW", 1)
	require.Empty(t, request("$JS.API.STREAM.UPDATE.GROW", `{"name":"GROW","subjects":["grow"],"num_replicas":2}`))
	two := peers("GROW", 2)
	require.Contains(t, two, one[0])
	require.Equal(t, []string{"az:1", "az:2"}, zones(two), "scaled up into the other zone")
}

// TestClusterHoldTimeoutOption: jetstream.Options.HoldTimeout (the
// configuration's hold_timeout) reaches the raft layer of a clustered
// server that does not tune it otherwise; unset, the layer's default.
func TestClusterHoldTimeoutOption(t *testing.T) {
	jc := startJSClusterTuned(t, make([]string, 2), server.Options{}, nil, func(i int, o *jetstream.Options) {
		o.Cluster = nil
		if i == 0 {
			o.HoldTimeout = 3 * time.Second
		}
	}, nil)
	require.Equal(t, 3*time.Second, jc.raft(0).HoldTimeout())
	require.Equal(t, jscluster.DefaultHoldTimeout, jc.raft(1).HoldTimeout())

	opts := server.DefaultOptions()
	opts.Host, opts.Port = "127.0.0.1", server.RandomPort
	s, err := server.New(opts)
	require.NoError(t, err)
	_, err = jetstream.New(s, jetstream.Options{StoreDir: t.TempDir(), HoldTimeout: -time.Second})
	require.ErrorIs(t, err, jetstream.ErrInvalidOptions)
}
