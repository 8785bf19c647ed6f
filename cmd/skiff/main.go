// Command skiff is the Skiff message broker and its benchmark harness.
//
//	skiff serve [flags]        run the broker (see skiff serve -h and docs/config.md)
//	skiff bench match [flags]  run the topic-matching benchmarks and write the report
//	skiff bench latency|throughput|compare|streams|core [flags]
//	                           the benchmark harness (docs/bench.md)
//	skiff version              print the version
//
// Each subcommand lives in its own file; this one only dispatches.
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one subcommand and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "serve":
		return serveCmd(args[1:], stdout, stderr)
	case "bench":
		return benchCmd(args[1:], stdout, stderr)
	case "version", "-v", "--version":
		fmt.Fprintln(stdout, "skiff", version)
		return 0
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "skiff: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprint(w, `Usage: skiff <command> [flags]

Commands:
  serve     run the broker (skiff serve -h for its flags)
  bench     benchmarks: match, core, latency, throughput, compare, streams (skiff bench help)
  version   print the version
`)
}
