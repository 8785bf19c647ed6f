package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/server"
)

// TestClusterFanOut: a message published on one server reaches every
// plain subscriber on every server exactly once, in the publisher's order.
func TestClusterFanOut(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprintf("servers=%d", n), func(t *testing.T) {
			c := clustertest.Start(t, n, server.Options{})
			var subs []*nats.Subscription
			for i := range n {
				nc := c.Connect(t, i)
				// Two overlapping subscriptions on one server: the peer
				// still gets each message once per subscription, and the
				// route carries it once.
				s1, err := nc.SubscribeSync("orders.*")
				require.NoError(t, err)
				subs = append(subs, s1)
				require.NoError(t, nc.Flush())
			}
			c.WaitInterest(t, "orders.new", allServers(n)...)
			pub := c.Connect(t, 0)
			const msgs = 100
			for k := range msgs {
				require.NoError(t, pub.Publish("orders.new", fmt.Appendf(nil, "%d", k)))
			}
			require.NoError(t, pub.Flush())
			for i, sub := range subs {
				for k := range msgs {
					m, err := sub.NextMsg(5 * time.Second)
					require.NoError(t, err, "subscriber %d, message %d", i, k)
					require.Equal(t, fmt.Sprint(k), string(m.Data), "subscriber %d: order kept", i)
				}
				_, err := sub.NextMsg(100 * time.Millisecond)
				require.ErrorIs(t, err, nats.ErrTimeout, "subscriber %d: nothing twice", i)
			}
		})
	}
}

// TestClusterQueueGroup: a queue group with members on several servers
// gets each message exactly once cluster-wide; a publisher's server with a
// member keeps the messages local, and a server without one spreads them
// over the peers' members.
func TestClusterQueueGroup(t *testing.T) {
	c := clustertest.Start(t, 3, server.Options{})
	var mu sync.Mutex
	got := map[string]int{}    // message -> deliveries
	byServer := make([]int, 3) // deliveries per member's server
	for i := 1; i < 3; i++ {
		nc := c.Connect(t, i)
		for range 2 {
			_, err := nc.QueueSubscribe("work.>", "workers", func(m *nats.Msg) {
				mu.Lock()
				got[string(m.Data)]++
				byServer[i]++
				mu.Unlock()
			})
			require.NoError(t, err)
		}
		require.NoError(t, nc.Flush())
	}
	c.WaitInterest(t, "work.a", 1, 2)
	pub := c.Connect(t, 0) // no member on server 0
	const msgs = 400
	for k := range msgs {
		require.NoError(t, pub.Publish("work.a", fmt.Appendf(nil, "%d", k)))
	}
	require.NoError(t, pub.Flush())
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == msgs
	}, 5*time.Second, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond) // a duplicate would arrive now
	mu.Lock()
	for k, n := range got {
		require.Equal(t, 1, n, "message %s delivered %d times", k, n)
	}
	require.Positive(t, byServer[1], "both servers' members share the load")
	require.Positive(t, byServer[2], "both servers' members share the load")
	clear(got)
	byServer[1], byServer[2] = 0, 0
	mu.Unlock()

	// A publisher on server 1, which has members: they get everything.
	pub1 := c.Connect(t, 1)
	for k := range msgs {
		require.NoError(t, pub1.Publish("work.b", fmt.Appendf(nil, "%d", k)))
	}
	require.NoError(t, pub1.Flush())
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == msgs
	}, 5*time.Second, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, msgs, byServer[1], "local members are preferred")
	require.Zero(t, byServer[2])
}

// TestClusterRequestReply: a requester and a responder on different
// servers, and no-responders when nobody in the cluster listens.
func TestClusterRequestReply(t *testing.T) {
	c := clustertest.Start(t, 3, server.Options{})
	responder := c.Connect(t, 2)
	_, err := responder.Subscribe("svc.echo", func(m *nats.Msg) {
		r := nats.NewMsg(m.Reply)
		r.Data = append([]byte("echo "), m.Data...)
		r.Header.Set("Served-By", "s3")
		require.NoError(t, m.RespondMsg(r))
	})
	require.NoError(t, err)
	require.NoError(t, responder.Flush())
	c.WaitInterest(t, "svc.echo", 2)

	requester := c.Connect(t, 0)
	for k := range 20 {
		m, err := requester.Request("svc.echo", fmt.Appendf(nil, "%d", k), 2*time.Second)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("echo %d", k), string(m.Data))
		require.Equal(t, "s3", m.Header.Get("Served-By"), "headers pass through routes")
	}
	_, err = requester.Request("svc.nobody", nil, 2*time.Second)
	require.ErrorIs(t, err, nats.ErrNoResponders)
}

// TestClusterHeaders: a message's headers cross a route unchanged, and a
// subscriber without header support gets the payload alone.
func TestClusterHeaders(t *testing.T) {
	c := clustertest.Start(t, 3, server.Options{})
	sub := c.Connect(t, 1)
	s, err := sub.SubscribeSync("h")
	require.NoError(t, err)
	require.NoError(t, sub.Flush())
	c.WaitInterest(t, "h", 1)
	pub := c.Connect(t, 0)
	m := nats.NewMsg("h")
	m.Header.Add("A", "1")
	m.Header.Add("A", "2")
	m.Data = []byte("body")
	require.NoError(t, pub.PublishMsg(m))
	got, err := s.NextMsg(2 * time.Second)
	require.NoError(t, err)
	require.Equal(t, []string{"1", "2"}, got.Header.Values("A"))
	require.Equal(t, "body", string(got.Data))
}

// TestClusterWildcards: interest in *, > and # patterns on one server
// draws the matching messages from another, and only those.
func TestClusterWildcards(t *testing.T) {
	c := clustertest.Start(t, 3, server.Options{})
	for _, tc := range []struct {
		pattern     string
		match, miss []string
	}{
		{"a.*.c", []string{"a.b.c", "a.x.c"}, []string{"a.b", "a.b.c.d"}},
		{"b.>", []string{"b.x", "b.x.y"}, []string{"b", "c.x"}},
		{"*.stock.#", []string{"usd.stock", "eur.stock.db"}, []string{"stock.nasdaq", "usd.bond"}},
	} {
		t.Run(tc.pattern, func(t *testing.T) {
			nc := c.Connect(t, 2)
			sub, err := nc.SubscribeSync(tc.pattern)
			require.NoError(t, err)
			require.NoError(t, nc.Flush())
			c.WaitInterest(t, tc.match[0], 2)
			pub := c.Connect(t, 0)
			for _, subj := range append(tc.miss, tc.match...) {
				require.NoError(t, pub.Publish(subj, []byte(subj)))
			}
			require.NoError(t, pub.Flush())
			for _, want := range tc.match {
				m, err := sub.NextMsg(2 * time.Second)
				require.NoError(t, err)
				require.Equal(t, want, m.Subject)
			}
			_, err = sub.NextMsg(100 * time.Millisecond)
			require.ErrorIs(t, err, nats.ErrTimeout)
		})
	}
}

// TestClusterUnsubscribePropagates: when the last subscriber on a server
// goes (unsubscribe, auto-unsubscribe or disconnect), the peers drop the
// interest and stop forwarding.
func TestClusterUnsubscribePropagates(t *testing.T) {
	c := clustertest.Start(t, 3, server.Options{})
	nc := c.Connect(t, 1)
	s1, err := nc.SubscribeSync("u.>")
	require.NoError(t, err)
	s2, err := nc.SubscribeSync("u.>")
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	c.WaitInterest(t, "u.x", 1)
	require.NoError(t, s1.Unsubscribe())
	require.NoError(t, nc.Flush())
	time.Sleep(50 * time.Millisecond)
	require.True(t, c.Servers[0].HasInterest("u.x"), "one subscriber is left")
	require.NoError(t, s2.AutoUnsubscribe(1))
	pub := c.Connect(t, 0)
	require.NoError(t, pub.Publish("u.x", []byte("1")))
	require.NoError(t, pub.Flush())
	_, err = s2.NextMsg(2 * time.Second)
	require.NoError(t, err)
	c.WaitNoInterest(t, "u.x")

	// A disconnect takes the client's interest away too.
	nc2 := c.Connect(t, 2)
	_, err = nc2.SubscribeSync("v")
	require.NoError(t, err)
	require.NoError(t, nc2.Flush())
	c.WaitInterest(t, "v", 2)
	nc2.Close()
	c.WaitNoInterest(t, "v")
}

func allServers(n int) []int {
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	return all
}

// TestClusterMonitoring: /routez lists each peer with nats-server's field
// names, /varz counts the routes, /metrics has per-route series.
func TestClusterMonitoring(t *testing.T) {
	// Without a system account, whose interest would be in /routez too.
	c := clustertest.Start(t, 3, server.Options{HTTPPort: server.RandomPort, NoSystemAccount: true})
	sub := c.Connect(t, 1)
	_, err := sub.SubscribeSync("mon.>")
	require.NoError(t, err)
	require.NoError(t, sub.Flush())
	c.WaitInterest(t, "mon.x", 1)
	pub := c.Connect(t, 0)
	for range 5 {
		require.NoError(t, pub.Publish("mon.x", []byte("hello")))
	}
	require.NoError(t, pub.Flush())

	base := "http://" + c.Servers[0].MonitorAddr().String()
	var rz struct {
		ID        string `json:"server_id"`
		NumRoutes int    `json:"num_routes"`
		Routes    []struct {
			Rid        uint64   `json:"rid"`
			RemoteID   string   `json:"remote_id"`
			RemoteName string   `json:"remote_name"`
			IP         string   `json:"ip"`
			Port       int      `json:"port"`
			Pending    *int     `json:"pending_size"`
			OutMsgs    int64    `json:"out_msgs"`
			InMsgs     *int64   `json:"in_msgs"`
			NumSubs    uint32   `json:"subscriptions"`
			Subs       []string `json:"subscriptions_list"`
		} `json:"routes"`
	}
	require.Eventually(t, func() bool {
		getJSON(t, base+"/routez?subs=1", &rz)
		for _, r := range rz.Routes {
			if r.RemoteName == "s2" && r.OutMsgs == 5 {
				return true
			}
		}
		return false
	}, 5*time.Second, 10*time.Millisecond, "%+v", rz)
	require.Equal(t, c.Servers[0].ID(), rz.ID)
	require.Equal(t, 2, rz.NumRoutes)
	for _, r := range rz.Routes {
		require.NotZero(t, r.Rid)
		require.Equal(t, "127.0.0.1", r.IP)
		require.NotZero(t, r.Port)
		require.NotNil(t, r.Pending)
		require.NotNil(t, r.InMsgs)
		if r.RemoteName == "s2" {
			require.Equal(t, c.Servers[1].ID(), r.RemoteID)
			require.Equal(t, uint32(1), r.NumSubs)
			require.Equal(t, []string{"$G mon.>"}, r.Subs) // account, subject
		}
	}
	var vz struct {
		Routes  int `json:"routes"`
		Cluster struct {
			Name string `json:"name"`
			Port int    `json:"cluster_port"`
		} `json:"cluster"`
	}
	getJSON(t, base+"/varz", &vz)
	require.Equal(t, 2, vz.Routes)
	require.Equal(t, "test", vz.Cluster.Name)
	require.NotZero(t, vz.Cluster.Port)

	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Contains(t, string(body), "skiff_routes 2")
	require.Contains(t, string(body), fmt.Sprintf(`skiff_route_out_msgs_total{remote_id=%q,remote_name="s2"} 5`, c.Servers[1].ID()))
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
}

// TestClusterQueueWeights: a server without members spreads a queue
// group's messages over the peers in proportion to their members (the
// weight in RS+), so that each member cluster-wide gets about the same
// share; the shares follow the weights as members come and go.
func TestClusterQueueWeights(t *testing.T) {
	c := clustertest.Start(t, 3, server.Options{})
	var mu sync.Mutex
	byServer := make([]int, 3)
	subscribe := func(i int) *nats.Subscription {
		nc := c.Connect(t, i)
		s, err := nc.QueueSubscribe("qw", "g", func(*nats.Msg) {
			mu.Lock()
			byServer[i]++
			mu.Unlock()
		})
		require.NoError(t, err)
		require.NoError(t, nc.Flush())
		return s
	}
	subscribe(1)
	var on2 []*nats.Subscription
	for range 3 {
		on2 = append(on2, subscribe(2))
	}
	waitWeight := func(peer, want int) {
		t.Helper()
		require.Eventually(t, func() bool {
			return c.Servers[0].PeerQueueWeight(c.Servers[peer].ID(), "qw", "g") == want
		}, clustertest.Wait, 5*time.Millisecond, "server %d's weight did not reach %d", peer, want)
	}
	waitWeight(1, 1)
	waitWeight(2, 3)
	pub := c.Connect(t, 0) // no member here: every message goes to a peer
	share := func(msgs int) float64 {
		t.Helper()
		mu.Lock()
		byServer[1], byServer[2] = 0, 0
		mu.Unlock()
		for range msgs {
			require.NoError(t, pub.Publish("qw", nil))
		}
		require.NoError(t, pub.Flush())
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return byServer[1]+byServer[2] == msgs
		}, 10*time.Second, 10*time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		return float64(byServer[2]) / float64(msgs)
	}
	// 1 member against 3: server 2 gets 3/4. With 4000 messages the
	// standard deviation of the share is under 0.007; the bounds are ±0.1.
	got := share(4000)
	t.Logf("server 2's share with weights 1:3: %.3f", got)
	require.InDelta(t, 0.75, got, 0.1)

	for _, s := range on2[:2] {
		require.NoError(t, s.Unsubscribe())
	}
	waitWeight(2, 1)
	got = share(4000)
	t.Logf("server 2's share with weights 1:1: %.3f", got)
	require.InDelta(t, 0.5, got, 0.1)
}
