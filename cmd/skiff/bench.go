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
	case "-h", "--help", "help":
		fmt.Fprint(stdout, benchUsage)
		return 0
	}
	fmt.Fprintf(stderr, "skiff bench: unknown benchmark %q\n\n%s", args[0], benchUsage)
	return 2
}

const benchUsage = `Usage: skiff bench <benchmark> [flags]

Benchmarks:
  match   topic-matching engines against the published tables and nats-server's Sublist
  core    the broker against nats-server with nats bench (make build tools first)
`
