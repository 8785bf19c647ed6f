package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/server"
)

// RunMonitored starts a server with monitoring on an ephemeral port.
func RunMonitored(t testing.TB, opts server.Options) *server.Server {
	t.Helper()
	opts.HTTPPort = server.RandomPort
	s := RunServer(t, opts)
	require.NotNil(t, s.MonitorAddr())
	return s
}

// httpGet fetches a monitoring path and returns the status, content type
// and body.
func monitorGet(t testing.TB, s *server.Server, path string) (status int, contentType string, body []byte) {
	t.Helper()
	resp, err := http.Get("http://" + s.MonitorAddr().String() + path)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Content-Type"), body
}

// MonitorJSON fetches a monitoring path, requires a 200 JSON answer, and
// decodes it into v.
func MonitorJSON(t testing.TB, s *server.Server, path string, v any) {
	t.Helper()
	status, ct, body := monitorGet(t, s, path)
	require.Equal(t, http.StatusOK, status, "GET %s: %s", path, body)
	require.Equal(t, "application/json", ct)
	require.NoError(t, json.Unmarshal(body, v), "GET %s: %s", path, body)
}

func getVarz(t testing.TB, s *server.Server) server.Varz {
	t.Helper()
	var v server.Varz
	MonitorJSON(t, s, "/varz", &v)
	return v
}

func tcpPort(t testing.TB, a net.Addr) int {
	t.Helper()
	ta, ok := a.(*net.TCPAddr)
	require.True(t, ok, "%T", a)
	return ta.Port
}

// receive requires n messages on sub.
func receiveN(t testing.TB, sub *nats.Subscription, n int) {
	t.Helper()
	for range n {
		_, err := sub.NextMsg(5 * time.Second)
		require.NoError(t, err)
	}
}

func clientID(t testing.TB, nc *nats.Conn) uint64 {
	t.Helper()
	id, err := nc.GetClientID()
	require.NoError(t, err)
	return id
}

func TestMonitorOff(t *testing.T) {
	s := RunServer(t, server.Options{})
	require.Nil(t, s.MonitorAddr())
}

func TestMonitorHealthz(t *testing.T) {
	s := RunMonitored(t, server.Options{})
	status, ct, body := monitorGet(t, s, "/healthz")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "application/json", ct)
	require.JSONEq(t, `{"status":"ok"}`, string(body))
}

func TestMonitorVarz(t *testing.T) {
	s := RunMonitored(t, server.Options{ServerName: "skiff-test"})
	subc := Connect(t, s)
	sub, err := subc.SubscribeSync("foo.>")
	require.NoError(t, err)
	require.NoError(t, subc.Flush())
	pub := Connect(t, s)
	for range 10 {
		require.NoError(t, pub.Publish("foo.bar", []byte("hello")))
	}
	require.NoError(t, pub.Flush())
	receiveN(t, sub, 10)

	before := time.Now().UTC()
	v := getVarz(t, s)
	require.Equal(t, s.ID(), v.ID)
	require.Equal(t, "skiff-test", v.Name)
	require.Equal(t, server.Version, v.Version)
	require.Equal(t, 1, v.Proto)
	require.Equal(t, runtime.Version(), v.GoVersion)
	require.Equal(t, "127.0.0.1", v.Host)
	require.Equal(t, tcpPort(t, s.Addr()), v.Port)
	require.Equal(t, "127.0.0.1", v.HTTPHost)
	require.Equal(t, tcpPort(t, s.MonitorAddr()), v.HTTPPort)
	require.Equal(t, server.DefaultMaxConnections, v.MaxConn)
	require.Equal(t, server.DefaultMaxSubscriptions, v.MaxSubs)
	require.Equal(t, server.DefaultPingInterval, v.PingInterval)
	require.Equal(t, server.DefaultMaxPingsOut, v.MaxPingsOut)
	require.InDelta(t, server.DefaultAuthTimeout.Seconds(), v.AuthTimeout, 1e-9)
	require.Equal(t, server.DefaultMaxControlLine, v.MaxControlLine)
	require.Equal(t, server.DefaultMaxPayload, v.MaxPayload)
	require.Equal(t, int64(server.DefaultMaxPending), v.MaxPending)
	require.Equal(t, server.DefaultWriteDeadline, v.WriteDeadline)
	require.False(t, v.Start.IsZero())
	require.False(t, v.Now.Before(v.Start))
	require.WithinDuration(t, before, v.Now, 5*time.Second)
	require.NotEmpty(t, v.Uptime)
	require.Positive(t, v.Mem)
	require.Equal(t, runtime.NumCPU(), v.Cores)
	require.GreaterOrEqual(t, v.CPU, 0.0)

	require.Equal(t, 2, v.Connections)
	require.Equal(t, uint64(2), v.TotalConnections)
	require.Equal(t, int64(10), v.InMsgs)
	require.Equal(t, int64(50), v.InBytes)
	require.Equal(t, int64(10), v.OutMsgs)
	require.Equal(t, int64(50), v.OutBytes)
	require.Equal(t, v.InMsgs, v.InClientMsgs)
	require.Equal(t, v.OutBytes, v.OutClientBytes)
	require.Zero(t, v.SlowConsumers)
	require.Equal(t, uint32(1), v.Subscriptions)
	require.Equal(t, map[string]uint64{"/varz": 1}, v.HTTPReqStats)

	// A closed client's counts stay in the totals.
	pub.Close()
	require.Eventually(t, func() bool { return getVarz(t, s).Connections == 1 }, 5*time.Second, 10*time.Millisecond)
	v = getVarz(t, s)
	require.Equal(t, uint64(2), v.TotalConnections)
	require.Equal(t, int64(10), v.InMsgs)
	require.Equal(t, int64(50), v.InBytes)
	require.Equal(t, int64(10), v.OutMsgs)

	_, _, _ = monitorGet(t, s, "/healthz")
	v = getVarz(t, s)
	require.Equal(t, uint64(1), v.HTTPReqStats["/healthz"])
	require.Greater(t, v.HTTPReqStats["/varz"], uint64(2))
}

// connzClients connects alpha (3 subscriptions, receives 2 messages),
// beta (1 subscription, publishes 5 one-byte messages) and gamma (2
// subscriptions, publishes 2 ten-byte messages to alpha), in that order,
// and flushes them gamma, beta, alpha, so that alpha was active last.
func connzClients(t *testing.T, s *server.Server) (alpha, beta, gamma *nats.Conn) {
	alpha = Connect(t, s, nats.Name("alpha"))
	beta = Connect(t, s, nats.Name("beta"))
	gamma = Connect(t, s, nats.Name("gamma"))
	a1, err := alpha.SubscribeSync("a.1")
	require.NoError(t, err)
	for _, subj := range []string{"a.2", "a.3"} {
		_, err := alpha.SubscribeSync(subj)
		require.NoError(t, err)
	}
	_, err = beta.SubscribeSync("b.1")
	require.NoError(t, err)
	for _, subj := range []string{"c.1", "c.2"} {
		_, err := gamma.SubscribeSync(subj)
		require.NoError(t, err)
	}
	require.NoError(t, alpha.Flush())
	for range 5 {
		require.NoError(t, beta.Publish("nobody", []byte("x")))
	}
	for range 2 {
		require.NoError(t, gamma.Publish("a.1", []byte("0123456789")))
	}
	receiveN(t, a1, 2)
	for _, nc := range []*nats.Conn{gamma, beta, alpha} {
		time.Sleep(5 * time.Millisecond) // distinct last-activity times
		require.NoError(t, nc.Flush())
	}
	return alpha, beta, gamma
}

func connzNames(c server.Connz) []string {
	var names []string
	for _, ci := range c.Conns {
		names = append(names, ci.Name)
	}
	return names
}

func TestMonitorConnz(t *testing.T) {
	s := RunMonitored(t, server.Options{})
	alpha, beta, gamma := connzClients(t, s)

	// A flush's PONG reaches the client before the writer that sent it
	// subtracts it from the connection's pending bytes, so read /connz
	// until that bookkeeping has caught up.
	var c server.Connz
	require.Eventually(t, func() bool {
		c = server.Connz{}
		MonitorJSON(t, s, "/connz", &c)
		for _, ci := range c.Conns {
			if ci.Pending != 0 {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "pending bytes never drained")
	require.Equal(t, s.ID(), c.ID)
	require.Equal(t, 3, c.NumConns)
	require.Equal(t, 3, c.Total)
	require.Equal(t, 0, c.Offset)
	require.Equal(t, 1024, c.Limit)
	require.Equal(t, []string{"alpha", "beta", "gamma"}, connzNames(c))
	want := []struct {
		nc                                 *nats.Conn
		subs                               uint32
		inMsgs, inBytes, outMsgs, outBytes int64
	}{
		{alpha, 3, 0, 0, 2, 20},
		{beta, 1, 5, 5, 0, 0},
		{gamma, 2, 2, 20, 0, 0},
	}
	for i, w := range want {
		ci := c.Conns[i]
		require.Equal(t, clientID(t, w.nc), ci.Cid)
		require.Equal(t, "127.0.0.1", ci.IP)
		require.Positive(t, ci.Port)
		require.Equal(t, "go", ci.Lang)
		require.Equal(t, nats.Version, ci.Version)
		require.Equal(t, w.subs, ci.NumSubs)
		require.Equal(t, w.inMsgs, ci.InMsgs)
		require.Equal(t, w.inBytes, ci.InBytes)
		require.Equal(t, w.outMsgs, ci.OutMsgs)
		require.Equal(t, w.outBytes, ci.OutBytes)
		require.Zero(t, ci.Pending)
		require.NotEmpty(t, ci.Uptime)
		require.NotEmpty(t, ci.Idle)
		require.False(t, ci.Start.IsZero())
		require.False(t, ci.LastActivity.Before(ci.Start))
		require.Empty(t, ci.Subs)
		require.Empty(t, ci.AuthorizedUser)
	}

	for _, tc := range []struct {
		sort string
		want []string
	}{
		{"cid", []string{"alpha", "beta", "gamma"}},
		{"start", []string{"alpha", "beta", "gamma"}},
		{"uptime", []string{"gamma", "beta", "alpha"}},
		{"subs", []string{"alpha", "gamma", "beta"}},
		{"msgs_from", []string{"beta", "gamma", "alpha"}},
		{"bytes_from", []string{"gamma", "beta", "alpha"}},
		{"msgs_to", []string{"alpha", "beta", "gamma"}},
		{"bytes_to", []string{"alpha", "beta", "gamma"}},
		{"pending", []string{"alpha", "beta", "gamma"}},
		{"last", []string{"alpha", "beta", "gamma"}},
		{"idle", []string{"gamma", "beta", "alpha"}},
	} {
		t.Run("sort="+tc.sort, func(t *testing.T) {
			var c server.Connz
			MonitorJSON(t, s, "/connz?sort="+tc.sort, &c)
			require.Equal(t, tc.want, connzNames(c))
		})
	}

	t.Run("paging", func(t *testing.T) {
		var c server.Connz
		MonitorJSON(t, s, "/connz?offset=1&limit=1", &c)
		require.Equal(t, []string{"beta"}, connzNames(c))
		require.Equal(t, 1, c.NumConns)
		require.Equal(t, 3, c.Total)
		require.Equal(t, 1, c.Offset)
		require.Equal(t, 1, c.Limit)

		MonitorJSON(t, s, "/connz?sort=subs&offset=1&limit=5", &c)
		require.Equal(t, []string{"gamma", "beta"}, connzNames(c))

		var raw map[string]any
		MonitorJSON(t, s, "/connz?offset=7", &raw)
		require.Equal(t, []any{}, raw["connections"])
		require.InDelta(t, 0, raw["num_connections"], 0)
		require.InDelta(t, 3, raw["total"], 0)

		MonitorJSON(t, s, "/connz?limit=1000000", &c)
		require.Equal(t, 10_000, c.Limit)
		MonitorJSON(t, s, "/connz?limit=0", &c)
		require.Equal(t, 1024, c.Limit)
	})

	t.Run("cid", func(t *testing.T) {
		var c server.Connz
		MonitorJSON(t, s, "/connz?cid="+strconv.FormatUint(clientID(t, gamma), 10), &c)
		require.Equal(t, []string{"gamma"}, connzNames(c))
		require.Equal(t, 1, c.Total)
		MonitorJSON(t, s, "/connz?cid=999999", &c)
		require.Empty(t, c.Conns)
		require.Zero(t, c.Total)
	})

	t.Run("subs", func(t *testing.T) {
		var c server.Connz
		MonitorJSON(t, s, "/connz?subs=1", &c)
		require.Equal(t, []string{"a.1", "a.2", "a.3"}, c.Conns[0].Subs)
		require.Equal(t, []string{"b.1"}, c.Conns[1].Subs)
		require.Equal(t, []string{"c.1", "c.2"}, c.Conns[2].Subs)
		require.Empty(t, c.Conns[0].SubsDetail)

		c = server.Connz{}
		MonitorJSON(t, s, "/connz?subs=detail&cid="+strconv.FormatUint(clientID(t, alpha), 10), &c)
		require.Len(t, c.Conns, 1)
		d := c.Conns[0].SubsDetail
		require.Len(t, d, 3)
		require.Equal(t, "a.1", d[0].Subject)
		require.Equal(t, "1", d[0].Sid)
		require.Equal(t, clientID(t, alpha), d[0].Cid)
		require.Empty(t, c.Conns[0].Subs)
	})
}

func TestMonitorConnzAuth(t *testing.T) {
	s := RunMonitored(t, server.Options{Users: []server.User{{Name: "ann", Password: "secret"}}})
	Connect(t, s, nats.UserInfo("ann", "secret"))
	var c server.Connz
	MonitorJSON(t, s, "/connz", &c)
	require.Len(t, c.Conns, 1)
	require.Empty(t, c.Conns[0].AuthorizedUser, "only with auth=true, as in the reference server")
	MonitorJSON(t, s, "/connz?auth=true", &c)
	require.Equal(t, "ann", c.Conns[0].AuthorizedUser)
	require.True(t, getVarz(t, s).AuthRequired)
}

func getSubsz(t testing.TB, s *server.Server, query string) server.Subsz {
	t.Helper()
	var sz server.Subsz
	MonitorJSON(t, s, "/subsz"+query, &sz)
	return sz
}

func subszEntries(sz server.Subsz) []string {
	var out []string
	for _, d := range sz.Subs {
		out = append(out, d.Subject+"|"+d.Queue)
	}
	return out
}

func TestMonitorSubsz(t *testing.T) {
	s := RunMonitored(t, server.Options{})
	a := Connect(t, s)
	for _, p := range []string{"foo.#", "foo.*", "#", "foo.>", "bar.*"} { // sids 1..5
		_, err := a.SubscribeSync(p)
		require.NoError(t, err)
	}
	require.NoError(t, a.Flush())
	b := Connect(t, s)
	for range 2 {
		_, err := b.QueueSubscribeSync("foo.bar", "workers")
		require.NoError(t, err)
	}
	plain, err := b.SubscribeSync("foo.bar")
	require.NoError(t, err)
	require.NoError(t, b.Flush())

	sz := getSubsz(t, s, "")
	require.Equal(t, s.ID(), sz.ID)
	require.Equal(t, uint32(8), sz.NumSubs)
	require.Equal(t, uint64(8), sz.NumInserts)
	require.Zero(t, sz.NumRemoves)
	require.Zero(t, sz.NumCache)
	require.Equal(t, 8, sz.Total)
	require.Empty(t, sz.Subs)
	// foo.bar: one plain subscription and one queue group; the five other
	// patterns one subscription each.
	require.Equal(t, uint32(2), sz.MaxFanout)
	require.InDelta(t, 7.0/6.0, sz.AvgFanout, 1e-9)

	sz = getSubsz(t, s, "?subs=1")
	require.Equal(t, []string{
		"foo.#|", "foo.*|", "#|", "foo.>|", "bar.*|",
		"foo.bar|workers", "foo.bar|workers", "foo.bar|",
	}, subszEntries(sz))
	require.Equal(t, "1", sz.Subs[0].Sid)
	require.Equal(t, clientID(t, a), sz.Subs[0].Cid)
	require.Equal(t, clientID(t, b), sz.Subs[7].Cid)
	require.Equal(t, 1024, sz.Limit)

	sz = getSubsz(t, s, "?subs=1&offset=2&limit=3")
	require.Equal(t, []string{"#|", "foo.>|", "bar.*|"}, subszEntries(sz))
	require.Equal(t, 8, sz.Total)
	require.Equal(t, 2, sz.Offset)
	require.Equal(t, 3, sz.Limit)

	for _, tc := range []struct {
		test string
		want []string
	}{
		{"foo", []string{"foo.#|", "#|"}},
		{"foo.bar", []string{"foo.#|", "foo.*|", "#|", "foo.>|", "foo.bar|workers", "foo.bar|workers", "foo.bar|"}},
		{"foo.bar.baz", []string{"foo.#|", "#|", "foo.>|"}},
		{"bar.baz", []string{"#|", "bar.*|"}},
		{"bar", []string{"#|"}},
		{"x.y.z", []string{"#|"}},
	} {
		t.Run("test="+tc.test, func(t *testing.T) {
			sz := getSubsz(t, s, "?subs=1&test="+tc.test)
			require.Equal(t, tc.want, subszEntries(sz))
			require.Equal(t, len(tc.want), sz.Total)
			require.Equal(t, len(tc.want), getSubsz(t, s, "?test="+tc.test).Total, "total without subs=1")
		})
	}

	require.NoError(t, plain.Unsubscribe())
	require.NoError(t, b.Flush())
	sz = getSubsz(t, s, "")
	require.Equal(t, uint32(7), sz.NumSubs)
	require.Equal(t, uint64(1), sz.NumRemoves)
	require.Equal(t, uint64(8), sz.NumInserts)
}

func TestMonitorSubszDeliveries(t *testing.T) {
	s := RunMonitored(t, server.Options{})
	nc := Connect(t, s)
	sub, err := nc.SubscribeSync("q.x")
	require.NoError(t, err)
	require.NoError(t, sub.AutoUnsubscribe(5))
	for range 2 {
		require.NoError(t, nc.Publish("q.x", []byte("m")))
	}
	receiveN(t, sub, 2)
	sz := getSubsz(t, s, "?subs=1")
	require.Len(t, sz.Subs, 1)
	require.Equal(t, int64(2), sz.Subs[0].Msgs)
	require.Equal(t, int64(5), sz.Subs[0].Max)
	require.Equal(t, uint64(2), sz.NumMatches, "one lookup per message published")
}

func TestMonitorMetrics(t *testing.T) {
	s := RunMonitored(t, server.Options{MaxPayload: 4096, MaxPending: 1 << 20, MaxConnections: 100})
	subc := Connect(t, s)
	sub, err := subc.SubscribeSync("m.*")
	require.NoError(t, err)
	require.NoError(t, subc.Flush())
	pub := Connect(t, s)
	for range 3 {
		require.NoError(t, pub.Publish("m.1", []byte("1234")))
	}
	require.NoError(t, pub.Flush())
	receiveN(t, sub, 3)

	families := scrapeMetrics(t, s)

	for name, want := range map[string]struct {
		kind  dto.MetricType
		value float64
	}{
		"skiff_connections":          {dto.MetricType_GAUGE, 2},
		"skiff_total_connections":    {dto.MetricType_GAUGE, 2},
		"skiff_subscriptions":        {dto.MetricType_GAUGE, 1},
		"skiff_in_msgs_total":        {dto.MetricType_COUNTER, 3},
		"skiff_out_msgs_total":       {dto.MetricType_COUNTER, 3},
		"skiff_in_bytes_total":       {dto.MetricType_COUNTER, 12},
		"skiff_out_bytes_total":      {dto.MetricType_COUNTER, 12},
		"skiff_slow_consumers_total": {dto.MetricType_COUNTER, 0},
		"skiff_max_payload_bytes":    {dto.MetricType_GAUGE, 4096},
		"skiff_max_pending_bytes":    {dto.MetricType_GAUGE, 1 << 20},
		"skiff_max_connections":      {dto.MetricType_GAUGE, 100},
		"skiff_info":                 {dto.MetricType_GAUGE, 1},
	} {
		f := families[name]
		require.NotNil(t, f, "%s missing", name)
		require.Equal(t, want.kind, f.GetType(), name)
		require.Len(t, f.GetMetric(), 1, name)
		m := f.GetMetric()[0]
		got := m.GetGauge().GetValue()
		if want.kind == dto.MetricType_COUNTER {
			got = m.GetCounter().GetValue()
		}
		require.InDelta(t, want.value, got, 0, name)
	}
	labels := map[string]string{}
	for _, l := range families["skiff_info"].GetMetric()[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	require.Equal(t, s.ID(), labels["server_id"])
	require.Equal(t, server.Version, labels["version"])
	require.Equal(t, uint64(1), getVarz(t, s).HTTPReqStats["/metrics"])
}

func TestMonitorBadRequests(t *testing.T) {
	s := RunMonitored(t, server.Options{})
	for _, path := range []string{
		"/connz?limit=abc",
		"/connz?limit=-1",
		"/connz?offset=-1",
		"/connz?offset=1.5",
		"/connz?sort=bogus",
		"/connz?sort=rtt",
		"/connz?sort=stop",
		"/connz?sort=reason",
		"/connz?cid=x",
		"/connz?cid=-3",
		"/connz?subs=maybe",
		"/connz?auth=sure",
		"/connz?state=closed",
		"/subsz?subs=x",
		"/subsz?limit=-5",
		"/subsz?offset=z",
		"/subsz?test=foo.*",
		"/subsz?test=foo.%23",
		"/subsz?test=foo.>",
		"/subsz?test=foo..bar",
	} {
		t.Run(path, func(t *testing.T) {
			status, ct, body := monitorGet(t, s, path)
			require.Equal(t, http.StatusBadRequest, status, "%s", body)
			require.Equal(t, "application/json", ct)
			var e struct {
				Error string `json:"error"`
			}
			require.NoError(t, json.Unmarshal(body, &e))
			require.NotEmpty(t, e.Error)
		})
	}

	resp, err := http.Post("http://"+s.MonitorAddr().String()+"/varz", "text/plain", nil)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// jsonKeys returns the JSON names of t's fields, those of embedded
// structs included.
func jsonKeys(t reflect.Type) map[string]bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	keys := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			for k := range jsonKeys(f.Type) {
				keys[k] = true
			}
			continue
		}
		if name != "" && name != "-" && f.IsExported() {
			keys[name] = true
		}
	}
	return keys
}

// requireKeysIn requires every key of the JSON object obj to be a field
// name of the reference server's type ref.
func requireKeysIn(t *testing.T, what string, obj any, ref reflect.Type) {
	t.Helper()
	m, ok := obj.(map[string]any)
	require.True(t, ok, "%s is %T", what, obj)
	require.NotEmpty(t, m, what)
	allowed := jsonKeys(ref)
	for k := range m {
		require.True(t, allowed[k], "%s: %q is not a field of %v", what, k, ref)
	}
}

// requireFieldsOfReference requires, for each pair of a Skiff type and a
// nats-server type, every JSON field name of the first to be one of the
// second's.
func requireFieldsOfReference(t *testing.T, pairs [][2]any) {
	t.Helper()
	for _, pair := range pairs {
		ours, ref := reflect.TypeOf(pair[0]), reflect.TypeOf(pair[1])
		allowed := jsonKeys(ref)
		for k := range jsonKeys(ours) {
			require.True(t, allowed[k], "%v.%s is not a field of %v", ours, k, ref)
		}
	}
}

// TestMonitorFieldNamesMatchReference checks Skiff's monitoring JSON
// against nats-server's types, which tools decode it into: the declared
// field names, the keys of real responses, and that a response decodes
// into the reference type with the same values.
func TestMonitorFieldNamesMatchReference(t *testing.T) {
	requireFieldsOfReference(t, [][2]any{
		{server.Varz{}, natsserver.Varz{}},
		{server.SlowConsumersStats{}, natsserver.SlowConsumersStats{}},
		{server.Connz{}, natsserver.Connz{}},
		{server.ConnInfo{}, natsserver.ConnInfo{}},
		{server.Subsz{}, natsserver.Subsz{}},
		{server.SubDetail{}, natsserver.SubDetail{}},
	})

	s := RunMonitored(t, server.Options{})
	nc := Connect(t, s, nats.Name("n"))
	_, err := nc.QueueSubscribeSync("foo.*", "q")
	require.NoError(t, err)
	require.NoError(t, nc.Publish("foo.bar", []byte("x")))
	require.NoError(t, nc.Flush())

	var v map[string]any
	MonitorJSON(t, s, "/varz", &v)
	requireKeysIn(t, "/varz", v, reflect.TypeOf(natsserver.Varz{}))
	requireKeysIn(t, "/varz slow_consumer_stats", v["slow_consumer_stats"], reflect.TypeOf(natsserver.SlowConsumersStats{}))
	var rv natsserver.Varz
	MonitorJSON(t, s, "/varz", &rv)
	require.Equal(t, s.ID(), rv.ID)
	require.Equal(t, int64(1), rv.InMsgs)
	require.Equal(t, server.DefaultPingInterval, rv.PingInterval)

	var c map[string]any
	MonitorJSON(t, s, "/connz?subs=detail&auth=1", &c)
	requireKeysIn(t, "/connz", c, reflect.TypeOf(natsserver.Connz{}))
	conns := c["connections"].([]any)
	require.Len(t, conns, 1)
	requireKeysIn(t, "/connz connection", conns[0], reflect.TypeOf(natsserver.ConnInfo{}))
	details := conns[0].(map[string]any)["subscriptions_list_detail"].([]any)
	requireKeysIn(t, "/connz subscription", details[0], reflect.TypeOf(natsserver.SubDetail{}))
	var rc natsserver.Connz
	MonitorJSON(t, s, "/connz?subs=1", &rc)
	require.Equal(t, []string{"foo.*"}, rc.Conns[0].Subs)
	require.Equal(t, int64(1), rc.Conns[0].InMsgs)

	var sz map[string]any
	MonitorJSON(t, s, "/subsz?subs=1", &sz)
	requireKeysIn(t, "/subsz", sz, reflect.TypeOf(natsserver.Subsz{}))
	requireKeysIn(t, "/subsz subscription", sz["subscriptions_list"].([]any)[0], reflect.TypeOf(natsserver.SubDetail{}))
	var rsz natsserver.Subsz
	MonitorJSON(t, s, "/subsz?subs=1", &rsz)
	require.Equal(t, uint32(1), rsz.NumSubs)
	require.Equal(t, "q", rsz.Subs[0].Queue)
}

// TestMonitorUnderChurn polls every endpoint while clients come and go,
// for the race detector, and requires the totals never to go down.
func TestMonitorUnderChurn(t *testing.T) {
	s := RunMonitored(t, server.Options{})
	stop := make(chan struct{})
	done := make(chan struct{})
	var published atomic.Int64
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			nc, err := nats.Connect(s.ClientURL(), nats.MaxReconnects(0))
			if err != nil {
				t.Error(err)
				return
			}
			sub, _ := nc.SubscribeSync("churn.*")
			_ = sub.AutoUnsubscribe(3)
			for range 5 {
				_ = nc.Publish("churn."+strconv.Itoa(i), []byte("payload"))
				published.Add(1)
			}
			_ = nc.Flush()
			nc.Close()
		}
	}()
	var last server.Varz
	var lastAcc server.AccountStat
	for range 30 {
		v := getVarz(t, s)
		require.GreaterOrEqual(t, v.InMsgs, last.InMsgs)
		require.GreaterOrEqual(t, v.OutMsgs, last.OutMsgs)
		require.GreaterOrEqual(t, v.InBytes, last.InBytes)
		require.GreaterOrEqual(t, v.OutBytes, last.OutBytes)
		last = v
		var stz server.AccountStatz
		MonitorJSON(t, s, "/accstatz?unused=1", &stz)
		require.Len(t, stz.Accounts, 1)
		acc := *stz.Accounts[0]
		require.GreaterOrEqual(t, acc.Received.Msgs, lastAcc.Received.Msgs)
		require.GreaterOrEqual(t, acc.Received.Bytes, lastAcc.Received.Bytes)
		require.GreaterOrEqual(t, acc.Sent.Msgs, lastAcc.Sent.Msgs)
		require.GreaterOrEqual(t, acc.Sent.Bytes, lastAcc.Sent.Bytes)
		lastAcc = acc
		var az server.Accountz
		MonitorJSON(t, s, "/accountz?acc=%24G", &az)
		var c server.Connz
		MonitorJSON(t, s, "/connz?subs=detail&sort=msgs_from", &c)
		getSubsz(t, s, "?subs=1&test=churn.1")
		status, _, _ := monitorGet(t, s, "/metrics")
		require.Equal(t, http.StatusOK, status)
	}
	close(stop)
	<-done
	require.Eventually(t, func() bool {
		v := getVarz(t, s)
		return v.Connections == 0 && v.InMsgs == published.Load()
	}, 5*time.Second, 10*time.Millisecond)
	// Every connection bound to $G at CONNECT: the account's totals are
	// the server's.
	stz := s.AccountStatz(server.AccountStatzOptions{IncludeUnused: true})
	require.Equal(t, published.Load(), stz.Accounts[0].Received.Msgs)
	require.Equal(t, getVarz(t, s).OutMsgs, stz.Accounts[0].Sent.Msgs)
}

// TestMonitorExtensions adds an endpoint and a collector before Start, as
// JetStream does, and checks what is refused.
func TestMonitorExtensions(t *testing.T) {
	opts := server.Options{Host: "127.0.0.1", Port: server.RandomPort, HTTPPort: server.RandomPort}
	s, err := server.New(opts)
	require.NoError(t, err)
	require.NoError(t, s.HandleMonitor("/extra", func(r *http.Request) (any, error) {
		if r.URL.Query().Get("fail") != "" {
			return nil, errors.New("asked to fail")
		}
		return map[string]int{"answer": 42}, nil
	}))
	require.Error(t, s.HandleMonitor("/extra", nil), "a path twice")
	require.Error(t, s.HandleMonitor("/varz", nil), "a built-in path")
	extra := prometheus.NewGauge(prometheus.GaugeOpts{Name: "extra_gauge", Help: "An added gauge."})
	extra.Set(7)
	require.NoError(t, s.RegisterMetrics(extra))
	require.NoError(t, s.Start())
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	require.Error(t, s.HandleMonitor("/late", nil), "after Start")
	require.Error(t, s.RegisterMetrics(prometheus.NewGauge(prometheus.GaugeOpts{Name: "late", Help: "x"})), "after Start")

	var v map[string]int
	MonitorJSON(t, s, "/extra", &v)
	require.Equal(t, 42, v["answer"])
	status, _, body := monitorGet(t, s, "/extra?fail=1")
	require.Equal(t, http.StatusBadRequest, status)
	require.Contains(t, string(body), "asked to fail")
	_, _, body = monitorGet(t, s, "/metrics")
	require.Contains(t, string(body), "extra_gauge 7")
	require.Contains(t, string(body), "skiff_connections 0")
}
