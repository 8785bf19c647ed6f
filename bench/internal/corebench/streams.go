package corebench

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// storeDirMark in a scenario's Config is replaced, run by run, by a fresh
// temporary directory that is removed when the server stops, so that every
// JetStream measurement starts from an empty store.
const storeDirMark = "STORE_DIR"

// jsConfig enables JetStream for the server's global account.
const jsConfig = `jetstream { store_dir: "` + storeDirMark + `" }`

// jsAccountsConfig enables JetStream for account A of accountsConfig,
// which is then the only account that has it.
var jsAccountsConfig = jsConfig + "\n" + accountsWith("jetstream: enabled, ")

// jsAccountsLabel names jsAccountsConfig in the report's table.
const jsAccountsLabel = "jetstream, accounts A (JetStream enabled) and B"

var (
	// "NATS JetStream asynchronous publisher stats: 189,017 msgs/sec ~ ..."
	jsPubRate = regexp.MustCompile(`asynchronous publisher (?:aggregated )?stats: ([0-9,]+) msgs/sec`)
	// "NATS JetStream ordered ephemeral consumer stats: 532,672 msgs/sec ~ ..."
	jsOrderedRate = regexp.MustCompile(`ordered ephemeral consumer (?:aggregated )?stats: ([0-9,]+) msgs/sec`)
)

// streamScenarios measure JetStream with accounts off and on: the same
// file stream, created by `nats bench js pub async --create`, in the
// global account or in account A.
func streamScenarios() []Scenario {
	global := func(p *Proc) string { return p.URL }
	inA := func(p *Proc) string { return asUser(p.URL, "a") }
	pub := func(url func(*Proc) string) func(context.Context, *Options, *Proc) (float64, error) {
		return func(ctx context.Context, o *Options, p *Proc) (float64, error) {
			return o.jsPublish(ctx, url(p), 16, o.Msgs)
		}
	}
	consume := func(url func(*Proc) string) func(context.Context, *Options, *Proc) (float64, error) {
		return func(ctx context.Context, o *Options, p *Proc) (float64, error) {
			if _, err := o.jsPublish(ctx, url(p), 16, o.Msgs); err != nil {
				return 0, err
			}
			return o.jsOrdered(ctx, url(p), o.Msgs)
		}
	}
	return []Scenario{
		{Name: "js-pub-16", Config: jsConfig, ConfigLabel: "jetstream", Title: "JetStream async publish to a file stream, 16 B (acknowledged msgs/s)", Unit: "msgs/s", Goal: 1,
			Run: pub(global)},
		{Name: "js-pub-16-account", Config: jsAccountsConfig, ConfigLabel: jsAccountsLabel, Title: "JetStream async publish to a file stream, 16 B, in account A (acknowledged msgs/s)", Unit: "msgs/s", Goal: 1,
			Run: pub(inA)},
		{Name: "js-ordered-16", Config: jsConfig, ConfigLabel: "jetstream", Title: "JetStream ordered consumer reading a file stream, 16 B (delivered msgs/s)", Unit: "msgs/s", Goal: 1,
			Run: consume(global)},
		{Name: "js-ordered-16-account", Config: jsAccountsConfig, ConfigLabel: jsAccountsLabel, Title: "JetStream ordered consumer reading a file stream, 16 B, in account A (delivered msgs/s)", Unit: "msgs/s", Goal: 1,
			Run: consume(inA)},
	}
}

// jsPublish creates the bench stream and publishes n messages of size
// bytes to it asynchronously; it returns the publisher's rate, which
// counts a message when its acknowledgement arrived.
//
// The stream is made with `nats stream add`, not `nats bench --create`,
// which asks for atomic batch publishing (allow_atomic), a feature Skiff
// refuses (docs/streams.md); the bench publishes no batches either way.
func (o *Options) jsPublish(ctx context.Context, url string, size, n int) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	add := o.nats(ctx, url, "stream", "add", "benchstream", "--subjects", "bench.js", "--storage", "file", "--defaults")
	if out, err := add.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("nats stream add: %w\n%s", err, out)
	}
	return o.jsPubAsync(ctx, url, size, n)
}

// jsPubAsync publishes n messages of size bytes to bench.js with `nats
// bench js pub async` and returns its rate of acknowledged messages.
func (o *Options) jsPubAsync(ctx context.Context, url string, size, n int) (float64, error) {
	rate, _, err := o.jsPubAsyncCPU(ctx, url, size, n)
	return rate, err
}

// jsPubAsyncCPU is jsPubAsync that also returns the CPU time the
// publisher (nats bench) used.
func (o *Options) jsPubAsyncCPU(ctx context.Context, url string, size, n int) (float64, time.Duration, error) {
	cmd := o.natsBench(ctx, url, "js", "pub", "async", "bench.js",
		"--msgs", strconv.Itoa(n), "--size", strconv.Itoa(size), "--no-progress")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("nats bench js pub async: %w\n%s", err, out)
	}
	rate, err := parseRate(jsPubRate, out)
	return rate, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), err
}

// jsOrdered reads n messages of the bench stream with an ordered
// consumer and returns its rate.
func (o *Options) jsOrdered(ctx context.Context, url string, n int) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := o.natsBench(ctx, url, "js", "ordered", "--msgs", strconv.Itoa(n), "--no-progress").CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("nats bench js ordered: %w\n%s", err, out)
	}
	return parseRate(jsOrderedRate, out)
}
