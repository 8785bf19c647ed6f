// Command skiff-bench is Skiff's benchmark harness: the `skiff bench`
// subcommands, in a module of their own (github.com/skiffmq/skiff/bench) so
// that the broker's module carries none of the harness's dependencies
// (Kafka, Redis and AMQP clients, plotting). `skiff bench ARGS` runs
// `skiff-bench ARGS` from beside the skiff binary; docs/bench.md describes
// the benchmarks.
package main

import (
	"os"
)

func main() {
	os.Exit(benchCmd(os.Args[1:], os.Stdout, os.Stderr))
}
