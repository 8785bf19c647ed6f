package main

import (
	"fmt"
	"io"
)

// benchCmd dispatches the bench subcommands.
func benchCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, benchUsage)
		return 2
	}
	switch args[0] {
	case "match":
		return benchMatchCmd(args[1:], stdout, stderr)
	case "core":
		return benchCoreCmd(args[1:], stdout, stderr)
	case "cluster":
		return benchClusterCmd(args[1:], stdout, stderr)
	case "latency":
		return benchLatencyCmd(args[1:], stdout, stderr)
	case "throughput":
		return benchThroughputCmd(args[1:], stdout, stderr)
	case "compare":
		return benchCompareCmd(args[1:], stdout, stderr)
	case "streams":
		return benchStreamsCmd(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, benchUsage)
		return 0
	}
	fmt.Fprintf(stderr, "skiff bench: unknown benchmark %q\n\n%s", args[0], benchUsage)
	return 2
}

const benchUsage = `Usage: skiff bench <benchmark> [flags]

Benchmarks:
  match       topic-matching engines against the published tables and nats-server's Sublist
  core        the broker against nats-server with nats bench (make build tools first)
  cluster     three Skiff servers against a three-node nats-server cluster (make build tools first)
  latency     open-loop round-trip latency with coordinated-omission correction, HDR to 99.9999%
  throughput  N publishers, M subscribers: sender and receiver rates
  compare     Skiff and real peers (nats-server, Redis, RabbitMQ) side by side, in alternation
  streams     Skiff's streams against nats-server JetStream and Kafka: latency and acked throughput
`
