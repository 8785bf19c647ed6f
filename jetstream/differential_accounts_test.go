package jetstream_test

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	skiff "github.com/skiffmq/skiff/broker"
	"github.com/skiffmq/skiff/server"
)

// Differential tests with accounts: the same configuration file loaded
// into nats-server (ProcessConfigFile) and Skiff (broker.ParseConfig),
// the same requests made by users of each account, the same answers.

// accountsConf is the accounts of the differential scripts; each user's
// password is its name. g is a user of the global account, which has no
// JetStream once accounts are configured.
const accountsConf = `
authorization { users: [ {user: g, password: g} ] }
accounts {
  A: { users: [ {user: a, password: a} ], jetstream: { max_streams: 2, max_consumers: 2, max_mem: 20000, max_file: 30000 } }
  B: { users: [ {user: b, password: b} ], jetstream: enabled }
  C: { users: [ {user: c, password: c} ] }
  D: { users: [ {user: d, password: d} ], jetstream: {} }
  E: { users: [ {user: e, password: e} ], jetstream: { max_bytes_required: true, mem_max_stream_bytes: 1000,
                                                       disk_max_stream_bytes: 2000, max_ack_pending: 50 } }
}
`

// accountStep is a step made by one account's user.
type accountStep struct {
	user string
	step
}

// as makes steps of a user's.
func as(user string, steps ...step) []accountStep {
	out := make([]accountStep, len(steps))
	for i, s := range steps {
		out[i] = accountStep{user: user, step: s}
	}
	return out
}

// startReferenceConf starts nats-server with JetStream on the
// configuration text.
func startReferenceConf(t *testing.T, conf string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ref.conf")
	text := fmt.Sprintf("listen: \"127.0.0.1:-1\"\njetstream { store_dir: %q }\n%s", t.TempDir(), conf)
	require.NoError(t, os.WriteFile(path, []byte(text), 0o600))
	o, err := natsserver.ProcessConfigFile(path)
	require.NoError(t, err)
	o.NoLog, o.NoSigs = true, true
	return runReference(t, o)
}

// startSkiffConf starts Skiff, JetStream on, with the configuration text
// as `skiff serve` reads it.
func startSkiffConf(t *testing.T, conf string) string {
	t.Helper()
	cfg, err := skiff.ParseConfig(conf)
	require.NoError(t, err)
	cfg.Server.Host, cfg.Server.Port, cfg.Server.HTTPPort = "127.0.0.1", server.RandomPort, 0
	cfg.Server.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.JetStreamEnabled, cfg.JetStream.StoreDir = true, t.TempDir()
	b, err := skiff.Start(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Shutdown(ctx(t)) })
	return b.ClientURL()
}

// runAccountScript runs steps against both servers loaded with conf, each
// step as its user (whose password is its name), and compares them.
func runAccountScript(t *testing.T, conf string, steps []accountStep) {
	runAccountScriptAs(t, conf, steps, func(user string) nats.Option { return nats.UserInfo(user, user) })
}

// runAccountScriptAs is runAccountScript with the users' credentials
// given by login.
func runAccountScriptAs(t *testing.T, conf string, steps []accountStep, login func(user string) nats.Option) {
	targets := func(url string, reference bool) map[string]*target {
		out := map[string]*target{}
		for _, s := range steps {
			if out[s.user] != nil {
				continue
			}
			nc, err := nats.Connect(url, login(s.user))
			require.NoError(t, err)
			t.Cleanup(nc.Close)
			out[s.user] = &target{t: t, nc: nc, strict: true, reference: reference}
		}
		return out
	}
	ref := targets(startReferenceConf(t, conf), true)
	sk := targets(startSkiffConf(t, conf), false)
	for _, s := range steps {
		name := s.user + ": " + s.name
		want := s.do(ref[s.user])
		if os.Getenv("SKIFF_DIFF_LOG") != "" {
			t.Logf("%s: %v", name, want)
		}
		got := s.do(sk[s.user])
		if s.differs != "" {
			require.Equal(t, s.skiff, got, "%s (differs on purpose: %s; nats-server: %v)", name, s.differs, want)
			continue
		}
		require.Equal(t, want, got, "%s: Skiff differs from nats-server", name)
	}
}

// The INFO fields both servers agree on for any account: usage and the
// storage limits. Skiff gives its server-wide bounds where an account
// sets no max_streams, max_consumers or max_ack_pending (nats-server -1).
var infoFields = []string{"memory", "storage", "reserved_memory", "reserved_storage", "streams", "consumers",
	"limits.max_memory", "limits.max_storage", "limits.memory_max_stream_bytes", "limits.storage_max_stream_bytes",
	"limits.max_bytes_required"}

// publishUntilRefused publishes 1 KB messages until one is refused.
func publishUntilRefused(subj string) func(*target) any {
	payload := strings.Repeat("x", 1000)
	return func(tg *target) any {
		for i := range 100 {
			if r := tg.pub(subj, payload); strings.Contains(r, "error") {
				return fmt.Sprintf("refused: %s (after more than 4: %v)", r[strings.Index(r, "error"):], i > 4)
			}
		}
		return "never refused"
	}
}

// TestDifferentialAccounts: the same stream name in two accounts, INFO per
// account, the account limits with their codes, and an account without
// JetStream.
func TestDifferentialAccounts(t *testing.T) {
	runAccountScript(t, accountsConf, accountLimitSteps())
}

// consumerCreate creates a durable consumer with explicit acks.
func consumerCreate(stream, name string) func(*target) any {
	return api("CONSUMER.CREATE."+stream+"."+name,
		fmt.Sprintf(`{"stream_name":%q,"config":{"durable_name":%q,"ack_policy":"explicit"}}`, stream, name), "config.max_ack_pending")
}

// accountLimitSteps are the steps of users a, b and e, whose accounts have
// accountsConf's limits (A: 2 streams, 2 consumers, 20000 bytes of memory,
// 30000 of file; B: none; E: max_bytes required, per-stream bounds, max
// ack pending 50), configured or in account JWTs.
func accountLimitSteps() []accountStep {
	consumer := consumerCreate
	var steps []accountStep
	steps = append(steps, as("a",
		step{name: "info, empty", do: api("INFO", "", append(infoFields, "limits.max_streams", "limits.max_consumers")...)},
		step{name: "create ORDERS", do: api("STREAM.CREATE.ORDERS", `{"name":"ORDERS","subjects":["orders.>"]}`, streamFields...)},
	)...)
	steps = append(steps, as("b",
		step{name: "info, empty", do: api("INFO", "", infoFields...)},
		step{name: "create ORDERS, the same name and subjects", do: api("STREAM.CREATE.ORDERS", `{"name":"ORDERS","subjects":["orders.>"]}`, streamFields...)},
		step{name: "publish", do: pub("orders.1", "b's")},
	)...)
	steps = append(steps, as("a",
		step{name: "publish", do: pub("orders.1", "a's")},
		step{name: "publish again", do: pub("orders.2", "a's")},
		step{name: "max_consumers above the account's", do: api("STREAM.CREATE.X", `{"name":"X","subjects":["x"],"max_consumers":3}`)},
		step{name: "memory past max_mem", do: api("STREAM.CREATE.X", `{"name":"X","subjects":["x"],"storage":"memory","max_bytes":20001}`)},
		step{name: "file past max_file", do: api("STREAM.CREATE.X", `{"name":"X","subjects":["x"],"max_bytes":30001}`)},
		step{name: "memory within", do: api("STREAM.CREATE.M", `{"name":"M","subjects":["m"],"storage":"memory","max_bytes":15000}`, "config.max_bytes")},
		step{name: "a third stream", do: api("STREAM.CREATE.Y", `{"name":"Y","subjects":["y"]}`)},
		step{name: "consumer 1", do: consumer("ORDERS", "C1")},
		step{name: "consumer 2", do: consumer("ORDERS", "C2")},
		step{name: "consumer 3", do: consumer("ORDERS", "C3")},
		step{name: "consumer on the other stream", do: consumer("M", "C1")},
		step{name: "info of ORDERS", do: api("STREAM.INFO.ORDERS", "", streamFields...)},
		step{name: "the first message", do: api("STREAM.MSG.GET.ORDERS", `{"seq":1}`, "message.subject", "message.data")},
		step{name: "publish until refused", do: publishUntilRefused("orders.fill")},
		step{name: "memory: publish until refused", do: publishUntilRefused("m")},
		step{name: "info, full", do: api("INFO", "", "streams", "consumers", "reserved_memory", "reserved_storage",
			"limits.max_memory", "limits.max_storage", "limits.max_streams", "limits.max_consumers")},
		step{name: "names", do: api("STREAM.NAMES", "", "total", "streams")},
	)...)
	steps = append(steps, as("b",
		step{name: "consumer 1", do: consumer("ORDERS", "C1")},
		step{name: "consumer 2", do: consumer("ORDERS", "C2")},
		step{name: "consumer 3", do: consumer("ORDERS", "C3")},
		step{name: "info of ORDERS", do: api("STREAM.INFO.ORDERS", "", streamFields...)},
		step{name: "the first message", do: api("STREAM.MSG.GET.ORDERS", `{"seq":1}`, "message.subject", "message.data")},
		step{name: "info", do: api("INFO", "", infoFields...)},
		step{name: "names", do: api("STREAM.NAMES", "", "total", "streams")},
	)...)
	steps = append(steps, as("e",
		step{name: "without max_bytes", do: api("STREAM.CREATE.X", `{"name":"X","subjects":["x"]}`)},
		step{name: "file past disk_max_stream_bytes", do: api("STREAM.CREATE.X", `{"name":"X","subjects":["x"],"max_bytes":2001}`)},
		step{name: "memory past mem_max_stream_bytes", do: api("STREAM.CREATE.X", `{"name":"X","subjects":["x"],"storage":"memory","max_bytes":1001}`)},
		step{name: "within", do: api("STREAM.CREATE.X", `{"name":"X","subjects":["x"],"max_bytes":2000}`, "config.max_bytes")},
		step{name: "update without max_bytes", do: api("STREAM.UPDATE.X", `{"name":"X","subjects":["x"]}`)},
		step{name: "consumer with the default max_ack_pending", do: consumer("X", "C")},
		step{name: "consumer past max_ack_pending", do: api("CONSUMER.CREATE.X.D",
			`{"stream_name":"X","config":{"durable_name":"D","ack_policy":"explicit","max_ack_pending":51}}`)},
		step{name: "info", do: api("INFO", "", append(infoFields, "limits.max_ack_pending")...)},
	)...)
	return steps
}

// TestDifferentialAccountWithoutJetStream: every API of an account without
// JetStream answers 10039, or has no responders where nats-server has no
// subscription; the global account, beside configured accounts, has none.
func TestDifferentialAccountWithoutJetStream(t *testing.T) {
	runAccountScript(t, accountsConf, as("c",
		step{name: "info", do: api("INFO", "")},
		step{name: "stream create", do: api("STREAM.CREATE.S", `{"name":"S","subjects":["s"]}`)},
		step{name: "stream update", do: api("STREAM.UPDATE.S", `{"name":"S","subjects":["s"]}`)},
		step{name: "stream info", do: api("STREAM.INFO.S", "")},
		step{name: "stream delete", do: api("STREAM.DELETE.S", "")},
		step{name: "stream purge", do: api("STREAM.PURGE.S", "")},
		step{name: "stream names", do: api("STREAM.NAMES", "")},
		step{name: "stream list", do: api("STREAM.LIST", "")},
		step{name: "msg get", do: api("STREAM.MSG.GET.S", `{"seq":1}`)},
		step{name: "msg delete", do: api("STREAM.MSG.DELETE.S", `{"seq":1}`)},
		step{name: "consumer create", do: api("CONSUMER.CREATE.S.C", `{"stream_name":"S","config":{"name":"C"}}`)},
		step{name: "durable create", do: api("CONSUMER.DURABLE.CREATE.S.C", `{"stream_name":"S","config":{"durable_name":"C"}}`)},
		step{name: "consumer info", do: api("CONSUMER.INFO.S.C", "")},
		step{name: "consumer delete", do: api("CONSUMER.DELETE.S.C", "")},
		step{name: "consumer names", do: api("CONSUMER.NAMES.S", "")},
		step{name: "consumer list", do: api("CONSUMER.LIST.S", "")},
		step{name: "consumer pause", do: api("CONSUMER.PAUSE.S.C", `{}`)},
		step{name: "consumer reset", do: api("CONSUMER.RESET.S.C", "")},
		step{name: "direct get", do: api("DIRECT.GET.S", `{"seq":1}`)},
		step{name: "pull", do: api("CONSUMER.MSG.NEXT.S.C", `{"batch":1}`)},
		step{name: "publish to no stream", do: pub("s", "x")},
	))
	runAccountScript(t, accountsConf, as("g",
		step{name: "info in the global account", do: api("INFO", "")},
		step{name: "stream create in the global account", do: api("STREAM.CREATE.S", `{"name":"S","subjects":["s"]}`)},
	))
}

// TestDifferentialAccountBuckets: a KV bucket of the same name in two
// accounts is two buckets.
func TestDifferentialAccountBuckets(t *testing.T) {
	kv := func(value string) func(*target) any {
		return func(tg *target) any {
			js, err := njs.New(tg.nc)
			require.NoError(t, err)
			c := ctx(t)
			var r record
			bucket, err := js.CreateKeyValue(c, njs.KeyValueConfig{Bucket: "CFG"})
			r.add("create", outcome(err))
			if err != nil {
				return r
			}
			_, err = bucket.Get(c, "color")
			r.add("get before", outcome(err))
			rev, err := bucket.Put(c, "color", []byte(value))
			r.add("put", rev, " ", outcome(err))
			r.add("get", entry(bucket.Get(c, "color")))
			var keys []string
			lister, err := bucket.ListKeys(c)
			require.NoError(t, err)
			for k := range lister.Keys() {
				keys = append(keys, k)
			}
			r.add("keys", keys)
			return r
		}
	}
	steps := append(as("b", step{name: "bucket", do: kv("blue")}), as("d", step{name: "bucket", do: kv("red")})...)
	steps = append(steps, as("b", step{name: "bucket again", do: func(tg *target) any {
		js, err := njs.New(tg.nc)
		require.NoError(t, err)
		bucket, err := js.KeyValue(ctx(t), "CFG")
		require.NoError(t, err)
		return entry(bucket.Get(ctx(t), "color"))
	}})...)
	steps = append(steps, as("c", step{name: "bucket without JetStream", do: kv("green")})...)
	runAccountScript(t, accountsConf, steps)
}

// importsConf exports A's orders as a stream to B, which has a stream of
// them, and A's JetStream API as a service to C.
const importsConf = `
accounts {
  A: { users: [ {user: a, password: a} ], jetstream: enabled,
       exports: [ {stream: "orders.>"}, {service: "$JS.API.>"} ] }
  B: { users: [ {user: b, password: b} ], jetstream: enabled,
       imports: [ {stream: {account: A, subject: "orders.>"}, to: "ext.orders.>"} ] }
  C: { users: [ {user: c, password: c} ],
       imports: [ {service: {account: A, subject: "$JS.API.>"}, to: "a.api.>"} ] }
}
`

// TestDifferentialAccountImports: a stream of the importer stores what
// crosses a stream import, as nats-server's; the JetStream API of another
// account through a service import is refused on purpose.
func TestDifferentialAccountImports(t *testing.T) {
	viaImport := func(subj string) func(*target) any {
		return func(tg *target) any {
			m, err := tg.nc.Request(subj, nil, 2*time.Second)
			if err != nil {
				return "error: " + err.Error()
			}
			return pick(t, m.Data, "type", "error.code", "error.err_code", "error.description", "streams")
		}
	}
	var steps []accountStep
	steps = append(steps, as("b", step{name: "a stream of the imported subjects",
		do: api("STREAM.CREATE.EXT", `{"name":"EXT","subjects":["ext.orders.>"]}`, "config.subjects")})...)
	steps = append(steps, as("a",
		step{name: "a stream of the exported subjects", do: api("STREAM.CREATE.ORDERS", `{"name":"ORDERS","subjects":["orders.>"]}`, "config.subjects")},
		step{name: "publish", do: pub("orders.1", "first")},
	)...)
	steps = append(steps, as("b",
		step{name: "what crossed is stored", do: func(tg *target) any {
			return tg.apiUntil("STREAM.INFO.EXT", "", has("state.messages=1"), "state.messages", "state.last_seq")
		}},
		step{name: "its subject", do: api("STREAM.MSG.GET.EXT", `{"seq":1}`, "message.subject", "message.data")},
	)...)
	steps = append(steps, as("c", step{name: "A's API through a service import", do: viaImport("a.api.INFO"),
		differs: "JetStream through an import would act for a principal of another account; Skiff refuses it (docs/accounts.md)",
		skiff:   `error.code=503 error.description="JetStream not enabled for account: the JetStream API of another account, through an import, is not supported by Skiff" error.err_code=10039 type="io.nats.jetstream.api.v1.account_info_response"`})...)
	runAccountScript(t, importsConf, steps)
}
