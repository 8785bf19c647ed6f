package server_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/broker"
	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// monitorConf is the accounts configuration of the account monitoring
// tests, shared with their differential against nats-server.
const (
	monitorConf      = "testdata/diff/conf/monitor.conf"
	monitorNkeySeed  = "SUALE5T2WGR4HLL6GULXOYITUXHD7VMCIPIZOJKLDANOUCJILQ62GW2A4M"
	monitorNkeyUser  = "UBQRXNXK77UKJMN7NFC2K257OCGEIRX52BTH7NAX2RYWAWYUTU7H27L7"
	monitorWaitLimit = 5 * time.Second
)

// accountsServer starts Skiff with monitor.conf and monitoring; mod, if
// not nil, changes the options first.
func accountsServer(t *testing.T, mod func(*server.Options)) *server.Server {
	t.Helper()
	bc, err := broker.LoadConfig(monitorConf)
	require.NoError(t, err)
	o := bc.Server
	if mod != nil {
		mod(&o)
	}
	return RunMonitored(t, o)
}

// accountTraffic is a fixed workload over every account of monitor.conf,
// the same on any server: clients a, n (A's nkey user) and a2 in A, b and
// b2 in B, c in C and g in the global account. Once it returns, every
// message it sent has been delivered, and a2 has closed: clients, the
// server's count of its clients, is 6.
type accountTraffic struct {
	a, n, a2, b, b2, c, g *nats.Conn
}

func runAccountTraffic(t *testing.T, url string, clients func() int) *accountTraffic {
	t.Helper()
	conn := func(name string, opt nats.Option) *nats.Conn {
		nc, err := nats.Connect(url, nats.MaxReconnects(0), nats.Name(name), opt)
		require.NoError(t, err)
		t.Cleanup(nc.Close)
		return nc
	}
	user := func(u string) nats.Option { return nats.UserInfo(u, u) }
	kp, err := nkeys.FromSeed([]byte(monitorNkeySeed))
	require.NoError(t, err)
	tr := &accountTraffic{
		a: conn("a", user("a")), n: conn("n", nkeyOption(kp, monitorNkeyUser)), a2: conn("a2", user("a2")),
		b: conn("b", user("b")), b2: conn("b2", user("b2")), c: conn("c", user("c")), g: conn("g", user("g")),
	}
	sub := func(nc *nats.Conn, subj string) *nats.Subscription {
		s, err := nc.SubscribeSync(subj)
		require.NoError(t, err)
		return s
	}
	flush := func(ncs ...*nats.Conn) {
		for _, nc := range ncs {
			require.NoError(t, nc.Flush())
		}
	}
	pub := func(nc *nats.Conn, subj, data string, n int) {
		for range n {
			require.NoError(t, nc.Publish(subj, []byte(data)))
		}
	}
	next := func(s *nats.Subscription, n int) *nats.Msg {
		var m *nats.Msg
		for range n {
			var err error
			m, err = s.NextMsg(monitorWaitLimit)
			require.NoError(t, err, "%s", s.Subject)
		}
		return m
	}

	echo, stream, aWork := sub(tr.a, "svc.echo"), sub(tr.a, "svc.stream"), sub(tr.a, "work")
	events, private, tenant, replies := sub(tr.b, "a.events.>"), sub(tr.b, "pa.private.>"), sub(tr.b, "tenant.B.events"), sub(tr.b, "reply.>")
	cWork, gWork := sub(tr.c, "work"), sub(tr.g, "work")
	tmp := sub(tr.c, "tmp")
	require.NoError(t, tmp.Unsubscribe())
	flush(tr.a, tr.b, tr.c, tr.g)

	pub(tr.a2, "work", "hello", 3)
	pub(tr.a2, "events.1", "ev", 2)
	pub(tr.a2, "private.x", "p", 1)
	pub(tr.a2, "tenant.B.events", "t", 1)
	flush(tr.a2)
	// Three requests across B's service imports; A answers the first,
	// so the other two stay open in A's response table.
	require.NoError(t, tr.b.PublishRequest("echo", "reply.1", []byte("ping")))
	require.NoError(t, tr.b.PublishRequest("echo", "reply.2", []byte("hold")))
	require.NoError(t, tr.b.PublishRequest("svc.stream", "reply.3", []byte("s")))
	flush(tr.b)
	ping := next(echo, 1)
	require.Equal(t, "ping", string(ping.Data))
	require.NoError(t, ping.Respond([]byte("ok:ping")))
	flush(tr.a)
	require.Equal(t, "hold", string(next(echo, 1).Data))
	next(stream, 1)
	require.Equal(t, "ok:ping", string(next(replies, 1).Data))
	pub(tr.c, "work", "cc", 2)
	pub(tr.g, "work", "gg", 1)
	flush(tr.c, tr.g)

	next(aWork, 3)
	next(cWork, 2)
	next(gWork, 1)
	next(events, 2)
	next(private, 1)
	next(tenant, 1)
	tr.a2.Close()
	require.Eventually(t, func() bool { return clients() == 6 }, monitorWaitLimit, 10*time.Millisecond)
	return tr
}

func accountz(t *testing.T, s *server.Server, query string) server.Accountz {
	t.Helper()
	var az server.Accountz
	MonitorJSON(t, s, "/accountz"+query, &az)
	return az
}

func TestMonitorAccountz(t *testing.T) {
	s := accountsServer(t, nil)
	az := accountz(t, s, "")
	require.Equal(t, s.ID(), az.ID)
	require.Equal(t, []string{"$G", "A", "B", "C"}, az.Accounts)
	require.Nil(t, az.Account)
	require.Empty(t, az.SystemAccount, "Skiff has no system account yet")

	runAccountTraffic(t, s.ClientURL(), s.NumClients)
	service := func(subj, rt string, accounts ...string) server.ExtExport {
		return server.ExtExport{Subject: subj, Type: "service", ResponseType: rt, ApprovedAccounts: accounts}
	}
	stream := func(subj string, accounts ...string) server.ExtExport {
		return server.ExtExport{Subject: subj, Type: "stream", ApprovedAccounts: accounts}
	}
	for _, tc := range []struct {
		acc     string
		conns   int
		exports []server.ExtExport
		imports []server.ExtImport
	}{
		{acc: "$G", conns: 1},
		{acc: "A", conns: 2, exports: []server.ExtExport{
			service("svc.echo", "Singleton"), service("svc.stream", "Streamed"), service("svc.chunk", "Chunked", "B"),
			stream("events.>"), stream("private.>", "B", "C"), stream("tenant.*.events"),
		}},
		{acc: "B", conns: 2, imports: []server.ExtImport{
			{Subject: "events.>", Account: "A", LocalSubject: "a.events.>", Type: "stream"},
			{Subject: "private.>", Account: "A", LocalSubject: "pa.private.>", Type: "stream"},
			{Subject: "tenant.B.events", Account: "A", LocalSubject: "tenant.B.events", Type: "stream"},
			{Subject: "svc.echo", Account: "A", To: "echo", LocalSubject: "echo", Type: "service", Share: true},
			{Subject: "svc.stream", Account: "A", To: "svc.stream", LocalSubject: "svc.stream", Type: "service"},
			{Subject: "svc.chunk", Account: "A", To: "chunk", LocalSubject: "chunk", Type: "service"},
		}},
		{acc: "C", conns: 1},
	} {
		t.Run(tc.acc, func(t *testing.T) {
			az := accountz(t, s, "?acc="+url.QueryEscape(tc.acc))
			require.Nil(t, az.Accounts)
			ai := az.Account
			require.NotNil(t, ai)
			require.Equal(t, tc.acc, ai.AccountName)
			require.Equal(t, tc.acc, ai.NameTag)
			require.False(t, ai.LastUpdate.IsZero())
			require.False(t, ai.LastUpdate.After(time.Now()))
			require.True(t, ai.Complete)
			require.False(t, ai.Expired)
			require.False(t, ai.IsSystem)
			require.False(t, ai.JetStream)
			require.Zero(t, ai.LeafCnt)
			require.Equal(t, tc.conns, ai.ClientCnt)
			require.Equal(t, tc.exports, ai.Exports)
			require.Equal(t, tc.imports, ai.Imports)
			sz := getSubsz(t, s, "?acc="+url.QueryEscape(tc.acc))
			require.Equal(t, sz.NumSubs, ai.SubCnt)
			require.Equal(t, ai.SubCnt, ai.Sublist.NumSubs)
			require.Equal(t, sz.NumInserts, ai.Sublist.NumInserts)
			require.Equal(t, sz.NumRemoves, ai.Sublist.NumRemoves)
			require.Equal(t, sz.NumMatches, ai.Sublist.NumMatches)
			require.Equal(t, sz.MaxFanout, ai.Sublist.MaxFanout)
		})
	}

	// C has no bridge: its index is its client's, and its counters are
	// its own.
	c := accountz(t, s, "?acc=C").Account
	require.Equal(t, uint32(1), c.SubCnt, "c's work; tmp was removed")
	require.Equal(t, server.SublistStats{NumSubs: 1, NumInserts: 2, NumRemoves: 1, NumMatches: 2, MaxFanout: 1, AvgFanout: 1}, *c.Sublist)
	require.Empty(t, c.Responses)

	// The two requests A did not answer are open in A's table, by the
	// reply subject A's responder answers on.
	resp := accountz(t, s, "?acc=A").Account.Responses
	require.Len(t, resp, 2)
	byReply := map[string]server.ExtImport{}
	for key, r := range resp {
		require.True(t, strings.HasPrefix(key, "_R_."), key)
		require.Equal(t, key, r.LocalSubject)
		require.Equal(t, key, r.To)
		byReply[r.Subject] = server.ExtImport{Subject: r.Subject, Account: r.Account, Type: r.Type, Share: r.Share}
	}
	require.Equal(t, map[string]server.ExtImport{
		"reply.2": {Subject: "reply.2", Account: "B", Type: "service", Share: true},
		"reply.3": {Subject: "reply.3", Account: "B", Type: "service"},
	}, byReply)
	require.Empty(t, accountz(t, s, "?acc=B").Account.Responses, "B's table holds the ways back from B's own exports only")

	status, _, body := monitorGet(t, s, "/accountz?acc=nope")
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, string(body), "Account nope does not exist")
	_, err := s.Accountz(server.AccountzOptions{Account: "nope"})
	require.True(t, errors.Is(err, server.ErrUnknownAccount), "%v", err)
}

func accountNames(stz server.AccountStatz) []string {
	names := []string{}
	for _, a := range stz.Accounts {
		names = append(names, a.Account)
	}
	return names
}

func TestMonitorAccountStatz(t *testing.T) {
	s := accountsServer(t, nil)
	tr := runAccountTraffic(t, s.ClientURL(), s.NumClients)
	tr.b2.Close()
	require.Eventually(t, func() bool { return s.NumClients() == 5 }, monitorWaitLimit, 10*time.Millisecond)

	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{"$G", "A", "B", "C"}},
		{"?unused=true", []string{"$G", "A", "B", "C"}},
		{"?accounts=B,A", []string{"B", "A"}},
		{"?accounts=nope,C", []string{"C"}},
		{"?accounts=nope", []string{}},
	} {
		t.Run(tc.query, func(t *testing.T) {
			var stz server.AccountStatz
			MonitorJSON(t, s, "/accstatz"+tc.query, &stz)
			require.Equal(t, s.ID(), stz.ID)
			require.Equal(t, tc.want, accountNames(stz))
		})
	}

	// Totals are the live clients' counters plus those of the closed
	// ones (a2 in A, b2 in B), as /connz shows the live ones.
	var connz server.Connz
	MonitorJSON(t, s, "/connz?auth=true", &connz)
	live := map[string]server.AccountStat{}
	for _, ci := range connz.Conns {
		acc := ci.NameTag
		st := live[acc]
		st.Conns++
		st.NumSubs += ci.NumSubs
		st.Received.Msgs += ci.InMsgs
		st.Received.Bytes += ci.InBytes
		st.Sent.Msgs += ci.OutMsgs
		st.Sent.Bytes += ci.OutBytes
		live[acc] = st
	}
	closed := map[string]server.DataStats{
		"A": {Msgs: 7, Bytes: 3*5 + 2*2 + 1 + 1}, // a2's publications
	}
	var stz server.AccountStatz
	MonitorJSON(t, s, "/accstatz", &stz)
	for _, st := range stz.Accounts {
		l := live[st.Account]
		require.Equal(t, st.Account, st.Name)
		require.Equal(t, l.Conns, st.Conns, st.Account)
		require.Equal(t, l.Conns, st.TotalConns, st.Account)
		require.Zero(t, st.LeafNodes)
		require.Equal(t, l.Received.Msgs+closed[st.Account].Msgs, st.Received.Msgs, st.Account)
		require.Equal(t, l.Received.Bytes+closed[st.Account].Bytes, st.Received.Bytes, st.Account)
		require.Equal(t, l.Sent, st.Sent, "%s: a2 and b2 received nothing", st.Account)
		require.Zero(t, st.SlowConsumers)
		sz := getSubsz(t, s, "?acc="+url.QueryEscape(st.Account))
		require.Equal(t, sz.NumSubs, st.NumSubs)
	}
	want := map[string]struct{ in, out server.DataStats }{
		"$G": {server.DataStats{Msgs: 1, Bytes: 2}, server.DataStats{Msgs: 1, Bytes: 2}},
		"C":  {server.DataStats{Msgs: 2, Bytes: 4}, server.DataStats{Msgs: 2, Bytes: 4}},
		// Three requests (the header of the one across a share import
		// is B's to A, not B's own); to b: 2 events, 1 private, 1
		// tenant, 1 response ("ok:ping").
		"B": {server.DataStats{Msgs: 3, Bytes: 4 + 4 + 1}, server.DataStats{Msgs: 5, Bytes: 2*2 + 1 + 1 + 7}},
	}
	for _, st := range stz.Accounts {
		if w, ok := want[st.Account]; ok {
			require.Equal(t, w.in, st.Received, st.Account)
			require.Equal(t, w.out, st.Sent, st.Account)
		}
	}

	tr.c.Close()
	require.Eventually(t, func() bool { return s.NumClients() == 4 }, monitorWaitLimit, 10*time.Millisecond)
	MonitorJSON(t, s, "/accstatz", &stz)
	require.Equal(t, []string{"$G", "A", "B"}, accountNames(stz), "C has no client left")
	MonitorJSON(t, s, "/accstatz?accounts=C&unused=1", &stz)
	require.Equal(t, []string{"C"}, accountNames(stz))
	c := stz.Accounts[0]
	require.Zero(t, c.Conns)
	require.Zero(t, c.NumSubs)
	require.Equal(t, want["C"].in, c.Received, "closed clients' traffic stays counted")
	require.Equal(t, want["C"].out, c.Sent)

	status, _, body := monitorGet(t, s, "/accstatz?unused=maybe")
	require.Equal(t, http.StatusBadRequest, status, "%s", body)
	require.Equal(t, stz.Accounts[0].Received, s.AccountStatz(server.AccountStatzOptions{Accounts: []string{"C"}, IncludeUnused: true}).Accounts[0].Received)
}

// TestMonitorAccountSlowConsumer cuts a client of B off as a slow
// consumer: it counts in B only.
func TestMonitorAccountSlowConsumer(t *testing.T) {
	s := accountsServer(t, func(o *server.Options) { o.MaxPending, o.MaxPayload = 256<<10, 64<<10 })
	slow := DialRaw(t, s)
	slow.Send("CONNECT {\"verbose\":false,\"user\":\"b\",\"pass\":\"b\"}\r\nSUB firehose 1\r\nPING\r\n")
	slow.Expect("PONG")
	pub := Connect(t, s, nats.UserInfo("b2", "b2"))
	other := Connect(t, s, nats.UserInfo("c", "c"))
	payload := make([]byte, 32<<10)
	for range 1000 { // 32 MiB: more than the socket buffers and MaxPending hold
		require.NoError(t, pub.Publish("firehose", payload))
	}
	require.NoError(t, pub.FlushTimeout(10*time.Second))
	require.Eventually(t, func() bool { return s.NumClients() == 2 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, other.Flush())

	stz := s.AccountStatz(server.AccountStatzOptions{Accounts: []string{"A", "B", "C"}, IncludeUnused: true})
	require.Equal(t, []int64{0, 1, 0}, []int64{stz.Accounts[0].SlowConsumers, stz.Accounts[1].SlowConsumers, stz.Accounts[2].SlowConsumers})
	require.Equal(t, int64(1), getVarz(t, s).SlowConsumers)
	require.Equal(t, float64(1), accountMetrics(t, s)["skiff_account_slow_consumers_total"]["B"])
}

func TestMonitorConnzAccounts(t *testing.T) {
	s := accountsServer(t, nil)
	runAccountTraffic(t, s.ClientURL(), s.NumClients)
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{"a", "n", "b", "b2", "c", "g"}},
		{"?acc=A", []string{"a", "n"}},
		{"?acc=B&auth=1", []string{"b", "b2"}},
		{"?acc=%24G", []string{"g"}},
		{"?acc=nope", nil},
		{"?user=b2", []string{"b2"}},
		{"?user=" + monitorNkeyUser, []string{"n"}},
		{"?acc=A&user=b", nil},
		{"?acc=A&sort=msgs_from&limit=1", []string{"a"}},
	} {
		t.Run(tc.query, func(t *testing.T) {
			var c server.Connz
			MonitorJSON(t, s, "/connz"+tc.query, &c)
			require.Equal(t, tc.want, connzNames(c))
			require.Len(t, tc.want, c.NumConns)
			if !strings.Contains(tc.query, "limit") {
				require.Equal(t, len(tc.want), c.Total)
			}
		})
	}

	type ident struct{ account, nameTag, issuer, user string }
	want := map[string]ident{
		"a":  {"A", "A", "", "a"},
		"n":  {"A", "A", "A", monitorNkeyUser},
		"b":  {"B", "B", "", "b"},
		"b2": {"B", "B", "", "b2"},
		"c":  {"C", "C", "", "c"},
		"g":  {"", "$G", "", "g"}, // the global account is not named, as in nats-server
	}
	var c server.Connz
	MonitorJSON(t, s, "/connz", &c)
	for _, ci := range c.Conns {
		require.Equal(t, ident{}, ident{ci.Account, ci.NameTag, ci.IssuerKey, ci.AuthorizedUser}, "only with auth=true: %s", ci.Name)
	}
	MonitorJSON(t, s, "/connz?auth=true", &c)
	require.Len(t, c.Conns, len(want))
	for _, ci := range c.Conns {
		require.Equal(t, want[ci.Name], ident{ci.Account, ci.NameTag, ci.IssuerKey, ci.AuthorizedUser}, ci.Name)
	}
}

// scrapeMetrics scrapes /metrics and parses it.
func scrapeMetrics(t testing.TB, s *server.Server) map[string]*dto.MetricFamily {
	t.Helper()
	status, ct, body := monitorGet(t, s, "/metrics")
	require.Equal(t, http.StatusOK, status)
	require.True(t, strings.HasPrefix(ct, "text/plain"), ct)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	require.NoError(t, err, "%s", body)
	return families
}

// accountMetrics scrapes /metrics and returns the per-account series by
// name and account.
func accountMetrics(t *testing.T, s *server.Server) map[string]map[string]float64 {
	t.Helper()
	out := map[string]map[string]float64{}
	for name, f := range scrapeMetrics(t, s) {
		if !strings.HasPrefix(name, "skiff_account_") {
			continue
		}
		out[name] = map[string]float64{}
		for _, m := range f.GetMetric() {
			require.Len(t, m.GetLabel(), 1, name)
			require.Equal(t, "account", m.GetLabel()[0].GetName())
			v := m.GetGauge().GetValue()
			if strings.HasSuffix(name, "_total") {
				v = m.GetCounter().GetValue()
			}
			out[name][m.GetLabel()[0].GetValue()] = v
		}
	}
	return out
}

func TestMonitorAccountMetrics(t *testing.T) {
	s := accountsServer(t, nil)
	runAccountTraffic(t, s.ClientURL(), s.NumClients)
	stz := s.AccountStatz(server.AccountStatzOptions{IncludeUnused: true})
	got := accountMetrics(t, s)
	require.Len(t, got, 8)
	for name, series := range got {
		require.Len(t, series, len(stz.Accounts), "%s: one series per account", name)
	}
	for _, st := range stz.Accounts {
		a := st.Account
		require.Equal(t, map[string]float64{
			"skiff_account_connections":          float64(st.Conns),
			"skiff_account_subscriptions":        float64(st.NumSubs),
			"skiff_account_in_msgs_total":        float64(st.Received.Msgs),
			"skiff_account_in_bytes_total":       float64(st.Received.Bytes),
			"skiff_account_out_msgs_total":       float64(st.Sent.Msgs),
			"skiff_account_out_bytes_total":      float64(st.Sent.Bytes),
			"skiff_account_slow_consumers_total": 0,
			"skiff_account_pending_responses":    float64(len(accountz(t, s, "?acc="+url.QueryEscape(a)).Account.Responses)),
		}, map[string]float64{
			"skiff_account_connections":          got["skiff_account_connections"][a],
			"skiff_account_subscriptions":        got["skiff_account_subscriptions"][a],
			"skiff_account_in_msgs_total":        got["skiff_account_in_msgs_total"][a],
			"skiff_account_in_bytes_total":       got["skiff_account_in_bytes_total"][a],
			"skiff_account_out_msgs_total":       got["skiff_account_out_msgs_total"][a],
			"skiff_account_out_bytes_total":      got["skiff_account_out_bytes_total"][a],
			"skiff_account_slow_consumers_total": got["skiff_account_slow_consumers_total"][a],
			"skiff_account_pending_responses":    got["skiff_account_pending_responses"][a],
		}, a)
	}
	require.Equal(t, float64(2), got["skiff_account_pending_responses"]["A"])
	require.Equal(t, float64(8), got["skiff_account_in_msgs_total"]["A"], "a2's 7 (closed) and a's response")
	require.Contains(t, scrapeMetrics(t, s), "skiff_bridge_drops_total")
}

// TestMonitorAccountFieldNamesMatchReference checks the account endpoints'
// types against nats-server's, and that their answers decode into them.
func TestMonitorAccountFieldNamesMatchReference(t *testing.T) {
	requireFieldsOfReference(t, [][2]any{
		{server.Accountz{}, natsserver.Accountz{}},
		{server.AccountInfo{}, natsserver.AccountInfo{}},
		{server.ExtExport{}, natsserver.ExtExport{}},
		{server.ExtImport{}, natsserver.ExtImport{}},
		{server.SublistStats{}, natsserver.SublistStats{}},
		{server.AccountStatz{}, natsserver.AccountStatz{}},
		{server.AccountStat{}, natsserver.AccountStat{}},
		{server.DataStats{}, natsserver.DataStats{}},
		{server.AccountzOptions{}, natsserver.AccountzOptions{}},
		{server.AccountStatzOptions{}, natsserver.AccountStatzOptions{}},
	})

	s := accountsServer(t, nil)
	runAccountTraffic(t, s.ClientURL(), s.NumClients)
	var az natsserver.Accountz
	MonitorJSON(t, s, "/accountz?acc=B", &az)
	require.Equal(t, "B", az.Account.AccountName)
	require.Len(t, az.Account.Imports, 6)
	require.Equal(t, "echo", string(az.Account.Imports[3].LocalSubject))
	require.True(t, az.Account.Imports[3].IsService())
	MonitorJSON(t, s, "/accountz?acc=A", &az)
	require.Len(t, az.Account.Responses, 2)
	require.Equal(t, uint32(1), az.Account.Sublist.MaxFanout)
	var stz natsserver.AccountStatz
	MonitorJSON(t, s, "/accstatz", &stz)
	require.Len(t, stz.Accounts, 4)
	require.Equal(t, int64(2), stz.Accounts[3].Received.Msgs) // C
}

// TestMonitorAccountzJetStream: jetstream_enabled says which accounts
// JetStream serves, checked against a client's $JS.API.INFO in each.
func TestMonitorAccountzJetStream(t *testing.T) {
	users := func(name string) []server.User { return []server.User{{Name: name, Password: name}} }
	for _, tc := range []struct {
		name     string
		accounts []server.AccountConfig
		users    []server.User
		streams  bool
		want     map[string]bool // by user, named after its account
	}{
		{name: "global account only", users: users("$G"), streams: true, want: map[string]bool{"$G": true}},
		{name: "no JetStream", users: users("$G"), want: map[string]bool{"$G": false}},
		{name: "configured accounts", users: users("$G"), streams: true, accounts: []server.AccountConfig{
			{Name: "JS", Users: users("JS"), JetStream: &server.JetStreamLimits{MaxStreams: 2}},
			{Name: "NOJS", Users: users("NOJS")},
		}, want: map[string]bool{"$G": false, "JS": true, "NOJS": false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := server.New(server.Options{Host: "127.0.0.1", Port: server.RandomPort, HTTPPort: server.RandomPort, Users: tc.users, Accounts: tc.accounts})
			require.NoError(t, err)
			if tc.streams {
				js, err := jetstream.New(s, jetstream.Options{StoreDir: t.TempDir()})
				require.NoError(t, err)
				t.Cleanup(func() { _ = js.Close() })
			}
			require.NoError(t, s.Start())
			t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
			for acc, enabled := range tc.want {
				require.Equal(t, enabled, accountz(t, s, "?acc="+url.QueryEscape(acc)).Account.JetStream, acc)
				nc := Connect(t, s, nats.UserInfo(acc, acc))
				js, err := nc.JetStream(nats.MaxWait(time.Second))
				require.NoError(t, err)
				_, err = js.AccountInfo()
				require.Equal(t, enabled, err == nil, "%s: %v", acc, err)
			}
		})
	}
}
