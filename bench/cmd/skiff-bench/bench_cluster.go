package main

import (
	"io"

	"github.com/skiffmq/skiff/bench/internal/corebench"
)

// benchClusterCmd compares three Skiff servers joined by routes with a
// three-node nats-server cluster and writes cluster.md.
func benchClusterCmd(args []string, stdout, stderr io.Writer) int {
	return natsBenchCmd(natsBenchReport{
		name: "cluster", title: "Cluster against a nats-server cluster", run: corebench.RunCluster,
		intro: "Each scenario ran %d times on three Skiff servers joined by routes and on a three-node " +
			"nats-server cluster, alternating which went first, every time on freshly started servers, all on " +
			"loopback; figures are medians, every sample is listed.",
		machine: "the six servers and the load generators share it", notes: clusterNotes,
	}, args, stdout, stderr)
}

// clusterNotes explains how to read cluster.md.
const clusterNotes = `
## How to read this

- **The clusters.** Three servers of one kind, each given every route
  (nats-server's syntax, which both read: ` + "`cluster { name, listen, routes }`" + `,
  ` + "`jetstream: disabled`" + ` but in the replicated-stream scenarios), started afresh for every run; a run starts once a
  message published on each server reaches a subscriber on each other.
  nats-server runs with its defaults otherwise (route pooling included).
- **Where the clients are.** Server 1 publishes or requests; servers 2 and
  3 hold the subscribers and responders, so every message crosses a route
  (and, in the fan-out, the publisher's server sends each message on two
  routes).
- **Configuration.** Fan-out and request/reply give both servers
  ` + "`max_pending: 1GB`" + `, as in core.md, so that they compare delivery rather
  than the moment backpressure begins; churn runs on defaults.
- **Churn.** The same minimal raw-protocol clients as core.md's churn: the
  subscriptions (churn.<i>.*, i < 10,000) are split between servers 2 and
  3, two churners (on servers 2 and 3) together subscribe and unsubscribe
  1,000 patterns per second over the whole subject space, so about half of
  the changes are new interest for their server and travel to its peers as
  RS+/RS-; the publisher on server 1 publishes to random subjects. A run
  whose churners could not keep 80% of that rate counts as failed; the
  churn each run handled is in the command's log.
- **Queue groups.** A server without a member of the group (server 1 here)
  spreads the requests over the peers' members; Skiff in proportion to the
  members each peer has, like nats-server.
- **Replicated streams (cluster-js-*).** JetStream is on (` + "`jetstream { store_dir }`" + `,
  a fresh directory per server and run) and an R3 file stream is made with
  ` + "`nats stream add --replicas 3`" + `. The publisher, ` + "`nats bench js pub async`" + `
  (one client, batches of 500, at most 200,000 messages), connects to a
  server that does not lead the stream, so every publish crosses a route to
  the leader. Defaults: nats-server fsyncs its streams every 2 minutes; Skiff
  fsyncs its streams and its raft log every 100 ms (its sync_interval
  default); ` + "`sync_interval: always`" + ` makes both fsync before each
  acknowledgement (Skiff once per raft batch). Each publish run also
  measures the CPU each message cost the servers (together and each) and
  the publisher, from /proc and the publisher's rusage: the load generator
  shares the machine, so the rate follows their sum. Their medians are in
  the table after the main one, each run's in the command's log.
- **Failover.** One nats.go publisher sends a message every 5 ms, each with
  a Nats-Msg-Id, retried every 5 ms (each try waiting 250 ms for its ack)
  until acknowledged. Each run kills the stream's leader (SIGKILL) 5 times;
  a kill's time is from the kill to the acknowledgement of the first
  publish sent after it. The killed server is restarted, and the next kill
  waits until the stream has a leader and both other replicas are current.
  The run's figure is the median of its 5 kills; every kill's time is in
  the command's log. The resolution is the try's 250 ms: the publish in
  flight at the kill goes to the dead leader and times out before the
  retry, so a failover faster than 250 ms shows as about 250 ms.
`
