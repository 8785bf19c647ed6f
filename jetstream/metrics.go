package jetstream

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metricsCollector puts JetStream on the server's /metrics: totals, and a
// series per stream and per consumer, read at scrape time from the same
// state as STREAM.INFO and CONSUMER.INFO. How many series there are is
// bounded by max_streams and max_consumers.
type metricsCollector struct{ js *JetStream }

var _ prometheus.Collector = (*metricsCollector)(nil)

func jsDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("skiff_jetstream_"+name, help, labels, nil)
}

var (
	descStreams      = jsDesc("streams", "Streams.")
	descStreamsFail  = jsDesc("streams_failed", "Streams that could not be opened at start: left on disk, not served.")
	descConsumers    = jsDesc("consumers", "Consumers of every stream.")
	descMessages     = jsDesc("messages", "Messages stored in every stream.")
	descMemoryBytes  = jsDesc("memory_bytes", "Bytes stored in memory streams.")
	descStorageBytes = jsDesc("storage_bytes", "Bytes stored in file streams.")
	descAPIRequests  = jsDesc("api_requests_total", "JetStream API requests.")
	descAPIErrors    = jsDesc("api_errors_total", "JetStream API requests answered with an error.")
	descAdvDropped   = jsDesc("advisories_dropped_total", "Advisories dropped because too many waited to be published.")
	descDeputy       = jsDesc("refused_internal_total", "Server-published messages refused by the API, acks or a stream: they would act past their client's permissions.")
	descOpenFiles    = jsDesc("open_files", "Descriptors open for the files of streams and consumers.")
	descMaxOpenFiles = jsDesc("max_open_files", "Bound on the descriptors of the files of streams and consumers.")
	descFileReopens  = jsDesc("file_reopens_total", "Files of streams and consumers opened again after their descriptor was closed to stay within the bound.")

	descStreamMessages  = jsDesc("stream_messages", "Messages in the stream.", "stream")
	descStreamBytes     = jsDesc("stream_bytes", "Bytes in the stream, as STREAM.INFO counts them.", "stream")
	descStreamFirstSeq  = jsDesc("stream_first_seq", "Sequence of the stream's first message.", "stream")
	descStreamLastSeq   = jsDesc("stream_last_seq", "Sequence of the stream's last message.", "stream")
	descStreamConsumers = jsDesc("stream_consumers", "Consumers of the stream.", "stream")
	descStreamFailed    = jsDesc("stream_consumers_failed", "Durable consumers of the stream whose state could not be recovered at start: left on disk, not served.", "stream")
	descStreamCorrupt   = jsDesc("stream_corrupt_records_total", "Records of the stream found corrupt when read since the server started: skipped, removed and logged.", "stream")
	descStreamLost      = jsDesc("stream_lost_records_total", "Sequences of the stream that recovery found lost when it opened the stream at start: damaged records, the unreadable rest of a segment, missing segment files.", "stream")

	descConsumerPending     = jsDesc("consumer_num_pending", "Messages the consumer has yet to deliver.", "stream", "consumer")
	descConsumerAckPending  = jsDesc("consumer_num_ack_pending", "Messages delivered and not acknowledged.", "stream", "consumer")
	descConsumerRedelivered = jsDesc("consumer_num_redelivered", "Pending messages delivered more than once.", "stream", "consumer")
	descConsumerWaiting     = jsDesc("consumer_num_waiting", "Pull requests waiting.", "stream", "consumer")
	descConsumerDelivered   = jsDesc("consumer_delivered_stream_seq", "Stream sequence of the last delivered message.", "stream", "consumer")
	descConsumerAckFloor    = jsDesc("consumer_ack_floor_stream_seq", "Stream sequence below which every message is acknowledged.", "stream", "consumer")
)

// Describe implements prometheus.Collector.
func (mc *metricsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		descStreams, descStreamsFail, descConsumers, descMessages, descMemoryBytes, descStorageBytes, descAPIRequests, descAPIErrors,
		descAdvDropped, descDeputy, descOpenFiles, descMaxOpenFiles, descFileReopens,
		descStreamMessages, descStreamBytes, descStreamFirstSeq, descStreamLastSeq, descStreamConsumers, descStreamCorrupt, descStreamLost, descStreamFailed,
		descConsumerPending, descConsumerAckPending, descConsumerRedelivered, descConsumerWaiting,
		descConsumerDelivered, descConsumerAckFloor,
	} {
		ch <- d
	}
}

// Collect implements prometheus.Collector; scrapes may run at once.
func (mc *metricsCollector) Collect(ch chan<- prometheus.Metric) {
	js := mc.js
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	u := js.usage()
	gauge(descStreams, float64(u.streams))
	gauge(descStreamsFail, float64(len(js.failedStreams())))
	gauge(descConsumers, float64(u.consumers))
	gauge(descMessages, float64(u.msgs))
	gauge(descMemoryBytes, float64(u.memory))
	gauge(descStorageBytes, float64(u.storage))
	api := js.apiStats()
	counter(descAPIRequests, float64(api.Total))
	counter(descAPIErrors, float64(api.Errors))
	counter(descAdvDropped, float64(js.adv.dropped.Load()))
	counter(descDeputy, float64(js.internalDropped.Load()))
	hs := js.handles.Stats()
	gauge(descOpenFiles, float64(hs.Open))
	gauge(descMaxOpenFiles, float64(hs.Max))
	counter(descFileReopens, float64(hs.Reopens))

	for _, name := range js.sortedStreamNames() {
		st := js.lookup(name)
		if st == nil {
			continue // deleted meanwhile
		}
		s := st.store.State()
		consumers := *st.clist.Load()
		gauge(descStreamMessages, float64(s.Msgs), name)
		gauge(descStreamBytes, float64(s.Bytes), name)
		gauge(descStreamFirstSeq, float64(s.FirstSeq), name)
		gauge(descStreamLastSeq, float64(s.LastSeq), name)
		gauge(descStreamConsumers, float64(len(consumers)), name)
		gauge(descStreamFailed, float64(len(st.failedConsumers())), name)
		ch <- prometheus.MustNewConstMetric(descStreamCorrupt, prometheus.CounterValue, float64(st.store.CorruptRecords()), name)
		ch <- prometheus.MustNewConstMetric(descStreamLost, prometheus.CounterValue, float64(st.store.Recovery().LostRecords()), name)
		for _, c := range consumers {
			ci := c.info()
			gauge(descConsumerPending, float64(ci.NumPending), name, ci.Name)
			gauge(descConsumerAckPending, float64(ci.NumAckPending), name, ci.Name)
			gauge(descConsumerRedelivered, float64(ci.NumRedelivered), name, ci.Name)
			gauge(descConsumerWaiting, float64(ci.NumWaiting), name, ci.Name)
			gauge(descConsumerDelivered, float64(ci.Delivered.Stream), name, ci.Name)
			gauge(descConsumerAckFloor, float64(ci.AckFloor.Stream), name, ci.Name)
		}
	}
}
