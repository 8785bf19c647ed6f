// Package bench measures messaging systems the way Tyler Treat's
// "Benchmarking Message Queue Latency"
// (https://bravenewgeek.com/benchmarking-message-queue-latency/) describes, and is what
// `skiff bench latency|throughput|compare` run.
//
// # Latency
//
// A request is a round trip through the broker: a connection publishes a
// payload of the requested size on its own subject and receives it back.
// Requests follow a fixed schedule (open loop): the rate is spread evenly
// over the connections, and a connection sends request i at
//
//	start + i × connections/rate
//
// whether or not earlier requests came back. Each latency is taken from
// the request's intended send time, so a stall counts for every request
// queued behind it (coordinated omission corrected); the service time,
// from the actual send, is kept beside it for contrast. Both go into HDR
// histograms (1 µs to 1 min, 3 significant digits) and are reported up to
// the 99.9999th percentile.
//
//	intended  i=0      i=1      i=2      i=3
//	          |--------|--------|--------|------->
//	sent      |        |   stall ....... |||     (i=1..3 leave late)
//	latency   |<-->    |<------------------>     corrected: from the mark
//	                            |<-->            uncorrected: from the send
//
// A Target is the system under test; adding a system is one file that
// implements it (see target_nats.go, target_jetstream.go, target_redis.go,
// target_amqp.go, target_kafka.go).
//
// # Throughput
//
// N publishers send M messages each as fast as the target accepts them,
// and subscribers count what arrives; publisher and subscriber rates are
// reported separately, since they differ.
//
// Types here are safe for use by one benchmark at a time unless noted.
package bench
