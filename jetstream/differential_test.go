package jetstream_test

// Differential tests: the same client scripts run against Skiff and against
// the reference nats-server with JetStream, started in process; every step
// records what the client saw (acks, API answers with their error codes,
// deliveries with their ack subjects, status messages), reduced to what
// does not depend on time or randomness, and both servers must have given
// the same record.
//
// Where Skiff differs on purpose a step says so (differs), and only Skiff's
// side is checked against the expectation written there.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/jetstream"
)

// startReference starts nats-server with JetStream in process.
func startReference(t *testing.T) string {
	t.Helper()
	return startReferenceWith(t, nil)
}

// startReferenceWith starts nats-server with JetStream in process, its
// options changed by with (when not nil).
func startReferenceWith(t *testing.T, with func(*natsserver.Options)) string {
	t.Helper()
	o := &natsserver.Options{
		Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: t.TempDir(),
	}
	if with != nil {
		with(o)
	}
	return runReference(t, o)
}

// runReference starts nats-server with the options o until the test's
// end, and returns its client URL.
func runReference(t *testing.T, o *natsserver.Options) string {
	t.Helper()
	ns, err := natsserver.NewServer(o)
	require.NoError(t, err)
	ns.Start()
	t.Cleanup(func() {
		ns.Shutdown()
		ns.WaitForShutdown()
	})
	require.True(t, ns.ReadyForConnections(5*time.Second), "nats-server did not start")
	return ns.ClientURL()
}

// target is one server under a script.
type target struct {
	t  *testing.T
	nc *nats.Conn
	// strict: check every API answer against its published JSON schema
	// and for fields it does not define (schema_test.go).
	strict bool
	// reference: the target is nats-server, whose error answers carry
	// its response type's other fields too (Skiff's carry only the
	// error).
	reference bool
}

// api sends a JetStream API request and returns the answer reduced to the
// given JSON paths (dot-separated; "error" and "type" are always kept).
func (tg *target) api(subj, body string, paths ...string) string {
	tg.t.Helper()
	m, err := tg.nc.Request("$JS.API."+subj, []byte(body), 2*time.Second)
	if err != nil {
		return "error: " + err.Error()
	}
	if m.Header.Get("Status") != "" {
		return "status " + m.Header.Get("Status")
	}
	if tg.strict && !strings.HasPrefix(subj, "DIRECT.GET.") {
		require.NoError(tg.t, validateAnswer(tg.t, m.Data, "", tg.reference), "$JS.API.%s %s", subj, body)
	}
	return pick(tg.t, m.Data, append([]string{"type", "error.code", "error.err_code", "error.description"}, paths...)...)
}

// apiUntil repeats an API request (as api) until done says yes of the
// answer, for at most 5 s, and returns the last answer: for state that a
// server's own timers change.
func (tg *target) apiUntil(subj, body string, done func(string) bool, paths ...string) string {
	tg.t.Helper()
	var r string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if r = tg.api(subj, body, paths...); done(r) {
			break
		}
	}
	return r
}

// has returns a done function for apiUntil: the answer contains s.
func has(s string) func(string) bool { return func(r string) bool { return strings.Contains(r, s) } }

// pub publishes with a reply and returns the ack.
func (tg *target) pub(subj, data string, hdr ...string) string {
	tg.t.Helper()
	m := nats.NewMsg(subj)
	m.Data = []byte(data)
	for i := 0; i+1 < len(hdr); i += 2 {
		m.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := tg.nc.RequestMsg(m, 2*time.Second)
	if err != nil {
		return "error: " + err.Error()
	}
	if tg.strict && resp.Header.Get("Status") == "" {
		require.NoError(tg.t, validateAnswer(tg.t, resp.Data, "io.nats.jetstream.api.v1.pub_ack_response", tg.reference), "publish to %s", subj)
	}
	return pick(tg.t, resp.Data, "stream", "seq", "duplicate", "error.code", "error.err_code", "error.description")
}

// collect sends body to subj with a fresh inbox and returns everything
// that arrives on it until quiet for the given time.
func (tg *target) collect(subj, body string, quiet time.Duration) []string {
	tg.t.Helper()
	inbox := nats.NewInbox()
	sub, err := tg.nc.SubscribeSync(inbox)
	require.NoError(tg.t, err)
	defer func() { _ = sub.Unsubscribe() }()
	require.NoError(tg.t, tg.nc.PublishRequest(subj, inbox, []byte(body)))
	return tg.drain(sub, quiet)
}

// drain returns the messages of sub until none arrives for quiet.
func (tg *target) drain(sub *nats.Subscription, quiet time.Duration) []string {
	var out []string
	for {
		m, err := sub.NextMsg(quiet)
		if errors.Is(err, nats.ErrTimeout) {
			return out
		}
		require.NoError(tg.t, err)
		out = append(out, describe(m))
	}
}

// during returns the messages of sub for a while, with runs of identical
// heartbeats counted once: how many fit depends on timing.
func (tg *target) during(sub *nats.Subscription, d time.Duration) []string {
	var out []string
	deadline := time.Now().Add(d)
	for {
		m, err := sub.NextMsg(time.Until(deadline))
		if errors.Is(err, nats.ErrTimeout) || time.Now().After(deadline) {
			return out
		}
		require.NoError(tg.t, err)
		s := describe(m)
		if strings.HasPrefix(s, "status 100 Idle") && len(out) > 0 && out[len(out)-1] == s {
			continue
		}
		out = append(out, s)
	}
}

// describe reduces a delivered message to what both servers must agree
// on: a status with its description and pending counts, or the subject,
// data, the ack subject's delivery count and sequences, and the pending
// count.
func describe(m *nats.Msg) string {
	if st := m.Header.Get("Status"); st != "" {
		s := "status " + st + " " + m.Header.Get("Description")
		for _, h := range []string{"Nats-Pending-Messages", "Nats-Pending-Bytes", "Nats-Last-Consumer", "Nats-Last-Stream"} {
			if v := m.Header.Get(h); v != "" {
				s += fmt.Sprintf(" %s=%s", h, v)
			}
		}
		return s
	}
	subj := m.Subject
	if m.Header.Get("Nats-Stream") != "" { // a DIRECT.GET answer, on an inbox
		subj = fmt.Sprintf("direct %s %s seq=%s", m.Header.Get("Nats-Stream"), m.Header.Get("Nats-Subject"), m.Header.Get("Nats-Sequence"))
	}
	s := fmt.Sprintf("%s %q", subj, m.Data)
	if toks := strings.Split(m.Reply, "."); len(toks) == 9 && toks[1] == "ACK" {
		// $JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<dseq>.<ts>.<pending>
		s += fmt.Sprintf(" dc=%s sseq=%s dseq=%s pending=%s", toks[4], toks[5], toks[6], toks[8])
	}
	return s
}

// pick returns the named paths of a JSON document as "path=value" lines,
// sorted; missing paths are left out.
func pick(t *testing.T, data []byte, paths ...string) string {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Sprintf("not JSON: %q", data)
	}
	var out []string
	for _, p := range paths {
		var v any = doc
		for _, k := range strings.Split(p, ".") {
			m, ok := v.(map[string]any)
			if !ok {
				v = nil
				break
			}
			v = m[k]
		}
		if v == nil {
			continue
		}
		b, _ := json.Marshal(v)
		out = append(out, p+"="+string(b))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// step is one action of a script; its result is compared.
type step struct {
	name string
	do   func(tg *target) any
	// differs, if set, says why Skiff answers differently on purpose;
	// skiff is then Skiff's expected answer and the reference's is not
	// compared.
	differs string
	skiff   any
}

// runScript runs steps against both servers and compares them.
func runScript(t *testing.T, steps []step) {
	runScriptWith(t, nil, jetstream.Options{}, steps)
}

// runScriptWith runs steps against nats-server configured by refOpts and
// Skiff with opts, and compares them.
func runScriptWith(t *testing.T, refOpts func(*natsserver.Options), opts jetstream.Options, steps []step) {
	ref := &target{t: t, strict: true, reference: true}
	nc, err := nats.Connect(startReferenceWith(t, refOpts))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	ref.nc = nc
	sk := &target{t: t, strict: true}
	b := startBrokerWith(t, opts)
	nc2, err := nats.Connect(b.srv.ClientURL())
	require.NoError(t, err)
	t.Cleanup(nc2.Close)
	sk.nc = nc2
	for _, s := range steps {
		want := s.do(ref)
		if os.Getenv("SKIFF_DIFF_LOG") != "" { // what the steps compare, to read
			t.Logf("%s: %v", s.name, want)
		}
		got := s.do(sk)
		if s.differs != "" {
			require.Equal(t, s.skiff, got, "%s (differs on purpose: %s; nats-server: %v)", s.name, s.differs, want)
			continue
		}
		require.Equal(t, want, got, "%s: Skiff differs from nats-server", s.name)
	}
}

// The fields of a stream's info that both servers must agree on.
var streamFields = []string{
	"config.name", "config.subjects", "config.retention", "config.storage", "config.discard",
	"config.max_msgs", "config.max_bytes", "config.max_age", "config.max_msgs_per_subject",
	"config.max_msg_size", "config.duplicate_window", "config.num_replicas", "config.max_consumers",
	"config.sealed", "config.deny_delete", "config.deny_purge", "config.allow_direct",
	"state.messages", "state.first_seq", "state.last_seq", "state.num_deleted",
	"state.num_subjects", "state.consumer_count", "state.subjects", "did_create",
}

// The fields of a consumer's info that both servers must agree on.
var consumerFields = []string{
	"stream_name", "config.durable_name", "config.deliver_policy", "config.ack_policy",
	"config.ack_wait", "config.max_deliver", "config.max_waiting", "config.max_ack_pending",
	"config.replay_policy", "config.filter_subject", "config.filter_subjects", "config.deliver_subject",
	"config.opt_start_seq", "config.backoff", "config.headers_only", "config.inactive_threshold",
	"delivered.consumer_seq", "delivered.stream_seq", "ack_floor.consumer_seq", "ack_floor.stream_seq",
	"num_ack_pending", "num_redelivered", "num_waiting", "num_pending",
}

func api(subj, body string, paths ...string) func(*target) any {
	return func(tg *target) any { return tg.api(subj, body, paths...) }
}

func pub(subj, data string, hdr ...string) func(*target) any {
	return func(tg *target) any { return tg.pub(subj, data, hdr...) }
}

func pull(consumer, body string) func(*target) any {
	return func(tg *target) any {
		return tg.collect("$JS.API.CONSUMER.MSG.NEXT.S."+consumer, body, 300*time.Millisecond)
	}
}

// unordered compares a pull's messages as a set: sorted, with their
// delivery sequences left out.
func unordered(do func(*target) any) func(*target) any {
	dseq := regexp.MustCompile(` dseq=[0-9]+`)
	return func(tg *target) any {
		got, ok := do(tg).([]string)
		if !ok {
			return got
		}
		out := make([]string, len(got))
		for i, line := range got {
			out[i] = dseq.ReplaceAllString(line, "")
		}
		sort.Strings(out)
		return out
	}
}

func TestDifferentialStreams(t *testing.T) {
	runScript(t, []step{
		{name: "info", do: api("INFO", "", "streams", "consumers")},
		{name: "create", do: api("STREAM.CREATE.ORDERS", `{"name":"ORDERS","subjects":["orders.*"]}`, streamFields...)},
		{name: "create again", do: api("STREAM.CREATE.ORDERS", `{"name":"ORDERS","subjects":["orders.*"]}`, streamFields...)},
		{name: "create different", do: api("STREAM.CREATE.ORDERS", `{"name":"ORDERS","subjects":["orders.*"],"max_msgs":5}`)},
		{name: "create mismatched name", do: api("STREAM.CREATE.X", `{"name":"Y"}`)},
		{name: "create overlapping", do: api("STREAM.CREATE.OTHER", `{"name":"OTHER","subjects":["orders.new"]}`)},
		{name: "create bad json", do: api("STREAM.CREATE.X", `{"name":`)},
		{name: "create replicas", do: api("STREAM.CREATE.R", `{"name":"R","num_replicas":3}`)},
		{name: "info missing", do: api("STREAM.INFO.NOPE", "")},
		{name: "pub 1", do: pub("orders.new", "one")},
		{name: "pub 2", do: pub("orders.paid", "two", "Nats-Msg-Id", "m2")},
		{name: "pub dup", do: pub("orders.paid", "two", "Nats-Msg-Id", "m2")},
		{name: "pub 3", do: pub("orders.new", "three")},
		{name: "expect stream", do: pub("orders.new", "x", "Nats-Expected-Stream", "NOPE")},
		{name: "expect last seq", do: pub("orders.new", "x", "Nats-Expected-Last-Sequence", "1")},
		{name: "expect last seq ok", do: pub("orders.new", "four", "Nats-Expected-Last-Sequence", "3")},
		{name: "expect subject seq", do: pub("orders.paid", "x", "Nats-Expected-Last-Subject-Sequence", "1")},
		{name: "expect msg id", do: pub("orders.paid", "x", "Nats-Expected-Last-Msg-Id", "nope")},
		{name: "info", do: api("STREAM.INFO.ORDERS", "", streamFields...)},
		{name: "info subjects", do: api("STREAM.INFO.ORDERS", `{"subjects_filter":"orders.*"}`, append(streamFields, "total", "offset", "limit")...)},
		{name: "info subjects offset", do: api("STREAM.INFO.ORDERS", `{"subjects_filter":">","offset":1}`, "state.subjects", "total", "offset", "limit")},
		{name: "msg get", do: api("STREAM.MSG.GET.ORDERS", `{"seq":2}`, "message.subject", "message.seq", "message.data", "message.hdrs")},
		{name: "msg get last", do: api("STREAM.MSG.GET.ORDERS", `{"last_by_subj":"orders.new"}`, "message.subject", "message.seq", "message.data")},
		{name: "msg get next", do: api("STREAM.MSG.GET.ORDERS", `{"seq":2,"next_by_subj":"orders.new"}`, "message.seq")},
		{name: "msg get missing", do: api("STREAM.MSG.GET.ORDERS", `{"seq":99}`)},
		{name: "msg get bad", do: api("STREAM.MSG.GET.ORDERS", `{"seq":1,"last_by_subj":"orders.new"}`)},
		{name: "msg delete", do: api("STREAM.MSG.DELETE.ORDERS", `{"seq":1}`, "success")},
		{name: "info after delete", do: api("STREAM.INFO.ORDERS", "", streamFields...)},
		{name: "msg delete interior", do: api("STREAM.MSG.DELETE.ORDERS", `{"seq":3}`, "success")},
		{name: "info deleted details", do: api("STREAM.INFO.ORDERS", `{"deleted_details":true}`, append(streamFields, "state.deleted")...)},
		{name: "names", do: api("STREAM.NAMES", "", "total", "streams", "limit", "offset")},
		{name: "names filtered", do: api("STREAM.NAMES", `{"subject":"nothing.here"}`, "total", "streams")},
		{name: "list", do: api("STREAM.LIST", "", "total", "limit")},
		{name: "update", do: api("STREAM.UPDATE.ORDERS", `{"name":"ORDERS","subjects":["orders.*","returns.>"],"max_msgs":100}`, streamFields...)},
		{name: "update storage", do: api("STREAM.UPDATE.ORDERS", `{"name":"ORDERS","subjects":["orders.*"],"storage":"memory"}`)},
		{name: "update missing", do: api("STREAM.UPDATE.NOPE", `{"name":"NOPE"}`)},
		{name: "pub returns", do: pub("returns.a.b", "r")},
		{name: "purge keep", do: api("STREAM.PURGE.ORDERS", `{"filter":"orders.new","keep":1}`, "success", "purged")},
		{name: "purge all", do: api("STREAM.PURGE.ORDERS", "", "success", "purged")},
		{name: "info after purge", do: api("STREAM.INFO.ORDERS", "", streamFields...)},
		{name: "direct get disabled", do: api("DIRECT.GET.ORDERS", `{"seq":1}`)},
		{name: "delete", do: api("STREAM.DELETE.ORDERS", "", "success")},
		{name: "delete again", do: api("STREAM.DELETE.ORDERS", "")},
		{name: "limits stream", do: api("STREAM.CREATE.L", `{"name":"L","max_msgs":2,"discard":"new","max_msg_size":10}`, streamFields...)},
		{name: "pub l1", do: pub("L", "a")},
		{name: "pub l2", do: pub("L", "b")},
		{name: "pub l3 full", do: pub("L", "c")},
		{name: "pub too big", do: pub("L", "0123456789abcdef")},
		{name: "memory stream", do: api("STREAM.CREATE.M", `{"name":"M","storage":"memory","max_age":60000000000,"allow_direct":true}`, streamFields...)},
		{name: "pub m", do: pub("M", "m", "K", "v")},
		{name: "direct get", do: func(tg *target) any {
			return tg.collect("$JS.API.DIRECT.GET.M", `{"seq":1}`, 300*time.Millisecond)
		}},
		{name: "direct get missing", do: func(tg *target) any {
			return tg.collect("$JS.API.DIRECT.GET.M", `{"seq":5}`, 300*time.Millisecond)
		}},
		{name: "direct get empty", do: func(tg *target) any {
			return tg.collect("$JS.API.DIRECT.GET.M", "", 300*time.Millisecond)
		}},
		{name: "info counts", do: api("INFO", "", "streams", "consumers")},
	})
}

func TestDifferentialConsumers(t *testing.T) {
	setup := []step{
		{name: "stream", do: api("STREAM.CREATE.S", `{"name":"S","subjects":["s.>"]}`, "config.name")},
	}
	for i := range 5 {
		setup = append(setup, step{name: fmt.Sprint("pub ", i), do: pub(fmt.Sprintf("s.%d", i%2), fmt.Sprint(i))})
	}
	steps := append(setup, []step{
		{name: "create pull", do: api("CONSUMER.CREATE.S.D", `{"stream_name":"S","config":{"durable_name":"D","ack_policy":"explicit","ack_wait":500000000}}`, consumerFields...)},
		{name: "create same", do: api("CONSUMER.CREATE.S.D", `{"stream_name":"S","config":{"durable_name":"D","ack_policy":"explicit","ack_wait":500000000}}`, consumerFields...)},
		{name: "create different", do: api("CONSUMER.CREATE.S.D", `{"stream_name":"S","config":{"durable_name":"D","ack_policy":"all"},"action":"create"}`)},
		{name: "update missing", do: api("CONSUMER.CREATE.S.E", `{"stream_name":"S","config":{"durable_name":"E"},"action":"update"}`)},
		{name: "update ack policy", do: api("CONSUMER.CREATE.S.D", `{"stream_name":"S","config":{"durable_name":"D","ack_policy":"all","ack_wait":500000000}}`)},
		{name: "durable mismatch", do: api("CONSUMER.CREATE.S.D", `{"stream_name":"S","config":{"durable_name":"X"}}`)},
		{name: "stream mismatch", do: api("CONSUMER.CREATE.S.D", `{"stream_name":"T","config":{"durable_name":"D"}}`)},
		{name: "stream missing", do: api("CONSUMER.CREATE.T.D", `{"stream_name":"T","config":{"durable_name":"D"}}`)},
		{name: "filter mismatch", do: api("CONSUMER.CREATE.S.F.s.1", `{"stream_name":"S","config":{"name":"F","filter_subject":"s.0"}}`)},
		{name: "bad start", do: api("CONSUMER.CREATE.S.B", `{"stream_name":"S","config":{"name":"B","opt_start_seq":3}}`)},
		{name: "bad filter", do: api("CONSUMER.CREATE.S.B", `{"stream_name":"S","config":{"name":"B","filter_subjects":["s.*","s.1"]}}`)},
		{name: "pull heartbeat", do: api("CONSUMER.CREATE.S.B", `{"stream_name":"S","config":{"name":"B","idle_heartbeat":1000000000}}`)},
		{name: "info", do: api("CONSUMER.INFO.S.D", "", consumerFields...)},
		{name: "info missing", do: api("CONSUMER.INFO.S.NOPE", "")},
		{name: "next 2", do: pull("D", `{"batch":2,"expires":500000000}`)},
		{name: "info after next", do: api("CONSUMER.INFO.S.D", "", consumerFields...)},
		{name: "ack 1", do: func(tg *target) any {
			resp, err := tg.nc.Request("$JS.ACK.S.D.1.1.1.0.4", []byte("+ACK"), time.Second)
			if err != nil {
				return err.Error()
			}
			return fmt.Sprintf("%q", resp.Data)
		}},
		{name: "nak 2", do: func(tg *target) any {
			require.NoError(tg.t, tg.nc.Publish("$JS.ACK.S.D.1.2.2.0.3", []byte("-NAK")))
			err := tg.nc.Flush()
			time.Sleep(50 * time.Millisecond) // both servers apply acks asynchronously
			return err
		}},
		{name: "next after nak", do: pull("D", `{"batch":1,"expires":500000000}`)},
		{name: "term 2", do: func(tg *target) any {
			resp, err := tg.nc.Request("$JS.ACK.S.D.2.2.3.0.3", []byte("+TERM"), time.Second)
			if err != nil {
				return err.Error()
			}
			return fmt.Sprintf("%q", resp.Data)
		}},
		{name: "info after term", do: api("CONSUMER.INFO.S.D", "", consumerFields...)},
		{name: "next no_wait", do: pull("D", `{"batch":10,"no_wait":true}`)},
		{name: "next no_wait empty", do: pull("D", `{"batch":1,"no_wait":true}`)},
		{name: "next expires", do: pull("D", `{"batch":3,"expires":100000000}`)},
		// Which of two messages whose ack waits end a few milliseconds
		// apart comes first depends on when the earlier steps delivered
		// them, on either server: compared as a set, without the
		// delivery sequences that order gives.
		{name: "redelivery after ack wait", do: unordered(pull("D", `{"batch":3,"expires":2500000000}`))},
		{name: "bad request", do: pull("D", `{"batch":1,"expires":100000000,"idle_heartbeat":100000000}`)},
		{name: "names", do: api("CONSUMER.NAMES.S", "", "total", "consumers")},
		{name: "list", do: api("CONSUMER.LIST.S", "", "total")},
		{name: "filtered", do: api("CONSUMER.CREATE.S.F", `{"stream_name":"S","config":{"name":"F","filter_subject":"s.1","ack_policy":"none"}}`, consumerFields...)},
		{name: "next filtered", do: pull("F", `{"batch":5,"expires":200000000}`)},
		{name: "by start seq", do: api("CONSUMER.CREATE.S.Q", `{"stream_name":"S","config":{"name":"Q","deliver_policy":"by_start_sequence","opt_start_seq":4,"ack_policy":"none"}}`, consumerFields...)},
		{name: "next by seq", do: pull("Q", `{"batch":5,"expires":200000000}`)},
		{name: "last per subject", do: api("CONSUMER.CREATE.S.L", `{"stream_name":"S","config":{"name":"L","deliver_policy":"last_per_subject","filter_subject":"s.*","ack_policy":"none"}}`, consumerFields...)},
		{name: "next last per subject", do: pull("L", `{"batch":5,"expires":200000000}`)},
		{name: "max bytes", do: pull("F", `{"batch":5,"max_bytes":5,"expires":200000000}`)},
		{name: "pub more", do: pub("s.1", "5")},
		{name: "max bytes fits", do: pull("F", `{"batch":5,"max_bytes":1000,"expires":200000000}`)},
		{name: "delete", do: api("CONSUMER.DELETE.S.D", "", "success")},
		{name: "delete again", do: api("CONSUMER.DELETE.S.D", "")},
		{name: "next deleted", do: func(tg *target) any {
			_, err := tg.nc.Request("$JS.API.CONSUMER.MSG.NEXT.S.D", nil, 500*time.Millisecond)
			return fmt.Sprint(err)
		}},
		{name: "push", do: func(tg *target) any {
			sub, err := tg.nc.SubscribeSync("deliver.here")
			require.NoError(tg.t, err)
			defer func() { _ = sub.Unsubscribe() }()
			r := tg.api("CONSUMER.CREATE.S.P", `{"stream_name":"S","config":{"durable_name":"P","deliver_subject":"deliver.here","ack_policy":"none","idle_heartbeat":200000000}}`, consumerFields...)
			return append([]string{r}, tg.during(sub, time.Second)...)
		}},
		{name: "push first heartbeat after an interval", do: func(tg *target) any {
			sub, err := tg.nc.SubscribeSync("deliver.new")
			require.NoError(tg.t, err)
			defer func() { _ = sub.Unsubscribe() }()
			r := tg.api("CONSUMER.CREATE.S.PN", `{"stream_name":"S","config":{"durable_name":"PN","deliver_subject":"deliver.new","deliver_policy":"new","ack_policy":"none","idle_heartbeat":1000000000}}`, "config.deliver_policy")
			return append([]string{r}, tg.during(sub, 500*time.Millisecond)...)
		}},
		{name: "push next refused", do: pull("P", "")},
		{name: "push next refused again", do: pull("P", "")},
	}...)
	runScript(t, steps)
}

func TestDifferentialRollup(t *testing.T) {
	rollFields := []string{"config.allow_rollup_hdrs", "config.deny_purge", "state.messages", "state.first_seq",
		"state.last_seq", "state.num_deleted", "state.num_subjects"}
	runScript(t, []step{
		{name: "rollup needs purge", do: api("STREAM.CREATE.R", `{"name":"R","subjects":["r.>"],"allow_rollup_hdrs":true,"deny_purge":true}`)},
		{name: "create without rollups", do: api("STREAM.CREATE.N", `{"name":"N","subjects":["n.>"]}`, rollFields...)},
		{name: "rollup not permitted", do: pub("n.a", "x", "Nats-Rollup", "sub")},
		{name: "create", do: api("STREAM.CREATE.R", `{"name":"R","subjects":["r.>"],"allow_rollup_hdrs":true}`, rollFields...)},
		{name: "pub a1", do: pub("r.a", "a1")},
		{name: "pub b1", do: pub("r.b", "b1")},
		{name: "pub a2", do: pub("r.a", "a2")},
		{name: "pub a3", do: pub("r.a", "a3")},
		{name: "rollup invalid", do: pub("r.a", "x", "Nats-Rollup", "some")},
		{name: "rollup sub", do: pub("r.a", "a4", "Nats-Rollup", "sub")},
		{name: "info after sub", do: api("STREAM.INFO.R", `{"subjects_filter":">"}`, append(rollFields, "state.subjects")...)},
		{name: "last a", do: api("STREAM.MSG.GET.R", `{"last_by_subj":"r.a"}`, "message.seq", "message.data")},
		{name: "first", do: api("STREAM.MSG.GET.R", `{"seq":1}`)},
		{name: "b1 kept", do: api("STREAM.MSG.GET.R", `{"seq":2}`, "message.data")},
		{name: "rollup sub upper case", do: pub("r.b", "b2", "Nats-Rollup", "SUB")},
		{name: "rollup with wrong expectation", do: pub("r.b", "x", "Nats-Rollup", "sub", "Nats-Expected-Last-Subject-Sequence", "1")},
		{name: "pub c1", do: pub("r.c", "c1")},
		{name: "rollup all", do: pub("r.z", "z", "Nats-Rollup", "all")},
		{name: "info after all", do: api("STREAM.INFO.R", `{"subjects_filter":">"}`, append(rollFields, "state.subjects")...)},
		{name: "update deny purge", do: api("STREAM.UPDATE.R", `{"name":"R","subjects":["r.>"],"allow_rollup_hdrs":true,"deny_purge":true}`)},
		{name: "update no rollups", do: api("STREAM.UPDATE.R", `{"name":"R","subjects":["r.>"]}`, rollFields...)},
		{name: "rollup after update", do: pub("r.a", "x", "Nats-Rollup", "sub")},
		{name: "seal", do: api("STREAM.UPDATE.R", `{"name":"R","subjects":["r.>"],"allow_rollup_hdrs":true,"sealed":true}`,
			append(rollFields, "config.sealed", "config.deny_delete")...)},
	})
}

// A published subject with tokens that look like wildcards is a literal
// subject: streams store it, filters' wildcards match it, and a rollup on
// it purges what its tokens match (KV purges of a.* rely on this).
func TestDifferentialWildcardTokens(t *testing.T) {
	fields := []string{"state.messages", "state.num_subjects", "state.subjects"}
	runScript(t, []step{
		{name: "create", do: api("STREAM.CREATE.W", `{"name":"W","subjects":["w.>"],"allow_rollup_hdrs":true}`)},
		{name: "pub w.a.x", do: pub("w.a.x", "1")},
		{name: "pub w.a.y", do: pub("w.a.y", "2")},
		{name: "pub w.a.*", do: pub("w.a.*", "3")},
		{name: "pub w.>", do: pub("w.>", "4")},
		{name: "info", do: api("STREAM.INFO.W", `{"subjects_filter":">"}`, fields...)},
		{name: "last by literal *", do: api("STREAM.MSG.GET.W", `{"last_by_subj":"w.a.*"}`, "message.seq", "message.subject")},
		{name: "rollup on w.a.*", do: pub("w.a.*", "5", "Nats-Rollup", "sub")},
		{name: "info after rollup", do: api("STREAM.INFO.W", `{"subjects_filter":">"}`, fields...)},
	})
}

// INFO's api.total counts the requests answered before it; a refused
// create counts as an error.
func TestDifferentialAccountInfo(t *testing.T) {
	runScript(t, []step{
		{name: "first info", do: api("INFO", "", "api.total", "api.errors", "streams")},
		{name: "create", do: api("STREAM.CREATE.A", `{"name":"A","subjects":["a"]}`)},
		{name: "mirror_direct without a mirror", do: api("STREAM.CREATE.M", `{"name":"M","subjects":["m"],"mirror_direct":true}`)},
		{name: "mirror_direct by update", do: api("STREAM.UPDATE.A", `{"name":"A","subjects":["a"],"mirror_direct":true}`, "config.mirror_direct")},
		{name: "info", do: api("INFO", "", "api.total", "api.errors", "streams")},
	})
}

// A stream's consumer_limits may not change under its consumers.
func TestDifferentialConsumerLimitsUpdate(t *testing.T) {
	runScript(t, []step{
		{name: "create", do: api("STREAM.CREATE.L", `{"name":"L","subjects":["l"]}`)},
		{name: "consumer", do: api("CONSUMER.CREATE.L.C", `{"stream_name":"L","config":{"name":"C","durable_name":"C","ack_policy":"explicit","max_ack_pending":100,"inactive_threshold":60000000000}}`)},
		{name: "tighter max_ack_pending", do: api("STREAM.UPDATE.L", `{"name":"L","subjects":["l"],"consumer_limits":{"max_ack_pending":10}}`)},
		{name: "tighter inactive_threshold", do: api("STREAM.UPDATE.L", `{"name":"L","subjects":["l"],"consumer_limits":{"inactive_threshold":1000000000}}`)},
		{name: "looser", do: api("STREAM.UPDATE.L", `{"name":"L","subjects":["l"],"consumer_limits":{"max_ack_pending":100,"inactive_threshold":60000000000}}`, "config.consumer_limits.max_ack_pending")},
	})
}

// A no_wait pull request that max_ack_pending blocks: nats-server 2.15
// keeps it until an ack makes room (a one-shot request, "Dont expire
// oneshots if we are here because of max ack pending limit"), or ends it
// at its expiry with 408; Skiff does the same.
func TestDifferentialNoWaitAtMaxAckPending(t *testing.T) {
	runScript(t, []step{
		{name: "create", do: api("STREAM.CREATE.S", `{"name":"S","subjects":["s"]}`)},
		{name: "pub 1", do: pub("s", "1")},
		{name: "pub 2", do: pub("s", "2")},
		{name: "pub 3", do: pub("s", "3")},
		{name: "consumer", do: api("CONSUMER.CREATE.S.C", `{"stream_name":"S","config":{"name":"C","durable_name":"C","ack_policy":"explicit","max_ack_pending":1}}`)},
		{name: "first", do: pull("C", `{"batch":1,"no_wait":true}`)},
		{name: "blocked no_wait", do: pull("C", `{"batch":1,"no_wait":true}`)},
		{name: "blocked no_wait with expires", do: pull("C", `{"batch":1,"no_wait":true,"expires":200000000}`)},
	})
}

// A consumer's filters need not overlap the stream's subjects (nats-server
// 2.10+ dropped the check): such a consumer simply has nothing to deliver.
func TestDifferentialFilterOutsideStream(t *testing.T) {
	runScript(t, []step{
		{name: "create", do: api("STREAM.CREATE.E", `{"name":"E","subjects":["events"]}`)},
		{name: "one filter", do: api("CONSUMER.CREATE.E.A", `{"stream_name":"E","config":{"name":"A","filter_subject":"other.>"}}`, "config.filter_subject", "num_pending")},
		{name: "two filters", do: api("CONSUMER.CREATE.E.B", `{"stream_name":"E","config":{"name":"B","filter_subjects":["one","two"]}}`, "config.filter_subjects")},
		{name: "update filters", do: api("CONSUMER.CREATE.E.B", `{"stream_name":"E","config":{"name":"B","filter_subjects":["one","three"]}}`, "config.filter_subjects")},
	})
}

// CONSUMER.RESET: back to the ack floor, or to a sequence where the
// deliver policy allows it.
func TestDifferentialConsumerReset(t *testing.T) {
	resetFields := []string{"reset_seq", "delivered.consumer_seq", "delivered.stream_seq", "ack_floor.stream_seq",
		"num_ack_pending", "num_pending", "num_redelivered"}
	steps := []step{
		{name: "create", do: api("STREAM.CREATE.S", `{"name":"S","subjects":["s"]}`)},
	}
	for i := 1; i <= 5; i++ {
		steps = append(steps, step{name: fmt.Sprintf("pub %d", i), do: pub("s", strconv.Itoa(i))})
	}
	steps = append(steps, []step{
		{name: "consumer", do: api("CONSUMER.CREATE.S.C", `{"stream_name":"S","config":{"name":"C","durable_name":"C","ack_policy":"explicit"}}`)},
		{name: "pull 3", do: pull("C", `{"batch":3,"no_wait":true}`)},
		{name: "reset to the floor", do: api("CONSUMER.RESET.S.C", "", resetFields...)},
		{name: "pull again", do: pull("C", `{"batch":2,"no_wait":true}`)},
		{name: "reset to 4", do: api("CONSUMER.RESET.S.C", `{"seq":4}`, resetFields...)},
		{name: "pull from 4", do: pull("C", `{"batch":5,"no_wait":true}`)},
		{name: "reset a missing consumer", do: api("CONSUMER.RESET.S.NOPE", "")},
		{name: "new consumer", do: api("CONSUMER.CREATE.S.N", `{"stream_name":"S","config":{"name":"N","deliver_policy":"new","ack_policy":"explicit"}}`)},
		{name: "reset not allowed", do: api("CONSUMER.RESET.S.N", `{"seq":2}`)},
		{name: "by start sequence", do: api("CONSUMER.CREATE.S.Q", `{"stream_name":"S","config":{"name":"Q","deliver_policy":"by_start_sequence","opt_start_seq":3,"ack_policy":"explicit"}}`)},
		{name: "reset below start", do: api("CONSUMER.RESET.S.Q", `{"seq":2}`)},
		{name: "reset at start", do: api("CONSUMER.RESET.S.Q", `{"seq":3}`, resetFields...)},
	}...)
	runScript(t, steps)
}

func TestDifferentialPause(t *testing.T) {
	far := time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
	soon := func() string { return time.Now().Add(1500 * time.Millisecond).UTC().Format(time.RFC3339Nano) }
	pauseFields := []string{"paused", "config.pause_until"}
	runScript(t, []step{
		{name: "stream", do: api("STREAM.CREATE.S", `{"name":"S","subjects":["s.>"]}`)},
		{name: "pub", do: pub("s.1", "one")},
		{name: "create paused", do: api("CONSUMER.CREATE.S.P", `{"stream_name":"S","config":{"durable_name":"P","ack_policy":"explicit","pause_until":"`+far+`"}}`, pauseFields...)},
		{name: "paused: nothing", do: pull("P", `{"batch":1,"expires":100000000}`)},
		{name: "create again while paused", do: api("CONSUMER.CREATE.S.P", `{"stream_name":"S","config":{"durable_name":"P","ack_policy":"explicit"},"action":"create"}`, pauseFields...)},
		{name: "update while paused", do: api("CONSUMER.CREATE.S.P", `{"stream_name":"S","config":{"durable_name":"P","ack_policy":"explicit","description":"d"}}`, pauseFields...)},
		{name: "resume", do: api("CONSUMER.PAUSE.S.P", "", "paused", "pause_until")},
		{name: "info resumed", do: api("CONSUMER.INFO.S.P", "", pauseFields...)},
		{name: "delivers", do: pull("P", `{"batch":1,"expires":100000000}`)},
		{name: "pause missing consumer", do: api("CONSUMER.PAUSE.S.NOPE", `{"pause_until":"`+far+`"}`)},
		{name: "pause missing stream", do: api("CONSUMER.PAUSE.NOPE.P", `{"pause_until":"`+far+`"}`)},
		{name: "pause bad json", do: api("CONSUMER.PAUSE.S.P", `{"pause_until":`)},
		{name: "pause for a while", do: func(tg *target) any {
			r := tg.api("CONSUMER.PAUSE.S.P", `{"pause_until":"`+soon()+`"}`, "paused")
			info := tg.api("CONSUMER.INFO.S.P", "", "paused")
			tg.pub("s.2", "two")
			// Nothing while paused; the pause runs out within the pull.
			got := tg.collect("$JS.API.CONSUMER.MSG.NEXT.S.P", `{"batch":1,"expires":4000000000}`, 2500*time.Millisecond)
			return append([]string{r, info}, got...)
		}},
		{name: "info after", do: api("CONSUMER.INFO.S.P", "", "paused", "num_ack_pending")},
	})
}

func TestDifferentialMessageTTL(t *testing.T) {
	ttlFields := []string{"config.allow_msg_ttl", "state.messages", "state.first_seq", "state.last_seq"}
	// waitMsgs polls STREAM.INFO until the stream holds n messages (both
	// servers expire on timers of their own), then reports it.
	waitMsgs := func(stream string, n int) func(*target) any {
		return func(tg *target) any {
			return tg.apiUntil("STREAM.INFO."+stream, "", has(fmt.Sprintf("state.messages=%d ", n)), ttlFields...)
		}
	}
	runScript(t, []step{
		{name: "no ttl stream", do: api("STREAM.CREATE.N", `{"name":"N","subjects":["n.>"]}`, ttlFields...)},
		{name: "ttl disabled", do: pub("n.a", "x", "Nats-TTL", "5s")},
		{name: "ttl zero is none", do: pub("n.a", "x", "Nats-TTL", "0")},
		{name: "ttl stream", do: api("STREAM.CREATE.T", `{"name":"T","subjects":["t.>"],"allow_msg_ttl":true}`, ttlFields...)},
		{name: "ttl invalid", do: pub("t.a", "x", "Nats-TTL", "soon")},
		{name: "ttl under a second", do: pub("t.a", "x", "Nats-TTL", "500ms")},
		{name: "ttl negative", do: pub("t.a", "x", "Nats-TTL", "-5")},
		{name: "pub 1s", do: pub("t.a", "short", "Nats-TTL", "1s")},
		{name: "pub 1 (seconds)", do: pub("t.b", "short", "Nats-TTL", "1")},
		{name: "pub never", do: pub("t.c", "kept", "Nats-TTL", "never")},
		{name: "pub 1h", do: pub("t.d", "long", "Nats-TTL", "1h")},
		{name: "pub plain", do: pub("t.e", "plain")},
		{name: "info before", do: api("STREAM.INFO.T", "", ttlFields...)},
		{name: "expired", do: waitMsgs("T", 3)},
		{name: "kept", do: api("STREAM.MSG.GET.T", `{"seq":3}`, "message.data", "message.hdrs")},
		{name: "gone", do: api("STREAM.MSG.GET.T", `{"seq":1}`)},
		{name: "disable refused", do: api("STREAM.UPDATE.T", `{"name":"T","subjects":["t.>"]}`)},
	})
}

func TestDifferentialDeleteMarkers(t *testing.T) {
	sdmFields := []string{"config.allow_msg_ttl", "config.allow_rollup_hdrs", "config.deny_purge", "config.subject_delete_marker_ttl", "config.max_age"}
	runScript(t, []step{
		{name: "marker ttl too short", do: api("STREAM.CREATE.X", `{"name":"X","subjects":["x.>"],"subject_delete_marker_ttl":500000000}`)},
		{name: "marker ttl negative", do: api("STREAM.CREATE.X", `{"name":"X","subjects":["x.>"],"subject_delete_marker_ttl":-1}`)},
		{name: "create", do: api("STREAM.CREATE.S", `{"name":"S","subjects":["s.>"],"max_age":1000000000,"subject_delete_marker_ttl":1000000000,"deny_purge":true}`, sdmFields...)},
		{name: "watch expiries", do: func(tg *target) any {
			sub, err := tg.nc.SubscribeSync("watch.s")
			require.NoError(tg.t, err)
			defer func() { _ = sub.Unsubscribe() }()
			r := tg.api("CONSUMER.CREATE.S.W", `{"stream_name":"S","config":{"durable_name":"W","deliver_subject":"watch.s","ack_policy":"none"}}`, "config.durable_name")
			tg.pub("s.a", "a1")
			tg.pub("s.a", "a2")
			tg.pub("s.b", "b1")
			// The three messages, then, when max_age removes them, a
			// marker for each subject (not for a1: a2 was after it).
			var got []string
			deadline := time.Now().Add(4 * time.Second)
			for len(got) < 5 && time.Now().Before(deadline) {
				m, err := sub.NextMsg(time.Until(deadline))
				if err != nil {
					break
				}
				got = append(got, fmt.Sprintf("%s %q reason=%q ttl=%q rollup=%q", m.Subject, m.Data,
					m.Header.Get("Nats-Marker-Reason"), m.Header.Get("Nats-TTL"), m.Header.Get("Nats-Rollup")))
			}
			sort.Strings(got)
			return append([]string{r}, got...)
		}},
		{name: "older messages stay", do: func(tg *target) any {
			// A marker replaces a subject's only message: when the newest
			// expires by its TTL and an older one without TTL is there,
			// it just goes.
			tg.api("STREAM.CREATE.K", `{"name":"K","subjects":["k.>"],"subject_delete_marker_ttl":1000000000,"max_msgs_per_subject":5}`)
			tg.pub("k.a", "keep")
			tg.pub("k.a", "short", "Nats-TTL", "1s")
			r := tg.apiUntil("STREAM.INFO.K", "", has("state.messages=1 "), "state.messages")
			time.Sleep(300 * time.Millisecond)
			return []string{r, tg.api("STREAM.MSG.GET.K", `{"last_by_subj":"k.a"}`, "message.data", "message.seq")}
		}},
		{name: "markers off", do: func(tg *target) any {
			// Without markers max_age is the store's again: the new,
			// longer one applies, not the stream's old expiries.
			tg.api("STREAM.CREATE.M", `{"name":"M","subjects":["m.>"],"subject_delete_marker_ttl":1000000000,"max_age":1000000000}`)
			tg.pub("m.a", "x")
			r := tg.api("STREAM.UPDATE.M", `{"name":"M","subjects":["m.>"],"allow_msg_ttl":true,"allow_rollup_hdrs":true,"max_age":3600000000000}`, "config.subject_delete_marker_ttl", "config.max_age")
			time.Sleep(2 * time.Second)
			return []string{r, tg.api("STREAM.INFO.M", "", "state.messages")}
		}},
		{name: "all gone", do: func(tg *target) any {
			// Markers go too, by their TTL or max_age, and leave none.
			return tg.apiUntil("STREAM.INFO.S", "", has("state.messages=0 "), "state.messages", "state.last_seq")
		}},
	})
}

// Server-wide storage quotas: the same reservations refused at create and
// update, and the same refusal of a publish past the quota, with the same
// codes (10047 file, 10028 memory, 10023 publish).
func TestDifferentialQuotas(t *testing.T) {
	const quota = 20_000
	payload := strings.Repeat("x", 1000)
	steps := []step{
		{name: "file too big", do: api("STREAM.CREATE.BIG", `{"name":"BIG","subjects":["big"],"max_bytes":30000}`)},
		{name: "memory too big", do: api("STREAM.CREATE.MBIG", `{"name":"MBIG","subjects":["mbig"],"storage":"memory","max_bytes":30000}`)},
		{name: "file half", do: api("STREAM.CREATE.HALF", `{"name":"HALF","subjects":["half"],"max_bytes":10000}`, "config.max_bytes")},
		{name: "file rest too big", do: api("STREAM.CREATE.REST", `{"name":"REST","subjects":["rest"],"max_bytes":15000}`)},
		{name: "update past the quota", do: api("STREAM.UPDATE.HALF", `{"name":"HALF","subjects":["half"],"max_bytes":25000}`)},
		{name: "update within it", do: api("STREAM.UPDATE.HALF", `{"name":"HALF","subjects":["half"],"max_bytes":12000}`, "config.max_bytes")},
		{name: "memory fits", do: api("STREAM.CREATE.M", `{"name":"M","subjects":["m"],"storage":"memory","max_bytes":15000}`, "config.max_bytes")},
	}
	// A publish is refused once the quota is used up, whoever reaches it.
	steps = append(steps, step{name: "publish until refused", do: func(tg *target) any {
		if r := tg.api("STREAM.CREATE.FILL", `{"name":"FILL","subjects":["fill"],"storage":"memory"}`); strings.Contains(r, "error") {
			return r
		}
		for i := range 100 {
			if r := tg.pub("fill", payload); strings.Contains(r, "error") {
				return fmt.Sprintf("refused: %s", r[strings.Index(r, "error"):]) + fmt.Sprintf(" (after more than 4: %v)", i > 4)
			}
		}
		return "never refused"
	}})
	runScriptWith(t, func(o *natsserver.Options) {
		o.JetStreamMaxStore, o.JetStreamMaxMemory = quota, quota
	}, jetstream.Options{MaxStore: quota, MaxMemory: quota}, steps)
}

// Strict request checking, nats-server's default: an unknown field is
// refused as invalid JSON (10025) in every request type.
func TestDifferentialStrict(t *testing.T) {
	runScript(t, []step{
		{name: "stream create", do: api("STREAM.CREATE.S", `{"name":"S","subjects":["s"],"no_such":1}`)},
		{name: "stream create ok", do: api("STREAM.CREATE.S", `{"name":"S","subjects":["s"]}`, "config.name")},
		{name: "stream update", do: api("STREAM.UPDATE.S", `{"name":"S","subjects":["s"],"no_such":1}`)},
		{name: "consumer create", do: api("CONSUMER.CREATE.S.C", `{"stream_name":"S","config":{"durable_name":"C","no_such":1}}`)},
		{name: "consumer create, unknown top level", do: api("CONSUMER.CREATE.S.C", `{"stream_name":"S","no_such":1,"config":{"durable_name":"C"}}`)},
		{name: "stream info", do: api("STREAM.INFO.S", `{"no_such":1}`)},
		{name: "msg get", do: api("STREAM.MSG.GET.S", `{"seq":1,"no_such":1}`)},
		{name: "purge", do: api("STREAM.PURGE.S", `{"no_such":1}`)},
	})
}

// A stream without max_consumers takes at most the server's default
// (nats-server 2.15's default_max_consumers, 1,000 unless configured; 5
// here, on both servers); its own max_consumers may raise that.
func TestDifferentialDefaultMaxConsumers(t *testing.T) {
	fill := func(stream string, n int) func(*target) any {
		return func(tg *target) any {
			for i := range n {
				r := tg.api(fmt.Sprintf("CONSUMER.CREATE.%s.C%d", stream, i),
					fmt.Sprintf(`{"stream_name":%q,"config":{"name":"C%d","durable_name":"C%d"}}`, stream, i, i))
				if strings.Contains(r, "error") {
					return fmt.Sprintf("consumer %d: %s", i, r)
				}
			}
			return fmt.Sprintf("%d consumers", n)
		}
	}
	runScriptWith(t, func(o *natsserver.Options) { o.JetStreamLimits.DefaultMaxConsumers = 5 },
		jetstream.Options{MaxConsumersPerStream: 5}, []step{
			{name: "create", do: api("STREAM.CREATE.S", `{"name":"S","subjects":["s"]}`)},
			{name: "fill", do: fill("S", 5)},
			{name: "one more", do: api("CONSUMER.CREATE.S.X", `{"stream_name":"S","config":{"name":"X","durable_name":"X"}}`)},
			{name: "raised", do: api("STREAM.CREATE.R", `{"name":"R","subjects":["r"],"max_consumers":6}`)},
			{name: "fill raised", do: fill("R", 6)},
			{name: "past the raised", do: api("CONSUMER.CREATE.R.X", `{"stream_name":"R","config":{"name":"X","durable_name":"X"}}`)},
		})
	require.Equal(t, 1_000, jetstream.DefaultMaxConsumersPerStream, "nats-server's JSDefaultMaxConsumersPerStream")
}
