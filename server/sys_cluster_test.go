package server_test

import (
	"encoding/json"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
)

// TestSysClusterPing: a request to $SYS.REQ.SERVER.PING reaches every
// server of the cluster, and each answers, wherever the requester is.
func TestSysClusterPing(t *testing.T) {
	c := clustertest.Start(t, 3, sysOptions())
	c.WaitAccountInterest(t, "SYS", "$SYS.REQ.SERVER.PING", 0, 1, 2)
	sys := connectAs(t, c.Servers[1], "sys")
	inbox := nats.NewInbox()
	sub, err := sys.SubscribeSync(inbox)
	require.NoError(t, err)
	require.NoError(t, sys.PublishRequest("$SYS.REQ.SERVER.PING", inbox, nil))
	ids := map[string]int{}
	for range 3 {
		m, err := sub.NextMsg(5 * time.Second)
		require.NoError(t, err)
		var ssm natsserver.ServerStatsMsg
		require.NoError(t, json.Unmarshal(m.Data, &ssm))
		ids[ssm.Server.ID] = ssm.Stats.ActiveServers
		require.Equal(t, "test", ssm.Server.Cluster)
		require.Len(t, ssm.Stats.Routes, 2)
	}
	require.Equal(t, map[string]int{c.Servers[0].ID(): 3, c.Servers[1].ID(): 3, c.Servers[2].ID(): 3}, ids)
	requireNoMsg(t, sub)
}

// TestSysClusterTenantConnz: a tenant's PING.CONNZ, through its system
// import, is answered by every server, each with the tenant's
// connections there only.
func TestSysClusterTenantConnz(t *testing.T) {
	c := clustertest.Start(t, 3, sysOptions())
	c.WaitAccountInterest(t, "SYS", "$SYS.REQ.ACCOUNT.*.CONNZ", 0, 1, 2)
	for i := range 3 {
		connectAs(t, c.Servers[i], "a", nats.Name("a-"+c.Servers[i].Name()))
		connectAs(t, c.Servers[i], "b", nats.Name("b-"+c.Servers[i].Name()))
	}
	a := connectAs(t, c.Servers[0], "a2")
	inbox := nats.NewInbox()
	sub, err := a.SubscribeSync(inbox)
	require.NoError(t, err)
	require.NoError(t, a.PublishRequest("$SYS.REQ.SERVER.PING.CONNZ", inbox, nil))
	names := map[string][]string{}
	for range 3 {
		m, err := sub.NextMsg(5 * time.Second)
		require.NoError(t, err)
		var r natsserver.ServerAPIConnzResponse
		require.NoError(t, json.Unmarshal(m.Data, &r))
		require.Nil(t, r.Error)
		for _, ci := range r.Data.Conns {
			names[r.Server.Name] = append(names[r.Server.Name], ci.Name)
		}
	}
	require.Equal(t, map[string][]string{"s1": {"a-s1", ""}, "s2": {"a-s2"}, "s3": {"a-s3"}}, names)
	requireNoMsg(t, sub)
}

// TestSysClusterMaxConnections: an account's max_connections counts its
// clients on every server, as the servers' $SYS connection counts tell;
// a server that shuts down gives its clients' places back.
func TestSysClusterMaxConnections(t *testing.T) {
	o := sysOptions()
	o.Accounts[1].Limits.MaxConnections = 2
	c := clustertest.Start(t, 3, o)
	c.WaitAccountInterest(t, "SYS", "$SYS.SERVER.ACCOUNT.A.CONNS", 0, 1, 2)
	connectAs(t, c.Servers[0], "a", nats.NoReconnect())
	connectAs(t, c.Servers[1], "a2", nats.NoReconnect())

	// The counts are the peers' last reports: once every server has
	// heard the others', A is full everywhere. The test waits for that
	// rather than probing: a probe let in by a server that has not heard
	// yet puts A over its limit once the counts agree, and every server
	// then closes its newest clients (enforceMaxConns, as nats-server
	// does), the first two included.
	counts := func() [3][2]int {
		var n [3][2]int
		for i := range 3 {
			if c.Servers[i] == nil {
				continue // stopped
			}
			if a, ok := c.Servers[i].LookupAccount("A"); ok {
				n[i] = [2]int{a.NumConnections(), a.NumRemoteConnections()}
			}
		}
		return n
	}
	want := [3][2]int{{1, 1}, {1, 1}, {0, 2}}
	require.Eventually(t, func() bool { return counts() == want }, 10*time.Second, 10*time.Millisecond,
		"each server counts A's clients here and on its peers")
	// Only s3: a client refused by one server tries the others its INFO
	// told of.
	_, err := nats.Connect(c.URL(2), nats.UserInfo("a", "a"), nats.NoReconnect(), nats.IgnoreDiscoveredServers())
	require.ErrorContains(t, err, "maximum account active connections exceeded", "one on s1, one on s2: A is full (counts %v)", counts())

	c.Stop(t, 1)
	require.Eventually(t, func() bool { return counts()[2] == [2]int{0, 1} }, 10*time.Second, 10*time.Millisecond,
		"s2's SHUTDOWN drops its count")
	nc, err := nats.Connect(c.URL(2), nats.UserInfo("a", "a"), nats.NoReconnect())
	require.NoError(t, err)
	nc.Close()
}
