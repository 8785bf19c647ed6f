package jetstream_test

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// TestMetrics scrapes /metrics for JetStream's totals and its per-stream
// and per-consumer series.
func TestMetrics(t *testing.T) {
	b := startMonitoredBroker(t)
	s := b.srv

	_, jsc := connect(t, s.ClientURL())
	c := ctx(t)
	_, err := jsc.CreateStream(c, njs.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}})
	require.NoError(t, err)
	_, err = jsc.CreateStream(c, njs.StreamConfig{Name: "M", Subjects: []string{"m"}, Storage: njs.MemoryStorage})
	require.NoError(t, err)
	for i := range 5 {
		_, err := jsc.Publish(c, fmt.Sprintf("orders.%d", i), []byte("order"))
		require.NoError(t, err)
	}
	_, err = jsc.Publish(c, "m", []byte("in memory"))
	require.NoError(t, err)
	_, err = jsc.Stream(c, "NOPE")
	require.ErrorIs(t, err, njs.ErrStreamNotFound) // one API error
	cons, err := jsc.CreateOrUpdateConsumer(c, "ORDERS", njs.ConsumerConfig{Durable: "W", AckPolicy: njs.AckExplicitPolicy})
	require.NoError(t, err)
	batch, err := cons.Fetch(3, njs.FetchMaxWait(2*time.Second))
	require.NoError(t, err)
	var msgs []njs.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	require.Len(t, msgs, 3)
	require.NoError(t, msgs[0].DoubleAck(c)) // 2 and 3 stay pending

	resp, err := http.Get(fmt.Sprintf("http://%s/metrics", s.MonitorAddr()))
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	require.NoError(t, err, "%s", body)

	// Every series of the skiff_jetstream_ families, as name{labels} value.
	var got []string
	for name, f := range families {
		if !strings.HasPrefix(name, "skiff_jetstream_") {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			got = append(got, fmt.Sprintf("%s{%s} %v", name, strings.Join(labels, ","), v))
		}
	}
	sort.Strings(got)
	info, err := jsc.Stream(c, "ORDERS")
	require.NoError(t, err)
	fileBytes := info.CachedInfo().State.Bytes
	mem, err := jsc.Stream(c, "M")
	require.NoError(t, err)
	memBytes := mem.CachedInfo().State.Bytes
	handles := b.js.HandleStats()
	require.Positive(t, handles.Open, "ORDERS's files and its consumer's")
	want := []string{
		fmt.Sprintf("skiff_jetstream_open_files{} %d", handles.Open),
		fmt.Sprintf("skiff_jetstream_max_open_files{} %d", handles.Max),
		"skiff_jetstream_file_reopens_total{} 0",
		"skiff_jetstream_orphaned_accounts{} 0",
		"skiff_jetstream_refused_across_accounts_total{} 0",
		"skiff_jetstream_advisories_dropped_total{} 0",
		"skiff_jetstream_api_errors_total{} 1",
		// Stream creates 2, stream info 1, consumer create 1; the pull
		// request (CONSUMER.MSG.NEXT) goes to its consumer and is not
		// counted, as in nats-server; the two STREAM.INFO below come
		// after the scrape.
		"skiff_jetstream_api_requests_total{} 4",
		"skiff_jetstream_consumer_ack_floor_stream_seq{consumer=W,stream=ORDERS} 1",
		"skiff_jetstream_consumer_delivered_stream_seq{consumer=W,stream=ORDERS} 3",
		"skiff_jetstream_consumer_num_ack_pending{consumer=W,stream=ORDERS} 2",
		"skiff_jetstream_consumer_num_pending{consumer=W,stream=ORDERS} 2",
		"skiff_jetstream_consumer_num_redelivered{consumer=W,stream=ORDERS} 0",
		"skiff_jetstream_consumer_num_waiting{consumer=W,stream=ORDERS} 0",
		"skiff_jetstream_consumers{} 1",
		"skiff_jetstream_streams_failed{} 0",
		fmt.Sprintf("skiff_jetstream_memory_bytes{} %d", memBytes),
		"skiff_jetstream_messages{} 6",
		"skiff_jetstream_refused_internal_total{} 0",
		fmt.Sprintf("skiff_jetstream_storage_bytes{} %d", fileBytes),
		"skiff_jetstream_stream_bytes{stream=M} " + fmt.Sprint(memBytes),
		"skiff_jetstream_stream_bytes{stream=ORDERS} " + fmt.Sprint(fileBytes),
		"skiff_jetstream_stream_consumers{stream=M} 0",
		"skiff_jetstream_stream_consumers{stream=ORDERS} 1",
		"skiff_jetstream_stream_corrupt_records_total{stream=M} 0",
		"skiff_jetstream_stream_corrupt_records_total{stream=ORDERS} 0",
		"skiff_jetstream_stream_lost_records_total{stream=M} 0",
		"skiff_jetstream_stream_lost_records_total{stream=ORDERS} 0",
		"skiff_jetstream_stream_consumers_failed{stream=M} 0",
		"skiff_jetstream_stream_consumers_failed{stream=ORDERS} 0",
		"skiff_jetstream_stream_first_seq{stream=M} 1",
		"skiff_jetstream_stream_first_seq{stream=ORDERS} 1",
		"skiff_jetstream_stream_last_seq{stream=M} 1",
		"skiff_jetstream_stream_last_seq{stream=ORDERS} 5",
		"skiff_jetstream_stream_messages{stream=M} 1",
		"skiff_jetstream_stream_messages{stream=ORDERS} 5",
		"skiff_jetstream_streams{} 2",
	}
	sort.Strings(want)
	require.Equal(t, want, got)
}
