package server

import "github.com/prometheus/client_golang/prometheus"

// metricsCollector exposes the server's counters and limits to Prometheus.
// It reads them at scrape time, so the server keeps no second set of
// counters for it. Each server registers its own collector in its own
// registry: two servers in one process (as in tests) do not collide.
type metricsCollector struct {
	m *monitor
}

var _ prometheus.Collector = (*metricsCollector)(nil)

func newDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	descInfo = newDesc("skiff_info", "Server identity; the value is always 1.",
		"server_id", "server_name", "version", "skiff_version")
	descConnections      = newDesc("skiff_connections", "Open client connections.")
	descTotalConnections = newDesc("skiff_total_connections", "Client connections accepted since the server started.")
	descSubscriptions    = newDesc("skiff_subscriptions", "Subscriptions in the index.")
	descInMsgs           = newDesc("skiff_in_msgs_total", "Messages received from clients.")
	descOutMsgs          = newDesc("skiff_out_msgs_total", "Messages sent to clients.")
	descInBytes          = newDesc("skiff_in_bytes_total", "Payload bytes received from clients.")
	descOutBytes         = newDesc("skiff_out_bytes_total", "Payload bytes sent to clients.")
	descSlowConsumers    = newDesc("skiff_slow_consumers_total", "Clients cut off as slow consumers.")
	descStalls           = newDesc("skiff_publisher_stalls_total", "Times a publisher's read waited for a subscriber past three quarters of max_pending.")
	descMaxPayload       = newDesc("skiff_max_payload_bytes", "Configured largest message, headers included.")
	descMaxPending       = newDesc("skiff_max_pending_bytes", "Configured bound on the bytes queued for one client.")
	descMaxConnections   = newDesc("skiff_max_connections", "Configured bound on open client connections.")
)

// Describe implements prometheus.Collector.
func (mc *metricsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		descInfo, descConnections, descTotalConnections, descSubscriptions,
		descInMsgs, descOutMsgs, descInBytes, descOutBytes, descSlowConsumers, descStalls,
		descMaxPayload, descMaxPending, descMaxConnections,
	} {
		ch <- d
	}
	for _, d := range routeDescs {
		ch <- d
	}
	for _, d := range accountDescs {
		ch <- d
	}
}

// Collect implements prometheus.Collector. The registry may call it from
// several scrapes at once; everything it reads is safe for that.
func (mc *metricsCollector) Collect(ch chan<- prometheus.Metric) {
	s := mc.m.s
	o := &s.opts
	t := mc.m.counters()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v)
	}
	gauge(descInfo, 1, s.id, s.name, Version, SkiffVersion)
	gauge(descConnections, float64(s.NumClients()))
	// total_connections only grows, but it keeps its reference name
	// (no _total suffix), so it is exposed as a gauge.
	gauge(descTotalConnections, float64(s.stats.totalConns.Load()))
	gauge(descSubscriptions, float64(s.NumSubscriptions()))
	counter(descInMsgs, float64(t.inMsgs))
	counter(descOutMsgs, float64(t.outMsgs))
	counter(descInBytes, float64(t.inBytes))
	counter(descOutBytes, float64(t.outBytes))
	counter(descSlowConsumers, float64(s.stats.slowConsumers.Load()))
	counter(descStalls, float64(s.stats.stalls.Load()))
	gauge(descMaxPayload, float64(o.MaxPayload))
	gauge(descMaxPending, float64(o.MaxPending))
	gauge(descMaxConnections, float64(o.MaxConnections))
	s.collectRoutes(ch)
	s.collectAccounts(ch)
}
