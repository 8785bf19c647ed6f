package jetstream

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metricsCollector puts JetStream on the server's /metrics: totals, and a
// series per stream and per consumer, read at scrape time from the same
// state as STREAM.INFO and CONSUMER.INFO. How many series there are is
// bounded by max_streams and max_consumers.
//
// On a server with configured accounts the stream and consumer series
// carry an account label, and each JetStream-enabled account has series
// of its own (skiff_jetstream_account_*); without, they keep the labels
// they always had, so that dashboards of one account keep working.
type metricsCollector struct {
	js *JetStream
	d  metricDescs
}

var _ prometheus.Collector = (*metricsCollector)(nil)

func newMetricsCollector(js *JetStream) *metricsCollector {
	return &metricsCollector{js: js, d: newMetricDescs(js.multi)}
}

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
	descForeign      = jsDesc("refused_across_accounts_total", "Clients' messages of another account that reached an account's JetStream API, acknowledgements or flow control through an import: refused.")
	descOrphaned     = jsDesc("orphaned_accounts", "Directories under the store's accounts/ of no JetStream-enabled account: kept on disk, not served.")
)

// metricDescs are the series whose labels depend on whether the server
// has accounts.
type metricDescs struct {
	streamMessages, streamBytes, streamFirstSeq, streamLastSeq, streamConsumers,
	streamFailed, streamCorrupt, streamLost *prometheus.Desc
	consumerPending, consumerAckPending, consumerRedelivered, consumerWaiting,
	consumerDelivered, consumerAckFloor *prometheus.Desc
	// Per account, with accounts only.
	accStreams, accConsumers, accMemory, accStorage, accAPIRequests, accAPIErrors,
	accLimitMemory, accLimitStorage, accLimitStreams, accLimitConsumers *prometheus.Desc
}

func newMetricDescs(multi bool) metricDescs {
	stream, consumer := []string{"stream"}, []string{"stream", "consumer"}
	if multi {
		stream, consumer = []string{"account", "stream"}, []string{"account", "stream", "consumer"}
	}
	d := metricDescs{
		streamMessages:  jsDesc("stream_messages", "Messages in the stream.", stream...),
		streamBytes:     jsDesc("stream_bytes", "Bytes in the stream, as STREAM.INFO counts them.", stream...),
		streamFirstSeq:  jsDesc("stream_first_seq", "Sequence of the stream's first message.", stream...),
		streamLastSeq:   jsDesc("stream_last_seq", "Sequence of the stream's last message.", stream...),
		streamConsumers: jsDesc("stream_consumers", "Consumers of the stream.", stream...),
		streamFailed:    jsDesc("stream_consumers_failed", "Durable consumers of the stream whose state could not be recovered at start: left on disk, not served.", stream...),
		streamCorrupt:   jsDesc("stream_corrupt_records_total", "Records of the stream found corrupt when read since the server started: skipped, removed and logged.", stream...),
		streamLost:      jsDesc("stream_lost_records_total", "Sequences of the stream that recovery found lost when it opened the stream at start: damaged records, the unreadable rest of a segment, missing segment files.", stream...),

		consumerPending:     jsDesc("consumer_num_pending", "Messages the consumer has yet to deliver.", consumer...),
		consumerAckPending:  jsDesc("consumer_num_ack_pending", "Messages delivered and not acknowledged.", consumer...),
		consumerRedelivered: jsDesc("consumer_num_redelivered", "Pending messages delivered more than once.", consumer...),
		consumerWaiting:     jsDesc("consumer_num_waiting", "Pull requests waiting.", consumer...),
		consumerDelivered:   jsDesc("consumer_delivered_stream_seq", "Stream sequence of the last delivered message.", consumer...),
		consumerAckFloor:    jsDesc("consumer_ack_floor_stream_seq", "Stream sequence below which every message is acknowledged.", consumer...),
	}
	if multi {
		d.accStreams = jsDesc("account_streams", "Streams of the account.", "account")
		d.accConsumers = jsDesc("account_consumers", "Consumers of the account's streams.", "account")
		d.accMemory = jsDesc("account_memory_bytes", "Bytes stored in the account's memory streams.", "account")
		d.accStorage = jsDesc("account_storage_bytes", "Bytes stored in the account's file streams.", "account")
		d.accAPIRequests = jsDesc("account_api_requests_total", "JetStream API requests in the account.", "account")
		d.accAPIErrors = jsDesc("account_api_errors_total", "JetStream API requests in the account answered with an error.", "account")
		d.accLimitMemory = jsDesc("account_limit_memory_bytes", "The account's max_memory (-1: none).", "account")
		d.accLimitStorage = jsDesc("account_limit_storage_bytes", "The account's max_store (-1: none).", "account")
		d.accLimitStreams = jsDesc("account_limit_streams", "The account's max_streams (-1: none).", "account")
		d.accLimitConsumers = jsDesc("account_limit_consumers", "The account's max_consumers, per stream (-1: none).", "account")
	}
	return d
}

func (d *metricDescs) all() []*prometheus.Desc {
	out := []*prometheus.Desc{
		d.streamMessages, d.streamBytes, d.streamFirstSeq, d.streamLastSeq, d.streamConsumers, d.streamCorrupt, d.streamLost, d.streamFailed,
		d.consumerPending, d.consumerAckPending, d.consumerRedelivered, d.consumerWaiting, d.consumerDelivered, d.consumerAckFloor,
	}
	if d.accStreams != nil {
		out = append(out, d.accStreams, d.accConsumers, d.accMemory, d.accStorage, d.accAPIRequests, d.accAPIErrors,
			d.accLimitMemory, d.accLimitStorage, d.accLimitStreams, d.accLimitConsumers)
	}
	return out
}

// Describe implements prometheus.Collector.
func (mc *metricsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		descStreams, descStreamsFail, descConsumers, descMessages, descMemoryBytes, descStorageBytes, descAPIRequests, descAPIErrors,
		descAdvDropped, descDeputy, descOpenFiles, descMaxOpenFiles, descFileReopens, descOrphaned, descForeign,
	} {
		ch <- d
	}
	for _, d := range mc.d.all() {
		ch <- d
	}
}

// Collect implements prometheus.Collector; scrapes may run at once.
func (mc *metricsCollector) Collect(ch chan<- prometheus.Metric) {
	js, d := mc.js, &mc.d
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	accounts := js.sortedAccounts()
	var total usage
	failed := 0
	var dropped uint64
	for _, ja := range accounts {
		total.add(ja.usage())
		failed += len(ja.failedStreams())
		dropped += ja.adv.dropped.Load()
	}
	gauge(descStreams, float64(total.streams))
	gauge(descStreamsFail, float64(failed))
	gauge(descConsumers, float64(total.consumers))
	gauge(descMessages, float64(total.msgs))
	gauge(descMemoryBytes, float64(total.memory))
	gauge(descStorageBytes, float64(total.storage))
	api := js.apiStats()
	counter(descAPIRequests, float64(api.Total))
	counter(descAPIErrors, float64(api.Errors))
	counter(descAdvDropped, float64(dropped))
	counter(descDeputy, float64(js.internalDropped.Load()))
	counter(descForeign, float64(js.foreignRefused.Load()))
	hs := js.handles.Stats()
	gauge(descOpenFiles, float64(hs.Open))
	gauge(descMaxOpenFiles, float64(hs.Max))
	counter(descFileReopens, float64(hs.Reopens))
	// A server without accounts has them too: accounts removed from its
	// configuration leave theirs.
	gauge(descOrphaned, float64(len(js.orphans)))

	for _, ja := range accounts {
		// The account label comes first, with accounts; none without.
		var acc []string
		if js.multi {
			acc = []string{ja.name}
			u, api := ja.usage(), ja.apiStats()
			gauge(d.accStreams, float64(u.streams), ja.name)
			gauge(d.accConsumers, float64(u.consumers), ja.name)
			gauge(d.accMemory, float64(u.memory), ja.name)
			gauge(d.accStorage, float64(u.storage), ja.name)
			counter(d.accAPIRequests, float64(api.Total), ja.name)
			counter(d.accAPIErrors, float64(api.Errors), ja.name)
			gauge(d.accLimitMemory, float64(ja.lim().maxMemory), ja.name)
			gauge(d.accLimitStorage, float64(ja.lim().maxStore), ja.name)
			gauge(d.accLimitStreams, float64(ja.lim().maxStreams), ja.name)
			gauge(d.accLimitConsumers, float64(ja.lim().maxConsumers), ja.name)
		}
		for _, name := range ja.sortedStreamNames() {
			st := ja.lookup(name)
			if st == nil {
				continue // deleted meanwhile
			}
			sl := append(acc[:len(acc):len(acc)], name)
			s := st.store.State()
			consumers := *st.clist.Load()
			gauge(d.streamMessages, float64(s.Msgs), sl...)
			gauge(d.streamBytes, float64(s.Bytes), sl...)
			gauge(d.streamFirstSeq, float64(s.FirstSeq), sl...)
			gauge(d.streamLastSeq, float64(s.LastSeq), sl...)
			gauge(d.streamConsumers, float64(len(consumers)), sl...)
			gauge(d.streamFailed, float64(len(st.failedConsumers())), sl...)
			counter(d.streamCorrupt, float64(st.store.CorruptRecords()), sl...)
			counter(d.streamLost, float64(st.store.Recovery().LostRecords()), sl...)
			for _, c := range consumers {
				ci := c.info()
				cl := append(sl[:len(sl):len(sl)], ci.Name)
				gauge(d.consumerPending, float64(ci.NumPending), cl...)
				gauge(d.consumerAckPending, float64(ci.NumAckPending), cl...)
				gauge(d.consumerRedelivered, float64(ci.NumRedelivered), cl...)
				gauge(d.consumerWaiting, float64(ci.NumWaiting), cl...)
				gauge(d.consumerDelivered, float64(ci.Delivered.Stream), cl...)
				gauge(d.consumerAckFloor, float64(ci.AckFloor.Stream), cl...)
			}
		}
	}
}
