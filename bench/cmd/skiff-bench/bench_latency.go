package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/skiffmq/skiff/bench"
)

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// benchLatencyCmd runs the open-loop latency benchmark against one or more
// targets.
func benchLatencyCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("skiff bench latency", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var targets stringList
	fs.Var(&targets, "target", "target URL (nats://, redis://, amqp://, noop://); repeat to compare (default nats://127.0.0.1:4222)")
	rate := fs.Float64("rate", 1000, "requests per second, over all connections")
	size := fs.String("size", "256B", "payload size (256B, 1KB, 1MB)")
	conns := fs.Int("connections", 1, "connections")
	duration := fs.Duration("duration", 10*time.Second, "measured time per run (the published suite uses 30s)")
	warmup := fs.Duration("warmup", 2*time.Second, "unrecorded time before each run")
	suite := fs.String("suite", "", "run a named suite of configurations instead (published)")
	out := fs.String("out", "", "directory for .hgrm files and PNG plots")
	jsonOut := fs.String("json", "", "file for the JSON results")
	overhead := fs.Bool("overhead", true, "also measure the harness's own overhead (no-op target) for each configuration")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if len(targets) == 0 {
		targets = stringList{"nats://127.0.0.1:4222"}
	}
	sz, err := bench.ParseSize(*size)
	if err != nil {
		fmt.Fprintln(stderr, "skiff bench latency:", err)
		return 2
	}
	configs := []bench.Config{{Size: sz, Rate: *rate, Connections: *conns}}
	if *suite != "" {
		var ok bool
		if configs, ok = bench.Suites[*suite]; !ok {
			fmt.Fprintf(stderr, "skiff bench latency: unknown suite %q\n", *suite)
			return 2
		}
	}
	if *out != "" {
		if err := os.MkdirAll(*out, 0o755); err != nil {
			fmt.Fprintln(stderr, "skiff bench latency:", err)
			return 1
		}
	}
	var reports []bench.LatencyReport
	ctx := context.Background()
	for _, cfg := range configs {
		name := bench.Name(cfg.Size, cfg.Rate, cfg.Connections)
		opts := bench.LatencyOptions{Rate: cfg.Rate, Size: cfg.Size, Connections: cfg.Connections,
			Duration: *duration, Warmup: warmupOption(*warmup), Progress: progressWriter(stderr)}
		var over map[string]float64
		if *overhead {
			o := opts
			o.Duration, o.Progress = min(*duration, 5*time.Second), nil
			res, err := bench.RunLatency(ctx, bench.Noop{}, o)
			if err != nil {
				fmt.Fprintln(stderr, "skiff bench latency: overhead:", err)
				return 1
			}
			over = res.Corrected.Summary()
		}
		var results []*bench.LatencyResult
		var labels []string
		for _, u := range targets {
			t, err := bench.OpenTarget(u)
			if err != nil {
				fmt.Fprintln(stderr, "skiff bench latency:", err)
				return 2
			}
			fmt.Fprintf(stderr, "%s: %s\n", name, u)
			res, err := bench.RunLatency(ctx, t, opts)
			if err != nil {
				fmt.Fprintln(stderr, "skiff bench latency:", err)
				return 1
			}
			rep := res.Report()
			rep.URL, rep.Overhead = u, over
			reports = append(reports, rep)
			results = append(results, res)
			labels = append(labels, targetLabel(u))
			printLatency(stdout, name, &rep)
			if *out != "" {
				if err := res.WriteHGRMs(*out, name+"-"+targetLabel(u)); err != nil {
					fmt.Fprintln(stderr, "skiff bench latency:", err)
					return 1
				}
			}
		}
		if *out != "" {
			title := fmt.Sprintf("%s at %.0f req/s over %d connection(s), corrected", bench.SizeName(cfg.Size), cfg.Rate, cfg.Connections)
			if err := bench.PlotLatency(filepath.Join(*out, name+".png"), title, labels, results, false); err != nil {
				fmt.Fprintln(stderr, "skiff bench latency:", err)
				return 1
			}
		}
	}
	if *jsonOut != "" {
		var v any = reports
		if len(reports) == 1 {
			v = reports[0]
		}
		b, _ := json.MarshalIndent(v, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintln(stderr, "skiff bench latency:", err)
			return 1
		}
	}
	return 0
}

// warmupOption turns --warmup into LatencyOptions.Warmup, where zero means
// the default: --warmup 0 asks for no warm-up.
func warmupOption(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// targetLabel names a target URL for files and legends: its scheme and
// port.
func targetLabel(u string) string {
	s := strings.NewReplacer("://", "-", ":", "-", "/", "", "@", "-").Replace(u)
	if i := strings.LastIndex(s, "-"); i > 0 && strings.Contains(u, "127.0.0.1") {
		return strings.SplitN(u, "://", 2)[0] + "-" + s[i+1:]
	}
	return s
}

func printLatency(w io.Writer, name string, r *bench.LatencyReport) {
	fmt.Fprintf(w, "%s %s  sent %d lost %d  corrected:", name, r.URL, r.Sent, r.Lost)
	for _, p := range bench.Percentiles {
		fmt.Fprintf(w, " p%s=%s", bench.PercentileKey(p), micros(r.Corrected[bench.PercentileKey(p)]))
	}
	fmt.Fprintf(w, "  uncorrected p99.9999=%s", micros(r.Uncorrected["99.9999"]))
	if r.Overhead != nil {
		fmt.Fprintf(w, "  harness p99.99=%s", micros(r.Overhead["99.99"]))
	}
	fmt.Fprintln(w)
}

func micros(us float64) string {
	if us >= 1000 {
		return fmt.Sprintf("%.2fms", us/1000)
	}
	return fmt.Sprintf("%.0fµs", us)
}

// progressWriter returns w if it is a terminal, else nil: the live status
// line is for people, not for logs.
func progressWriter(w io.Writer) io.Writer {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return w
}
