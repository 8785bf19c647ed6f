package conf_test

import (
	"testing"

	natsconf "github.com/nats-io/nats-server/v2/conf"
	"github.com/stretchr/testify/require"
)

// compatConfigs are written the way nats-server's documentation and users
// write them; Skiff must read each exactly as nats-server does.
var compatConfigs = map[string]string{
	"sample": natsSample,
	"server": `# NATS server
server_name: n1
listen: 0.0.0.0:4222
http_port 8222
http: localhost:8222
debug: true
trace = false
logtime: yes
max_connections: 64K
max_payload: 8MB
max_pending: 64mb
write_deadline: "10s"
ping_interval: "2m"
ping_max: 2
lame_duck_duration: "30s"
pid_file: "/var/run/nats.pid"
log_file: /var/log/nats.log
`,
	"cluster": `cluster {
  name: c1
  listen: 0.0.0.0:6222
  routes = [
    nats-route://n2:6222
    nats-route://user:pass@n3:6222
  ]
  authorization { user: ruser, password: T0pS3cr3t, timeout: 0.75 }
}`,
	"jetstream": `jetstream {
  store_dir: /data/js
  max_memory_store: 1G
  max_file_store: 10GiB
  domain: hub
}
jetstream: enabled`,
	"accounts": `accounts: {
  SYS: { users: [ {user: admin, password: $2a$11$3kIDaCxw.Glsl1.u5nKa6eUnNDLV5HV9tIuUp7EHhMt6Nm9myW1aS} ] }
  ORDERS: {
    jetstream: enabled
    users: [ {user: "a", password: "b", permissions: { publish: ">" , subscribe: ["orders.*", "_INBOX.>"] }} ]
    exports: [ {stream: "orders.>"}, {service: "orders.q", response: stream} ]
    mappings = { "orders.new": "orders.created.>" }
  }
}
system_account: SYS
no_auth_user: a`,
	"variables": `TOKEN: "s3cr3t"
TIMEOUT = 2
authorization {
  token: $TOKEN
  timeout: $TIMEOUT
}`,
	"leafnodes": `leafnodes {
  remotes = [
    { url: "tls://connect.ngs.global", credentials: "/creds/ngs.creds" },
    { urls: [nats-leaf://a:7422, nats-leaf://b:7422], account: ORDERS }
  ]
}`,
	"tls": `tls {
  cert_file: "./certs/server.pem"
  key_file:  "./certs/key.pem"
  ca_file:   './certs/ca.pem'
  verify:    true
  timeout:   2.5
  cipher_suites: [
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
  ]
}`,
	"json": `{
  "port": 4222,
  "debug": false,
  "authorization": { "users": [ { "user": "x", "password": "y" } ] },
  "websocket": { "port": 8080, "no_tls": true }
}`,
	"separators and comments": "a = 1; b : 2, c 3\n// comment\n# comment\nd: [1, 2, 3,] # trailing\ne { f: -1, g: -2.5 }\nh: \"q\\\"\\t\"\n",
}

func TestCompatWithNatsServer(t *testing.T) {
	for name, src := range compatConfigs {
		t.Run(name, func(t *testing.T) {
			want, err := natsconf.Parse(src)
			require.NoError(t, err, "nats-server rejects it")
			require.Equal(t, want, mustParse(t, src).Interface())
		})
	}
}

// TestCompatDifferences pins down where Skiff deliberately reads a file
// differently from nats-server; docs/config-format.md lists the same.
func TestCompatDifferences(t *testing.T) {
	for _, tc := range []struct {
		name    string
		src     string
		skiff   any    // what Skiff reads for key v
		natsErr bool   // nats-server rejects the file
		nats    any    // else what nats-server reads
		why     string // for the reader of a failure
	}{
		{"underscore separators", "v: 1_000", int64(1000), false, "1_000", "Skiff reads digits with _ as a number"},
		{"float exponent", "v: 1.5e3", 1500.0, true, nil, "nats-server has no exponents"},
		{"backslash in a bare word", `v: C:\data`, `C:\data`, true, nil, "Skiff does not unescape bare words"},
		{"unicode escape", `v: "\u00e9"`, "é", true, nil, "nats-server has only \\x escapes"},
		{"key case", "v: 1\nV: 2", int64(2), false, int64(1), "Skiff treats keys that differ in case as one key"},
		{"fractional size", "v: 1.5GB", "1.5GB", true, nil, "Skiff reads a word that is not a number as a string"},
		{"brace after bare key", "v{b: 1}", obj{"b": int64(1)}, false, nil, "nats-server reads the key v{b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := mustParse(t, tc.src).Get("v")
			require.True(t, ok)
			require.Equal(t, tc.skiff, v.Interface(), tc.why)
			m, err := natsconf.Parse(tc.src)
			if tc.natsErr {
				require.Error(t, err, tc.why)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.nats, m["v"], tc.why)
		})
	}
}
