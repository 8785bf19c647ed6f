package server

import "github.com/prometheus/client_golang/prometheus"

// Per-account series, labelled with the account's name: one per account
// the server has, so their number is bounded by the accounts of its
// configuration (in operator mode, those preloaded in the resolver) and
// "$G". A client cannot make an account up (it connects to one that
// exists), so no client can add series.
var (
	descAccConnections   = newDesc("skiff_account_connections", "Client connections of the account.", "account")
	descAccSubscriptions = newDesc("skiff_account_subscriptions", "Subscriptions in the account's index, its bridges and peers' interest included.", "account")
	descAccInMsgs        = newDesc("skiff_account_in_msgs_total", "Messages the account's clients published.", "account")
	descAccInBytes       = newDesc("skiff_account_in_bytes_total", "Payload bytes the account's clients published.", "account")
	descAccOutMsgs       = newDesc("skiff_account_out_msgs_total", "Messages sent to the account's clients.", "account")
	descAccOutBytes      = newDesc("skiff_account_out_bytes_total", "Payload bytes sent to the account's clients.", "account")
	descAccSlowConsumers = newDesc("skiff_account_slow_consumers_total", "The account's clients cut off as slow consumers.", "account")
	descAccResponses     = newDesc("skiff_account_pending_responses", "Requests to the account's service exports whose responses may still come.", "account")
	descBridgeDrops      = newDesc("skiff_bridge_drops_total", "Messages not carried further across imports: past 4 imports, or around a loop of imports.")
)

var accountDescs = []*prometheus.Desc{
	descAccConnections, descAccSubscriptions, descAccInMsgs, descAccInBytes,
	descAccOutMsgs, descAccOutBytes, descAccSlowConsumers, descAccResponses, descBridgeDrops,
}

// collectAccounts sends the per-account series, read at scrape time from
// the same sums as /accstatz (accountUsage).
func (s *Server) collectAccounts(ch chan<- prometheus.Metric) {
	for _, a := range s.Accounts() {
		u := a.usage()
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, a.name)
		}
		counter := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, a.name)
		}
		gauge(descAccConnections, float64(u.conns))
		gauge(descAccSubscriptions, float64(u.subs))
		counter(descAccInMsgs, float64(u.traffic.inMsgs))
		counter(descAccInBytes, float64(u.traffic.inBytes))
		counter(descAccOutMsgs, float64(u.traffic.outMsgs))
		counter(descAccOutBytes, float64(u.traffic.outBytes))
		counter(descAccSlowConsumers, float64(u.slowConsumers))
		gauge(descAccResponses, float64(a.NumPendingResponses()))
	}
	ch <- prometheus.MustNewConstMetric(descBridgeDrops, prometheus.CounterValue, float64(s.stats.bridgeDrops.Load()))
}
