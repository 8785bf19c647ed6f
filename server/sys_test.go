package server_test

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/jwttest"
	"github.com/skiffmq/skiff/internal/natscli"
	"github.com/skiffmq/skiff/server"
)

// sysOptions are accounts SYS (the system account, user sys), A (users a,
// a2) and B (user b); passwords are the user names.
func sysOptions() server.Options {
	return server.Options{
		SystemAccount: "SYS",
		Accounts: []server.AccountConfig{
			{Name: "SYS", Users: namedUsers("sys")},
			{Name: "A", Users: namedUsers("a", "a2")},
			{Name: "B", Users: namedUsers("b")},
		},
	}
}

// jsonFields returns the JSON fields of struct type t by name, those of
// embedded structs included.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name != "" && name != "-" && f.IsExported() {
			out[name] = f.Type
		}
	}
	return out
}

// requireKeysDeep requires every key of the decoded JSON v, at every
// depth, to be a field of the reference type ref at that place: tools
// decode the answers into nats-server's types.
func requireKeysDeep(t *testing.T, what string, v any, ref reflect.Type) {
	t.Helper()
	if ref == nil {
		return // any
	}
	for ref.Kind() == reflect.Pointer {
		ref = ref.Elem()
	}
	switch v := v.(type) {
	case map[string]any:
		switch ref.Kind() {
		case reflect.Struct:
			if ref == reflect.TypeOf(time.Time{}) {
				return
			}
			fields := jsonFields(ref)
			for k, sub := range v {
				ft, ok := fields[k]
				require.True(t, ok, "%s: %q is not a field of %v", what, k, ref)
				requireKeysDeep(t, what+"."+k, sub, ft)
			}
		case reflect.Map:
			for k, sub := range v {
				requireKeysDeep(t, what+"."+k, sub, ref.Elem())
			}
		}
	case []any:
		if ref.Kind() == reflect.Slice {
			for _, sub := range v {
				requireKeysDeep(t, what+"[]", sub, ref.Elem())
			}
		}
	}
}

// sysWatch is a subscription that tests read by subject. Its messages go
// to a channel: nats.go's NextMsg fails once the connection has closed,
// even for messages that arrived before (a SHUTDOWN event, then the
// server closing the connection), while a channel keeps them.
type sysWatch struct {
	t    *testing.T
	sub  *nats.Subscription
	ch   chan *nats.Msg
	seen []*nats.Msg
}

func watch(t *testing.T, nc *nats.Conn, subject string) *sysWatch {
	t.Helper()
	ch := make(chan *nats.Msg, 4096)
	sub, err := nc.ChanSubscribe(subject, ch)
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	return &sysWatch{t: t, sub: sub, ch: ch}
}

// receive returns the next message, waiting at most d; ok is false if
// none came.
func (w *sysWatch) receive(d time.Duration) (m *nats.Msg, ok bool) {
	select {
	case m = <-w.ch:
		return m, true
	case <-time.After(d):
		return nil, false
	}
}

// next returns the next message on subj, setting aside the others.
func (w *sysWatch) next(subj string) *nats.Msg {
	w.t.Helper()
	for i, m := range w.seen {
		if m.Subject == subj {
			w.seen = slices.Delete(w.seen, i, i+1)
			return m
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		m, ok := w.receive(time.Until(deadline))
		require.True(w.t, ok, "waiting for %s", subj)
		if m.Subject == subj {
			return m
		}
		w.seen = append(w.seen, m)
	}
}

// decode decodes JSON into a map (for its keys) and into the reference
// type ref (for its values).
func decode[T any](t *testing.T, data []byte) (map[string]any, *T) {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m), "%s", data)
	var ref T
	require.NoError(t, json.Unmarshal(data, &ref), "%s", data)
	requireKeysDeep(t, reflect.TypeOf(ref).Name(), m, reflect.TypeOf(ref))
	return m, &ref
}

// TestSystemAccountChoice: which account is the system account.
func TestSystemAccountChoice(t *testing.T) {
	configured := sysOptions()
	dollar := sysOptions()
	dollar.SystemAccount = ""
	dollar.Accounts[0].Name = "$SYS"
	for _, tc := range []struct {
		name  string
		opts  server.Options
		want  string // "" for none
		users bool   // a configured user (sys) connects into it
	}{
		{"default", server.Options{}, "$SYS", false},
		{"none", server.Options{NoSystemAccount: true}, "", false},
		{"system_account", configured, "SYS", true},
		{"$SYS configured", dollar, "$SYS", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := RunServer(t, tc.opts)
			sys := s.SystemAccount()
			if tc.want == "" {
				require.Nil(t, sys)
				return
			}
			require.Equal(t, tc.want, sys.Name())
			acc, ok := s.LookupAccount(tc.want)
			require.True(t, ok)
			require.Same(t, sys, acc)
			if tc.users {
				connectAs(t, s, "sys")
				require.Equal(t, 1, sys.NumConnections())
			}
		})
	}

	for name, o := range map[string]server.Options{
		"not configured":    {SystemAccount: "NOPE"},
		"and none":          {SystemAccount: "SYS", NoSystemAccount: true, Accounts: []server.AccountConfig{{Name: "SYS"}}},
		"JetStream in it":   {SystemAccount: "SYS", Accounts: []server.AccountConfig{{Name: "SYS", JetStream: &server.JetStreamLimits{}}}},
		"JetStream in $SYS": {Accounts: []server.AccountConfig{{Name: "$SYS", JetStream: &server.JetStreamLimits{}}}},
	} {
		t.Run("refused/"+name, func(t *testing.T) {
			_, err := server.New(o)
			require.ErrorIs(t, err, server.ErrInvalidOptions)
		})
	}
}

// TestSysEvents: the events of a client's life, in nats-server's shapes,
// seen by a user of the system account subscribed to $SYS.>.
func TestSysEvents(t *testing.T) {
	s := RunServer(t, sysOptions())
	w := watch(t, connectAs(t, s, "sys"), "$SYS.>")

	a := connectAs(t, s, "a", nats.Name("app"), nats.NoReconnect())
	m := w.next("$SYS.ACCOUNT.A.CONNECT")
	_, conn := decode[natsserver.ConnectEventMsg](t, m.Data)
	require.Equal(t, natsserver.ConnectEventMsgType, conn.Type)
	require.NotEmpty(t, conn.ID)
	require.Equal(t, s.ID(), conn.Server.ID)
	require.Equal(t, s.Name(), conn.Server.Name)
	require.Equal(t, server.Version, conn.Server.Version)
	require.Equal(t, "A", conn.Client.Account)
	require.Equal(t, "a", conn.Client.User)
	require.Equal(t, "app", conn.Client.Name)
	require.Equal(t, "go", conn.Client.Lang)
	require.Equal(t, "Client", conn.Client.Kind)
	require.NotZero(t, conn.Client.ID)
	require.Nil(t, conn.Client.Stop)

	for _, subj := range []string{"$SYS.SERVER.ACCOUNT.A.CONNS", "$SYS.ACCOUNT.A.SERVER.CONNS"} {
		_, n := decode[natsserver.AccountNumConns](t, w.next(subj).Data)
		require.Equal(t, natsserver.AccountNumConnsMsgType, n.Type)
		require.Equal(t, "A", n.Account)
		require.Equal(t, 1, n.Conns)
		require.Equal(t, s.ID(), n.Server.ID)
	}

	for range 2 {
		require.NoError(t, a.Publish("x", []byte("hello")))
	}
	require.NoError(t, a.Flush())
	a.Close()
	_, disc := decode[natsserver.DisconnectEventMsg](t, w.next("$SYS.ACCOUNT.A.DISCONNECT").Data)
	require.Equal(t, natsserver.DisconnectEventMsgType, disc.Type)
	require.Equal(t, conn.Client.ID, disc.Client.ID)
	require.Equal(t, "Client Closed", disc.Reason)
	require.Equal(t, int64(2), disc.Sent.Msgs, "what the client sent")
	require.Equal(t, int64(10), disc.Sent.Bytes)
	require.NotNil(t, disc.Client.Stop)
	_, n := decode[natsserver.AccountNumConns](t, w.next("$SYS.ACCOUNT.A.SERVER.CONNS").Data)
	require.Zero(t, n.Conns, "the last count says none are left")
	require.Equal(t, int64(2), n.Received.Msgs, "and what the account's clients published")
	require.Equal(t, int64(10), n.Received.Bytes)

	_, err := nats.Connect(s.ClientURL(), nats.UserInfo("a", "wrong"), nats.Name("intruder"))
	require.Error(t, err)
	_, authErr := decode[natsserver.DisconnectEventMsg](t, w.next("$SYS.SERVER."+s.ID()+".CLIENT.AUTH.ERR").Data)
	require.Equal(t, "Authentication Failure", authErr.Reason)
	require.Equal(t, "a", authErr.Client.User)
	require.Equal(t, "intruder", authErr.Client.Name)

	// The global account's clients are not counted (nats-server sends no
	// SERVER.CONNS for it); their CONNECT events are sent.
	o := sysOptions()
	o.Users = []server.User{{Name: "g", Password: "g"}}
	s2 := RunServer(t, o)
	w2 := watch(t, connectAs(t, s2, "sys"), "$SYS.ACCOUNT.>")
	connectAs(t, s2, "g")
	_, g := decode[natsserver.ConnectEventMsg](t, w2.next("$SYS.ACCOUNT.$G.CONNECT").Data)
	require.Equal(t, "$G", g.Client.Account)
	for {
		m, ok := w2.receive(300 * time.Millisecond)
		if !ok {
			break
		}
		require.NotContains(t, m.Subject, "$G.SERVER.CONNS", "no SERVER.CONNS for $G")
	}
}

// TestSysStatsz: STATSZ on request, in nats-server's shape, on a timer,
// and filtered by server.
func TestSysStatsz(t *testing.T) {
	o := sysOptions()
	o.ServerName = "statsz-test"
	o.Tags = []string{"AZ:2", " ssd "}
	s := RunServer(t, o)
	sys := connectAs(t, s, "sys")
	connectAs(t, s, "a")
	heartbeat := watch(t, sys, "$SYS.SERVER."+s.ID()+".STATSZ")

	for _, subj := range []string{"$SYS.REQ.SERVER.PING", "$SYS.REQ.SERVER.PING.STATSZ", "$SYS.REQ.SERVER." + s.ID() + ".STATSZ"} {
		resp, err := sys.Request(subj, nil, 5*time.Second)
		require.NoError(t, err, subj)
		m, ssm := decode[natsserver.ServerStatsMsg](t, resp.Data)
		require.Contains(t, m, "statsz")
		require.Equal(t, s.ID(), ssm.Server.ID)
		require.Equal(t, "statsz-test", ssm.Server.Name)
		require.Equal(t, 2, ssm.Stats.Connections)
		require.Equal(t, 1, ssm.Stats.ActiveServers)
		require.Equal(t, 2, ssm.Stats.ActiveAccounts, "SYS and A have clients")
		require.Equal(t, uint32(s.NumSubscriptions()), ssm.Stats.NumSubs)
		require.Positive(t, ssm.Stats.Mem)
		require.Positive(t, ssm.Server.Seq)
		require.Equal(t, []string{"az:2", "ssd"}, ssm.Server.Tags, "server_tags, lowercased")
	}

	// Filters: a request for another server gets no answer from this one.
	body := func(f natsserver.EventFilterOptions) []byte {
		b, err := json.Marshal(f)
		require.NoError(t, err)
		return b
	}
	for _, f := range []natsserver.EventFilterOptions{
		{Name: "other"}, {Name: "statsz", ExactMatch: true}, {Host: "10.9.9.9"}, {Cluster: "c1"},
		{Tags: []string{"az:1"}}, {Tags: []string{"az:2", "gpu"}}, {Domain: "hub"},
	} {
		_, err := sys.Request("$SYS.REQ.SERVER.PING.STATSZ", body(f), 200*time.Millisecond)
		require.ErrorIs(t, err, nats.ErrTimeout, "%+v", f)
	}
	for _, f := range []natsserver.EventFilterOptions{{Name: "statsz"}, {Name: "statsz-test", ExactMatch: true}, {Host: "127.0.0"},
		{Tags: []string{"az:2"}}, {Tags: []string{"SSD", "az:2"}}} {
		_, err := sys.Request("$SYS.REQ.SERVER.PING.STATSZ", body(f), 5*time.Second)
		require.NoError(t, err, "%+v", f)
	}

	// The heartbeat: soon after the start, then every 10s.
	_, ssm := decode[natsserver.ServerStatsMsg](t, heartbeat.next(heartbeat.sub.Subject).Data)
	require.Equal(t, s.ID(), ssm.Server.ID)
	// A PING without a reply asks for one on the server's own subject.
	require.NoError(t, sys.Publish("$SYS.REQ.SERVER.PING", nil))
	heartbeat.next(heartbeat.sub.Subject)
}

// TestSysShutdownEvents: SHUTDOWN and LAMEDUCK reach the system account's
// subscribers before their connections close.
func TestSysShutdownEvents(t *testing.T) {
	s := RunServer(t, sysOptions())
	w := watch(t, connectAs(t, s, "sys", nats.NoReconnect()), "$SYS.SERVER.>")
	go func() { _ = s.Shutdown(context.Background()) }()
	m, si := decode[natsserver.ServerInfo](t, w.next("$SYS.SERVER."+s.ID()+".SHUTDOWN").Data)
	require.Equal(t, s.ID(), si.ID)
	require.Contains(t, m, "seq")

	o := sysOptions()
	o.LameDuckGracePeriod, o.LameDuckDuration = 10*time.Millisecond, 500*time.Millisecond
	ld := RunServer(t, o)
	w = watch(t, connectAs(t, ld, "sys", nats.NoReconnect()), "$SYS.SERVER.>")
	go func() { _ = ld.LameDuck(context.Background()) }()
	_, si = decode[natsserver.ServerInfo](t, w.next("$SYS.SERVER."+ld.ID()+".LAMEDUCK").Data)
	require.Equal(t, ld.ID(), si.ID)
}

// sysRequest sends a request to the system account and returns the
// answer, decoded into a map and a ServerAPIResponse whose data is T.
func sysRequest[T any](t *testing.T, nc *nats.Conn, subj string, body any) (map[string]any, *T, *natsserver.ApiError) {
	t.Helper()
	var b []byte
	if body != nil {
		var err error
		b, err = json.Marshal(body)
		require.NoError(t, err)
	}
	resp, err := nc.Request(subj, b, 5*time.Second)
	require.NoError(t, err, subj)
	var m map[string]any
	require.NoError(t, json.Unmarshal(resp.Data, &m), "%s", resp.Data)
	requireKeysDeep(t, subj, m, reflect.TypeOf(natsserver.ServerAPIResponse{}))
	require.Contains(t, m, "server")
	requireKeysDeep(t, subj+" server", m["server"], reflect.TypeOf(natsserver.ServerInfo{}))
	var r struct {
		Data  *T                   `json:"data"`
		Error *natsserver.ApiError `json:"error"`
	}
	require.NoError(t, json.Unmarshal(resp.Data, &r), "%s", resp.Data)
	if r.Error == nil {
		requireKeysDeep(t, subj+" data", m["data"], reflect.TypeOf(*new(T)))
	}
	return m, r.Data, r.Error
}

// TestSysRequests: every z request the server answers, in nats-server's
// shapes, about the server and about one account.
func TestSysRequests(t *testing.T) {
	s := RunServer(t, sysOptions())
	sys := connectAs(t, s, "sys")
	a := connectAs(t, s, "a", nats.Name("app"))
	_, err := a.SubscribeSync("a.stuff")
	require.NoError(t, err)
	require.NoError(t, a.Flush())
	b := connectAs(t, s, "b")
	_, err = b.SubscribeSync("b.stuff")
	require.NoError(t, err)
	require.NoError(t, b.Flush())

	for _, prefix := range []string{"$SYS.REQ.SERVER.PING.", "$SYS.REQ.SERVER." + s.ID() + "."} {
		resp, err := sys.Request(prefix+"IDZ", nil, 5*time.Second)
		require.NoError(t, err)
		_, id := decode[natsserver.ServerID](t, resp.Data)
		require.Equal(t, natsserver.ServerID{Name: s.Name(), Host: "127.0.0.1", ID: s.ID()}, *id)

		_, varz, apiErr := sysRequest[natsserver.Varz](t, sys, prefix+"VARZ", nil)
		require.Nil(t, apiErr)
		require.Equal(t, s.ID(), varz.ID)
		require.Equal(t, 3, varz.Connections)

		_, sz, apiErr := sysRequest[natsserver.Subsz](t, sys, prefix+"SUBSZ", natsserver.SubszOptions{Subscriptions: true, Test: "b.stuff"})
		require.Nil(t, apiErr)
		require.Len(t, sz.Subs, 1)
		require.Equal(t, "B", sz.Subs[0].Account)

		_, cz, apiErr := sysRequest[natsserver.Connz](t, sys, prefix+"CONNZ", natsserver.ConnzOptions{Username: true, Subscriptions: true})
		require.Nil(t, apiErr)
		require.Equal(t, 3, cz.Total)
		users := map[string][]string{}
		for _, c := range cz.Conns {
			users[c.AuthorizedUser] = c.Subs
		}
		require.Equal(t, []string{"a.stuff"}, users["a"])

		_, rz, apiErr := sysRequest[natsserver.Routez](t, sys, prefix+"ROUTEZ", nil)
		require.Nil(t, apiErr)
		require.Zero(t, rz.NumRoutes)
		_, gz, apiErr := sysRequest[natsserver.Gatewayz](t, sys, prefix+"GATEWAYZ", nil)
		require.Nil(t, apiErr)
		require.Empty(t, gz.OutboundGateways)
		_, lz, apiErr := sysRequest[natsserver.Leafz](t, sys, prefix+"LEAFZ", nil)
		require.Nil(t, apiErr)
		require.Zero(t, lz.NumLeafs)
		_, hz, apiErr := sysRequest[natsserver.HealthStatus](t, sys, prefix+"HEALTHZ", nil)
		require.Nil(t, apiErr)
		require.Equal(t, "ok", hz.Status)
		_, hz, _ = sysRequest[natsserver.HealthStatus](t, sys, prefix+"HEALTHZ", natsserver.HealthzOptions{JSEnabledOnly: true})
		require.Equal(t, "unavailable", hz.Status, "no JetStream here")
		_, jsz, apiErr := sysRequest[natsserver.JSInfo](t, sys, prefix+"JSZ", nil)
		require.Nil(t, apiErr)
		require.True(t, jsz.Disabled)
	}

	// Errors: bad options are the requester's (400), as nats-server's.
	for subj, body := range map[string]any{
		"$SYS.REQ.SERVER.PING.CONNZ": natsserver.ConnzOptions{Sort: "rtt"},
		"$SYS.REQ.SERVER.PING.SUBSZ": natsserver.SubszOptions{Test: "a.*"},
		"$SYS.REQ.SERVER.PING.VARZ":  "not options",
	} {
		_, _, apiErr := sysRequest[any](t, sys, subj, body)
		require.NotNil(t, apiErr, subj)
		require.Equal(t, 400, apiErr.Code, subj)
	}

	// About one account.
	_, sz, apiErr := sysRequest[natsserver.Subsz](t, sys, "$SYS.REQ.ACCOUNT.A.SUBSZ", nil)
	require.Nil(t, apiErr)
	var subjects []string
	for _, d := range sz.Subs {
		require.Equal(t, "A", d.Account)
		subjects = append(subjects, d.Subject)
	}
	require.Contains(t, subjects, "a.stuff")
	require.NotContains(t, subjects, "b.stuff")
	_, _, apiErr = sysRequest[natsserver.Subsz](t, sys, "$SYS.REQ.ACCOUNT.NOPE.SUBSZ", nil)
	require.NotNil(t, apiErr)
	require.Contains(t, apiErr.Description, `account "NOPE" not found`)
	_, _, apiErr = sysRequest[natsserver.AccountDetail](t, sys, "$SYS.REQ.ACCOUNT.A.JSZ", nil)
	require.NotNil(t, apiErr, "no JetStream in A")

	resp, err := sys.Request("$SYS.REQ.ACCOUNT.A.CONNS", nil, 5*time.Second)
	require.NoError(t, err)
	_, conns := decode[natsserver.AccountNumConns](t, resp.Data)
	require.Equal(t, "A", conns.Account)
	require.Equal(t, 1, conns.Conns)

	// The accounts' own monitoring: /accountz and /accstatz.
	_, az, apiErr := sysRequest[natsserver.Accountz](t, sys, "$SYS.REQ.SERVER.PING.ACCOUNTZ", nil)
	require.Nil(t, apiErr)
	require.Equal(t, "SYS", az.SystemAccount)
	require.Equal(t, []string{"$G", "A", "B", "SYS"}, az.Accounts)
	_, az, apiErr = sysRequest[natsserver.Accountz](t, sys, "$SYS.REQ.SERVER."+s.ID()+".ACCOUNTZ", natsserver.AccountzOptions{Account: "SYS"})
	require.Nil(t, apiErr)
	require.True(t, az.Account.IsSystem)
	var exports []string
	for _, e := range az.Account.Exports {
		exports = append(exports, string(e.Subject))
	}
	require.Equal(t, []string{"$SYS.REQ.ACCOUNT.*.CONNZ", "$SYS.REQ.ACCOUNT.*.STATZ", "$SYS.REQ.USER.*.INFO"}, exports)
	_, info, apiErr := sysRequest[natsserver.AccountInfo](t, sys, "$SYS.REQ.ACCOUNT.A.INFO", nil)
	require.Nil(t, apiErr)
	require.Equal(t, "A", info.AccountName)
	require.False(t, info.IsSystem)
	require.Equal(t, 1, info.ClientCnt)
	var imports []string
	for _, im := range info.Imports {
		require.Equal(t, "SYS", im.Account)
		imports = append(imports, string(im.LocalSubject)+" -> "+string(im.Subject))
	}
	require.Equal(t, []string{
		"$SYS.REQ.ACCOUNT.PING.CONNZ -> $SYS.REQ.ACCOUNT.A.CONNZ", "$SYS.REQ.SERVER.PING.CONNZ -> $SYS.REQ.ACCOUNT.A.CONNZ",
		"$SYS.REQ.ACCOUNT.PING.STATZ -> $SYS.REQ.ACCOUNT.A.STATZ", "$SYS.REQ.USER.INFO -> $SYS.REQ.USER.A.INFO",
	}, imports, "the system imports, as nats-server lists them")
	_, stz, apiErr := sysRequest[natsserver.AccountStatz](t, sys, "$SYS.REQ.ACCOUNT.B.STATZ", nil)
	require.Nil(t, apiErr)
	require.Len(t, stz.Accounts, 1)
	require.Equal(t, "B", stz.Accounts[0].Account)
	require.Equal(t, 1, stz.Accounts[0].Conns)
	_, stz, apiErr = sysRequest[natsserver.AccountStatz](t, sys, "$SYS.REQ.ACCOUNT.PING.STATZ", nil)
	require.Nil(t, apiErr)
	var statz []string
	for _, st := range stz.Accounts {
		statz = append(statz, st.Account)
	}
	require.Equal(t, []string{"A", "B", "SYS"}, statz, "the accounts with clients")
	_, err = sys.Request("$SYS.REQ.ACCOUNT.PING.STATZ", []byte(`{"accounts":["$G"]}`), 300*time.Millisecond)
	require.ErrorIs(t, err, nats.ErrTimeout, "no client in $G: no answer, unless include_unused")
	_, stz, _ = sysRequest[natsserver.AccountStatz](t, sys, "$SYS.REQ.ACCOUNT.PING.STATZ", natsserver.AccountStatzOptions{Accounts: []string{"$G"}, IncludeUnused: true})
	require.Len(t, stz.Accounts, 1)

	// Nothing behind these in a server without clustered JetStream: no
	// responders.
	for _, z := range []string{"RAFTZ"} {
		_, err := sys.Request("$SYS.REQ.SERVER.PING."+z, nil, 5*time.Second)
		require.ErrorIs(t, err, nats.ErrNoResponders, z)
	}
	_, err = sys.Request("$SYS.REQ.SERVER."+s.ID()+".RELOAD", nil, 5*time.Second)
	require.ErrorIs(t, err, nats.ErrNoResponders, "no hot reload")
}

// TestSysKickAndLDM: KICK closes a connection, LDM tells it to move.
func TestSysKickAndLDM(t *testing.T) {
	s := RunServer(t, sysOptions())
	sys := connectAs(t, s, "sys")
	ldm := make(chan struct{}, 1)
	a := connectAs(t, s, "a", nats.NoReconnect(), nats.LameDuckModeHandler(func(*nats.Conn) { ldm <- struct{}{} }))
	cid, err := a.GetClientID()
	require.NoError(t, err)

	_, _, apiErr := sysRequest[any](t, sys, "$SYS.REQ.SERVER."+s.ID()+".LDM", natsserver.LDMClientReq{CID: cid})
	require.Nil(t, apiErr)
	select {
	case <-ldm:
	case <-time.After(5 * time.Second):
		t.Fatal("the client was not told of lame duck mode")
	}
	require.False(t, a.IsClosed())

	_, _, apiErr = sysRequest[any](t, sys, "$SYS.REQ.SERVER."+s.ID()+".KICK", natsserver.KickClientReq{CID: cid})
	require.Nil(t, apiErr)
	require.Eventually(t, a.IsClosed, 5*time.Second, 10*time.Millisecond)
	_, _, apiErr = sysRequest[any](t, sys, "$SYS.REQ.SERVER."+s.ID()+".KICK", natsserver.KickClientReq{CID: cid})
	require.NotNil(t, apiErr)
	require.Contains(t, apiErr.Description, "no such client")
}

// TestSysUserInfo: $SYS.REQ.USER.INFO tells the requester who it is, in
// every account (through its system import).
func TestSysUserInfo(t *testing.T) {
	o := sysOptions()
	o.Accounts[1].Users[0].Permissions = &server.Permissions{
		Publish:   server.SubjectPermission{Allow: []string{"a.>", "$SYS.REQ.USER.INFO", "_INBOX.>"}},
		Subscribe: server.SubjectPermission{Deny: []string{"secret.>"}},
	}
	s := RunServer(t, o)
	for _, tc := range []struct{ user, account string }{{"a", "A"}, {"b", "B"}, {"sys", "SYS"}} {
		_, ui, apiErr := sysRequest[natsserver.UserInfo](t, connectAs(t, s, tc.user), "$SYS.REQ.USER.INFO", nil)
		require.Nil(t, apiErr, tc.user)
		require.Equal(t, tc.user, ui.UserID)
		require.Equal(t, tc.account, ui.Account)
		if tc.user == "a" {
			require.Equal(t, []string{"a.>", "$SYS.REQ.USER.INFO", "_INBOX.>"}, ui.Permissions.Publish.Allow)
			require.Equal(t, []string{"secret.>"}, ui.Permissions.Subscribe.Deny)
		} else {
			require.Nil(t, ui.Permissions)
		}
	}
}

// TestSysTenantIsolation: a tenant reaches $SYS only through its system
// imports, which answer about its own account; $SYS events and the other
// requests are not in its namespace.
func TestSysTenantIsolation(t *testing.T) {
	s := RunServer(t, sysOptions())
	a := connectAs(t, s, "a")
	for _, subj := range []string{
		"$SYS.REQ.SERVER.PING", "$SYS.REQ.SERVER.PING.VARZ", "$SYS.REQ.SERVER.PING.SUBSZ",
		"$SYS.REQ.SERVER." + s.ID() + ".CONNZ", "$SYS.REQ.SERVER." + s.ID() + ".KICK",
		"$SYS.REQ.ACCOUNT.B.CONNZ", "$SYS.REQ.ACCOUNT.A.SUBSZ", "$SYS.REQ.USER.B.INFO",
	} {
		_, err := a.Request(subj, nil, 5*time.Second)
		require.ErrorIs(t, err, nats.ErrNoResponders, "%s from a tenant", subj)
	}

	// Its imports answer about its own connections, whatever it asks.
	a2 := connectAs(t, s, "a2", nats.Name("a2-app"))
	connectAs(t, s, "b", nats.Name("b-app"))
	for _, subj := range []string{"$SYS.REQ.SERVER.PING.CONNZ", "$SYS.REQ.ACCOUNT.PING.CONNZ"} {
		for body, want := range map[*natsserver.ConnzOptions]int{
			{}: 2, {Account: "B", Username: true}: 2, {User: "a2"}: 1,
			{User: "b"}: 0, // b is B's: the user filter applies within A
		} {
			_, cz, apiErr := sysRequest[natsserver.Connz](t, a, subj, body)
			require.Nil(t, apiErr, "%s %+v", subj, *body)
			require.Equal(t, want, cz.Total, "%s %+v: of a's and a2's", subj, *body)
			for _, c := range cz.Conns {
				require.NotEqual(t, "b-app", c.Name)
			}
		}
	}
	cid, err := a2.GetClientID()
	require.NoError(t, err)
	_, cz, _ := sysRequest[natsserver.Connz](t, a, "$SYS.REQ.SERVER.PING.CONNZ", natsserver.ConnzOptions{CID: cid})
	require.Equal(t, 1, cz.Total)
	require.Equal(t, "a2-app", cz.Conns[0].Name)

	// The system account's users filter as they like.
	sys := connectAs(t, s, "sys")
	for body, want := range map[*natsserver.ConnzOptions]int{
		{Account: "B"}: 1, {Account: "A"}: 2, {User: "a2"}: 1, {}: 4,
	} {
		_, cz, apiErr := sysRequest[natsserver.Connz](t, sys, "$SYS.REQ.SERVER.PING.CONNZ", body)
		require.Nil(t, apiErr)
		require.Equal(t, want, cz.Total, "%+v", *body)
	}
	_, cz, apiErr := sysRequest[natsserver.Connz](t, sys, "$SYS.REQ.ACCOUNT.B.CONNZ", natsserver.ConnzOptions{Account: "A"})
	require.Nil(t, apiErr)
	require.Equal(t, 1, cz.Total, "the subject's account, not the body's")
	require.Equal(t, "b-app", cz.Conns[0].Name)

	// Its own statistics, whatever it asks.
	for _, body := range []any{nil, natsserver.AccountStatzOptions{Accounts: []string{"B", "SYS"}, IncludeUnused: true}} {
		_, stz, apiErr := sysRequest[natsserver.AccountStatz](t, a, "$SYS.REQ.ACCOUNT.PING.STATZ", body)
		require.Nil(t, apiErr)
		require.Len(t, stz.Accounts, 1, "%v", body)
		require.Equal(t, "A", stz.Accounts[0].Account)
		require.Equal(t, 2, stz.Accounts[0].Conns)
	}

	// Nothing of the system account's events reaches a tenant subscribed
	// to $SYS.> in its own namespace.
	spy := watch(t, a2, "$SYS.>")
	watch(t, sys, "$SYS.>") // someone listens: the events are sent
	connectAs(t, s, "b").Close()
	_, err = sys.Request("$SYS.REQ.SERVER.PING", nil, 5*time.Second)
	require.NoError(t, err)
	require.NoError(t, sys.Flush())
	m, ok := spy.receive(300 * time.Millisecond)
	require.False(t, ok, "a tenant saw %v", m)
}

// TestSysOperatorMode: in operator mode the system account is the
// operator's (its JWT's exports as nsc writes them); events name accounts
// by their public keys, and every account, registered at start or later,
// gets the system imports.
func TestSysOperatorMode(t *testing.T) {
	committed, err := jwt.DecodeAccountClaims(readJWT(t, "SYS.jwt"))
	require.NoError(t, err)
	op := jwttest.NewOperator(t)
	sysAcc := op.Account("SYS", jwttest.Exports(committed.Exports...))
	op.Update(jwttest.SystemAccount(sysAcc.Pub))
	a := op.Account("A")
	s := RunServer(t, operatorOptions(op, sysAcc, a))
	require.Equal(t, sysAcc.Pub, s.SystemAccount().Name())

	sys := Connect(t, s, nats.UserCredentials(sysAcc.User("sys").CredsFile(t)))
	w := watch(t, sys, "$SYS.ACCOUNT.>")
	user := a.User("alice")
	na := Connect(t, s, nats.UserCredentials(user.CredsFile(t)))
	_, ev := decode[natsserver.ConnectEventMsg](t, w.next("$SYS.ACCOUNT."+a.Pub+".CONNECT").Data)
	require.Equal(t, a.Pub, ev.Client.Account)
	require.Equal(t, "A", ev.Client.NameTag, "the JWT's name")
	require.Equal(t, a.Pub, ev.Client.IssuerKey)

	resp, err := sys.Request("$SYS.REQ.SERVER.PING", nil, 5*time.Second)
	require.NoError(t, err)
	_, ssm := decode[natsserver.ServerStatsMsg](t, resp.Data)
	require.Equal(t, s.ID(), ssm.Server.ID)

	_, ui, apiErr := sysRequest[natsserver.UserInfo](t, na, "$SYS.REQ.USER.INFO", nil)
	require.Nil(t, apiErr)
	require.Equal(t, user.Pub, ui.UserID)
	require.Equal(t, a.Pub, ui.Account)
}

// TestSysRuntimeRequests: PROFILEZ, EXPVARZ and IPQUEUESZ answer as
// nats-server's: a profile by name (or why not), the runtime's memory
// statistics and command line, and an empty map of internal queues.
func TestSysRuntimeRequests(t *testing.T) {
	s := RunServer(t, sysOptions())
	sys := connectAs(t, s, "sys")
	request := func(z, body string) map[string]any {
		t.Helper()
		resp, err := sys.Request("$SYS.REQ.SERVER."+s.ID()+"."+z, []byte(body), 10*time.Second)
		require.NoError(t, err, z)
		m, _ := decode[map[string]any](t, resp.Data)
		require.Nil(t, m["error"], "%s: %s", z, resp.Data)
		data, _ := m["data"].(map[string]any)
		return data
	}
	for _, tc := range []struct{ body, err string }{
		{`{"name":"heap"}`, ""},
		{`{"name":"goroutine","debug":1}`, ""},
		{`{"name":"cpu","duration":100000000}`, ""},
		{`{}`, "Profile name not specified"},
		{`{"name":"nothing"}`, `Profile "nothing" not found`},
		{`{"name":"cpu"}`, "Duration 0s should be between 0s and 15s"},
	} {
		d := request("PROFILEZ", tc.body)
		if tc.err != "" {
			require.Equal(t, tc.err, d["error"], tc.body)
			continue
		}
		require.Empty(t, d["error"], tc.body)
		require.NotEmpty(t, d["profile"], tc.body)
	}
	d := request("EXPVARZ", "")
	require.Contains(t, d["memstats"], "HeapAlloc")
	require.NotEmpty(t, d["cmdline"])
	require.Empty(t, request("IPQUEUESZ", ""), "Skiff has no internal queues of nats-server's kind")

	// The nats CLI writes the profile to a file.
	dir := t.TempDir()
	out := natscli.New(t, natscli.Path(t), s.ClientURL()).Run("--user", "sys", "--password", "sys",
		"server", "request", "profile", "allocs", dir)
	require.Contains(t, out, "profile written")
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 1)
}
