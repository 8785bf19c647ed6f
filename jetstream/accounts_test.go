package jetstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// JetStream per account, seen by clients: each account its own streams,
// consumers, buckets and limits, nothing crossing.

// tenant is an account with one user, named after it in lower case, whose
// password is the user name.
func tenant(name string, js *server.JetStreamLimits) server.AccountConfig {
	u := strings.ToLower(name)
	return server.AccountConfig{Name: name, Users: []server.User{{Name: u, Password: u}}, JetStream: js}
}

// startAccountsBroker starts a broker with the accounts, JetStream options
// jsOpts (StoreDir: a fresh directory when empty) and monitoring.
func startAccountsBroker(t testing.TB, jsOpts jetstream.Options, accounts ...server.AccountConfig) *broker {
	t.Helper()
	return startBrokerConfigured(t, jsOpts, func(o *server.Options) { o.HTTPPort, o.Accounts = server.RandomPort, accounts })
}

// connectUser connects as one of tenant's users.
func connectUser(t testing.TB, b *broker, user string) (*nats.Conn, njs.JetStream) {
	t.Helper()
	nc, err := nats.Connect(b.srv.ClientURL(), nats.UserInfo(user, user), nats.Timeout(5*time.Second))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := njs.New(nc)
	require.NoError(t, err)
	return nc, js
}

// TestAccountsIsolation: two accounts with the same stream, consumer,
// bucket and object store names, and the same subjects, share nothing.
func TestAccountsIsolation(t *testing.T) {
	b := startAccountsBroker(t, jetstream.Options{},
		tenant("A", &server.JetStreamLimits{}), tenant("B", &server.JetStreamLimits{}), tenant("C", nil))
	c := ctx(t)
	ncA, jsA := connectUser(t, b, "a")
	ncB, jsB := connectUser(t, b, "b")
	for _, js := range []njs.JetStream{jsA, jsB} {
		_, err := js.CreateStream(c, njs.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
		require.NoError(t, err, "the same name and subjects in each account")
	}
	for i := range 3 {
		_, err := jsA.Publish(c, fmt.Sprintf("orders.%d", i), []byte("a"))
		require.NoError(t, err)
	}
	_, err := jsB.Publish(c, "orders.1", []byte("b"))
	require.NoError(t, err)
	for js, want := range map[njs.JetStream]uint64{jsA: 3, jsB: 1} {
		s, err := js.Stream(c, "ORDERS")
		require.NoError(t, err)
		require.Equal(t, want, s.CachedInfo().State.Msgs)
		info, err := js.AccountInfo(c)
		require.NoError(t, err)
		require.Equal(t, 1, info.Streams)
	}

	// Consumers: A's durable is not B's, and B's acks never reach it.
	consA, err := jsA.CreateOrUpdateConsumer(c, "ORDERS", njs.ConsumerConfig{Durable: "W", AckPolicy: njs.AckExplicitPolicy})
	require.NoError(t, err)
	_, err = jsB.Consumer(c, "ORDERS", "W")
	require.ErrorIs(t, err, njs.ErrConsumerNotFound)
	first := fetchOne(t, consA)
	meta, err := first.Metadata()
	require.NoError(t, err)
	ack := fmt.Sprintf("$JS.ACK.ORDERS.W.1.%d.%d.0.2", meta.Sequence.Stream, meta.Sequence.Consumer)
	require.NoError(t, ncB.Publish(ack, []byte("+ACK")))
	require.NoError(t, ncB.Flush())
	time.Sleep(100 * time.Millisecond) // acks are applied asynchronously
	info, err := consA.Info(c)
	require.NoError(t, err)
	require.Equal(t, 1, info.NumAckPending, "B's ack did not reach A's consumer")
	require.NoError(t, first.DoubleAck(c))

	// A push consumer of B delivers in B: A's subscriber to the same
	// subject sees nothing.
	subA, subB := subscribeEach(t, "deliver.here", ncA, ncB)
	_, err = jsB.CreateOrUpdateConsumer(c, "ORDERS", njs.ConsumerConfig{Durable: "P", DeliverSubject: "deliver.here"})
	require.NoError(t, err)
	m, err := subB.NextMsg(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "b", string(m.Data))
	_, err = subA.NextMsg(200 * time.Millisecond)
	require.ErrorIs(t, err, nats.ErrTimeout)

	// Buckets of the same name.
	for js, v := range map[njs.JetStream]string{jsA: "blue", jsB: "red"} {
		kv, err := js.CreateKeyValue(c, njs.KeyValueConfig{Bucket: "CFG"})
		require.NoError(t, err)
		_, err = kv.Put(c, "color", []byte(v))
		require.NoError(t, err)
	}
	for js, v := range map[njs.JetStream]string{jsA: "blue", jsB: "red"} {
		kv, err := js.KeyValue(c, "CFG")
		require.NoError(t, err)
		e, err := kv.Get(c, "color")
		require.NoError(t, err)
		require.Equal(t, v, string(e.Value()))
		h, err := kv.History(c, "color")
		require.NoError(t, err)
		require.Len(t, h, 1, "one put in each account")
	}
	obsA, err := jsA.CreateObjectStore(c, njs.ObjectStoreConfig{Bucket: "FILES"})
	require.NoError(t, err)
	_, err = obsA.PutBytes(c, "report", []byte("A's report"))
	require.NoError(t, err)
	obsB, err := jsB.CreateObjectStore(c, njs.ObjectStoreConfig{Bucket: "FILES"})
	require.NoError(t, err)
	_, err = obsB.GetBytes(c, "report")
	require.ErrorIs(t, err, njs.ErrObjectNotFound)
	got, err := obsA.GetBytes(c, "report")
	require.NoError(t, err)
	require.Equal(t, "A's report", string(got))

	// Names and deletes stay in their account.
	require.NoError(t, jsB.DeleteStream(c, "ORDERS"))
	s, err := jsA.Stream(c, "ORDERS")
	require.NoError(t, err)
	require.Equal(t, uint64(3), s.CachedInfo().State.Msgs)
	var names []string
	for n := range jsA.StreamNames(c).Name() {
		names = append(names, n)
	}
	require.ElementsMatch(t, []string{"ORDERS", "KV_CFG", "OBJ_FILES"}, names)

	// C has no JetStream.
	_, jsC := connectUser(t, b, "c")
	_, err = jsC.AccountInfo(c)
	require.ErrorIs(t, err, njs.ErrJetStreamNotEnabledForAccount)
	_, err = jsC.CreateStream(c, njs.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	require.Equal(t, njs.ErrorCode(10039), apiCode(err), "%v", err)
}

// TestAccountQuotaOtherTenantPublishes: a tenant at its storage quota has
// its publishes refused (10002) while another tenant's, at the same time
// and on the same subjects, all succeed, though B's own quota has room
// for its messages only, not for A's too: each account counts its own.
func TestAccountQuotaOtherTenantPublishes(t *testing.T) {
	const quota, msgs = 20_000, 100
	payload := make([]byte, 1000)
	quotaB := int64(msgs * len(payload) * 11 / 10) // B's messages and their framing, not A's
	b := startAccountsBroker(t, jetstream.Options{},
		tenant("A", &server.JetStreamLimits{MaxStore: quota}), tenant("B", &server.JetStreamLimits{MaxStore: quotaB}))
	c := ctx(t)
	jsA, jsB := streamSInEach(t, b)
	var wg sync.WaitGroup
	var refusedA int
	var errA error
	wg.Add(2)
	go func() {
		defer wg.Done()
		for range msgs {
			_, err := jsA.Publish(c, "s", payload)
			if apiCode(err) == 10002 {
				refusedA++
				continue
			}
			if err != nil {
				errA = err
				return
			}
		}
	}()
	var errB error
	go func() {
		defer wg.Done()
		for i := range msgs {
			if _, err := jsB.Publish(c, "s", payload); err != nil {
				errB = fmt.Errorf("B's publish %d: %w", i, err)
				return
			}
		}
	}()
	wg.Wait()
	require.NoError(t, errA)
	require.NoError(t, errB, "B is not bound by A's quota")
	require.Greater(t, refusedA, 70, "A's publishes past its quota are refused")
	for js, want := range map[njs.JetStream]uint64{jsA: uint64(msgs - refusedA), jsB: msgs} {
		s, err := js.Stream(c, "S")
		require.NoError(t, err)
		require.Equal(t, want, s.CachedInfo().State.Msgs)
	}
	_, err := jsA.Publish(c, "s", payload)
	var apiErr *njs.APIError
	require.ErrorAs(t, err, &apiErr)
	require.Equal(t, 400, apiErr.Code)
	require.Equal(t, "resource limits exceeded for account", apiErr.Description)

	// A purge makes room, once recounted.
	s, err := jsA.Stream(c, "S")
	require.NoError(t, err)
	require.NoError(t, s.Purge(c))
	require.Eventually(t, func() bool { _, err := jsA.Publish(c, "s", payload); return err == nil },
		5*time.Second, 50*time.Millisecond)
}

// TestAccountLimits: each account limit with nats-server's error.
func TestAccountLimits(t *testing.T) {
	b := startAccountsBroker(t, jetstream.Options{},
		tenant("A", &server.JetStreamLimits{MaxStreams: 2, MaxConsumers: 2, MaxMemory: 10_000, MaxStore: 20_000, MaxAckPending: 50}),
		tenant("B", &server.JetStreamLimits{MaxBytesRequired: true, MemoryMaxStreamBytes: 1000, StoreMaxStreamBytes: 2000}))
	c := ctx(t)
	_, jsA := connectUser(t, b, "a")
	_, jsB := connectUser(t, b, "b")
	code := func(_ any, err error) njs.ErrorCode { return apiCode(err) }

	require.Equal(t, njs.ErrorCode(10026), code(jsA.CreateStream(c, njs.StreamConfig{Name: "X", MaxConsumers: 3})),
		"a stream's max_consumers above the account's")
	require.Equal(t, njs.ErrorCode(10028), code(jsA.CreateStream(c, njs.StreamConfig{Name: "X", Storage: njs.MemoryStorage, MaxBytes: 10_001})))
	require.Equal(t, njs.ErrorCode(10047), code(jsA.CreateStream(c, njs.StreamConfig{Name: "X", MaxBytes: 20_001})))
	_, err := jsA.CreateStream(c, njs.StreamConfig{Name: "S1", MaxBytes: 15_000})
	require.NoError(t, err)
	require.Equal(t, njs.ErrorCode(10047), code(jsA.CreateStream(c, njs.StreamConfig{Name: "X", MaxBytes: 6000})),
		"beside S1's reservation")
	_, err = jsA.CreateStream(c, njs.StreamConfig{Name: "S2", Storage: njs.MemoryStorage})
	require.NoError(t, err)
	require.Equal(t, njs.ErrorCode(10027), code(jsA.CreateStream(c, njs.StreamConfig{Name: "S3"})))
	require.Equal(t, njs.ErrorCode(10047), code(jsA.UpdateStream(c, njs.StreamConfig{Name: "S1", MaxBytes: 20_001})))

	for i := range 2 {
		_, err := jsA.CreateOrUpdateConsumer(c, "S1", njs.ConsumerConfig{Durable: fmt.Sprint("C", i), AckPolicy: njs.AckExplicitPolicy})
		require.NoError(t, err)
	}
	require.Equal(t, njs.ErrorCode(10026), code(jsA.CreateOrUpdateConsumer(c, "S1", njs.ConsumerConfig{Durable: "C2"})),
		"the account's max_consumers, per stream")
	_, err = jsA.CreateOrUpdateConsumer(c, "S2", njs.ConsumerConfig{Durable: "C0", AckPolicy: njs.AckExplicitPolicy})
	require.NoError(t, err, "another stream has its own")
	cons, err := jsA.Consumer(c, "S1", "C0")
	require.NoError(t, err)
	require.Equal(t, 50, cons.CachedInfo().Config.MaxAckPending, "the account's max_ack_pending is the default")
	_, err = jsA.CreateOrUpdateConsumer(c, "S2", njs.ConsumerConfig{Durable: "C1", AckPolicy: njs.AckExplicitPolicy, MaxAckPending: 51})
	require.Equal(t, njs.ErrorCode(10121), apiCode(err))

	require.Equal(t, njs.ErrorCode(10113), code(jsB.CreateStream(c, njs.StreamConfig{Name: "X"})))
	require.Equal(t, njs.ErrorCode(10122), code(jsB.CreateStream(c, njs.StreamConfig{Name: "X", MaxBytes: 2001})))
	require.Equal(t, njs.ErrorCode(10122), code(jsB.CreateStream(c, njs.StreamConfig{Name: "X", Storage: njs.MemoryStorage, MaxBytes: 1001})))
	_, err = jsB.CreateStream(c, njs.StreamConfig{Name: "X", MaxBytes: 2000})
	require.NoError(t, err)
	require.Equal(t, njs.ErrorCode(10113), code(jsB.UpdateStream(c, njs.StreamConfig{Name: "X"})))

	info, err := jsA.AccountInfo(c)
	require.NoError(t, err)
	require.Equal(t, njs.AccountLimits{MaxMemory: 10_000, MaxStore: 20_000, MaxStreams: 2, MaxConsumers: 2,
		MaxAckPending: 50, MemoryMaxStreamBytes: -1, StoreMaxStreamBytes: -1}, info.Limits)
	require.Equal(t, 2, info.Streams)
	require.Equal(t, 3, info.Consumers)
	require.Equal(t, uint64(15_000), info.ReservedStore)
}

// TestAccountServerBoundsSpanAccounts: the server-wide bounds count every
// account's streams and consumers.
func TestAccountServerBoundsSpanAccounts(t *testing.T) {
	b := startAccountsBroker(t, jetstream.Options{MaxStreams: 2, MaxStore: 10_000},
		tenant("A", &server.JetStreamLimits{}), tenant("B", &server.JetStreamLimits{}))
	c := ctx(t)
	_, jsA := connectUser(t, b, "a")
	_, jsB := connectUser(t, b, "b")
	_, err := jsA.CreateStream(c, njs.StreamConfig{Name: "S", MaxBytes: 6000})
	require.NoError(t, err)
	_, err = jsB.CreateStream(c, njs.StreamConfig{Name: "S", MaxBytes: 6000})
	require.Equal(t, njs.ErrorCode(10047), apiCode(err), "the server's quota, beside A's reservation")
	_, err = jsB.CreateStream(c, njs.StreamConfig{Name: "S", MaxBytes: 4000})
	require.NoError(t, err)
	_, err = jsB.CreateStream(c, njs.StreamConfig{Name: "T", MaxBytes: 1})
	require.Equal(t, njs.ErrorCode(10027), apiCode(err), "the server's max_streams, over both accounts")
}

// TestAccountAdvisories: advisories are published in the account they
// are about, and only there.
func TestAccountAdvisories(t *testing.T) {
	b := startAccountsBroker(t, jetstream.Options{}, tenant("A", &server.JetStreamLimits{}), tenant("B", &server.JetStreamLimits{}))
	ncA, jsA := connectUser(t, b, "a")
	ncB, _ := connectUser(t, b, "b")
	subA, subB := subscribeEach(t, "$JS.EVENT.ADVISORY.>", ncA, ncB)
	_, err := jsA.CreateStream(ctx(t), njs.StreamConfig{Name: "S", Subjects: []string{"s"}})
	require.NoError(t, err)
	var subjects []string
	for {
		m, err := subA.NextMsg(500 * time.Millisecond)
		if errors.Is(err, nats.ErrTimeout) {
			break
		}
		require.NoError(t, err)
		subjects = append(subjects, m.Subject)
	}
	require.Contains(t, subjects, "$JS.EVENT.ADVISORY.STREAM.CREATED.S")
	require.Contains(t, subjects, "$JS.EVENT.ADVISORY.API")
	_, err = subB.NextMsg(100 * time.Millisecond)
	require.ErrorIs(t, err, nats.ErrTimeout, "B hears nothing of A")
}

// TestAccountJszAndMetrics: /jsz details each account, filtered by acc,
// and /metrics labels streams with their account.
func TestAccountJszAndMetrics(t *testing.T) {
	b := startAccountsBroker(t, jetstream.Options{},
		tenant("A", &server.JetStreamLimits{MaxStreams: 5}), tenant("B", &server.JetStreamLimits{}), tenant("C", nil))
	c := ctx(t)
	jsA, _ := streamSInEach(t, b)
	_, err := jsA.CreateStream(c, njs.StreamConfig{Name: "T", Subjects: []string{"t"}})
	require.NoError(t, err)
	_, err = jsA.Publish(c, "s", []byte("a"))
	require.NoError(t, err)

	v := getJSON(t, b, "/jsz?streams=true")
	require.EqualValues(t, 2, v["accounts"], "A and B have JetStream")
	require.EqualValues(t, 3, v["streams"])
	details := v["account_details"].([]any)
	require.Len(t, details, 2)
	require.Equal(t, "A", details[0].(map[string]any)["name"])
	require.Len(t, details[0].(map[string]any)["stream_detail"], 2)
	require.Equal(t, "B", details[1].(map[string]any)["name"])

	v = getJSON(t, b, "/jsz?acc=B")
	details = v["account_details"].([]any)
	require.Len(t, details, 1)
	require.Equal(t, "B", details[0].(map[string]any)["name"])
	require.EqualValues(t, 3, v["streams"], "the totals still cover every account")
	v = getJSON(t, b, "/jsz?acc=C")
	require.Nil(t, v["account_details"], "C has no JetStream")

	metrics := scrape(t, b)
	for _, want := range []string{
		`skiff_jetstream_stream_messages{account="A",stream="S"} 1`,
		`skiff_jetstream_stream_messages{account="B",stream="S"} 0`,
		`skiff_jetstream_account_streams{account="A"} 2`,
		`skiff_jetstream_account_limit_streams{account="A"} 5`,
		`skiff_jetstream_account_limit_streams{account="B"} -1`,
		`skiff_jetstream_streams 3`,
	} {
		require.Contains(t, metrics, want)
	}
}

// TestAccountStreamWorkers: the requests about one stream name in two
// accounts are two streams' requests: a create held up in A does not hold
// up B's stream of the same name... unless they hash to the same worker,
// which the worker of (account, stream) decides.
func TestAccountStreamWorkers(t *testing.T) {
	require.Equal(t, jetstream.StreamWorkerOf("S"), jetstream.AccountStreamWorkerOf(server.GlobalAccountName, "S"))
	differ := false
	for i := range 16 {
		if jetstream.AccountStreamWorkerOf("A", fmt.Sprint("S", i)) != jetstream.AccountStreamWorkerOf("B", fmt.Sprint("S", i)) {
			differ = true
		}
	}
	require.True(t, differ, "the account is part of the hash")
}

// TestSystemAccountNeverHasJetStream: an account named $SYS, nats-server's
// system account, cannot be given JetStream.
func TestSystemAccountNeverHasJetStream(t *testing.T) {
	opts := server.DefaultOptions()
	opts.Host, opts.Port = "127.0.0.1", server.RandomPort
	opts.Accounts = []server.AccountConfig{tenant("$SYS", &server.JetStreamLimits{})}
	_, err := server.New(opts)
	require.ErrorContains(t, err, "jetstream can not be enabled on the system account")
}

// TestAccountNamesFoldingTogether: two accounts with JetStream whose names
// differ only in case would share a directory on macOS and Windows.
func TestAccountNamesFoldingTogether(t *testing.T) {
	opts := server.DefaultOptions()
	opts.Host, opts.Port = "127.0.0.1", server.RandomPort
	opts.Accounts = []server.AccountConfig{tenant("Team", &server.JetStreamLimits{}), tenant("TEAM", &server.JetStreamLimits{})}
	opts.Accounts[1].Users[0].Name = "team2"
	s, err := server.New(opts)
	require.NoError(t, err)
	_, err = jetstream.New(s, jetstream.Options{StoreDir: t.TempDir()})
	require.ErrorIs(t, err, jetstream.ErrInvalidOptions)
	_ = s.Shutdown(context.Background())
}

// getJSON reads a monitoring endpoint's JSON.
func getJSON(t *testing.T, b *broker, path string) map[string]any {
	t.Helper()
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(httpGet(t, fmt.Sprintf("http://%s%s", b.srv.MonitorAddr(), path))), &v))
	return v
}

// scrape reads /metrics.
func scrape(t *testing.T, b *broker) string {
	t.Helper()
	return httpGet(t, fmt.Sprintf("http://%s/metrics", b.srv.MonitorAddr()))
}

// TestAccountQuotasPastTheServers: accounts whose quotas add up past the
// server's are refused, as nats-server refuses to start JetStream.
func TestAccountQuotasPastTheServers(t *testing.T) {
	for _, tc := range []struct {
		name  string
		a, b  server.JetStreamLimits
		error string
	}{
		{"memory", server.JetStreamLimits{MaxMemory: 8000}, server.JetStreamLimits{MaxMemory: 8000}, "insufficient memory resources"},
		{"storage", server.JetStreamLimits{MaxStore: 80_000}, server.JetStreamLimits{MaxStore: 30_000}, "insufficient storage resources"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := server.DefaultOptions()
			opts.Host, opts.Port = "127.0.0.1", server.RandomPort
			opts.Accounts = []server.AccountConfig{tenant("A", &tc.a), tenant("B", &tc.b)}
			s, err := server.New(opts)
			require.NoError(t, err)
			_, err = jetstream.New(s, jetstream.Options{StoreDir: t.TempDir(), MaxMemory: 10_000, MaxStore: 100_000})
			require.ErrorIs(t, err, jetstream.ErrInvalidOptions)
			require.ErrorContains(t, err, tc.error)
		})
	}
}

// TestDeputyAcrossAccounts: a user of account B, allowed everything in B,
// can never reach account A's streams: not through B's API, nor through
// what the server publishes for B (a push consumer's deliveries, a pull
// request's replies), which is published in B.
func TestDeputyAcrossAccounts(t *testing.T) {
	b := startAccountsBroker(t, jetstream.Options{}, tenant("A", &server.JetStreamLimits{}), tenant("B", &server.JetStreamLimits{}))
	c := ctx(t)
	_, jsA := connectUser(t, b, "a")
	_, err := jsA.CreateStream(c, njs.StreamConfig{Name: "VICTIM", Subjects: []string{"victim.>"}})
	require.NoError(t, err)
	_, err = jsA.Publish(c, "victim.data", []byte("precious"))
	require.NoError(t, err)

	ncB, jsB := connectUser(t, b, "b")
	require.ErrorIs(t, jsB.DeleteStream(c, "VICTIM"), njs.ErrStreamNotFound, "B's API is B's")
	_, err = jsB.CreateStream(c, njs.StreamConfig{Name: "OWN", Subjects: []string{"own.>"}})
	require.NoError(t, err)
	_, err = jsB.Publish(c, "own.x", []byte("injected"))
	require.NoError(t, err)
	// A push consumer of B delivering to A's API and stream subjects, and
	// pull requests of B whose replies are A's subjects: all in B.
	for i, deliver := range []string{"$JS.API.STREAM.DELETE.VICTIM", "victim.injected"} {
		_, err = jsB.CreateOrUpdateConsumer(c, "OWN", njs.ConsumerConfig{Durable: fmt.Sprint("push", i), DeliverSubject: deliver})
		require.NoError(t, err)
		sub, err := ncB.SubscribeSync(deliver) // so that it delivers
		require.NoError(t, err)
		_, err = sub.NextMsg(5 * time.Second)
		require.NoError(t, err, "delivered in B")
	}
	_, err = jsB.CreateOrUpdateConsumer(c, "OWN", njs.ConsumerConfig{Durable: "pull", AckPolicy: njs.AckExplicitPolicy})
	require.NoError(t, err)
	require.NoError(t, ncB.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.OWN.pull", "victim.injected", []byte(`{"batch":1,"expires":1000000000}`)))
	require.NoError(t, ncB.Flush())
	time.Sleep(200 * time.Millisecond)

	s, err := jsA.Stream(c, "VICTIM")
	require.NoError(t, err, "A's stream is still there")
	require.Equal(t, uint64(1), s.CachedInfo().State.Msgs, "nothing of B's reached it")
}

// TestJetStreamAcrossImports: another account's clients reaching an
// account's JetStream through an import (its API as a service, acks as a
// stream) are refused, answered where they asked, counted: nothing of
// theirs acts in the account.
func TestJetStreamAcrossImports(t *testing.T) {
	a := tenant("A", &server.JetStreamLimits{})
	a.Exports = []server.Export{{Subject: "$JS.API.>", Service: true}}
	a.Imports = []server.Import{{Account: "C", Subject: "$JS.ACK.>"}}
	b := tenant("B", nil)
	b.Imports = []server.Import{{Account: "A", Subject: "$JS.API.>", Service: true, To: "a.api.>"}}
	c := tenant("C", nil)
	c.Exports = []server.Export{{Subject: "$JS.ACK.>"}}
	br := startAccountsBroker(t, jetstream.Options{}, a, b, c)
	cx := ctx(t)

	_, jsA := connectUser(t, br, "a")
	_, err := jsA.CreateStream(cx, njs.StreamConfig{Name: "S", Subjects: []string{"s"}})
	require.NoError(t, err)
	_, err = jsA.Publish(cx, "s", []byte("x"))
	require.NoError(t, err)
	cons, err := jsA.CreateOrUpdateConsumer(cx, "S", njs.ConsumerConfig{Durable: "W", AckPolicy: njs.AckExplicitPolicy})
	require.NoError(t, err)

	// B, through its import of A's API.
	ncB, _ := connectUser(t, br, "b")
	jsB, err := njs.NewWithAPIPrefix(ncB, "a.api")
	require.NoError(t, err)
	_, err = jsB.CreateStream(cx, njs.StreamConfig{Name: "X", Subjects: []string{"x"}})
	require.Equal(t, njs.ErrorCode(10039), apiCode(err), "%v", err)
	require.ErrorContains(t, err, "through an import, is not supported by Skiff")
	require.ErrorIs(t, jsB.DeleteStream(cx, "S"), njs.ErrJetStreamNotEnabledForAccount)
	m, err := ncB.Request("a.api.CONSUMER.MSG.NEXT.S.W", []byte(`{"batch":1}`), 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "409", m.Header.Get("Status"), "a pull request is answered with a status")

	// C, whose ack subjects A imports: A's consumer does not take C's ack.
	got := fetchOne(t, cons)
	ncC, _ := connectUser(t, br, "c")
	require.NoError(t, ncC.Publish(got.Reply(), []byte("+ACK")))
	require.NoError(t, ncC.Flush())
	time.Sleep(100 * time.Millisecond) // acks are applied asynchronously
	info, err := cons.Info(cx)
	require.NoError(t, err)
	require.Equal(t, 1, info.NumAckPending, "C's ack did not reach A's consumer")

	info2, err := jsA.AccountInfo(cx)
	require.NoError(t, err)
	require.Equal(t, 1, info2.Streams, "nothing created through the import")
	require.Contains(t, scrape(t, br), "skiff_jetstream_refused_across_accounts_total 4")
	require.NoError(t, got.Ack(), "A's own ack is taken")
}

// subscribeEach subscribes a and b to subject, each, and returns once the
// server has both subscriptions.
func subscribeEach(t *testing.T, subject string, a, b *nats.Conn) (*nats.Subscription, *nats.Subscription) {
	t.Helper()
	var subs [2]*nats.Subscription
	for i, nc := range []*nats.Conn{a, b} {
		sub, err := nc.SubscribeSync(subject)
		require.NoError(t, err)
		require.NoError(t, nc.Flush())
		subs[i] = sub
	}
	return subs[0], subs[1]
}

// streamSInEach connects users a and b (of accounts A and B) and creates
// stream S on subject s in each account, the same name twice.
func streamSInEach(t *testing.T, b *broker) (jsA, jsB njs.JetStream) {
	t.Helper()
	_, jsA = connectUser(t, b, "a")
	_, jsB = connectUser(t, b, "b")
	for _, js := range []njs.JetStream{jsA, jsB} {
		_, err := js.CreateStream(ctx(t), njs.StreamConfig{Name: "S", Subjects: []string{"s"}})
		require.NoError(t, err)
	}
	return jsA, jsB
}
