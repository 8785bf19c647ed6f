package broker

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/server"
)

func TestConfigAccounts(t *testing.T) {
	cfg, err := ParseConfig(`
accounts {
  A: {
    users: [ {user: a, password: p}, {nkey: ` + testNkey + `} ]
    default_permissions: { publish: "a.>" }
    limits: { max_connections: 3, max_subs: 4, max_pay: 1KB }
  }
  B: { users: [ {user: b, password: q, permissions: { subscribe: "b.>" }} ] }
}
no_auth_user: b
`)
	require.NoError(t, err)
	o := cfg.Server
	require.Equal(t, "b", o.NoAuthUser)
	require.Len(t, o.Accounts, 2)
	a, b := o.Accounts[0], o.Accounts[1]
	require.Equal(t, "A", a.Name)
	require.Equal(t, []server.User{{Name: "a", Password: "p"}}, a.Users)
	require.Equal(t, testNkey, a.Nkeys[0].PublicKey)
	require.Equal(t, []string{"a.>"}, a.DefaultPermissions.Publish.Allow)
	require.Equal(t, server.AccountLimits{MaxConnections: 3, MaxSubscriptions: 4, MaxPayload: 1024}, a.Limits)
	require.Equal(t, "B", b.Name)
	require.Equal(t, []string{"b.>"}, b.Users[0].Permissions.Subscribe.Allow)
	require.Nil(t, b.DefaultPermissions)

	cfg, err = ParseConfig("accounts: [A, B]\n")
	require.NoError(t, err)
	require.Equal(t, []server.AccountConfig{{Name: "A"}, {Name: "B"}}, cfg.Server.Accounts)
}

// TestDifferentialAccountRefusals: a file nats-server refuses (reading it,
// or starting with it) Skiff refuses too, reading it or in server.New.
func TestDifferentialAccountRefusals(t *testing.T) {
	for name, text := range map[string]string{
		"user in two accounts":             "accounts {\n A: { users: [ {user: u, password: p} ] }\n B: { users: [ {user: u, password: q} ] }\n}",
		"user in an account and $G":        "authorization { users: [ {user: u, password: p} ] }\naccounts { A: { users: [ {user: u, password: q} ] } }",
		"nkey in two accounts":             "accounts {\n A: { users: [ {nkey: " + testNkey + "} ] }\n B: { users: [ {nkey: " + testNkey + "} ] }\n}",
		"single user and accounts":         "authorization { user: u, password: p }\naccounts { A: { users: [ {user: a, password: q} ] } }",
		"token and accounts":               "authorization { token: t }\naccounts { A: { users: [ {user: a, password: q} ] } }",
		"reserved account":                 "accounts { $G: { users: [ {user: a, password: q} ] } }",
		"no_auth_user unknown":             "accounts { A: { users: [ {user: a, password: q} ] } }\nno_auth_user: b",
		"no_auth_user without users":       "no_auth_user: b",
		"import from an undefined account": "accounts {\n A: {}\n B: { imports: [ {stream: {account: Z, subject: x}} ] }\n}",
		"stream import not exported":       "accounts {\n A: { exports: [ {stream: y} ] }\n B: { imports: [ {stream: {account: A, subject: x}} ] }\n}",
		"stream import of a service":       "accounts {\n A: { exports: [ {service: x} ] }\n B: { imports: [ {stream: {account: A, subject: x}} ] }\n}",
		"stream import wider than the export": "accounts {\n A: { exports: [ {stream: \"x.a\"} ] }\n" +
			" B: { imports: [ {stream: {account: A, subject: \"x.*\"}} ] }\n}",
		"restricted stream export": "accounts {\n A: { exports: [ {stream: \"p.>\", accounts: [B]} ] }\n B: {}\n" +
			" C: { imports: [ {stream: {account: A, subject: \"p.>\"}} ] }\n}",
		"restricted service export": "accounts {\n A: { exports: [ {service: s, accounts: [B]} ] }\n B: {}\n" +
			" C: { imports: [ {service: {account: A, subject: s}} ] }\n}",
		"account token position": "accounts {\n A: { exports: [ {stream: \"t.*.e\", account_token_position: 2} ] }\n" +
			" B: { imports: [ {stream: {account: A, subject: \"t.C.e\"}} ] }\n C: {}\n}",
		"account token position not a wildcard": "accounts {\n A: { exports: [ {stream: \"t.x.e\", account_token_position: 2} ] }\n}",
		"export to an undefined account":        "accounts {\n A: { exports: [ {stream: x, accounts: [Z]} ] }\n}",
		"prefix with a wildcard": "accounts {\n A: { exports: [ {stream: \"x.>\"} ] }\n" +
			" B: { imports: [ {stream: {account: A, subject: \"x.>\"}, prefix: \"p.*\"} ] }\n}",
		"stream imports in a cycle": "accounts {\n A: { exports: [ {stream: \"x.>\"} ], imports: [ {stream: {account: B, subject: \"x.>\"}} ] }\n" +
			" B: { exports: [ {stream: \"x.>\"} ], imports: [ {stream: {account: A, subject: \"x.>\"}} ] }\n}",
		"service imports in a cycle": "accounts {\n A: { exports: [ {service: s} ], imports: [ {service: {account: B, subject: s}} ] }\n" +
			" B: { exports: [ {service: s} ], imports: [ {service: {account: A, subject: s}} ] }\n}",
		"duplicate service import subject": "accounts {\n A: { exports: [ {service: s}, {service: t} ] }\n" +
			" B: { imports: [ {service: {account: A, subject: s}, to: x}, {service: {account: A, subject: t}, to: x} ] }\n}",
		"mapping function in an import": "accounts {\n A: { exports: [ {stream: \"x.*\"} ] }\n" +
			" B: { imports: [ {stream: {account: A, subject: \"x.*\"}, to: \"y.{{partition(2,1)}}\"} ] }\n}",
		"import dropping a wildcard": "accounts {\n A: { exports: [ {service: \"x.*.*\"} ] }\n" +
			" B: { imports: [ {service: {account: A, subject: \"x.*.*\"}, to: \"y.$1\"} ] }\n}",
		"response type on a stream": "accounts {\n A: { exports: [ {stream: x, response: stream} ] }\n}",
		"two import kinds":          "accounts {\n A: { exports: [ {stream: x} ] }\n B: { imports: [ {stream: {account: A, subject: x}, service: {account: A, subject: x}} ] }\n}",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.conf")
			require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
			nopts, refErr := natsserver.ProcessConfigFile(path)
			if refErr == nil {
				nopts.NoSystemAccount = true
				_, refErr = natsserver.NewServer(nopts)
			}
			require.Error(t, refErr, "nats-server accepts it")
			cfg, err := LoadConfig(path)
			if err == nil {
				_, err = server.New(cfg.Server)
			}
			require.Error(t, err, "Skiff accepts it; nats-server: %v", refErr)
			t.Logf("nats-server: %v\nSkiff: %v", refErr, err)
		})
	}
}

// TestConfigAccountJetStream: an account's jetstream is enabled, disabled
// or a block of limits, with nats-server's keys and aliases.
func TestConfigAccountJetStream(t *testing.T) {
	cfg, err := ParseConfig(`
accounts {
  A: { jetstream: { max_mem: 1MB, max_file: 2GB, max_streams: 3, max_consumers: 4, max_ack_pending: 5,
                    max_bytes_required: true, mem_max_stream_bytes: 6KB, disk_max_stream_bytes: 7KB } }
  B: { jetstream: enabled }
  C: { jetstream: disabled }
  D: { jetstream: { max_store: -1 } }
}
`)
	require.NoError(t, err)
	acc := cfg.Server.Accounts
	require.Equal(t, &server.JetStreamLimits{MaxMemory: 1 << 20, MaxStore: 2 << 30, MaxStreams: 3, MaxConsumers: 4,
		MaxAckPending: 5, MaxBytesRequired: true, MemoryMaxStreamBytes: 6 << 10, StoreMaxStreamBytes: 7 << 10}, acc[0].JetStream)
	require.Equal(t, &server.JetStreamLimits{}, acc[1].JetStream)
	require.Nil(t, acc[2].JetStream)
	require.Equal(t, &server.JetStreamLimits{MaxStore: server.NoLimit}, acc[3].JetStream)
}

// TestStartJetStreamWithAccounts: JetStream runs with accounts, a stream
// in each account that has it and none in the one that has not.
func TestStartJetStreamWithAccounts(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.Server.Host = "127.0.0.1"
	cfg.Server.Accounts = []server.AccountConfig{
		{Name: "A", Users: []server.User{{Name: "a", Password: "p"}}, JetStream: &server.JetStreamLimits{MaxStreams: 1}},
		{Name: "B", Users: []server.User{{Name: "b", Password: "p"}}},
	}
	b, err := Start(cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, b.Shutdown(context.Background())) }()
	for user, want := range map[string]string{"a": `"max_streams":1`, "b": `"err_code":10039`} {
		nc, err := nats.Connect(b.ClientURL(), nats.UserInfo(user, "p"))
		require.NoError(t, err)
		m, err := nc.Request("$JS.API.INFO", nil, 5*time.Second)
		nc.Close()
		require.NoError(t, err)
		require.Contains(t, string(m.Data), want, "user %s", user)
	}
	require.DirExists(t, filepath.Join(cfg.JetStream.StoreDir, "accounts", "A", "streams"))
}
