package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/skiffmq/skiff/bench"
)

// benchThroughputCmd runs N publishers and M subscribers against a target
// and reports both sides' rates.
func benchThroughputCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("skiff bench throughput", flag.ContinueOnError)
	fs.SetOutput(stderr)
	target := fs.String("target", "nats://127.0.0.1:4222", "target URL")
	pubs := fs.Int("pub", 1, "publishers")
	subs := fs.Int("sub", 1, "subscribers (each receives every message)")
	msgs := fs.Int("msgs", 100_000, "messages per publisher")
	size := fs.String("size", "128B", "payload size")
	timeout := fs.Duration("timeout", 2*time.Minute, "bound on the run")
	jsonOut := fs.String("json", "", "file for the JSON result")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	sz, err := bench.ParseSize(*size)
	if err != nil {
		fmt.Fprintln(stderr, "skiff bench throughput:", err)
		return 2
	}
	t, err := bench.OpenTarget(*target)
	if err != nil {
		fmt.Fprintln(stderr, "skiff bench throughput:", err)
		return 2
	}
	res, err := bench.RunThroughput(context.Background(), t, bench.ThroughputOptions{
		Publishers: *pubs, Subscribers: *subs, Msgs: *msgs, Size: sz, Timeout: *timeout})
	if err != nil {
		fmt.Fprintln(stderr, "skiff bench throughput:", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: %d publisher(s) x %d msgs of %s, %d subscriber(s)\n", *target, *pubs, *msgs, bench.SizeName(sz), *subs)
	fmt.Fprintf(stdout, "  publishers:  %.0f msgs/s (each: %s)\n", res.PubRate, rates(res.PerPublisher))
	fmt.Fprintf(stdout, "  subscribers: %.0f msgs/s delivered (each: %s), received %d of %d\n", res.SubRate, rates(res.PerSubscriber), res.Received, res.Expected)
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(stderr, "skiff bench throughput:", err)
			return 1
		}
	}
	for _, f := range res.Failures {
		fmt.Fprintln(stderr, "skiff bench throughput: broker dropped", f)
	}
	if len(res.Failures) > 0 {
		fmt.Fprintln(stderr, "skiff bench throughput: a broker that cuts off slow consumers (Skiff past max_pending, 64MB by default) "+
			"drops a subscriber that falls that far behind: send fewer messages or raise the limit (docs/bench.md)")
	}
	if res.Received < res.Expected {
		fmt.Fprintf(stderr, "skiff bench throughput: %d messages were not delivered\n", res.Expected-res.Received)
		return 1
	}
	return 0
}

func rates(xs []float64) string {
	s := ""
	for i, x := range xs {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%.0f", x)
	}
	return s
}
