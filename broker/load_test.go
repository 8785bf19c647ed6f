package broker

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// TestMonitoringFromFile: a configuration file serves monitoring only if
// it asks (http, http_port, monitor_port), as nats-server's does; without
// a file, skiff serve's default is port 8222 (DefaultConfig).
func TestMonitoringFromFile(t *testing.T) {
	for _, tt := range []struct {
		text string
		port int
	}{
		{"listen: 127.0.0.1:4222", 0},
		{"http_port: 8222", 8222},
		{"monitor_port: 9000", 9000},
		{"http: 127.0.0.1:8223", 8223},
	} {
		cfg, err := ParseConfig(tt.text)
		require.NoError(t, err, tt.text)
		require.Equal(t, tt.port, cfg.Server.HTTPPort, tt.text)
	}
	require.Equal(t, 8222, DefaultConfig().Server.HTTPPort)
}

func TestExampleConfig(t *testing.T) {
	cfg, err := LoadConfig("../docs/skiff.conf")
	require.NoError(t, err)
	opts := &cfg.Server
	require.True(t, cfg.JetStreamEnabled)
	require.Equal(t, "./skiff-data", cfg.JetStream.StoreDir)
	require.Equal(t, "127.0.0.1", opts.Host)
	require.Equal(t, 4222, opts.Port)
	require.Equal(t, 8222, opts.HTTPPort)
	require.Equal(t, "skiff-example", opts.ServerName)
	require.Equal(t, 1<<20, opts.MaxPayload)
	require.Equal(t, 4096, opts.MaxControlLine)
	require.Equal(t, 10000, opts.MaxConnections)
	require.Equal(t, 100000, opts.MaxSubscriptions)
	require.Equal(t, 64<<20, opts.MaxPending)
	require.Equal(t, 10*time.Second, opts.WriteDeadline)
	require.Equal(t, 2*time.Minute, opts.PingInterval)
	require.Equal(t, 2, opts.MaxPingsOut)
	require.Equal(t, 2*time.Second, opts.AuthTimeout)
	require.Len(t, opts.Users, 2)
	alice := opts.Users[0]
	require.Equal(t, "alice", alice.Name)
	require.Equal(t, []string{"orders.>", "_INBOX.>"}, alice.Permissions.Publish.Allow)
	require.Equal(t, []string{"orders.secret"}, alice.Permissions.Publish.Deny)
	require.Equal(t, []string{"orders.#", "_INBOX.>"}, alice.Permissions.Subscribe.Allow)
	require.Nil(t, opts.Users[1].Permissions)
	// The result is valid for the server.
	opts.Port, opts.HTTPPort = server.RandomPort, 0
	_, err = server.New(*opts)
	require.NoError(t, err)
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name, text, key string
		line            int
		err             error
	}{
		{"bad size", "max_payload: lots", "max_payload", 1, ErrInvalidValue},
		{"bad duration", "\nping_interval: soon", "ping_interval", 2, ErrInvalidValue},
		{"unknown auth key", "authorization {\n  colour: red\n}", "authorization.colour", 2, ErrUnknownKey},
		{"users not a list", "authorization { users: 3 }", "authorization.users", 1, ErrInvalidValue},
		{"bad permission key", "authorization { users: [{user: a, permissions: {publish: {maybe: [x]}}}] }",
			"authorization.users[0].permissions.publish.maybe", 1, ErrUnknownKey},
		{"bad permission subject", "authorization { users: [{user: a, permissions: {publish: \"a..b\"}}] }",
			"authorization.users[0].permissions.publish", 1, ErrInvalidValue},
		{"queue permission", "authorization { users: [{user: a, permissions: {subscribe: \"a q\"}}] }",
			"authorization.users[0].permissions.subscribe", 1, ErrUnsupported},
		{"user without a name", "authorization { users: [{password: x}] }", "authorization.users[0]", 1, ErrInvalidValue},
		{"tls without files", "tls { verify: true }", "tls", 1, ErrInvalidValue},
		{"bad listen", "listen: nonsense", "listen", 1, ErrInvalidValue},
		{"port out of range", "port: 70000", "port", 1, ErrInvalidValue},
		{"bad jetstream", "jetstream: maybe", "jetstream", 1, ErrInvalidValue},
		{"bad store_dir", "jetstream { store_dir: [a] }", "jetstream.store_dir", 1, ErrInvalidValue},
		{"server name with a space", "server_name: \"a b\"", "server_name", 1, ErrInvalidValue},
		{"unknown top-level key", "colour: red", "colour", 1, ErrUnknownKey},
		{"cluster tls", "port: 4222\ncluster { port: 6222\n  tls: { cert_file: a } }", "cluster.tls", 3, ErrUnsupported},
		{"reserved account", "accounts {\n  $G: {}\n}", "accounts.$G", 2, ErrInvalidValue},
		{"reserved account in a list", "accounts: [A,\n  \"$G\"]", "accounts[1]", 2, ErrInvalidValue},
		{"account twice in a list", "accounts: [A,\n A]", "accounts[1]", 2, ErrInvalidValue},
		{"account not a block", "accounts {\n  A: 1\n}", "accounts.A", 2, ErrInvalidValue},
		{"export latency", "accounts {\n  A: {\n    exports: [ {service: x, latency: y} ]\n  }\n}", "accounts.A.exports[0].latency", 3, ErrUnsupported},
		{"export of neither kind", "accounts {\n  A: {\n    exports: [\n      {accounts: [B]}\n    ]\n  }\n}", "accounts.A.exports[0]", 4, ErrInvalidValue},
		{"export response on a stream", "accounts {\n  A: {\n    exports: [ {stream: x,\n      response: stream} ]\n  }\n}", "accounts.A.exports[0].response", 4, ErrInvalidValue},
		{"export unknown response", "accounts { A: { exports: [ {service: x, response: many} ] } }", "accounts.A.exports[0].response", 1, ErrInvalidValue},
		{"export threshold as a number", "accounts { A: { exports: [ {service: x, threshold: 5} ] } }", "accounts.A.exports[0].threshold", 1, ErrInvalidValue},
		{"import prefix and to", "accounts {\n  A: {\n    imports: [ {stream: {account: B, subject: x}, prefix: p,\n      to: y} ]\n  }\n}", "accounts.A.imports[0].to", 4, ErrInvalidValue},
		{"import without a subject", "accounts { A: { imports: [ {stream: {account: B}} ] } }", "accounts.A.imports[0].stream", 1, ErrInvalidValue},
		{"import share on a stream", "accounts { A: { imports: [ {stream: {account: B, subject: x}, share: true} ] } }", "accounts.A.imports[0].share", 1, ErrInvalidValue},
		{"import unknown source key", "accounts { A: { imports: [ {service: {account: B, subject: x, sbj: y}} ] } }", "accounts.A.imports[0].service.sbj", 1, ErrUnknownKey},
		{"account jetstream cluster_traffic", "accounts {\n  A: {\n    jetstream: { cluster_traffic: owner }\n  }\n}", "accounts.A.jetstream.cluster_traffic", 3, ErrUnsupported},
		{"account jetstream zero memory", "accounts {\n  A: {\n    jetstream {\n      max_mem: 0\n    }\n  }\n}", "accounts.A.jetstream.max_mem", 4, ErrUnsupported},
		{"account jetstream maybe", "accounts { A: { jetstream: maybe } }", "accounts.A.jetstream", 1, ErrInvalidValue},
		{"account jetstream list", "accounts {\n  A: {\n    jetstream: [ 1 ]\n  }\n}", "accounts.A.jetstream", 3, ErrInvalidValue},
		{"account jetstream unknown", "accounts { A: { jetstream: { max_bananas: 1 } } }", "accounts.A.jetstream.max_bananas", 1, ErrUnknownKey},
		{"zero account connections", "accounts {\n  A: {\n    limits: {\n      max_connections: 0\n    }\n  }\n}",
			"accounts.A.limits.max_connections", 4, ErrUnsupported},
		{"negative account payload", "accounts { A: { limits: { max_payload: -2 } } }", "accounts.A.limits.max_payload", 1, ErrUnsupported},
		{"huge account subscriptions", "accounts { A: { limits: { max_subs: 3000000000 } } }", "accounts.A.limits.max_subs", 1, ErrInvalidValue},
		{"unknown account limit", "accounts { A: { limits: { max_bananas: 1 } } }", "accounts.A.limits.max_bananas", 1, ErrUnknownKey},
		{"operator file missing", "operator: \"/nonexistent/op.jwt\"", "operator", 1, ErrInvalidValue},
		{"operator not an operator JWT", "operator: \"../testdata/jwt/A.jwt\"", "operator", 1, ErrInvalidValue},
		{"operator not a string", "operators: [\n  \"../testdata/jwt/operator.jwt\"\n  true\n]", "operators[1]", 3, ErrInvalidValue},
		{"URL resolver", "resolver: \"URL(http://127.0.0.1:9090/jwt/v1/accounts/)\"", "resolver", 1, ErrUnsupported},
		{"unknown resolver", "resolver: DISK", "resolver", 1, ErrInvalidValue},
		{"cache resolver", "resolver {\n  type: cache\n}", "resolver.type", 2, ErrUnsupported},
		{"cache resolver ttl", "resolver {\n  type: full\n  ttl: 2m\n}", "resolver.ttl", 3, ErrUnsupported},
		{"resolver limit zero", "resolver {\n  type: full\n  limit: 0\n}", "resolver.limit", 3, ErrInvalidValue},
		{"resolver interval not a duration", "resolver {\n  type: full\n  interval: soon\n}", "resolver.interval", 3, ErrInvalidValue},
		{"resolver of another type", "resolver: 5", "resolver", 1, ErrInvalidValue},
		{"preload not a block", "resolver_preload: [a]", "resolver_preload", 1, ErrInvalidValue},
		{"preload not a JWT", "resolver_preload {\n  AAA: nope\n}", "resolver_preload.AAA", 2, ErrInvalidValue},
		{"trusted key not an operator's", "trusted: [" + testNkey + "]", "trusted", 1, ErrInvalidValue},
		{"pinned key not an account's", "resolver_pinned_accounts: " + testNkey, "resolver_pinned_accounts", 1, ErrInvalidValue},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig(tt.text)
			require.ErrorIs(t, err, tt.err)
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, tt.key, ce.Key)
			require.Equal(t, tt.line, ce.Line)
		})
	}
}

// TestConfigReportsEveryProblem: one run lists all of a file's refusals.
func TestConfigReportsEveryProblem(t *testing.T) {
	_, err := ParseConfig("accounts { A { exports: [ {service: x, latency: y} ] } }\nport: 4222\ngateway { port: 7222 }\ndefault_sentinel: a\n")
	var keys []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var ce *ConfigError
		require.True(t, errors.As(e, &ce))
		require.ErrorIs(t, ce, ErrUnsupported)
		keys = append(keys, ce.Key)
	}
	require.Equal(t, []string{"accounts.A.exports[0].latency", "gateway", "default_sentinel"}, keys)
}

func TestConfigVariables(t *testing.T) {
	t.Setenv("SKIFF_TEST_PORT", "4444")
	cfg, err := ParseConfig("PW: s3cret\nport: $SKIFF_TEST_PORT\nauthorization { user: a, password: $PW }\n")
	require.NoError(t, err)
	require.Equal(t, 4444, cfg.Server.Port)
	require.Equal(t, "s3cret", cfg.Server.Password)

	// A variable nobody uses is a key like any other: unknown.
	_, err = ParseConfig("UNUSED: 1\n")
	require.ErrorIs(t, err, ErrUnknownKey)

	// A known key that other values refer to as a variable still takes
	// effect: reusing a block must never switch it off.
	cfg, err = ParseConfig("authorization { user: a, password: b }\ncluster { port: -1, authorization: $authorization }\n")
	require.NoError(t, err)
	require.Equal(t, "a", cfg.Server.Username, "client authorization dropped by its reuse in cluster")
	require.Equal(t, "b", cfg.Server.Password)
	require.Equal(t, "a", cfg.Server.Cluster.Username)

	cfg, err = ParseConfig("max_payload: 4096\nmax_control_line: $max_payload\n")
	require.NoError(t, err)
	require.Equal(t, 4096, cfg.Server.MaxPayload)
	require.Equal(t, 4096, cfg.Server.MaxControlLine)

	cfg, err = ParseConfig(`authorization {
  default_permissions: { publish: "pub.>" }
  users: [ {user: a, password: x, permissions: $default_permissions} ]
}`)
	require.NoError(t, err)
	require.Equal(t, []string{"pub.>"}, cfg.Server.Users[0].Permissions.Publish.Allow)

	// A refused key is refused whether or not it is reused.
	_, err = ParseConfig("default_sentinel: a\nx { y: $default_sentinel }\n")
	require.ErrorIs(t, err, ErrUnsupported)
}

func TestConfigInclude(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "auth.conf"), []byte("authorization { token: tok }\n"), 0o600))
	main := filepath.Join(dir, "main.conf")
	require.NoError(t, os.WriteFile(main, []byte("port: 4555\ninclude auth.conf\n"), 0o600))
	cfg, err := LoadConfig(main)
	require.NoError(t, err)
	require.Equal(t, 4555, cfg.Server.Port)
	require.Equal(t, "tok", cfg.Server.Token)

	// A refused key in an included file names that file.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "auth.conf"), []byte("\ndefault_sentinel: a\n"), 0o600))
	_, err = LoadConfig(main)
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "default_sentinel", ce.Key)
	require.Equal(t, filepath.Join(dir, "auth.conf"), ce.File)
	require.Equal(t, 2, ce.Line)
	require.Contains(t, err.Error(), "auth.conf:2: default_sentinel: not supported by Skiff")
}

func TestConfigDefaultPermissions(t *testing.T) {
	cfg, err := ParseConfig(`authorization {
  users: [ {user: a, password: x}, {user: b, password: y, permissions: {publish: "b.>"}} ]
  default_permissions: { publish: "pub.>", subscribe: {deny: "secret.>"} }
}`)
	require.NoError(t, err)
	require.Len(t, cfg.Server.Users, 2)
	require.Equal(t, []string{"pub.>"}, cfg.Server.Users[0].Permissions.Publish.Allow)
	require.Equal(t, []string{"secret.>"}, cfg.Server.Users[0].Permissions.Subscribe.Deny)
	require.Equal(t, []string{"b.>"}, cfg.Server.Users[1].Permissions.Publish.Allow)
	require.Empty(t, cfg.Server.Users[1].Permissions.Subscribe.Deny)
}

func TestConfigJetStream(t *testing.T) {
	tests := []struct {
		text    string
		streams bool
		dir     string
	}{
		{"", true, ""},
		{"jetstream: disabled", false, ""},
		{"jetstream: enabled", true, ""},
		{"jetstream: false", false, ""},
		{"jetstream: off", false, ""},
		{"jetstream { store_dir: /var/lib/skiff }", true, "/var/lib/skiff"},
		{"jetstream { store_dir: data, enabled: false }", false, "data"},
		{"store_dir: /top", true, "/top"},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			cfg, err := ParseConfig(tt.text)
			require.NoError(t, err)
			require.Equal(t, tt.streams, cfg.JetStreamEnabled)
			require.Equal(t, tt.dir, cfg.JetStream.StoreDir)
		})
	}
}

func TestConfigSync(t *testing.T) {
	tests := []struct {
		text     string
		policy   jetstream.SyncPolicy
		interval time.Duration
		err      bool
	}{
		{"jetstream { sync_interval: always }", jetstream.SyncAlways, 0, false},
		{"jetstream { sync: never }", jetstream.SyncNever, 0, false},
		{"jetstream { sync_interval: 2s }", jetstream.SyncInterval, 2 * time.Second, false},
		{"jetstream { sync_interval: \"10ms\" }", jetstream.SyncInterval, 10 * time.Millisecond, false},
		{"jetstream { sync_interval: sometimes }", 0, 0, true},
		{"jetstream { sync_interval: 0s }", 0, 0, true},
		{"jetstream { sync_interval: \"9ms\" }", 0, 0, true}, // below jetstream.MinSyncInterval
		{"jetstream { sync_interval: \"1ns\" }", 0, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			cfg, err := ParseConfig(tt.text)
			if tt.err {
				require.ErrorIs(t, err, ErrInvalidValue)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.policy, cfg.JetStream.Sync)
			require.Equal(t, tt.interval, cfg.JetStream.SyncInterval)
		})
	}
}

// TestConfigDurations: durations read as nats-server reads them: a quoted
// Go duration, or a bare number of seconds. An unquoted 2m is the number
// 2,000,000 to this syntax (TestDifferentialConfig checks nats-server
// agrees).
func TestConfigDurations(t *testing.T) {
	for text, want := range map[string]time.Duration{
		`ping_interval: "2m"`:   2 * time.Minute,
		`ping_interval: 90`:     90 * time.Second,
		`ping_interval: 1.5`:    1500 * time.Millisecond,
		`ping_interval: 500ms`:  500 * time.Millisecond,
		`ping_interval: 2m`:     2_000_000 * time.Second,
		`ping_interval: "1h5s"`: time.Hour + 5*time.Second,
	} {
		cfg, err := ParseConfig(text)
		require.NoError(t, err, text)
		require.Equal(t, want, cfg.Server.PingInterval, text)
	}
}

func TestLoadConfigMissingFile(t *testing.T) {
	_, err := LoadConfig(filepath.Join(t.TempDir(), "nope.conf"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// TestSystemAccountKeys: system_account names a configured account
// without operators too, and no_system_account (and its aliases) turns
// the system account off; both reach the server, which checks them.
func TestSystemAccountKeys(t *testing.T) {
	for _, k := range []string{"system_account", "system"} {
		cfg, err := ParseConfig("accounts { SYS: { users: [ {user: s, password: p} ] } }\n" + k + ": SYS\n")
		require.NoError(t, err, k)
		require.Equal(t, "SYS", cfg.Server.SystemAccount, k)
		require.False(t, cfg.Server.NoSystemAccount, k)
	}
	for _, k := range []string{"no_system_account", "no_system", "no_sys_acc"} {
		cfg, err := ParseConfig(k + ": true\n")
		require.NoError(t, err, k)
		require.True(t, cfg.Server.NoSystemAccount, k)
	}
	for _, text := range []string{
		"accounts: [A]\nsystem_account: B\n",                              // not configured
		"accounts: [SYS]\nsystem_account: SYS\nno_system_account: true\n", // contradictory
	} {
		cfg, err := ParseConfig(text)
		require.NoError(t, err)
		_, err = server.New(cfg.Server)
		require.ErrorIs(t, err, server.ErrInvalidOptions, text)
	}
}

func TestConfigUniqueTag(t *testing.T) {
	cfg, err := ParseConfig("jetstream { unique_tag: \"az:\" }")
	require.NoError(t, err)
	require.Equal(t, "az:", cfg.JetStream.UniqueTag)
	_, err = ParseConfig("jetstream { unique_tag: [az] }")
	require.ErrorIs(t, err, ErrInvalidValue)
}

func TestConfigHoldTimeout(t *testing.T) {
	cfg, err := ParseConfig("jetstream { hold_timeout: \"30s\" }")
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, cfg.JetStream.HoldTimeout)
	cfg, err = ParseConfig("jetstream { hold_timeout: 5 }")
	require.NoError(t, err)
	require.Equal(t, 5*time.Second, cfg.JetStream.HoldTimeout)
	for _, bad := range []string{"0", "\"-1s\"", "soon"} {
		_, err = ParseConfig("jetstream { hold_timeout: " + bad + " }")
		require.ErrorIs(t, err, ErrInvalidValue, bad)
	}
}
