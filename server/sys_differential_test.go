package server_test

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// keyPaths returns the paths of every key of decoded JSON v: "a.b" for
// objects, "a[].b" for arrays' elements. The objects at dynamic paths
// (maps by name) count as one key, "*".
func keyPaths(v any, path string, dynamic map[string]bool, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, sub := range v {
			p := path + "." + k
			if dynamic[path] {
				p = path + ".*"
			}
			out[p] = true
			keyPaths(sub, p, dynamic, out)
		}
	case []any:
		for _, sub := range v {
			keyPaths(sub, path+"[]", dynamic, out)
		}
	}
}

func startReferenceSys(t *testing.T) string {
	t.Helper()
	sysAcc, aAcc := natsserver.NewAccount("SYS"), natsserver.NewAccount("A")
	o := &natsserver.Options{
		Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true, ServerName: "diff",
		Accounts: []*natsserver.Account{sysAcc, aAcc}, SystemAccount: "SYS",
		Users: []*natsserver.User{
			{Username: "sys", Password: "sys", Account: sysAcc},
			{Username: "a", Password: "a", Account: aAcc},
		},
	}
	return runReference(t, o).ClientURL()
}

// TestSysDifferentialKeys sends the same $SYS requests to nats-server and
// to Skiff, configured alike, and sees the same events, and requires the
// same JSON keys at every depth (the values, volatile, are left out): no
// key nats-server does not have, and none missing but those listed.
func TestSysDifferentialKeys(t *testing.T) {
	o := sysOptions()
	o.ServerName = "diff"
	urls := map[string]string{"skiff": RunServer(t, o).ClientURL(), "nats-server": startReferenceSys(t)}
	dynamic := map[string]bool{".data.http_req_stats": true, ".data.outbound_gateways": true, ".data.inbound_gateways": true}
	keys := map[string]map[string]map[string]bool{} // server, what, paths
	for name, url := range urls {
		keys[name] = map[string]map[string]bool{}
		add := func(what string, data []byte) {
			var v any
			require.NoError(t, json.Unmarshal(data, &v), "%s %s: %s", name, what, data)
			paths := map[string]bool{}
			keyPaths(v, "", dynamic, paths)
			keys[name][what] = paths
		}
		sys, err := nats.Connect(url, nats.UserInfo("sys", "sys"))
		require.NoError(t, err)
		defer sys.Close()
		events, err := sys.SubscribeSync("$SYS.ACCOUNT.A.>")
		require.NoError(t, err)
		authErrs, err := sys.SubscribeSync("$SYS.SERVER.*.CLIENT.AUTH.ERR")
		require.NoError(t, err)
		require.NoError(t, sys.Flush())

		a, err := nats.Connect(url, nats.UserInfo("a", "a"), nats.Name("app"))
		require.NoError(t, err)
		_, err = a.SubscribeSync("a.sub")
		require.NoError(t, err)
		require.NoError(t, a.Publish("a.sub", []byte("x")))
		resp, err := a.Request("$SYS.REQ.USER.INFO", nil, 5*time.Second)
		require.NoError(t, err)
		add("USER.INFO", resp.Data)

		for _, req := range []struct{ subj, body string }{
			{"$SYS.REQ.SERVER.PING.ACCOUNTZ", ""},
			{"$SYS.REQ.SERVER.PING.ACCOUNTZ", `{"account":"A"}`},
			{"$SYS.REQ.ACCOUNT.A.INFO", ""},
			{"$SYS.REQ.ACCOUNT.A.STATZ", ""},
			{"$SYS.REQ.ACCOUNT.PING.STATZ", `{"accounts":["A"]}`},
			{"$SYS.REQ.SERVER.PING", ""},
			{"$SYS.REQ.SERVER.PING.STATSZ", ""},
			{"$SYS.REQ.SERVER.PING.IDZ", ""},
			{"$SYS.REQ.SERVER.PING.VARZ", ""},
			{"$SYS.REQ.SERVER.PING.SUBSZ", `{"subscriptions":true,"test":"a.sub"}`},
			{"$SYS.REQ.SERVER.PING.CONNZ", `{"auth":true,"subscriptions":true}`},
			{"$SYS.REQ.SERVER.PING.ROUTEZ", ""},
			{"$SYS.REQ.SERVER.PING.GATEWAYZ", ""},
			{"$SYS.REQ.SERVER.PING.LEAFZ", ""},
			{"$SYS.REQ.SERVER.PING.HEALTHZ", ""},
			{"$SYS.REQ.SERVER.PING.JSZ", ""},
			{"$SYS.REQ.ACCOUNT.A.SUBSZ", ""},
			{"$SYS.REQ.ACCOUNT.A.CONNS", ""},
		} {
			resp, err := sys.Request(req.subj, []byte(req.body), 5*time.Second)
			require.NoError(t, err, "%s %s", name, req.subj)
			add(strings.TrimPrefix(req.subj, "$SYS.REQ.")+" "+req.body, resp.Data)
		}

		a.Close()
		_, err = nats.Connect(url, nats.UserInfo("a", "wrong"))
		require.Error(t, err)
		for seen := map[string]bool{}; len(seen) < 3; {
			m, err := events.NextMsg(5 * time.Second)
			require.NoError(t, err, "%s: events seen %v", name, seen)
			ev := strings.TrimPrefix(m.Subject, "$SYS.ACCOUNT.A.")
			if !seen[ev] {
				seen[ev] = true
				add(ev, m.Data)
			}
		}
		m, err := authErrs.NextMsg(5 * time.Second)
		require.NoError(t, err)
		add("AUTH.ERR", m.Data)
	}

	// What Skiff leaves out, by answer ("" for all), as key path prefixes
	// (docs/monitoring.md says why).
	missingOK := map[string][]string{
		"": {".server.feature_flags"}, // nats-server's feature flags
		// A client's round trip time is not measured; the subscription's
		// account tag is not shown.
		"SERVER.PING.CONNZ {\"auth\":true,\"subscriptions\":true}":      {".data.connections[].rtt"},
		"SERVER.PING.SUBSZ {\"subscriptions\":true,\"test\":\"a.sub\"}": {".data.subscriptions_list[].account_tag"},
		"ACCOUNT.A.SUBSZ ": {".data.subscriptions_list[].account_tag"},
		// An account's traffic is not split by routes, gateways and leaf
		// nodes (/accstatz's difference).
		"SERVER.CONNS":     {".sent.", ".received."},
		"ACCOUNT.A.CONNS ": {".sent.", ".received."},
		"ACCOUNT.A.STATZ ": {".data.account_statz[].sent.", ".data.account_statz[].received."},
		"ACCOUNT.PING.STATZ {\"accounts\":[\"A\"]}": {".data.account_statz[].sent.", ".data.account_statz[].received."},
		// /varz's differences, the same over HTTP.
		"SERVER.PING.VARZ ": {".data.cluster", ".data.config_digest", ".data.config_load_time", ".data.disk_io_wait_stats",
			".data.feature_flags", ".data.gateway", ".data.http_base_path", ".data.https_port", ".data.jetstream",
			".data.leaf", ".data.leafnodes", ".data.mqtt", ".data.remotes", ".data.stale_connection", ".data.stalled_clients",
			".data.tls_timeout", ".data.websocket"},
	}
	// What Skiff has that nats-server leaves out here, with these values.
	extraOK := map[string][]string{
		"SERVER.PING.VARZ ": {".data.max_subscriptions"}, // omitted by nats-server when unlimited (0)
	}
	prefixed := func(k string, prefixes []string) bool {
		return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(k, p) })
	}
	require.Equal(t, slices.Sorted(maps.Keys(keys["nats-server"])), slices.Sorted(maps.Keys(keys["skiff"])))
	for _, what := range slices.Sorted(maps.Keys(keys["skiff"])) {
		ours, ref := keys["skiff"][what], keys["nats-server"][what]
		for k := range ours {
			require.True(t, ref[k] || prefixed(k, extraOK[what]), "%s: Skiff's %s is not nats-server's", what, k)
		}
		for k := range ref {
			require.True(t, ours[k] || prefixed(k, missingOK[""]) || prefixed(k, missingOK[what]),
				"%s: nats-server's %s is missing from Skiff's", what, k)
		}
	}
}
