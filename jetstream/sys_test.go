package jetstream_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/internal/natscli"
	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// startSysBroker starts a broker with accounts SYS (the system account,
// user sys), A and B (users a and b, with JetStream), and streams ORDERS
// in A (three messages) and EVENTS in B.
func startSysBroker(t *testing.T) *broker {
	t.Helper()
	b := startBrokerConfigured(t, jetstream.Options{}, func(o *server.Options) {
		o.SystemAccount = "SYS"
		o.Accounts = []server.AccountConfig{
			{Name: "SYS", Users: []server.User{{Name: "sys", Password: "sys"}}},
			{Name: "A", Users: []server.User{{Name: "a", Password: "a"}}, JetStream: &server.JetStreamLimits{}},
			{Name: "B", Users: []server.User{{Name: "b", Password: "b"}}, JetStream: &server.JetStreamLimits{}},
		}
	})
	for _, tc := range []struct{ user, stream, subject string }{{"a", "ORDERS", "orders.>"}, {"b", "EVENTS", "events.>"}} {
		nc, js := connectUser(t, b, tc.user)
		_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: tc.stream, Subjects: []string{tc.subject}})
		require.NoError(t, err)
		if tc.user == "a" {
			for range 3 {
				_, err := js.Publish(ctx(t), "orders.new", []byte("order"))
				require.NoError(t, err)
			}
		}
		nc.Close()
	}
	return b
}

// TestSysJSZ: JetStream answers JSZ on $SYS, about the server (every
// account) and about one account, in nats-server's shapes.
func TestSysJSZ(t *testing.T) {
	b := startSysBroker(t)
	sys, _ := connectUser(t, b, "sys")

	request := func(subj string, body any) []byte {
		t.Helper()
		data, err := json.Marshal(body)
		require.NoError(t, err)
		resp, err := sys.Request(subj, data, 5*time.Second)
		require.NoError(t, err)
		return resp.Data
	}
	var all natsserver.ServerAPIJszResponse
	require.NoError(t, json.Unmarshal(request("$SYS.REQ.SERVER.PING.JSZ", natsserver.JSzOptions{Accounts: true}), &all))
	require.Nil(t, all.Error)
	require.Equal(t, b.srv.ID(), all.Server.ID)
	require.True(t, all.Server.JetStream)
	require.Equal(t, 2, all.Data.Streams)
	require.Equal(t, uint64(3), all.Data.Messages)
	require.Equal(t, 2, all.Data.Accounts, "A and B; not the system account")
	var names []string
	for _, d := range all.Data.AccountDetails {
		names = append(names, d.Name)
	}
	require.ElementsMatch(t, []string{"A", "B"}, names)

	var one natsserver.ServerAPIJszResponse
	require.NoError(t, json.Unmarshal(request("$SYS.REQ.SERVER.PING.JSZ", natsserver.JSzOptions{Account: "B", Streams: true}), &one))
	require.Len(t, one.Data.AccountDetails, 1)
	require.Equal(t, "B", one.Data.AccountDetails[0].Name)
	require.Equal(t, "EVENTS", one.Data.AccountDetails[0].Streams[0].Name)

	var acc struct {
		Data  *natsserver.AccountDetail `json:"data"`
		Error *natsserver.ApiError      `json:"error"`
	}
	require.NoError(t, json.Unmarshal(request("$SYS.REQ.ACCOUNT.A.JSZ", natsserver.JSzOptions{Streams: true}), &acc))
	require.Nil(t, acc.Error)
	require.Equal(t, "A", acc.Data.Name)
	require.Len(t, acc.Data.Streams, 1)
	require.Equal(t, uint64(3), acc.Data.Streams[0].State.Msgs)
	require.NoError(t, json.Unmarshal(request("$SYS.REQ.ACCOUNT.SYS.JSZ", nil), &acc))
	require.NotNil(t, acc.Error, "no JetStream in the system account")
	require.Contains(t, acc.Error.Description, "not jetstream enabled")

	// ACCOUNTZ says which accounts JetStream serves.
	for name, want := range map[string]bool{"A": true, "B": true, "SYS": false, "$G": false} {
		var az natsserver.ServerAPIAccountzResponse
		require.NoError(t, json.Unmarshal(request("$SYS.REQ.SERVER.PING.ACCOUNTZ", natsserver.AccountzOptions{Account: name}), &az))
		require.Nil(t, az.Error, name)
		require.Equal(t, want, az.Data.Account.JetStream, name)
	}
}

// TestSysCLIReportJetStream: `nats server report jetstream` and `nats
// server request jetstream` as a user of the system account.
func TestSysCLIReportJetStream(t *testing.T) {
	b := startSysBroker(t)
	cli := natscli.New(t, natscli.Path(t), b.srv.ClientURL())
	run := func(args ...string) string {
		t.Helper()
		return cli.Run(append([]string{"--user", "sys", "--password", "sys"}, args...)...)
	}
	out := run("server", "report", "jetstream")
	require.Contains(t, out, "JetStream Summary")
	name := b.srv.Name()[:8] // compacted by the CLI
	require.Regexp(t, `│ `+name+`\S* +│ +│ 2 +│ 0 +│ 3 +│`, out, "streams, consumers, messages")

	out = run("server", "report", "jetstream", "--account", "A")
	require.Contains(t, out, "JetStream Summary for Account A")
	require.Regexp(t, `│ 1 +│ 0 +│ 3 +│`, out)

	out = run("server", "request", "jetstream", "--accounts")
	var resp natsserver.ServerAPIJszResponse
	require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(out)), &resp), out)
	require.Len(t, resp.Data.AccountDetails, 2)
}

// TestSysAccountLeavesGlobalJetStream: a configuration whose only account
// is the system account keeps JetStream in the global account, as
// nats-server does, and never gives it to the system account.
func TestSysAccountLeavesGlobalJetStream(t *testing.T) {
	b := startBrokerConfigured(t, jetstream.Options{}, func(o *server.Options) {
		o.SystemAccount = "SYS"
		o.Users = []server.User{{Name: "g", Password: "g"}}
		o.Accounts = []server.AccountConfig{{Name: "SYS", Users: []server.User{{Name: "sys", Password: "sys"}}}}
	})
	_, js := connectUser(t, b, "g")
	_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "G", Subjects: []string{"g.>"}})
	require.NoError(t, err, "$G has JetStream")
	_, sysJS := connectUser(t, b, "sys")
	_, err = sysJS.AccountInfo(ctx(t))
	require.Error(t, err, "the system account has none")
}

// TestSysCLIReportJetStreamCluster: `nats server report jetstream` as a
// user of the system account, through one server of a three-server
// cluster with JetStream: every server's row (the stream counted on the
// server it is placed on), and the meta group with every server.
func TestSysCLIReportJetStreamCluster(t *testing.T) {
	jc := startJSClusterWith(t, 3, server.Options{SystemAccount: "SYS", Accounts: []server.AccountConfig{
		{Name: "SYS", Users: []server.User{{Name: "sys", Password: "sys"}}},
		{Name: "A", Users: []server.User{{Name: "a", Password: "a"}}, JetStream: &server.JetStreamLimits{}},
	}})
	jc.waitMeta(t)
	js, err := jc.Connect(t, 1, nats.UserInfo("a", "a")).JetStream(nats.MaxWait(clustertest.Wait))
	require.NoError(t, err)
	_, err = js.AddStream(&nats.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	require.NoError(t, err)
	for range 3 {
		_, err := js.Publish("orders.new", []byte("order"))
		require.NoError(t, err)
	}
	placed := jc.placementIn(t, "A", "ORDERS")
	leader, _ := jc.raft(0).Leader()

	cli := natscli.New(t, natscli.Path(t), jc.URL(2))
	out := cli.Run("--user", "sys", "--password", "sys", "server", "report", "jetstream")
	require.Contains(t, out, "JetStream Summary")
	for _, s := range jc.Servers {
		row := `│ 0 +│ 0 +│ 0 +│`
		if s.Name() == placed {
			row = `│ 1 +│ 0 +│ 3 +│`
		}
		require.Regexp(t, `│ `+s.Name()+`\*? +│ test +`+row, out, "the row of %s", s.Name())
	}
	require.Contains(t, out, "RAFT Meta Group Information")
	for _, s := range jc.Servers {
		require.Regexp(t, `│ `+s.Name()+` +│ \S+ +│ (yes|   ) +│ true +│ true +│`, out, "meta group member %s", s.Name())
	}
	require.Regexp(t, `│ `+leader+` +│ \S+ +│ yes +│`, out)
}

// TestSysRaftz: RAFTZ, through one server of three, answers from each: the
// meta group (three voters, one leader among the answers) and an R3
// stream's group on every server; `nats server request raft` shows it.
func TestSysRaftz(t *testing.T) {
	jc := startJSClusterEach(t, make([]string, 3), server.Options{SystemAccount: "SYS", Accounts: []server.AccountConfig{
		{Name: "SYS", Users: []server.User{{Name: "sys", Password: "sys"}}},
		{Name: "A", Users: []server.User{{Name: "a", Password: "a"}}, JetStream: &server.JetStreamLimits{}},
	}}, nil)
	jc.waitMeta(t)
	js, err := jc.Connect(t, 0, nats.UserInfo("a", "a")).JetStream(nats.MaxWait(clustertest.Wait))
	require.NoError(t, err)
	_, err = js.AddStream(&nats.StreamConfig{Name: "R", Subjects: []string{"r"}, Replicas: 3})
	require.NoError(t, err)

	type group struct {
		State     string `json:"state"`
		Size      int    `json:"size"`
		SystemAcc bool   `json:"system_account"`
		Peers     map[string]struct {
			Known bool `json:"known"`
		} `json:"peers"`
	}
	sys := jc.Connect(t, 1, nats.UserInfo("sys", "sys"))
	var streamGroup string
	require.Eventually(t, func() bool {
		inbox := nats.NewInbox()
		sub, err := sys.SubscribeSync(inbox)
		require.NoError(t, err)
		defer func() { _ = sub.Unsubscribe() }()
		require.NoError(t, sys.PublishRequest("$SYS.REQ.SERVER.PING.RAFTZ", inbox, nil))
		metaLeaders, streamLeaders := 0, 0
		for range 3 {
			m, err := sub.NextMsg(clustertest.Wait)
			require.NoError(t, err)
			var resp struct {
				Data map[string]map[string]group `json:"data"`
			}
			require.NoError(t, json.Unmarshal(m.Data, &resp), string(m.Data))
			meta, ok := resp.Data["SYS"]["_meta_"]
			if !ok || meta.Size != 3 || len(meta.Peers) != 2 || len(resp.Data["A"]) != 1 {
				return false
			}
			if meta.State == "LEADER" {
				metaLeaders++
			}
			require.True(t, meta.SystemAcc, "the meta group's traffic is the system account's")
			for name, g := range resp.Data["A"] {
				streamGroup = name
				if g.Size != 3 {
					return false
				}
				require.True(t, g.SystemAcc, "a stream group's traffic is the system account's, as its stream info says")
				if g.State == "LEADER" {
					streamLeaders++
				}
			}
		}
		return metaLeaders == 1 && streamLeaders == 1
	}, clustertest.Wait, 50*time.Millisecond)
	require.Regexp(t, `^S-R3-\d+$`, streamGroup)

	out := natscli.New(t, natscli.Path(t), jc.URL(2)).Run("--user", "sys", "--password", "sys", "server", "request", "raft")
	require.Contains(t, out, `"_meta_"`)
	require.Contains(t, out, streamGroup)
}

// TestMetaLeaderStepdown: a user of the system account has the meta leader
// step down, through any server, to a preferred server or another; the
// nats CLI's `server cluster step-down` does it too; a tenant cannot.
func TestMetaLeaderStepdown(t *testing.T) {
	jc := startJSClusterWith(t, 3, server.Options{SystemAccount: "SYS", Accounts: []server.AccountConfig{
		{Name: "SYS", Users: []server.User{{Name: "sys", Password: "sys"}}},
		{Name: "A", Users: []server.User{{Name: "a", Password: "a"}}, JetStream: &server.JetStreamLimits{}},
	}})
	jc.waitMeta(t)
	leader := func() string {
		name, _ := jc.raft(0).Leader()
		return name
	}
	old := leader()
	other := jc.Servers[(jc.index(old)+1)%3].Name()
	sys := jc.Connect(t, 2, nats.UserInfo("sys", "sys"))
	m, err := sys.Request("$JS.API.META.LEADER.STEPDOWN", []byte(`{"placement":{"preferred":"`+other+`"}}`), clustertest.Wait)
	require.NoError(t, err)
	require.JSONEq(t, `{"type":"io.nats.jetstream.api.v1.meta_leader_stepdown_response","success":true}`, string(m.Data))
	require.Eventually(t, func() bool { return leader() == other }, clustertest.Wait, 10*time.Millisecond, "%s leads", other)
	jc.waitMeta(t)

	m, err = sys.Request("$JS.API.META.LEADER.STEPDOWN", []byte(`{"placement":{"preferred":"nobody"}}`), clustertest.Wait)
	require.NoError(t, err)
	require.Contains(t, string(m.Data), `"err_code":10041`)

	out := natscli.New(t, natscli.Path(t), jc.URL(0)).Run("--user", "sys", "--password", "sys", "server", "cluster", "step-down", "--force")
	t.Log(out)
	require.Eventually(t, func() bool { l := leader(); return l != "" && l != other }, clustertest.Wait, 10*time.Millisecond)

	jc.waitMeta(t)
	before := leader()
	tenant := jc.Connect(t, 1, nats.UserInfo("a", "a"))
	_, err = tenant.Request("$JS.API.META.LEADER.STEPDOWN", nil, 500*time.Millisecond)
	require.Error(t, err, "a tenant gets no answer")
	require.Never(t, func() bool { return leader() != before }, 500*time.Millisecond, 50*time.Millisecond)
}
