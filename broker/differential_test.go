package broker

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
	"github.com/skiffmq/skiff/subject"
)

// meaning is what a configuration file says, in terms both servers have,
// so that Skiff's reading can be compared with nats-server's.
type meaning struct {
	Host, ServerName, HTTPHost    string
	Port, HTTPPort                int
	MaxPayload, MaxControlLine    int
	MaxPending                    int64
	MaxConn, MaxSubs, MaxPingsOut int
	WriteDeadline, PingInterval   time.Duration
	Username, Password, Token     string
	AuthTimeout                   time.Duration
	Users                         []meaningUser
	Nkeys                         []meaningUser // Name is the public key
	TLS, TLSVerify, TLSRequired   bool
	TLSMinVersion                 uint16
	TLSTimeout                    time.Duration
	TLSFirst                      bool
	TLSFirstFallback              time.Duration
	StoreDir                      string
	SyncAlways                    bool
	SyncInterval                  time.Duration
	Debug, Trace, NoTime, UTC     bool
	LogFile, PIDFile              string
	ProfPort                      int
	LameDuck, LameDuckGrace       time.Duration
	Accounts                      []meaningAccount // by name
	NoAuthUser                    string
	// Operator mode: the operators' public keys, the trusted keys, the
	// resolver's kind and preloaded accounts, the pinned accounts.
	Operators, TrustedKeys  []string
	SystemAccount, Resolver string
	Preload, Pinned         []string
}

type meaningUser struct {
	Name, Password                       string
	PubAllow, PubDeny, SubAllow, SubDeny []string
	HasPermissions                       bool
	Account                              string // "" for the global account
}

// meaningAccount is an account and its limits, -1 for none, with its
// exports and imports, each as one sorted line.
type meaningAccount struct {
	Name                         string
	MaxConn, MaxSubs, MaxPayload int
	Exports, Imports             []string
	JetStream                    *meaningJS // nil: none
}

// meaningExport and meaningImport render an export or an import: for an
// import, the subjects as nats-server keeps them (the mapped pattern of a
// stream, the local pattern of a service).
func meaningExport(service bool, subj string, accounts []string, pos int, rt string, threshold time.Duration) string {
	sort.Strings(accounts)
	if !service {
		return fmt.Sprintf("stream %s accounts=%v pos=%d", subj, accounts, pos)
	}
	return fmt.Sprintf("service %s accounts=%v pos=%d response=%s threshold=%v", subj, accounts, pos, rt, threshold)
}

func meaningImport(service bool, acc, from, to string, share bool) string {
	if !service {
		return fmt.Sprintf("stream %s %s -> %s", acc, from, to)
	}
	return fmt.Sprintf("service %s %s -> %s share=%v", acc, from, to, share)
}

// skiffImports renders an account's exports and imports.
func skiffImports(a server.AccountConfig) (exports, imports []string) {
	pattern := func(src, dst string) string {
		if dst == src {
			return dst
		}
		tr, err := subject.NewTransform(src, dst)
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return tr.Pattern()
	}
	for _, e := range a.Exports {
		exports = append(exports, meaningExport(e.Service, e.Subject, slices.Clone(e.Accounts), e.TokenPosition,
			e.Response.String(), cmp.Or(e.Threshold, server.DefaultResponseThreshold)))
	}
	for _, im := range a.Imports {
		switch {
		case im.Service:
			imports = append(imports, meaningImport(true, im.Account, pattern(im.Subject, cmp.Or(im.To, im.Subject)), im.Subject, im.Share))
		case im.Prefix != "":
			imports = append(imports, meaningImport(false, im.Account, im.Subject, strings.TrimSuffix(im.Prefix, ".")+"."+im.Subject, false))
		default:
			imports = append(imports, meaningImport(false, im.Account, im.Subject, pattern(im.Subject, cmp.Or(im.To, im.Subject)), false))
		}
	}
	sort.Strings(exports)
	sort.Strings(imports)
	return exports, imports
}

// natsImports renders a nats-server account's exports and imports, from
// its unexported fields.
func natsImports(a *natsserver.Account) (exports, imports []string) {
	acc := reflect.ValueOf(a).Elem()
	approved := func(auth reflect.Value) (names []string, pos int) {
		for _, k := range auth.FieldByName("approved").MapKeys() {
			names = append(names, k.String())
		}
		return names, int(auth.FieldByName("accountPos").Uint())
	}
	ex := acc.FieldByName("exports")
	for it := ex.FieldByName("streams").MapRange(); it.Next(); {
		var names []string
		var pos int
		if !it.Value().IsNil() {
			names, pos = approved(it.Value().Elem().FieldByName("exportAuth"))
		}
		exports = append(exports, meaningExport(false, it.Key().String(), names, pos, "", 0))
	}
	for it := ex.FieldByName("services").MapRange(); it.Next(); {
		se := it.Value().Elem()
		names, pos := approved(se.FieldByName("exportAuth"))
		rt := natsserver.ServiceRespType(se.FieldByName("respType").Uint())
		exports = append(exports, meaningExport(true, it.Key().String(), names, pos, rt.String(),
			time.Duration(se.FieldByName("respThresh").Int())))
	}
	im := acc.FieldByName("imports")
	name := func(si reflect.Value) string { return si.FieldByName("acc").Elem().FieldByName("Name").String() }
	streams := im.FieldByName("streams")
	for i := range streams.Len() {
		si := streams.Index(i).Elem()
		imports = append(imports, meaningImport(false, name(si), si.FieldByName("from").String(), si.FieldByName("to").String(), false))
	}
	for it := im.FieldByName("services").MapRange(); it.Next(); {
		for i := range it.Value().Len() {
			si := it.Value().Index(i).Elem()
			imports = append(imports, meaningImport(true, name(si), si.FieldByName("from").String(),
				si.FieldByName("to").String(), si.FieldByName("share").Bool()))
		}
	}
	sort.Strings(exports)
	sort.Strings(imports)
	return exports, imports
}

// meaningJS is an account's JetStream limits, -1 for none.
type meaningJS struct {
	MaxMemory, MaxStore                     int64
	MaxStreams, MaxConsumers, MaxAckPending int64
	MemMaxStreamBytes, StoreMaxStreamBytes  int64
	MaxBytesRequired                        bool
}

// jsLimit renders a JetStream limit as "none" or a bound: zero and
// below mean none in both servers' JetStream limits.
func jsLimit(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}

// skiffUser is one user's meaning: perms are its own or its account's
// default ones, as nats-server applies them while reading.
func skiffUser(name, password string, perms *server.Permissions, account string) meaningUser {
	mu := meaningUser{Name: name, Password: password, HasPermissions: perms != nil, Account: account}
	if p := perms; p != nil {
		mu.PubAllow, mu.PubDeny, mu.SubAllow, mu.SubDeny = p.Publish.Allow, p.Publish.Deny, p.Subscribe.Allow, p.Subscribe.Deny
	}
	return mu
}

// natsUser is skiffUser for nats-server's users.
func natsUser(name, password string, p *natsserver.Permissions, acc *natsserver.Account) meaningUser {
	mu := meaningUser{Name: name, Password: password, HasPermissions: p != nil}
	if acc != nil && acc.Name != server.GlobalAccountName {
		mu.Account = acc.Name
	}
	if p != nil {
		if p.Publish != nil {
			mu.PubAllow, mu.PubDeny = p.Publish.Allow, p.Publish.Deny
		}
		if p.Subscribe != nil {
			mu.SubAllow, mu.SubDeny = p.Subscribe.Allow, p.Subscribe.Deny
		}
	}
	return mu
}

// skiffLimit renders an AccountLimits field as nats-server holds it.
func skiffLimit(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

func skiffMeaning(c Config) meaning {
	o := c.Server
	m := meaning{
		Host: o.Host, ServerName: o.ServerName, HTTPHost: o.HTTPHost, Port: o.Port, HTTPPort: o.HTTPPort,
		MaxPayload: o.MaxPayload, MaxControlLine: o.MaxControlLine, MaxPending: int64(o.MaxPending),
		MaxConn: o.MaxConnections, MaxSubs: o.MaxSubscriptions, MaxPingsOut: o.MaxPingsOut,
		WriteDeadline: o.WriteDeadline, PingInterval: o.PingInterval,
		Username: o.Username, Password: o.Password, Token: o.Token, AuthTimeout: o.AuthTimeout,
		TLS: o.TLS != nil, TLSRequired: o.TLSRequired, TLSTimeout: o.TLSTimeout,
		TLSFirst: o.TLSHandshakeFirst, TLSFirstFallback: o.TLSHandshakeFirstFallback,
		StoreDir: c.JetStream.StoreDir, SyncAlways: c.JetStream.Sync == jetstream.SyncAlways,
		SyncInterval: c.JetStream.SyncInterval,
		Debug:        c.Log.Debug, Trace: c.Log.Trace, NoTime: c.Log.NoTime, UTC: c.Log.UTC,
		LogFile: c.Log.File, PIDFile: c.PIDFile, ProfPort: c.ProfPort,
		LameDuck: o.LameDuckDuration, LameDuckGrace: o.LameDuckGracePeriod,
	}
	if o.TLS != nil {
		m.TLSVerify = o.TLS.ClientAuth == tls.RequireAndVerifyClientCert
		m.TLSMinVersion = o.TLS.MinVersion
	}
	for _, u := range o.Users {
		m.Users = append(m.Users, skiffUser(u.Name, u.Password, u.Permissions, ""))
	}
	for _, u := range o.Nkeys {
		m.Nkeys = append(m.Nkeys, skiffUser(u.PublicKey, "", u.Permissions, ""))
	}
	m.NoAuthUser = o.NoAuthUser
	for _, a := range o.Accounts {
		exports, imports := skiffImports(a)
		ma := meaningAccount{Name: a.Name, MaxConn: skiffLimit(a.Limits.MaxConnections),
			MaxSubs: skiffLimit(a.Limits.MaxSubscriptions), MaxPayload: skiffLimit(a.Limits.MaxPayload),
			Exports: exports, Imports: imports}
		if j := a.JetStream; j != nil {
			ma.JetStream = &meaningJS{MaxMemory: jsLimit(j.MaxMemory), MaxStore: jsLimit(j.MaxStore),
				MaxStreams: jsLimit(int64(j.MaxStreams)), MaxConsumers: jsLimit(int64(j.MaxConsumers)),
				MaxAckPending: jsLimit(int64(j.MaxAckPending)), MemMaxStreamBytes: jsLimit(j.MemoryMaxStreamBytes),
				StoreMaxStreamBytes: jsLimit(j.StoreMaxStreamBytes), MaxBytesRequired: j.MaxBytesRequired}
		}
		m.Accounts = append(m.Accounts, ma)
		perms := func(p *server.Permissions) *server.Permissions {
			if p == nil {
				return a.DefaultPermissions
			}
			return p
		}
		for _, u := range a.Users {
			m.Users = append(m.Users, skiffUser(u.Name, u.Password, perms(u.Permissions), a.Name))
		}
		for _, u := range a.Nkeys {
			m.Nkeys = append(m.Nkeys, skiffUser(u.PublicKey, "", perms(u.Permissions), a.Name))
		}
	}
	for _, j := range o.TrustedOperators {
		opc, err := jwt.DecodeOperatorClaims(j)
		if err != nil {
			panic(err) // LoadConfig decoded it already
		}
		m.Operators = append(m.Operators, opc.Subject)
	}
	m.TrustedKeys, m.SystemAccount = o.TrustedKeys, o.SystemAccount
	if o.Resolver.Type == server.ResolverMemory {
		m.Resolver = "MEMORY"
	}
	m.Preload = slices.Sorted(maps.Keys(o.Resolver.Preload))
	m.Pinned = slices.Sorted(slices.Values(o.ResolverPinnedAccounts))
	sortMeaning(&m)
	return m
}

// sortMeaning orders what neither reader keeps in file order.
func sortMeaning(m *meaning) {
	sort.Slice(m.Users, func(i, j int) bool { return m.Users[i].Name < m.Users[j].Name })
	sort.Slice(m.Nkeys, func(i, j int) bool { return m.Nkeys[i].Name < m.Nkeys[j].Name })
	sort.Slice(m.Accounts, func(i, j int) bool { return m.Accounts[i].Name < m.Accounts[j].Name })
}

func natsMeaning(o *natsserver.Options) meaning {
	m := meaning{
		Host: o.Host, ServerName: o.ServerName, HTTPHost: o.HTTPHost, Port: o.Port, HTTPPort: o.HTTPPort,
		MaxPayload: int(o.MaxPayload), MaxControlLine: int(o.MaxControlLine), MaxPending: o.MaxPending,
		MaxConn: o.MaxConn, MaxSubs: o.MaxSubs, MaxPingsOut: o.MaxPingsOut,
		WriteDeadline: o.WriteDeadline, PingInterval: o.PingInterval,
		Username: o.Username, Password: o.Password, Token: o.Authorization,
		AuthTimeout: time.Duration(o.AuthTimeout * float64(time.Second)),
		TLS:         o.TLSConfig != nil, TLSVerify: o.TLSVerify, TLSRequired: o.TLSConfig != nil && !o.AllowNonTLS,
		TLSTimeout: time.Duration(o.TLSTimeout * float64(time.Second)),
		TLSFirst:   o.TLSHandshakeFirst, TLSFirstFallback: o.TLSHandshakeFirstFallback,
		StoreDir: o.StoreDir, SyncAlways: o.SyncAlways, SyncInterval: o.SyncInterval,
		Debug: o.Debug, Trace: o.Trace, NoTime: !o.Logtime, UTC: o.LogtimeUTC,
		LogFile: o.LogFile, PIDFile: o.PidFile, ProfPort: o.ProfPort,
		LameDuck: o.LameDuckDuration, LameDuckGrace: o.LameDuckGracePeriod,
	}
	if o.TLSConfig != nil {
		m.TLSMinVersion = o.TLSConfig.MinVersion
		m.TLSVerify = o.TLSConfig.ClientAuth == tls.RequireAndVerifyClientCert
	}
	for _, u := range o.Users {
		m.Users = append(m.Users, natsUser(u.Username, u.Password, u.Permissions, u.Account))
	}
	for _, u := range o.Nkeys {
		m.Nkeys = append(m.Nkeys, natsUser(u.Nkey, "", u.Permissions, u.Account))
	}
	m.NoAuthUser = o.NoAuthUser
	for _, a := range o.Accounts {
		// The limits are unexported fields of nats-server's Account.
		l := reflect.ValueOf(a).Elem()
		exports, imports := natsImports(a)
		ma := meaningAccount{Name: a.Name, MaxConn: int(l.FieldByName("mconns").Int()),
			MaxSubs: int(l.FieldByName("msubs").Int()), MaxPayload: int(l.FieldByName("mpay").Int()),
			Exports: exports, Imports: imports}
		// jsLimits: by tier, "" for the limits of every tier.
		if j := l.FieldByName("jsLimits").MapIndex(reflect.ValueOf("")); j.IsValid() {
			f := func(name string) int64 { return jsLimit(j.FieldByName(name).Int()) }
			ma.JetStream = &meaningJS{MaxMemory: f("MaxMemory"), MaxStore: f("MaxStore"), MaxStreams: f("MaxStreams"),
				MaxConsumers: f("MaxConsumers"), MaxAckPending: f("MaxAckPending"),
				MemMaxStreamBytes: f("MemoryMaxStreamBytes"), StoreMaxStreamBytes: f("StoreMaxStreamBytes"),
				MaxBytesRequired: j.FieldByName("MaxBytesRequired").Bool()}
		}
		m.Accounts = append(m.Accounts, ma)
	}
	for _, opc := range o.TrustedOperators {
		m.Operators = append(m.Operators, opc.Subject)
	}
	m.TrustedKeys, m.SystemAccount = o.TrustedKeys, o.SystemAccount
	if _, ok := o.AccountResolver.(*natsserver.MemAccResolver); ok {
		m.Resolver = "MEMORY"
	}
	// The preloads and pinned accounts are unexported maps.
	opts := reflect.ValueOf(o).Elem()
	m.Preload = mapKeys(opts.FieldByName("resolverPreloads"))
	m.Pinned = mapKeys(opts.FieldByName("resolverPinnedAccounts"))
	sortMeaning(&m)
	return m
}

// mapKeys returns the sorted string keys of a map read by reflection.
func mapKeys(v reflect.Value) []string {
	var keys []string
	for _, k := range v.MapKeys() {
		keys = append(keys, k.String())
	}
	slices.Sort(keys)
	return keys
}

// TestDifferentialConfig reads the same files with Skiff and with
// nats-server's own ProcessConfigFile and requires the same meaning for
// every setting both have: the syntax is the reference parser's, and the
// mapping must agree with the reference's (sizes, durations as bare
// seconds or quoted, aliases, default permissions, TLS).
func TestDifferentialConfig(t *testing.T) {
	cert, key := writeTestCert(t)
	set := committedJWTSet()
	resolverConf, err := os.ReadFile(filepath.Join("..", "testdata", "jwt", "resolver.conf"))
	require.NoError(t, err)
	configs := map[string]string{
		"limits": `
server_name: n1
listen: 127.0.0.2:4333
http: "127.0.0.1:8333"
max_payload: 2MB
max_control_line: 8KB
max_pending: 100MB
max_connections: 1K
max_subscriptions: 1000
write_deadline: "3s"
ping_interval: 90
ping_max: 5
debug: true
trace: true
logtime: false
logtime_utc: true
log_file: "/tmp/skiff-diff.log"
pid_file: "/tmp/skiff-diff.pid"
prof_port: 6061
lame_duck_duration: "30s"
lame_duck_grace_period: "5s"
`,
		"aliases and units": `
net: 127.0.0.3
port: 4334
monitor_port: 8334
max_payload: 1MB
max_conn: 10
max_subs: 20
ping_interval: "1m30s"
write_deadline: 2
jetstream {
  store: "/tmp/skiff-diff-js"
  sync_interval: "250ms"
}
`,
		"users": `
authorization {
  timeout: 1.5
  default_permissions: { publish: { allow: ["pub.>"], deny: "pub.secret" }, subscribe: ["_INBOX.>"] }
  users: [
    {user: alice, password: "$2a$04$uUSy2a6aGqrCbiRBKObVA.2/GLBT/rXvI/XkcXpXQM8yZg3P11gMq"}
    {username: bob, pass: bobpw, permissions: { pub: "bob.>", sub: { deny: ["secret.>"] } } }
  ]
}
store_dir: "/tmp/skiff-diff-js2"
jetstream { sync: always }
`,
		"single user": `
authorization { user: admin, password: s3cret, timeout: "3s" }
`,
		"token": `
authorization { token: "t0ken" }
`,
		"nkey users": `
authorization {
  users: [
    {nkey: UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4}
    {nkey: UDK6ZTSX45PL5FT47CTD3UDJZWKNSOBGCGJUPHZEVOC7RKIIIT5IHPL4, permissions: { publish: "n.>", subscribe: { deny: "x.>" } } }
  ]
}
`,
		"a block reused as a variable": `
authorization { user: admin, password: s3cret }
cluster { name: c1, listen: "127.0.0.1:-1", authorization: $authorization }
`,
		"tls": `
port: 4335
tls {
  cert_file: "` + cert + `"
  key_file: "` + key + `"
  ca_file: "` + cert + `"
  verify: true
  timeout: 3
  min_version: "1.3"
}
allow_non_tls: true
`,
		"accounts": `
accounts {
  A: {
    users: [
      {user: alice, password: "$2a$04$uUSy2a6aGqrCbiRBKObVA.2/GLBT/rXvI/XkcXpXQM8yZg3P11gMq"}
      {user: al, password: alpw, permissions: { publish: "al.>" }}
      {nkey: UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4}
    ]
    default_permissions: { publish: { allow: ["a.>"], deny: "a.secret" }, subscribe: ["_INBOX.>", "a.>"] }
    limits: { max_connections: 10, max_subscriptions: 100, max_payload: 64KB }
  }
  B: {
    users: [ {username: bob, pass: bobpw} ]
    limits: { max_conn: 2, max_subs: 3, max_pay: 1024 }
  }
  C: { limits: { max_connections: -1 } }
}
authorization {
  users: [ {user: global, password: g} ]
}
no_auth_user: bob
`,
		"accounts with jetstream": `
accounts {
  A: { jetstream: { max_mem: 1G, max_file: 10G, max_streams: 10, max_consumers: 100, max_ack_pending: 50,
                    max_bytes_required: true, mem_max_stream_bytes: 1MB, disk_max_stream_bytes: 2MB } }
  B: { jetstream: enabled }
  C: { jetstream: disabled }
  D: { jetstream: { memory: 512MB, store: 1G, streams: 2, consumers: 3, max_bytes: false,
                    memory_max_stream_bytes: 10KB, store_max_stream_bytes: 20KB } }
  E: { jetstream: true }
  F: { jetstream: { max_memory: -1, disk: 5GB, max_stream_bytes: true, max_streams: 0 } }
  G: { jetstream: false }
  H: { jetstream: {} }
  I: {}
}
`,
		"exports and imports": `
accounts {
  A: {
    users: [ {user: a, password: a} ]
    exports: [
      {stream: "events.>"}
      {stream: "private.>", accounts: [B, C]}
      {stream: "tenant.*.events", account_token_position: 2}
      {service: "svc.echo"}
      {service: "svc.stream", response: stream, threshold: "5s"}
      {service: "svc.chunk", response_type: chunked, response_max_time: "1m"}
      {service: "svc.map.*.*", accounts: [B]}
    ]
  }
  B: {
    imports: [
      {stream: {account: A, subject: "events.>"}, to: "a.events.>"}
      {stream: {account: A, subject: "private.x.*"}, prefix: "from_a"}
      {stream: {account: A, subject: "tenant.B.events"}}
      {service: {account: A, subject: "svc.echo"}, to: "echo"}
      {service: {account: A, subject: "svc.stream"}, share: true}
      {service: {account: A, subject: "svc.map.*.*"}, to: "map.$2.{{wildcard(1)}}"}
    ]
  }
  C: {
    imports: [ {stream: {account: A, subject: "private.>"}, to: "p.>"}, {service: {account: A, subject: "svc.chunk"}} ]
  }
}
`,
		"accounts as a list": `
accounts: [A, B, "C.x"]
`,
		"operator mode (the committed nsc set)": string(resolverConf) + "resolver_pinned_accounts: [" + set.accountPub + "]\n",
		"operator inline, system":               "operators: [\"" + set.operatorJWT + "\"]\nresolver: MEM\nsystem: " + set.accountPub + "\n",
		"trusted keys":                          "trusted_keys: " + set.operatorPub + "\nresolver { type: MEMORY }\n",
		"tls first": `
tls {
  cert_file: "` + cert + `"
  key_file: "` + key + `"
  handshake_first: auto
}
`,
		"tls first with a fallback": `
tls {
  cert_file: "` + cert + `"
  key_file: "` + key + `"
  handshake_first: "300ms"
}
`,
	}
	for name, text := range configs {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "x.conf")
			require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
			nopts, err := natsserver.ProcessConfigFile(path)
			if err != nil {
				pe, ok := err.(interface{ Errors() []error })
				require.True(t, ok && len(pe.Errors()) == 0, "nats-server refuses the file: %v", err)
			}
			cfg, err := LoadConfig(path)
			require.NoError(t, err)
			want, got := natsMeaning(nopts), skiffMeaning(cfg)
			// Settings the file leaves out fall to each server's defaults,
			// which only New applies in nats-server: compare what is set.
			zeroUnset(&want, &got, text)
			require.Equal(t, want, got)
		})
	}
}

// zeroUnset clears, in both, the scalar settings nats-server left at zero
// (the file does not set them).
func zeroUnset(want, got *meaning, text string) {
	if want.Port == 0 {
		got.Port = 0
	}
	if want.Host == "" {
		got.Host = ""
	}
	if want.HTTPPort == 0 {
		got.HTTPPort, got.HTTPHost = 0, ""
	}
	if want.HTTPHost == "" {
		got.HTTPHost = ""
	}
	if want.MaxPayload == 0 {
		got.MaxPayload = 0
	}
	if want.MaxControlLine == 0 {
		got.MaxControlLine = 0
	}
	if want.MaxPending == 0 {
		got.MaxPending = 0
	}
	if want.MaxConn == 0 {
		got.MaxConn = 0
	}
	if want.MaxSubs == 0 {
		got.MaxSubs = 0
	}
	if want.MaxPingsOut == 0 {
		got.MaxPingsOut = 0
	}
	if want.WriteDeadline == 0 {
		got.WriteDeadline = 0
	}
	if want.PingInterval == 0 {
		got.PingInterval = 0
	}
	if want.AuthTimeout == 0 {
		got.AuthTimeout = 0
	}
	if want.TLSTimeout == 0 {
		got.TLSTimeout = 0
	}
	if want.SyncInterval == 0 {
		got.SyncInterval = 0
	}
	if want.LameDuck == 0 {
		got.LameDuck, got.LameDuckGrace = 0, 0
	}
	// Timestamps are on unless the file says logtime: false (the
	// default is nats-server's flag's, not its Options').
	if !strings.Contains(text, "logtime:") {
		want.NoTime, got.NoTime = false, false
	}
	// Under sync: always the interval means nothing.
	if want.SyncAlways {
		want.SyncInterval, got.SyncInterval = 0, 0
	}
}
