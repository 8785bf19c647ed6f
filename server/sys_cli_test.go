package server_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/internal/natscli"
	"github.com/skiffmq/skiff/server"
)

// sysCLI runs the nats CLI as the system account's user sys.
func sysCLI(t *testing.T, url string) func(args ...string) string {
	cli := natscli.New(t, natscli.Path(t), url)
	return func(args ...string) string {
		t.Helper()
		return cli.Run(append([]string{"--user", "sys", "--password", "sys"}, args...)...)
	}
}

// requestLines decodes the JSON lines `nats server request` prints, one
// answer per server, into nats-server's response type T.
func requestLines[T any](t *testing.T, out string) []T {
	t.Helper()
	var all []T
	for line := range strings.Lines(out) {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		var v T
		require.NoError(t, json.Unmarshal([]byte(line), &v), "%s", line)
		all = append(all, v)
	}
	return all
}

// TestSysCLI drives `nats server ...` against one server, as a user of
// the system account.
func TestSysCLI(t *testing.T) {
	o := sysOptions()
	o.ServerName = "solo"
	s := RunServer(t, o)
	connectAs(t, s, "a", nats.Name("tenant-app"))
	nats := sysCLI(t, s.ClientURL())

	out := nats("server", "list")
	require.Contains(t, out, "Server Overview")
	require.Regexp(t, `│ solo +│ +│ 127 +│ `+regexp.QuoteMeta(server.Version)+` +│ no +│ 2 `, out, "name, host, version, JetStream, connections")

	out = nats("server", "ping")
	require.Regexp(t, `(?m)^solo +rtt=`, out)
	require.Contains(t, out, "1 replies")
	require.NotContains(t, out, "Missing")

	for _, args := range [][]string{{"server", "info"}, {"server", "info", "solo"}, {"server", "info", s.ID()}} {
		out = nats(args...)
		require.Contains(t, out, "Server information for solo ("+s.ID()+")", args)
		require.Regexp(t, `Connections: 2\n`, out, args)
	}

	out = nats("server", "report", "connections")
	require.Contains(t, out, "Top 2 Connections out of 2")
	require.Regexp(t, `│ tenant-app +│ solo +│ +│ 127\.0\.0\.1:\d+ +│ A +│`, out, "name, server, account")

	out = nats("server", "report", "jetstream")
	require.Contains(t, out, "JetStream Summary")
	require.Regexp(t, `│ solo +│`, out)

	varz := requestLines[natsserver.ServerAPIVarzResponse](t, nats("server", "request", "variables"))
	require.Len(t, varz, 1)
	require.Equal(t, s.ID(), varz[0].Data.ID)
	connz := requestLines[natsserver.ServerAPIConnzResponse](t, nats("server", "request", "connections", "--subscriptions"))
	require.Len(t, connz, 1)
	require.Equal(t, 2, connz[0].Data.Total)
	subsz := requestLines[natsserver.ServerAPISubszResponse](t, nats("server", "request", "subscriptions"))
	require.Equal(t, s.ID(), subsz[0].Data.ID)
	start, _ := startSubs.Load(s)
	require.Equal(t, uint32(start.(int)+1), subsz[0].Data.NumSubs, "the system account's, the imports' and the CLI's inbox")
	routez := requestLines[natsserver.ServerAPIRoutezResponse](t, nats("server", "request", "routes"))
	require.Zero(t, routez[0].Data.NumRoutes)
	health := requestLines[natsserver.ServerAPIHealthzResponse](t, nats("server", "request", "jetstream-health"))
	require.Equal(t, "ok", health[0].Data.Status)
	accountz := requestLines[natsserver.ServerAPIAccountzResponse](t, nats("server", "request", "accounts", "--account", "A"))
	require.Equal(t, "A", accountz[0].Data.Account.AccountName)
	require.Equal(t, 1, accountz[0].Data.Account.ClientCnt)
	require.Equal(t, "SYS", accountz[0].Data.SystemAccount)
}

// TestSysCLICluster drives `nats server ...` against a cluster of three:
// every server answers a PING, wherever the CLI is connected.
func TestSysCLICluster(t *testing.T) {
	c := clustertest.Start(t, 3, sysOptions())
	c.WaitAccountInterest(t, "SYS", "$SYS.REQ.SERVER.PING.CONNZ", 0, 1, 2)
	for i := range 3 {
		connectAs(t, c.Servers[i], "a", nats.Name("app-"+c.Servers[i].Name()))
	}
	nats := sysCLI(t, c.URL(0))

	out := nats("server", "list")
	for _, name := range []string{"s1", "s2", "s3"} {
		require.Regexp(t, `│ `+name+` +│ test +│`, out)
	}
	require.Regexp(t, `│ +│ 1 +│ 3 +│`, out, "one cluster, three servers")

	out = nats("server", "ping")
	require.Contains(t, out, "3 replies")
	require.NotContains(t, out, "Missing")

	out = nats("server", "info", "s3")
	require.Contains(t, out, "Server information for s3 ("+c.Servers[2].ID()+")")

	out = nats("server", "report", "connections")
	require.Contains(t, out, "Top 4 Connections out of 4")
	for _, name := range []string{"app-s1", "app-s2", "app-s3"} {
		require.Contains(t, out, name)
	}

	varz := requestLines[natsserver.ServerAPIVarzResponse](t, nats("server", "request", "variables"))
	var names []string
	for _, v := range varz {
		names = append(names, v.Data.Name)
	}
	require.ElementsMatch(t, []string{"s1", "s2", "s3"}, names)
	routez := requestLines[natsserver.ServerAPIRoutezResponse](t, nats("server", "request", "routes"))
	require.Len(t, routez, 3)
	for _, r := range routez {
		require.Equal(t, 2, r.Data.NumRoutes)
	}
	one := requestLines[natsserver.ServerAPIVarzResponse](t, nats("server", "request", "variables", "--name", "s2"))
	require.Len(t, one, 1, "filtered by name")
	require.Equal(t, "s2", one[0].Data.Name)
}
