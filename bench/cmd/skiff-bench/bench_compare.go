package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/skiffmq/skiff/bench"
	"github.com/skiffmq/skiff/bench/internal/gobench"
	"github.com/skiffmq/skiff/bench/internal/sysinfo"
)

// benchCompareCmd runs a latency suite against Skiff and real peers, in
// alternation, and writes docs/benchmarks/<date>-<suite>.md.
func benchCompareCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("skiff bench compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	peers := fs.String("peers", "skiff,nats-server,redis", "servers to compare (skiff, nats-server, redis, rabbitmq), started by scripts/peers.sh")
	var urls stringList
	fs.Var(&urls, "url", "use a running server instead of starting one: name=URL (repeatable)")
	suite := fs.String("suite", "published", "latency suite")
	duration := fs.Duration("duration", 30*time.Second, "measured time per run")
	warmup := fs.Duration("warmup", 2*time.Second, "unrecorded time before each run")
	runs := fs.Int("runs", 1, "runs per server and configuration, alternating the order")
	out := fs.String("out", "docs/benchmarks", "directory for the report and plots")
	name := fs.String("name", "", "report name (default <date>-<suite>)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	configs, ok := bench.Suites[*suite]
	if !ok {
		fmt.Fprintf(stderr, "skiff bench compare: unknown suite %q\n", *suite)
		return 2
	}
	c := &comparison{suite: *suite, configs: configs, runs: *runs, stderr: stderr,
		opts: bench.LatencyOptions{Duration: *duration, Warmup: warmupOption(*warmup), Progress: progressWriter(stderr)}}
	given, err := givenURLs(urls)
	if err != nil {
		fmt.Fprintln(stderr, "skiff bench compare:", err)
		return 2
	}
	for _, p := range strings.Split(*peers, ",") {
		c.peers = append(c.peers, strings.TrimSpace(p))
	}
	if err := c.start(given); err != nil {
		c.stop()
		fmt.Fprintln(stderr, "skiff bench compare:", err)
		return 1
	}
	err = c.run(context.Background())
	c.stop()
	if err != nil {
		fmt.Fprintln(stderr, "skiff bench compare:", err)
		return 1
	}
	date := time.Now().UTC().Format("2006-01-02")
	if *name == "" {
		*name = date + "-" + *suite
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(stderr, "skiff bench compare:", err)
		return 1
	}
	md, err := c.report(*out, *name, date, args)
	if err != nil {
		fmt.Fprintln(stderr, "skiff bench compare:", err)
		return 1
	}
	path := filepath.Join(*out, *name+".md")
	if err := os.WriteFile(path, md, 0o644); err != nil {
		fmt.Fprintln(stderr, "skiff bench compare:", err)
		return 1
	}
	fmt.Fprintln(stdout, "wrote", path)
	return 0
}

// givenURLs reads --url name=URL flags.
func givenURLs(urls []string) (map[string]string, error) {
	given := map[string]string{}
	for _, u := range urls {
		k, v, ok := strings.Cut(u, "=")
		if !ok {
			return nil, fmt.Errorf("--url %q is not name=URL", u)
		}
		given[k] = v
	}
	return given, nil
}

type comparison struct {
	suite   string
	configs []bench.Config
	peers   []string
	urls    map[string]string
	started []string
	runs    int
	env     []string // extra environment for scripts/peers.sh
	// tolerant runs go on past a server's failed run, listed in failed,
	// instead of ending the comparison.
	tolerant bool
	failed   []string
	opts     bench.LatencyOptions
	stderr   io.Writer
	// results[config][peer] holds one result per run; overhead[config]
	// the harness's own latencies.
	results  []map[string][]*bench.LatencyResult
	overhead []*bench.LatencyResult
}

// start brings up every peer not given by URL with scripts/peers.sh.
func (c *comparison) start(given map[string]string) error {
	c.urls = map[string]string{}
	for _, p := range c.peers {
		if u, ok := given[p]; ok {
			c.urls[p] = u
			continue
		}
		cmd := exec.Command("scripts/peers.sh", "start", p)
		cmd.Env = append(os.Environ(), c.env...)
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("scripts/peers.sh start %s: %w", p, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		c.urls[p] = strings.TrimSpace(lines[len(lines)-1])
		c.started = append(c.started, p)
		fmt.Fprintf(c.stderr, "%s at %s\n", p, c.urls[p])
	}
	return nil
}

func (c *comparison) stop() {
	for _, p := range c.started {
		_ = exec.Command("scripts/peers.sh", "stop", p).Run()
	}
}

func (c *comparison) run(ctx context.Context) error {
	for ci, cfg := range c.configs {
		opts := c.opts
		opts.Rate, opts.Size, opts.Connections = cfg.Rate, cfg.Size, cfg.Connections
		o := opts
		o.Duration, o.Progress = min(opts.Duration, 5*time.Second), nil
		over, err := bench.RunLatency(ctx, bench.Noop{}, o)
		if err != nil {
			return err
		}
		c.overhead = append(c.overhead, over)
		c.results = append(c.results, map[string][]*bench.LatencyResult{})
		for run := range c.runs {
			for i := range c.peers {
				p := c.peers[(i+run)%len(c.peers)] // each server goes first in turn
				t, err := bench.OpenTarget(c.urls[p])
				if err != nil {
					return err
				}
				fmt.Fprintf(c.stderr, "%s run %d: %s\n", bench.Name(cfg.Size, cfg.Rate, cfg.Connections), run+1, p)
				res, err := bench.RunLatency(ctx, t, opts)
				if err != nil && c.tolerant {
					f := fmt.Sprintf("%s, %s, run %d: %v", p, bench.Name(cfg.Size, cfg.Rate, cfg.Connections), run+1, err)
					fmt.Fprintln(c.stderr, "  failed:", f)
					c.failed = append(c.failed, f)
					continue
				}
				if err != nil {
					return fmt.Errorf("%s: %w", p, err)
				}
				c.results[ci][p] = append(c.results[ci][p], res)
			}
		}
	}
	return nil
}

// median returns the median over runs of a peer's corrected latency at p,
// in microseconds.
func median(rs []*bench.LatencyResult, p float64, corrected bool) float64 {
	var xs []float64
	for _, r := range rs {
		h := r.Uncorrected
		if corrected {
			h = r.Corrected
		}
		xs = append(xs, float64(h.Percentile(p))/float64(time.Microsecond))
	}
	return gobench.Median(xs)
}

func (c *comparison) report(dir, name, date string, args []string) ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Latency: %s suite\n\n", c.suite)
	fmt.Fprintf(&b, "Generated by `skiff bench compare` on %s. Every configuration ran against each server %d time(s), the servers taking turns to go first; "+
		"figures are medians over runs, corrected for coordinated omission (from each request's intended send time) unless marked. "+
		"The load generator, the brokers and the harness share this machine.\n\n", date, c.runs)
	fmt.Fprintf(&b, "Command:\n\n```\nskiff bench compare %s\n```\n\n", strings.Join(args, " "))
	fmt.Fprintf(&b, "Machine:\n\n%s\nServers:\n\n", sysinfo.Read().Markdown())
	for _, p := range c.peers {
		fmt.Fprintf(&b, "- %s: %s (%s)\n", p, peerVersion(p), c.urls[p])
	}
	b.WriteString("\n## Goal: Skiff's corrected p99.99 and p99.9999 at or below every peer's\n\n| configuration | peer | p99.99 Skiff / peer | p99.9999 Skiff / peer | met |\n| --- | --- | --- | --- | --- |\n")
	for ci, cfg := range c.configs {
		sk := c.results[ci]["skiff"]
		for _, p := range c.peers {
			if p == "skiff" || sk == nil {
				continue
			}
			rs := c.results[ci][p]
			a4, b4 := median(sk, 99.99, true), median(rs, 99.99, true)
			a6, b6 := median(sk, 99.9999, true), median(rs, 99.9999, true)
			met := "yes"
			if a4 > b4 || a6 > b6 {
				met = "**no**"
			}
			fmt.Fprintf(&b, "| %s | %s | %s / %s | %s / %s | %s |\n", bench.Name(cfg.Size, cfg.Rate, cfg.Connections), p,
				micros(a4), micros(b4), micros(a6), micros(b6), met)
		}
	}
	if err := c.writeConfigs(&b, dir, name, "##"); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// writeConfigs writes, per configuration, a table of every percentile per
// server and a plot of their corrected distributions (files name-*.png in
// dir), under headings of the given level.
func (c *comparison) writeConfigs(b *bytes.Buffer, dir, name, heading string) error {
	for ci, cfg := range c.configs {
		cname := bench.Name(cfg.Size, cfg.Rate, cfg.Connections)
		fmt.Fprintf(b, "\n%s %s at %.0f requests/s over %d connection(s)\n\n", heading, bench.SizeName(cfg.Size), cfg.Rate, cfg.Connections)
		b.WriteString("| server |")
		for _, p := range bench.Percentiles {
			fmt.Fprintf(b, " p%s |", bench.PercentileKey(p))
		}
		b.WriteString(" uncorrected p99.9999 | lost |\n| --- |" + strings.Repeat(" ---: |", len(bench.Percentiles)+2) + "\n")
		var labels []string
		var merged []*bench.LatencyResult
		for _, p := range c.peers {
			rs := c.results[ci][p]
			if len(rs) == 0 {
				fmt.Fprintf(b, "| %s | failed (below) |%s\n", p, strings.Repeat(" |", len(bench.Percentiles)+1))
				continue
			}
			fmt.Fprintf(b, "| %s |", p)
			for _, q := range bench.Percentiles {
				fmt.Fprintf(b, " %s |", micros(median(rs, q, true)))
			}
			var lost int64
			m := &bench.LatencyResult{Corrected: bench.NewHistogram(), Uncorrected: bench.NewHistogram()}
			for _, r := range rs {
				lost += r.Lost()
				m.Corrected.Merge(r.Corrected)
				m.Uncorrected.Merge(r.Uncorrected)
			}
			fmt.Fprintf(b, " %s | %d |\n", micros(median(rs, 99.9999, false)), lost)
			labels = append(labels, p)
			merged = append(merged, m)
		}
		over := c.overhead[ci].Corrected
		fmt.Fprintf(b, "| harness alone (no-op target) |")
		for _, q := range bench.Percentiles {
			fmt.Fprintf(b, " %s |", micros(float64(over.Percentile(q))/float64(time.Microsecond)))
		}
		b.WriteString(" | |\n")
		plot := name + "-" + cname + ".png"
		title := fmt.Sprintf("%s at %.0f req/s over %d connection(s), corrected", bench.SizeName(cfg.Size), cfg.Rate, cfg.Connections)
		if err := bench.PlotLatency(filepath.Join(dir, plot), title, labels, merged, false); err != nil {
			return err
		}
		fmt.Fprintf(b, "\n![%s](%s)\n", cname, plot)
	}
	writeFailures(b, "Runs that failed (left out):", c.failed)
	return nil
}

// writeFailures lists failed runs under heading, if there are any.
func writeFailures(b *bytes.Buffer, heading string, failed []string) {
	if len(failed) == 0 {
		return
	}
	fmt.Fprintf(b, "\n%s\n\n", heading)
	for _, f := range failed {
		fmt.Fprintf(b, "- %s\n", f)
	}
}

// peerVersion asks scripts/peers.sh what version a peer is.
func peerVersion(p string) string {
	out, err := exec.Command("scripts/peers.sh", "version", p).Output()
	if err != nil {
		return "version unknown"
	}
	return strings.TrimSpace(string(out))
}
