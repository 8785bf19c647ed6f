package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/skiffmq/skiff/bench"
	"github.com/skiffmq/skiff/bench/internal/gobench"
	"github.com/skiffmq/skiff/bench/internal/sysinfo"
)

// streamMode is one storage configuration of the streams benchmark: how
// the peers are started (PEERS_SYNC) and what their target URLs ask for.
type streamMode struct {
	name    string
	what    string
	sync    string // PEERS_SYNC for scripts/peers.sh
	storage string // the jetstream target's storage
	kafka   string // the kafka target's query; "-" leaves Kafka out
}

var streamModes = []streamMode{
	{"memory", "memory storage, nothing on disk. Kafka has no such mode and is left out.", "", "memory", "-"},
	{"file", "file storage, acknowledged once written, fsynced in the background: " +
		"Skiff every 100 ms (its default), nats-server every 2 minutes (its default), Kafka when the operating system flushes (its default).",
		"", "file", ""},
	{"file-fsync", "file storage, fsynced before every acknowledgement: `sync_interval: always` for Skiff and nats-server, " +
		"`flush.messages=1` on the topic for Kafka.", "always", "file", "flush=always"},
}

// benchStreamsCmd runs the commit-log benchmarks of Tyler Treat's
// "Benchmarking Commit Logs" (https://bravenewgeek.com/benchmarking-commit-logs/)
// against Skiff's streams, nats-server's JetStream and Kafka, and writes
// docs/benchmarks/streams.md.
func benchStreamsCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("skiff bench streams", flag.ContinueOnError)
	fs.SetOutput(stderr)
	peers := fs.String("peers", "skiff,nats-server,kafka", "servers to compare (skiff, nats-server, kafka), started by scripts/peers.sh")
	modes := fs.String("modes", "memory,file,file-fsync", "storage modes: memory, file, file-fsync")
	sizes := fs.String("sizes", "256B,1KB,5KB,1MB", "latency payload sizes (\"\": no latency runs)")
	rate := fs.Float64("rate", 50, "latency: messages per second")
	duration := fs.Duration("duration", 30*time.Second, "latency: measured time per run, publish to delivery")
	ackDuration := fs.Duration("ack-duration", 10*time.Second, "latency: measured time per run, publish to acknowledgement (0: skip)")
	warmup := fs.Duration("warmup", 2*time.Second, "latency: unrecorded time before each run")
	runs := fs.Int("runs", 1, "latency runs per server and configuration, alternating the order")
	tpSizes := fs.String("tp-sizes", "16B,256B,1KB,5KB,1MB", "throughput payload sizes (\"\": no throughput runs)")
	msgs := fs.Int("msgs", 100_000, "throughput: messages per run (fewer for large payloads, see --tp-bytes)")
	tpBytes := fs.Int("tp-bytes", 1<<30, "throughput: most payload bytes per run")
	var urls stringList
	fs.Var(&urls, "url", "use a running server instead of starting one: name=URL, its nats:// or kafka:// URL (repeatable); its sync policy is its own")
	tpRuns := fs.Int("tp-runs", 3, "throughput runs per server and size, alternating the order")
	out := fs.String("out", "docs/benchmarks", "directory for the report and plots")
	name := fs.String("name", "streams", "report name")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "skiff bench streams:", err)
		return 1
	}
	latSizes, err := parseSizes(*sizes)
	if err != nil {
		return fail(err)
	}
	thrSizes, err := parseSizes(*tpSizes)
	if err != nil {
		return fail(err)
	}
	given, err := givenURLs(urls)
	if err != nil {
		return fail(err)
	}
	sb := &streamsBench{given: given, runs: *runs, tpRuns: *tpRuns, msgs: *msgs, maxBytes: *tpBytes, stderr: stderr,
		opts:        bench.LatencyOptions{Duration: *duration, Warmup: warmupOption(*warmup), Progress: progressWriter(stderr)},
		ackDuration: *ackDuration, tpSizes: thrSizes}
	for _, s := range latSizes {
		sb.configs = append(sb.configs, bench.Config{Size: s, Rate: *rate, Connections: 1})
	}
	for _, p := range strings.Split(*peers, ",") {
		sb.peers = append(sb.peers, strings.TrimSpace(p))
	}
	for _, m := range strings.Split(*modes, ",") {
		mode, ok := findMode(strings.TrimSpace(m))
		if !ok {
			return fail(fmt.Errorf("unknown mode %q", m))
		}
		sb.modes = append(sb.modes, &modeResult{mode: mode})
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fail(err)
	}
	for _, m := range sb.modes {
		if err := sb.runMode(context.Background(), m); err != nil {
			return fail(err)
		}
	}
	date := time.Now().UTC().Format("2006-01-02")
	md, err := sb.report(*out, *name, date, args)
	if err != nil {
		return fail(err)
	}
	path := filepath.Join(*out, *name+".md")
	if err := os.WriteFile(path, md, 0o644); err != nil {
		return fail(err)
	}
	fmt.Fprintln(stdout, "wrote", path)
	return 0
}

func findMode(name string) (streamMode, bool) {
	for _, m := range streamModes {
		if m.name == name {
			return m, true
		}
	}
	return streamMode{}, false
}

// parseSizes parses a comma-separated list of sizes; an empty list skips
// that part of the benchmark.
func parseSizes(s string) ([]int, error) {
	var sizes []int
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, f := range strings.Split(s, ",") {
		n, err := bench.ParseSize(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

type streamsBench struct {
	given       map[string]string // peers not to start: name → URL
	peers       []string
	modes       []*modeResult
	configs     []bench.Config
	tpSizes     []int
	runs        int
	tpRuns      int
	msgs        int
	maxBytes    int
	ackDuration time.Duration
	opts        bench.LatencyOptions
	stderr      io.Writer
}

// modeResult is what one storage mode measured.
type modeResult struct {
	mode     streamMode
	peers    []string
	versions map[string]string
	deliver  *comparison // publish to delivery
	ack      *comparison // publish to acknowledgement; nil when skipped
	// tp[size][peer] holds one throughput result per complete run;
	// tpFails lists the runs that failed, and why.
	tp      []map[string][]*bench.ThroughputResult
	tpFails []string
}

// modePeers returns the peers a mode runs: Kafka has no memory storage,
// and no acknowledgement latency here (its target has no such mode).
func (sb *streamsBench) modePeers(m streamMode, ack bool) []string {
	var ps []string
	for _, p := range sb.peers {
		if p == "kafka" && (m.kafka == "-" || ack) {
			continue
		}
		ps = append(ps, p)
	}
	return ps
}

// targetURL turns the URL scripts/peers.sh printed into the target's.
func targetURL(peer, url string, m streamMode, ack bool) string {
	if peer == "kafka" {
		if m.kafka != "" {
			return url + "?" + m.kafka
		}
		return url
	}
	u := "jetstream" + strings.TrimPrefix(url, "nats") + "?storage=" + m.storage
	if ack {
		u += "&until=ack"
	}
	return u
}

func (sb *streamsBench) runMode(ctx context.Context, mr *modeResult) error {
	m := mr.mode
	mr.peers = sb.modePeers(m, false)
	fmt.Fprintf(sb.stderr, "== %s: %s\n", m.name, m.what)
	mr.deliver = &comparison{suite: "streams-" + m.name, configs: sb.configs, peers: mr.peers, runs: sb.runs,
		env: []string{"PEERS_SYNC=" + m.sync}, opts: sb.opts, stderr: sb.stderr, tolerant: true}
	defer mr.deliver.stop()
	if err := mr.deliver.start(sb.given); err != nil {
		return err
	}
	mr.versions = map[string]string{}
	base := map[string]string{}
	for _, p := range mr.peers {
		mr.versions[p] = peerVersion(p)
		base[p] = mr.deliver.urls[p]
		mr.deliver.urls[p] = targetURL(p, base[p], m, false)
	}
	if err := mr.deliver.run(ctx); err != nil {
		return err
	}
	if sb.ackDuration > 0 {
		opts := sb.opts
		opts.Duration = sb.ackDuration
		mr.ack = &comparison{suite: "streams-ack-" + m.name, configs: sb.configs, peers: sb.modePeers(m, true),
			runs: sb.runs, opts: opts, stderr: sb.stderr, urls: map[string]string{}, tolerant: true}
		for _, p := range mr.ack.peers {
			mr.ack.urls[p] = targetURL(p, base[p], m, true)
		}
		if err := mr.ack.run(ctx); err != nil {
			return err
		}
	}
	for _, size := range sb.tpSizes {
		res := map[string][]*bench.ThroughputResult{}
		n := sb.tpMsgs(size)
		for run := range sb.tpRuns {
			for i := range mr.peers {
				p := mr.peers[(i+run)%len(mr.peers)]
				t, err := bench.OpenTarget(mr.deliver.urls[p])
				if err != nil {
					return err
				}
				fmt.Fprintf(sb.stderr, "throughput %s × %d run %d: %s\n", bench.SizeName(size), n, run+1, p)
				r, err := bench.RunThroughput(ctx, t, bench.ThroughputOptions{Publishers: 1, Subscribers: 1, Msgs: n, Size: size,
					Timeout: 5 * time.Minute})
				// A failed run is reported, not fatal: the other
				// servers' figures still stand.
				if err == nil && r.Received != r.Expected {
					err = fmt.Errorf("received %d of %d %v", r.Received, r.Expected, r.Failures)
				}
				if err != nil {
					f := fmt.Sprintf("%s, %s, run %d: %v", p, bench.SizeName(size), run+1, err)
					fmt.Fprintln(sb.stderr, "  failed:", f)
					mr.tpFails = append(mr.tpFails, f)
					continue
				}
				res[p] = append(res[p], r)
			}
		}
		mr.tp = append(mr.tp, res)
	}
	return nil
}

// tpMsgs is the message count of a throughput run of size-byte messages.
func (sb *streamsBench) tpMsgs(size int) int { return max(1, min(sb.msgs, sb.maxBytes/size)) }

func medianRate(rs []*bench.ThroughputResult, pub bool) float64 {
	var xs []float64
	for _, r := range rs {
		if pub {
			xs = append(xs, r.PubRate)
		} else {
			xs = append(xs, r.SubRate)
		}
	}
	return gobench.Median(xs)
}

func (sb *streamsBench) report(dir, name, date string, args []string) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("# Streams: Skiff against nats-server JetStream and Kafka\n\n")
	fmt.Fprintf(&b, "Generated by `skiff bench streams` on %s, following the method of Tyler Treat's [*Benchmarking Commit Logs*](https://bravenewgeek.com/benchmarking-commit-logs/). "+
		"The load generator and the servers share this machine; every server runs one node, replication 1.\n\n", date)
	fmt.Fprintf(&b, "Command:\n\n```\nskiff bench streams %s\n```\n\n", strings.Join(args, " "))
	fmt.Fprintf(&b, "Machine:\n\n%s\nServers:\n\n", sysinfo.Read().Markdown())
	seen := map[string]bool{}
	for _, mr := range sb.modes {
		for _, p := range mr.peers {
			if !seen[p] {
				seen[p] = true
				fmt.Fprintf(&b, "- %s: %s\n", p, mr.versions[p])
			}
		}
	}
	b.WriteString(`
What is measured:

- **Latency, publish to delivery**: one connection publishes at a fixed rate (asynchronously, acks handled on the side) into a stream of its own and reads it back through a consumer (Skiff and nats-server: an ordered pull consumer; Kafka: a partition consumer); each message's latency runs from its intended send time to its delivery (corrected for coordinated omission).
- **Latency, publish to acknowledgement**: the same schedule, the round trip ending when the publisher has the server's PubAck: the latency of a synchronous publish.
- **Throughput**: one publisher publishes the messages asynchronously (at most 4,096 unacknowledged), counted done only when every acknowledgement arrived; one subscriber reads them. Rates at the publisher and at the subscriber, medians over runs.

`)
	b.WriteString(sb.goals())
	for _, mr := range sb.modes {
		fmt.Fprintf(&b, "\n## Mode %s\n\n%s\n", mr.mode.name, mr.mode.what)
		b.WriteString("\n### Latency, publish to delivery\n")
		if err := mr.deliver.writeConfigs(&b, dir, name+"-"+mr.mode.name+"-deliver", "####"); err != nil {
			return nil, err
		}
		if mr.ack != nil {
			b.WriteString("\n### Latency, publish to acknowledgement\n")
			if err := mr.ack.writeConfigs(&b, dir, name+"-"+mr.mode.name+"-ack", "####"); err != nil {
				return nil, err
			}
		}
		b.WriteString("\n### Throughput\n\n| size | messages | server | publisher msgs/s | publisher MB/s | subscriber msgs/s | Skiff ÷ server, publisher | Skiff ÷ server, subscriber |\n| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n")
		for si, size := range sb.tpSizes {
			res := mr.tp[si]
			sp, ss := medianRate(res["skiff"], true), medianRate(res["skiff"], false)
			for _, p := range mr.peers {
				pub, sub := medianRate(res[p], true), medianRate(res[p], false)
				rp, rs := "", ""
				if p != "skiff" && res["skiff"] != nil && res[p] != nil {
					rp, rs = fmt.Sprintf("%.2f", sp/pub), fmt.Sprintf("%.2f", ss/sub)
				}
				if res[p] == nil {
					fmt.Fprintf(&b, "| %s | %d | %s | failed | | failed | | |\n", bench.SizeName(size), sb.tpMsgs(size), p)
					continue
				}
				fmt.Fprintf(&b, "| %s | %d | %s | %.0f | %.1f | %.0f | %s | %s |\n", bench.SizeName(size), sb.tpMsgs(size), p,
					pub, pub*float64(size)/1e6, sub, rp, rs)
			}
		}
		writeFailures(&b, "Runs that failed (left out of the medians):", mr.tpFails)
	}
	return b.Bytes(), nil
}

// goals checks the goals against nats-server: async publish
// throughput at least 1.5× at 16 B and 1 KB in mode file, synchronous
// publish p99 at or below, consumer throughput at least 1.0×.
func (sb *streamsBench) goals() string {
	var b strings.Builder
	b.WriteString("## Goals against nats-server JetStream\n\n| goal | mode | size | Skiff | nats-server | ratio | met |\n| --- | --- | --- | ---: | ---: | ---: | --- |\n")
	met := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "**no**"
	}
	for _, mr := range sb.modes {
		for si, size := range sb.tpSizes {
			sk, ns := mr.tp[si]["skiff"], mr.tp[si]["nats-server"]
			if sk == nil || ns == nil {
				continue
			}
			if mr.mode.name == "file" && (size == 16 || size == 1<<10) {
				a, c := medianRate(sk, true), medianRate(ns, true)
				fmt.Fprintf(&b, "| async publish ≥ 1.5× | %s | %s | %.0f msgs/s | %.0f msgs/s | %.2f | %s |\n",
					mr.mode.name, bench.SizeName(size), a, c, a/c, met(a >= 1.5*c))
			}
			a, c := medianRate(sk, false), medianRate(ns, false)
			fmt.Fprintf(&b, "| consumer ≥ 1.0× | %s | %s | %.0f msgs/s | %.0f msgs/s | %.2f | %s |\n",
				mr.mode.name, bench.SizeName(size), a, c, a/c, met(a >= c))
		}
		if mr.ack == nil {
			continue
		}
		for ci, cfg := range mr.ack.configs {
			sk, ns := mr.ack.results[ci]["skiff"], mr.ack.results[ci]["nats-server"]
			if sk == nil || ns == nil {
				continue
			}
			a, c := median(sk, 99, true), median(ns, 99, true)
			fmt.Fprintf(&b, "| sync publish p99 ≤ | %s | %s | %s | %s | %.2f | %s |\n",
				mr.mode.name, bench.SizeName(cfg.Size), micros(a), micros(c), a/c, met(a <= c))
		}
	}
	return b.String()
}
