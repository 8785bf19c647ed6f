package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/server"
)

// TestClusterAccountsIsolation: three servers, two accounts using the same
// subjects: interest and messages cross routes in their own account only,
// queue groups are per account, and requests are answered only in the
// requester's account.
func TestClusterAccountsIsolation(t *testing.T) {
	c := clustertest.Start(t, 3, accountsOptions())
	as := func(i int, user string) *nats.Conn { return c.Connect(t, i, nats.UserInfo(user, user)) }
	a1, b1, g1 := as(0, "a"), as(0, "b"), as(0, "g")
	a2, b2 := as(1, "a"), as(1, "b")
	a3, b3 := as(2, "a2"), as(2, "b2")

	t.Run("subscriptions", func(t *testing.T) {
		aSub, err := a1.SubscribeSync("orders.new")
		require.NoError(t, err)
		var others []*nats.Subscription
		for _, nc := range []*nats.Conn{b1, g1} {
			for _, subj := range []string{"orders.new", ">"} {
				sub, err := nc.SubscribeSync(subj)
				require.NoError(t, err)
				others = append(others, sub)
			}
			require.NoError(t, nc.Flush())
		}
		require.NoError(t, a1.Flush())
		c.WaitAccountInterest(t, "A", "orders.new", 0)
		c.WaitAccountInterest(t, "B", "orders.new", 0)
		c.WaitInterest(t, "orders.new", 0)

		require.NoError(t, a3.Publish("orders.new", []byte("A")))
		requireNext(t, aSub, "A")
		require.NoError(t, b3.Publish("orders.new", []byte("B")))
		require.NoError(t, b3.Flush())
		got, err := others[0].NextMsg(5 * time.Second) // b1's orders.new
		require.NoError(t, err)
		require.Equal(t, "B", string(got.Data), "B's own message crosses the route in B")
		got, err = others[1].NextMsg(5 * time.Second) // b1's >
		require.NoError(t, err)
		require.Equal(t, "B", string(got.Data))
		for _, sub := range others {
			requireNothing(t, sub, a3, b1, g1)
		}
		requireNothing(t, aSub, b3, a1)
		unsubscribe(t, others, []*nats.Subscription{aSub})
	})

	t.Run("queue groups", func(t *testing.T) {
		var members [2][]*nats.Subscription // A's, B's; all on server 2
		for i, nc := range []*nats.Conn{a2, b2} {
			for range 2 {
				sub, err := nc.QueueSubscribeSync("work", "q")
				require.NoError(t, err)
				members[i] = append(members[i], sub)
			}
			require.NoError(t, nc.Flush())
		}
		c.WaitAccountInterest(t, "A", "work", 1)
		c.WaitAccountInterest(t, "B", "work", 1)
		for range 30 {
			require.NoError(t, a3.Publish("work", []byte("a")))
		}
		for range 20 {
			require.NoError(t, b1.Publish("work", []byte("b")))
		}
		require.NoError(t, a3.Flush())
		require.NoError(t, b1.Flush())
		count := func(subs []*nats.Subscription, want string) int {
			n := 0
			for _, sub := range subs {
				for {
					m, err := sub.NextMsg(100 * time.Millisecond)
					if err != nil {
						break
					}
					require.Equal(t, want, string(m.Data), "a message of the other account")
					n++
				}
			}
			return n
		}
		require.Equal(t, 30, count(members[0], "a"), "each of A's messages to one of A's members")
		require.Equal(t, 20, count(members[1], "b"))
		unsubscribe(t, members[0], members[1])
	})

	t.Run("request reply", func(t *testing.T) {
		svc, err := a2.Subscribe("svc", func(m *nats.Msg) { _ = m.Respond([]byte("A on s2")) })
		require.NoError(t, err)
		require.NoError(t, a2.Flush())
		c.WaitAccountInterest(t, "A", "svc", 1)
		inbox, err := b1.SubscribeSync("_INBOX.>")
		require.NoError(t, err)
		require.NoError(t, b1.Flush())
		c.WaitAccountInterest(t, "B", "_INBOX.x", 0)

		m, err := a3.Request("svc", []byte("q"), 5*time.Second)
		require.NoError(t, err)
		require.Equal(t, "A on s2", string(m.Data))
		_, err = b3.Request("svc", []byte("q"), 5*time.Second)
		require.ErrorIs(t, err, nats.ErrNoResponders, "A's responder on another server does not answer B")
		requireNothing(t, inbox, a3, a2, b1)
		require.NoError(t, svc.Unsubscribe())
	})
}

// TestRouteAccounts: a route's RS+, RS- and RMSG carry the account and are
// honoured in it; those for an account this server does not have are
// dropped and counted (/routez unknown_account).
func TestRouteAccounts(t *testing.T) {
	o := accountsOptions()
	o.NoSystemAccount = true // the peer reads what it is told line by line
	o.Cluster = server.ClusterOptions{Name: "acc", Port: server.RandomPort}
	s := RunMonitored(t, o)
	r := dialRoute(t, s)
	r.register("acc", "NACCOUNTSPEER")

	// Local interest is told with its account.
	a := connectAs(t, s, "a")
	aSub, err := a.SubscribeSync("in")
	require.NoError(t, err)
	require.NoError(t, a.Flush())
	line := r.readLine()
	for line == "PING" || strings.HasPrefix(line, "INFO ") {
		line = r.readLine()
	}
	require.Equal(t, "RS+ A in", line)

	// A peer's interest lands in its account.
	r.send("RS+ B out\r\nRS+ Z out\r\nRS+ Z out q 2\r\n")
	accB, _ := s.LookupAccount("B")
	require.Eventually(t, func() bool { return accB.PeerHasInterest("NACCOUNTSPEER", "out") }, 5*time.Second, 5*time.Millisecond)
	accA, _ := s.LookupAccount("A")
	require.False(t, accA.PeerHasInterest("NACCOUNTSPEER", "out"))
	b := connectAs(t, s, "b")
	require.NoError(t, b.Publish("out", []byte("b")))
	line, payload := r.readUntil("RMSG ")
	require.Equal(t, "RMSG B out 1", line)
	require.Equal(t, "b", payload)
	require.NoError(t, a.Publish("out", []byte("a")))
	require.NoError(t, a.Flush()) // A has no peer interest in out: nothing forwarded

	// A peer's messages are delivered in their account only.
	r.send("RMSG B in 1\r\nb\r\nRMSG Z in 1\r\nz\r\nRMSG A in 1\r\na\r\n")
	m, err := aSub.NextMsg(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "a", string(m.Data), "B's and Z's messages are not A's")
	r.send("RS- Z out\r\nRS- B out\r\n")
	require.Eventually(t, func() bool { return !accB.PeerHasInterest("NACCOUNTSPEER", "out") }, 5*time.Second, 5*time.Millisecond)
	requireNothing(t, aSub, a)

	var rz server.Routez
	require.Eventually(t, func() bool {
		MonitorJSON(t, s, "/routez", &rz)
		return len(rz.Routes) == 1 && rz.Routes[0].UnknownAccount == 4
	}, 5*time.Second, 10*time.Millisecond, "RS+ Z twice, RMSG Z, RS- Z: %+v", rz.Routes)
}
