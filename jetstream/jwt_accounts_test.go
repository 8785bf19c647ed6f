package jetstream_test

import (
	"log/slog"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/jwttest"
	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// JetStream in operator mode: an account JWT's JetStream limits give the
// account JetStream with those limits, the same as a configured account's
// jetstream block (differential_accounts_test.go).

// jwtAccounts mints the operator-mode twin of accountsConf: users a, b, c,
// e in accounts of the same names; d, with file storage only; t, whose
// limits are an R1 tier; r, with an R3 tier only.
func jwtAccounts(t *testing.T) (conf string, login func(user string) nats.Option) {
	op := jwttest.NewOperator(t)
	sys := op.Account("SYS")
	op.Update(jwttest.SystemAccount(sys.Pub))
	unlimited := jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	accounts := map[string]*jwttest.Account{
		"a": op.Account("A", jwttest.JetStream(jwt.JetStreamLimits{MemoryStorage: 20000, DiskStorage: 30000, Streams: 2, Consumer: 2})),
		"b": op.Account("B", jwttest.JetStream(unlimited)),
		"c": op.Account("C"),
		// Disk only: mem_storage 0 leaves no room for memory streams.
		"d": op.Account("D", jwttest.JetStream(jwt.JetStreamLimits{DiskStorage: 1 << 20, Streams: -1, Consumer: -1})),
		"e": op.Account("E", jwttest.JetStream(jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1,
			MaxBytesRequired: true, MemoryMaxStreamBytes: 1000, DiskMaxStreamBytes: 2000, MaxAckPending: 50})),
		"t": op.Account("T", jwttest.AccountClaims(func(c *jwt.AccountClaims) {
			c.Limits.JetStreamTieredLimits = jwt.JetStreamTieredLimits{
				"R1": {MemoryStorage: 20000, DiskStorage: 30000, Streams: 1, Consumer: 1},
				"R3": {MemoryStorage: 1 << 20, DiskStorage: 1 << 20, Streams: 10, Consumer: 10},
			}
		})),
		"r": op.Account("R", jwttest.AccountClaims(func(c *jwt.AccountClaims) {
			c.Limits.JetStreamTieredLimits = jwt.JetStreamTieredLimits{"R3": {MemoryStorage: 1 << 20, DiskStorage: 1 << 20, Streams: 10, Consumer: 10}}
		})),
	}
	creds := map[string]string{}
	list := []*jwttest.Account{sys}
	for user, acc := range accounts {
		creds[user] = acc.User(user).CredsFile(t)
		list = append(list, acc)
	}
	return op.Conf(list...), func(user string) nats.Option { return nats.UserCredentials(creds[user]) }
}

// TestDifferentialJWTAccounts: TestDifferentialAccounts's steps in
// operator mode (the same stream name in two accounts, the limits of the
// account JWTs with their codes, INFO per account, a tenant at its quota
// beside one that keeps publishing), then storage-type and tier limits.
func TestDifferentialJWTAccounts(t *testing.T) {
	conf, login := jwtAccounts(t)
	consumer := consumerCreate
	steps := accountLimitSteps()
	steps = append(steps, as("d",
		step{name: "memory stream without room", do: api("STREAM.CREATE.M", `{"name":"M","subjects":["m"],"storage":"memory"}`)},
		step{name: "file stream", do: api("STREAM.CREATE.F", `{"name":"F","subjects":["f"]}`, "config.storage")},
		step{name: "info", do: api("INFO", "", "limits.max_memory", "limits.max_storage", "streams")},
	)...)
	steps = append(steps, as("e",
		step{name: "without max_bytes", do: api("STREAM.CREATE.X", `{"name":"X","subjects":["x"]}`)},
		step{name: "file past disk_max_stream_bytes", do: api("STREAM.CREATE.X", `{"name":"X","subjects":["x"],"max_bytes":2001}`)},
		step{name: "memory past mem_max_stream_bytes", do: api("STREAM.CREATE.X", `{"name":"X","subjects":["x"],"storage":"memory","max_bytes":1001}`)},
		step{name: "within", do: api("STREAM.CREATE.X", `{"name":"X","subjects":["x"],"max_bytes":2000}`, "config.max_bytes")},
		step{name: "consumer with the default max_ack_pending", do: consumer("X", "C")},
		step{name: "consumer past max_ack_pending", do: api("CONSUMER.CREATE.X.D",
			`{"stream_name":"X","config":{"durable_name":"D","ack_policy":"explicit","max_ack_pending":51}}`)},
	)...)
	steps = append(steps, as("t",
		step{name: "R1 tier: a stream", do: api("STREAM.CREATE.S", `{"name":"S","subjects":["s"]}`, "config.name")},
		step{name: "R1 tier: a second stream", do: api("STREAM.CREATE.S2", `{"name":"S2","subjects":["s2"]}`)},
		step{name: "R1 tier: file past max_file", do: api("STREAM.UPDATE.S", `{"name":"S","subjects":["s"],"max_bytes":30001}`)},
		step{name: "R1 tier: a consumer", do: consumer("S", "C1")},
		step{name: "R1 tier: a second consumer", do: consumer("S", "C2")},
	)...)
	steps = append(steps, as("r",
		step{name: "no R1 tier: a stream", do: api("STREAM.CREATE.S", `{"name":"S","subjects":["s"]}`),
			differs: "Skiff's streams have one replica: an account whose tiers lack R1 has JetStream without room, not a missing tier (10120)",
			skiff:   `error.code=500 error.description="insufficient storage resources available" error.err_code=10047 type="io.nats.jetstream.api.v1.stream_create_response"`},
	)...)
	runAccountScriptAs(t, conf, steps, login)
}

// TestDifferentialJWTAccountWithoutJetStream: an account JWT without
// JetStream limits answers 10039, as nats-server.
func TestDifferentialJWTAccountWithoutJetStream(t *testing.T) {
	conf, login := jwtAccounts(t)
	runAccountScriptAs(t, conf, as("c",
		step{name: "info", do: api("INFO", "")},
		step{name: "stream create", do: api("STREAM.CREATE.S", `{"name":"S","subjects":["s"]}`)},
		step{name: "stream names", do: api("STREAM.NAMES", "")},
		step{name: "consumer create", do: api("CONSUMER.CREATE.S.C", `{"stream_name":"S","config":{"name":"C"}}`)},
		step{name: "pull", do: api("CONSUMER.MSG.NEXT.S.C", `{"batch":1}`)},
		step{name: "publish to no stream", do: pub("s", "x")},
	), login)
}

// jwtBroker starts a broker in operator mode with op's accounts, JetStream
// on with jsOpts (StoreDir a fresh directory when empty).
func jwtBroker(t *testing.T, jsOpts jetstream.Options, op *jwttest.Operator, accounts ...*jwttest.Account) *broker {
	t.Helper()
	return startBrokerConfigured(t, jsOpts, func(o *server.Options) {
		o.TrustedOperators = []string{op.JWT}
		o.Resolver = server.ResolverOptions{Type: server.ResolverMemory, Preload: op.Preload(accounts...)}
	})
}

// jwtConnect connects user u and returns its JetStream context.
func jwtConnect(t *testing.T, b *broker, u *jwttest.User) njs.JetStream {
	t.Helper()
	nc, err := nats.Connect(b.srv.ClientURL(), nats.UserCredentials(u.CredsFile(t)))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := njs.New(nc)
	require.NoError(t, err)
	return js
}

// TestJWTAccountsIsolated: two accounts of operator mode, the same bucket
// and stream names in each, each with its own data, across a restart
// (the store keeps each under its account's public key).
func TestJWTAccountsIsolated(t *testing.T) {
	op := jwttest.NewOperator(t)
	unlimited := jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
	a := op.Account("A", jwttest.JetStream(unlimited))
	b := op.Account("B", jwttest.JetStream(unlimited))
	ua, ub := a.User("a"), b.User("b")
	dir := t.TempDir()
	br := jwtBroker(t, jetstream.Options{StoreDir: dir}, op, a, b)
	c := ctx(t)
	for _, tc := range []struct {
		u     *jwttest.User
		value string
	}{{ua, "a's"}, {ub, "b's"}} {
		js := jwtConnect(t, br, tc.u)
		kv, err := js.CreateKeyValue(c, njs.KeyValueConfig{Bucket: "CFG"})
		require.NoError(t, err)
		_, err = kv.Put(c, "owner", []byte(tc.value))
		require.NoError(t, err)
	}
	br.stop()
	for _, acc := range []*jwttest.Account{a, b} {
		require.DirExists(t, filepath.Join(dir, "accounts", acc.Pub, "streams", "KV_CFG"))
	}

	br = jwtBroker(t, jetstream.Options{StoreDir: dir}, op, a, b)
	for _, tc := range []struct {
		u     *jwttest.User
		value string
	}{{ua, "a's"}, {ub, "b's"}} {
		kv, err := jwtConnect(t, br, tc.u).KeyValue(c, "CFG")
		require.NoError(t, err)
		e, err := kv.Get(c, "owner")
		require.NoError(t, err)
		require.Equal(t, tc.value, string(e.Value()))
	}
}

// TestJWTAccountsPastServerQuota: account JWTs whose JetStream limits add
// up past the server's quota: the accounts that fit (by public key) get
// JetStream, the others are logged and answer 10039; the server starts.
func TestJWTAccountsPastServerQuota(t *testing.T) {
	op := jwttest.NewOperator(t)
	lim := jwt.JetStreamLimits{MemoryStorage: 20000, DiskStorage: 20000, Streams: -1, Consumer: -1}
	accs := []*jwttest.Account{op.Account("A", jwttest.JetStream(lim)), op.Account("B", jwttest.JetStream(lim))}
	logs := &logBuffer{}
	br := jwtBroker(t, jetstream.Options{MaxMemory: 30000, MaxStore: 1 << 20,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}, op, accs...)
	sort.Slice(accs, func(i, j int) bool { return accs[i].Pub < accs[j].Pub })
	_, err := jwtConnect(t, br, accs[0].User("u")).AccountInfo(ctx(t))
	require.NoError(t, err, "the first account fits")
	_, err = jwtConnect(t, br, accs[1].User("u")).AccountInfo(ctx(t))
	require.Equal(t, njs.JSErrCodeJetStreamNotEnabledForAccount, apiCode(err), "%v", err)
	require.Equal(t, 1, logs.count(`insufficient resources" account=`+accs[1].Pub))
}

// TestJWTAccountsPushed: with the full resolver, JetStream follows the
// account JWTs pushed while the server runs: an account pushed with
// JetStream gets it, a new JWT's limits apply at once, a JWT without
// JetStream takes it away (10039) and one with it again brings the
// stream back from disk.
func TestJWTAccountsPushed(t *testing.T) {
	op := jwttest.NewOperator(t)
	sys := op.Account("SYS")
	op.Update(jwttest.SystemAccount(sys.Pub))
	br := startBrokerConfigured(t, jetstream.Options{StoreDir: t.TempDir()}, func(o *server.Options) {
		o.TrustedOperators = []string{op.JWT}
		o.Resolver = server.ResolverOptions{Type: server.ResolverFull, Dir: t.TempDir(), Preload: op.Preload(sys)}
	})
	admin, err := nats.Connect(br.srv.ClientURL(), nats.UserCredentials(sys.User("admin").CredsFile(t)))
	require.NoError(t, err)
	defer admin.Close()
	push := func(acc *jwttest.Account) {
		t.Helper()
		m, err := admin.Request("$SYS.REQ.CLAIMS.UPDATE", []byte(acc.JWT), 5*time.Second)
		require.NoError(t, err)
		require.Contains(t, string(m.Data), `"code":200`)
	}
	a := op.Account("A", jwttest.JetStream(jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: 2, Consumer: -1}))
	push(a)
	js := jwtConnect(t, br, a.User("u"))
	ctx := t.Context()
	_, err = js.CreateStream(ctx, njs.StreamConfig{Name: "S1", Subjects: []string{"s1"}})
	require.NoError(t, err)
	_, err = js.Publish(ctx, "s1", []byte("kept"))
	require.NoError(t, err)

	a.Update(jwttest.JetStream(jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: 1, Consumer: -1}))
	push(a)
	_, err = js.CreateStream(ctx, njs.StreamConfig{Name: "S2", Subjects: []string{"s2"}})
	var apiErr *njs.APIError
	require.ErrorAs(t, err, &apiErr, "the new max_streams applies at once")
	require.Equal(t, njs.ErrorCode(10027), apiErr.ErrorCode, "maximum number of streams reached")

	a.Update(jwttest.AccountClaims(func(c *jwt.AccountClaims) { c.Limits.JetStreamLimits = jwt.JetStreamLimits{} }))
	push(a)
	_, err = js.AccountInfo(ctx)
	require.ErrorIs(t, err, njs.ErrJetStreamNotEnabledForAccount)

	a.Update(jwttest.JetStream(jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}))
	push(a)
	s, err := js.Stream(ctx, "S1")
	require.NoError(t, err, "the stream is back from disk")
	msg, err := s.GetMsg(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, "kept", string(msg.Data))
}
