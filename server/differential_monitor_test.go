package server_test

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/broker"
	"github.com/skiffmq/skiff/internal/jwttest"
)

// TestDifferentialAccountMonitoring loads monitor.conf into Skiff and
// nats-server, runs the same traffic in every account on each, and
// requires /accountz (the list and each account's detail) and /accstatz
// to have the same shape and the same values, except where the servers
// differ by nature or by design (skiffLacks, skiffDiffers).
func TestDifferentialAccountMonitoring(t *testing.T) {
	skiff := accountsServer(t, nil)
	runAccountTraffic(t, skiff.ClientURL(), skiff.NumClients)
	ref := startMonitoredReference(t, monitorConf)
	runAccountTraffic(t, ref.ClientURL(), func() int { return ref.NumClients() })
	ours := "http://" + skiff.MonitorAddr().String()
	theirs := "http://" + ref.MonitorAddr().String()

	paths := []string{"/accountz", "/accstatz?unused=1"}
	for _, acc := range []string{"$G", "A", "B", "C"} {
		paths = append(paths, "/accountz?acc="+url.QueryEscape(acc))
	}
	requireSameMonitoring(t, ours, theirs, paths, []string{"auth=1", "auth=1&acc=A", "auth=1&acc=%24G", "auth=1&acc=nope", "auth=1&user=b2", "acc=B"})
}

// TestDifferentialAccountMonitoringJWT is the same in operator mode: an
// account with tags, a signing key and a revoked user, its users (one
// signed by the signing key, one a bearer token), and another account,
// loaded from the same operator configuration into both servers.
func TestDifferentialAccountMonitoringJWT(t *testing.T) {
	op := jwttest.NewOperator(t)
	acc := op.Account("TEAM", jwttest.AccountClaims(func(c *jwt.AccountClaims) { c.Tags = jwt.TagList{"team:a"} }))
	sk := acc.AddSigningKey()
	acc.Revoke(acc.User("gone").Pub, time.Unix(1_700_000_000, 0))
	other := op.Account("OTHER")
	conf := filepath.Join(t.TempDir(), "operator.conf")
	require.NoError(t, os.WriteFile(conf, []byte(op.Conf(acc, other)), 0o600))
	users := map[string]*jwttest.User{
		"alice":  acc.User("alice", jwttest.Tags("role:dev")),
		"signed": acc.User("signed", jwttest.SignedWith(sk)),
		"bearer": acc.User("bearer", jwttest.Bearer()),
		"bob":    other.User("bob"),
	}
	connectAll := func(url string, clients func() int) {
		// In one order on both: each client receives its own and the
		// later clients' messages.
		for _, name := range slices.Sorted(maps.Keys(users)) {
			u := users[name]
			nc, err := nats.Connect(url, nats.MaxReconnects(0), nats.Name(name), nats.UserCredentials(u.CredsFile(t)))
			require.NoError(t, err, name)
			t.Cleanup(nc.Close)
			_, err = nc.SubscribeSync("work")
			require.NoError(t, err)
			require.NoError(t, nc.Publish("work", []byte(name)))
			require.NoError(t, nc.Flush())
		}
		require.Equal(t, len(users), clients())
	}

	bc, err := broker.LoadConfig(conf)
	require.NoError(t, err)
	skiff := RunMonitored(t, bc.Server)
	ref := startMonitoredReference(t, conf)
	// Before any client, Skiff lists the preloaded accounts (it registers
	// them at start); nats-server lists an account once a client looked
	// it up. Once both accounts have clients, the lists are the same.
	before := func(base string) any {
		v := fetchJSON(t, base+"/accountz")
		stableMonitorValues(v, false)
		return v["accounts"]
	}
	require.Equal(t, []any{"$G"}, before("http://"+ref.MonitorAddr().String()))
	require.Equal(t, sortedAny([]any{"$G", acc.Pub, other.Pub}), sortedAny(before("http://"+skiff.MonitorAddr().String())))
	connectAll(skiff.ClientURL(), skiff.NumClients)
	connectAll(ref.ClientURL(), func() int { return ref.NumClients() })

	paths := []string{"/accountz", "/accstatz?unused=1", "/accountz?acc=%24G", "/accountz?acc=" + acc.Pub, "/accountz?acc=" + other.Pub}
	requireSameMonitoring(t, "http://"+skiff.MonitorAddr().String(), "http://"+ref.MonitorAddr().String(), paths,
		[]string{"auth=1", "auth=1&acc=" + acc.Pub, "auth=1&user=" + users["bob"].Pub})
}

// requireSameMonitoring requires the answers of Skiff (at the monitoring
// address ours) and nats-server (theirs) to paths to have the same shape
// and values, except where the servers differ by nature or by design
// (skiffLacks, skiffDiffers), and /connz with each of connzQueries to say
// the same of whom each connection is.
func requireSameMonitoring(t *testing.T, ours, theirs string, paths, connzQueries []string) {
	for _, path := range paths {
		t.Run(path, func(t *testing.T) {
			got, want := settledMonitoring(t, ours+path, theirs+path)

			// Shape: every key Skiff writes, nats-server writes too; those
			// only nats-server writes are the ones listed.
			gotKeys, wantKeys := map[string]bool{}, map[string]bool{}
			jsonPaths(got, "", gotKeys)
			jsonPaths(want, "", wantKeys)
			for k := range gotKeys {
				require.True(t, wantKeys[k], "Skiff writes %s, nats-server does not", k)
			}
			var missing []string
			for k := range wantKeys {
				if !gotKeys[k] {
					missing = append(missing, k)
				}
			}
			slices.Sort(missing)
			require.Equal(t, skiffLacks[strings.SplitN(path, "?", 2)[0]], missing, "keys only nats-server writes")

			// Values: the same once what differs by nature is taken out.
			stableMonitorValues(got, false)
			stableMonitorValues(want, true)
			require.Equal(t, want, got)
		})
	}
	for _, query := range connzQueries {
		t.Run("/connz?"+query, func(t *testing.T) {
			require.Equal(t, connIdentities(t, theirs+"/connz?"+query), connIdentities(t, ours+"/connz?"+query))
		})
	}
}

// settledMonitoring fetches ours and theirs until their values agree
// (as the comparison sees them), for at most two seconds, and returns the
// last answers. nats-server adds a read's messages to its account's
// statistics after it answered the read's PING, so a client's Flush does
// not wait for them.
func settledMonitoring(t *testing.T, ours, theirs string) (got, want map[string]any) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, want = fetchJSON(t, ours), fetchJSON(t, theirs)
		g, w := jsonCopy(t, got), jsonCopy(t, want)
		stableMonitorValues(g, false)
		stableMonitorValues(w, true)
		if reflect.DeepEqual(g, w) || time.Now().After(deadline) {
			return got, want
		}
	}
}

// jsonCopy returns a deep copy of a decoded JSON object.
func jsonCopy(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

// connIdentities returns, by connection name, what /connz says of whom
// each connection acts as.
func connIdentities(t *testing.T, u string) map[string][6]any {
	t.Helper()
	out := map[string][6]any{}
	conns, _ := fetchJSON(t, u)["connections"].([]any)
	for _, c := range conns {
		ci := c.(map[string]any)
		out[ci["name"].(string)] = [6]any{ci["account"], ci["name_tag"], ci["issuer_key"], ci["authorized_user"], ci["jwt"], ci["tags"]}
	}
	return out
}

// skiffLacks are the keys nats-server writes and Skiff does not, by
// endpoint: nats-server splits an account's traffic by routes, gateways
// and leaf nodes, which Skiff does not count per account (and has no
// gateways or leaf nodes).
var skiffLacks = map[string][]string{
	"/accountz": nil,
	"/accstatz": func() []string {
		var keys []string
		for _, dir := range []string{"received", "sent"} {
			for _, via := range []string{"gateways", "leafs", "routes"} {
				p := ".account_statz[]." + dir + "." + via
				keys = append(keys, p, p+".bytes", p+".msgs")
			}
		}
		slices.Sort(keys)
		return keys
	}(),
}

// skiffDiffers are the values taken out of the comparison, each for a
// reason documented in docs/monitoring.md:
//   - subscriptions of accounts with exports or imports (A, B): Skiff
//     counts its bridges, nats-server its shadow subscriptions;
//   - sent of A and B: Skiff counts a message sent to a client in the
//     client's account; nats-server counts a delivery across a stream
//     import in the exporting (publishing) account, and across a service
//     import in the account it is delivered in, and the requests' bytes
//     include a Nats-Request-Info header whose values differ by server.
var skiffDiffers = map[string]bool{"A": true, "B": true}

// stableMonitorValues removes from an /accountz or /accstatz answer what
// two servers cannot share: identities, times, and the figures of
// skiffDiffers; it puts lists whose order is not part of the answer in
// order, and shows reply subjects of response tables (random) as _R_.
// For the reference's answer, it also drops what skiffLacks lists.
func stableMonitorValues(v map[string]any, reference bool) {
	delete(v, "server_id")
	delete(v, "now")
	if accs, ok := v["accounts"].([]any); ok {
		slices.SortFunc(accs, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
	}
	if d, ok := v["account_detail"].(map[string]any); ok {
		delete(d, "update_time")
		delete(d, "sublist_stats") // how each index counts is its own; its keys are compared
		if skiffDiffers[d["account_name"].(string)] {
			delete(d, "subscriptions")
		}
		for _, key := range []string{"exports", "imports"} {
			if list, ok := d[key].([]any); ok {
				for _, e := range list {
					if approved, ok := e.(map[string]any)["approved_accounts"].([]any); ok {
						slices.SortFunc(approved, func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
					}
				}
				sortByJSON(list)
			}
		}
		if resp, ok := d["responses"].(map[string]any); ok {
			var list []any
			for key, r := range resp {
				m := r.(map[string]any)
				if reference && m["type"] == float64(2) {
					// nats-server writes a response's type as the number
					// of jwt.Service (its map values are not addressable,
					// so ExportType's MarshalJSON is not used); jwt's
					// UnmarshalJSON refuses a number. Skiff writes the
					// name, as for imports.
					m["type"] = "service"
				}
				for _, f := range []string{"to", "local_subject"} {
					if m[f] == key {
						m[f] = "_R_"
					}
				}
				list = append(list, m)
			}
			sortByJSON(list)
			d["responses"] = list
		}
	}
	if stats, ok := v["account_statz"].([]any); ok {
		for _, s := range stats {
			st := s.(map[string]any)
			if skiffDiffers[st["acc"].(string)] {
				delete(st, "num_subscriptions")
				delete(st, "sent")
			}
			if reference {
				for _, dir := range []string{"received", "sent"} {
					if ds, ok := st[dir].(map[string]any); ok {
						delete(ds, "gateways")
						delete(ds, "leafs")
						delete(ds, "routes")
					}
				}
			}
		}
		sortByJSON(stats)
	}
}

func sortedAny(v any) []any {
	list, _ := v.([]any)
	return slices.SortedFunc(slices.Values(list), func(a, b any) int { return strings.Compare(a.(string), b.(string)) })
}

func sortByJSON(list []any) {
	slices.SortFunc(list, func(a, b any) int {
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		return strings.Compare(string(ja), string(jb))
	})
}

// jsonPaths collects the paths of every key of a decoded JSON value:
// ".a.b" for objects, "[]" for the elements of a list, and "_R_" for a
// key that is a response table's reply subject.
func jsonPaths(v any, path string, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if strings.HasPrefix(k, "_R_.") {
				k = "_R_"
			}
			out[path+"."+k] = true
			jsonPaths(e, path+"."+k, out)
		}
	case []any:
		for _, e := range x {
			jsonPaths(e, path+"[]", out)
		}
	}
}

func fetchJSON(t *testing.T, u string) map[string]any {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s: %s", u, body)
	var v map[string]any
	require.NoError(t, json.Unmarshal(body, &v), "GET %s: %s", u, body)
	return v
}

// startMonitoredReference starts nats-server in process with the
// configuration file conf and its monitoring port.
func startMonitoredReference(t *testing.T, conf string) *natsserver.Server {
	t.Helper()
	o := referenceConfOptions(t, conf)
	o.HTTPHost, o.HTTPPort = "127.0.0.1", -1
	return runReference(t, o)
}
