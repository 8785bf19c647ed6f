package jetstream_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// advisoryScript runs stream and consumer actions while subscribed to
// every advisory, and returns the advisories reduced to what does not
// change between runs: subject, type and the fields both servers fill.
func advisoryScript(t *testing.T, url string) []string {
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	defer nc.Close()
	sub, err := nc.SubscribeSync("$JS.EVENT.ADVISORY.>")
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	tg := &target{t: t, nc: nc}

	// A dead-letter stream: it keeps the advisories of messages that
	// reached max_deliver.
	dlq := tg.api("STREAM.CREATE.DLQ", `{"name":"DLQ","subjects":["$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.>"]}`)
	require.NotContains(t, dlq, "error")
	tg.api("STREAM.CREATE.S", `{"name":"S","subjects":["s.>"]}`)
	tg.api("STREAM.CREATE.S", `{"name":"S","subjects":["s.>"]}`) // the same: no new stream
	tg.api("STREAM.UPDATE.S", `{"name":"S","subjects":["s.>"],"max_msgs":100}`)
	for i := range 3 {
		tg.pub(fmt.Sprintf("s.%d", i), "x")
	}
	tg.api("CONSUMER.CREATE.S.C", `{"stream_name":"S","config":{"durable_name":"C","ack_policy":"explicit","max_deliver":2,"ack_wait":200000000}}`)
	// Message 1 is nacked twice and so reaches max_deliver; 2 is
	// terminated; 3 is acknowledged.
	next := func() *nats.Msg {
		m, err := nc.Request("$JS.API.CONSUMER.MSG.NEXT.S.C", []byte(`{"batch":1,"expires":2000000000}`), 3*time.Second)
		require.NoError(t, err)
		return m
	}
	far := time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
	tg.api("CONSUMER.PAUSE.S.C", `{"pause_until":"`+far+`"}`)
	tg.api("CONSUMER.PAUSE.S.C", "")
	// Acks are sent as requests: both servers answer once the ack is
	// applied, so the next pull sees it.
	ack := func(m *nats.Msg, body string) {
		_, err := nc.Request(m.Reply, []byte(body), 3*time.Second)
		require.NoError(t, err)
	}
	ack(next(), "-NAK")
	ack(next(), "-NAK")
	ack(next(), "+TERM bad input")
	ack(next(), "+ACK")
	// Delivering 1 a third time is past max_deliver: the next pull
	// finds nothing and the consumer says so.
	_, _ = nc.Request("$JS.API.CONSUMER.MSG.NEXT.S.C", []byte(`{"batch":1,"no_wait":true}`), time.Second)
	tg.api("STREAM.INFO.S", "")
	tg.api("INFO", "")
	tg.api("STREAM.NAMES", "")
	tg.api("CONSUMER.DELETE.S.C", "")
	tg.api("STREAM.DELETE.S", "")
	// The dead-letter stream got the max_deliver advisory (it is
	// published after the pull that found the message exhausted).
	dead := tg.apiUntil("STREAM.MSG.GET.DLQ", `{"last_by_subj":"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.S.C"}`,
		func(r string) bool { return !strings.Contains(r, "error") }, "message.seq")
	require.Equal(t, `message.seq=1 type="io.nats.jetstream.api.v1.stream_msg_get_response"`, dead)

	var out []string
	for {
		m, err := sub.NextMsg(500 * time.Millisecond)
		if err != nil {
			break
		}
		var v map[string]any
		require.NoError(t, json.Unmarshal(m.Data, &v), "%s", m.Data)
		require.Len(t, v["id"], 22, "id")
		_, err = time.Parse(time.RFC3339Nano, v["timestamp"].(string))
		require.NoError(t, err, "timestamp")
		line := m.Subject
		for _, k := range []string{"type", "stream", "consumer", "action", "stream_seq", "consumer_seq", "deliveries", "reason", "subject", "paused"} {
			if x, ok := v[k]; ok {
				line += fmt.Sprintf(" %s=%v", k, x)
			}
		}
		if c, ok := v["client"].(map[string]any); ok {
			line += fmt.Sprintf(" client.lang=%v client.acc=%v", c["lang"], c["acc"])
		}
		if r, ok := v["response"].(string); ok {
			var resp map[string]any
			require.NoError(t, json.Unmarshal([]byte(r), &resp))
			line += fmt.Sprintf(" response.type=%v", resp["type"])
		}
		out = append(out, line)
	}
	// Audits and actions come from different goroutines on either
	// server: compare them as sets. nats-server sometimes sends a pause
	// advisory twice (under load): repeats are not compared.
	sort.Strings(out)
	return slices.Compact(out)
}

// TestAdvisories compares the advisories of Skiff and nats-server for
// the same actions.
func TestAdvisories(t *testing.T) {
	want := advisoryScript(t, startReference(t))
	got := advisoryScript(t, startBroker(t, "").srv.ClientURL())
	require.Equal(t, strings.Join(want, "\n"), strings.Join(got, "\n"))
}
