package corebench

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/skiffmq/skiff/bench/internal/gobench"
)

// Scenario is one measurement, taken against each target.
type Scenario struct {
	Name  string
	Title string
	Unit  string
	// Goal is the least Skiff / nats-server ratio that meets the issue's
	// goal; for LowerIsBetter measurements the ratio is nats-server / Skiff.
	Goal          float64
	LowerIsBetter bool
	// Config is the configuration both servers run with ("" for their
	// defaults); ConfigLabel, if set, names it in the table instead.
	// STORE_DIR in it becomes a fresh directory for each run.
	Config      string
	ConfigLabel string
	// Run measures one server; RunCluster, set instead for the cluster
	// scenarios, measures a cluster of ClusterSize servers.
	Run         func(ctx context.Context, o *Options, p *Proc) (float64, error)
	RunCluster  func(ctx context.Context, o *Options, c *Cluster) (float64, error)
	ClusterSize int
}

// bigPending lets both servers queue a whole run's backlog for a slow
// client: Skiff then does not cut it off, and nats-server does not stall
// the publisher (it does past 75% of max_pending), so that both measure
// delivery rather than their different overload policies.
const bigPending = "max_pending: 1GB"

// Scenarios are the comparisons of docs/benchmarks/core.md.
func Scenarios() []Scenario {
	return append([]Scenario{
		{Name: "pubsub-16", Config: bigPending, Title: "1 publisher -> 1 subscriber, 16 B (delivered msgs/s)", Unit: "msgs/s", Goal: 1,
			Run: func(ctx context.Context, o *Options, p *Proc) (float64, error) {
				return o.pubSub(ctx, p.URL, "bench.a", "bench.a", 1, 16)
			}},
		{Name: "pubsub-1k", Config: bigPending, Title: "1 publisher -> 1 subscriber, 1 KiB (delivered msgs/s)", Unit: "msgs/s", Goal: 1,
			Run: func(ctx context.Context, o *Options, p *Proc) (float64, error) {
				return o.pubSub(ctx, p.URL, "bench.a", "bench.a", 1, 1024)
			}},
		{Name: "fanout-4", Config: bigPending, Title: "1 publisher -> 4 subscribers, 128 B (delivered msgs/s)", Unit: "msgs/s", Goal: 1,
			Run: func(ctx context.Context, o *Options, p *Proc) (float64, error) {
				return o.pubSub(ctx, p.URL, "bench.b", "bench.b", 4, 128)
			}},
		{Name: "fanout-4-wildcard", Config: bigPending, Title: "1 publisher -> 4 subscribers on `bench.>`, 128 B (delivered msgs/s)", Unit: "msgs/s", Goal: 1,
			Run: func(ctx context.Context, o *Options, p *Proc) (float64, error) {
				return o.pubSub(ctx, p.URL, "bench.>", "bench.c.d", 4, 128)
			}},
		{Name: "request-reply", Config: bigPending, Title: "request/reply, `nats bench service`, 4 requesters, 2 responders, 128 B (req/s)", Unit: "req/s", Goal: 1,
			Run: func(ctx context.Context, o *Options, p *Proc) (float64, error) {
				return o.service(ctx, p.URL, 4, 128)
			}},
		{Name: "pubsub-16-defaults", Title: "1 publisher -> 1 subscriber, 16 B, both servers on default limits (delivered msgs/s)", Unit: "msgs/s", Goal: 1,
			Run: func(ctx context.Context, o *Options, p *Proc) (float64, error) {
				return o.pubSub(ctx, p.URL, "bench.a", "bench.a", 1, 16)
			}},
		{Name: "pubsub-1k-defaults", Title: "1 publisher -> 1 subscriber, 1 KiB, both servers on default limits (delivered msgs/s)", Unit: "msgs/s", Goal: 1,
			Run: func(ctx context.Context, o *Options, p *Proc) (float64, error) {
				return o.pubSub(ctx, p.URL, "bench.a", "bench.a", 1, 1024)
			}},
		{Name: "pubsub-64k-defaults", Title: "1 publisher -> 1 subscriber, 64 KiB, both servers on default limits, a sixteenth of the messages (delivered msgs/s)", Unit: "msgs/s", Goal: 1,
			Run: func(ctx context.Context, o *Options, p *Proc) (float64, error) {
				return o.pubSubN(ctx, p.URL, "bench.a", "bench.a", 1, 64<<10, max(o.Msgs/16, 1))
			}},
		// The cost of accounts: the same workloads with both clients in one
		// account, and across accounts through a stream or service import.
		{Name: "pubsub-16-account", Config: bigPending + "\n" + accountsConfig, ConfigLabel: accountsLabel, Title: "1 publisher -> 1 subscriber, 16 B, both in account A (delivered msgs/s)", Unit: "msgs/s", Goal: 1,
			Run: func(ctx context.Context, o *Options, p *Proc) (float64, error) {
				a := asUser(p.URL, "a")
				return o.pubSubAt(ctx, a, a, "bench.a", "bench.a", 1, 16, o.Msgs)
			}},
		{Name: "pubsub-16-import", Config: bigPending + "\n" + accountsConfig, ConfigLabel: accountsLabel, Title: "1 publisher in account A -> 1 subscriber in B through a stream import, 16 B (delivered msgs/s)", Unit: "msgs/s", Goal: 1,
			Run: func(ctx context.Context, o *Options, p *Proc) (float64, error) {
				return o.pubSubAt(ctx, asUser(p.URL, "b"), asUser(p.URL, "a"), "bench.a", "bench.a", 1, 16, o.Msgs)
			}},
		{Name: "request-reply-import", Config: bigPending + "\n" + accountsConfig, ConfigLabel: accountsLabel, Title: "request/reply, requesters in account B, responders in A through a service import, 4 requesters, 2 responders, 128 B (req/s)", Unit: "req/s", Goal: 1,
			Run: func(ctx context.Context, o *Options, p *Proc) (float64, error) {
				return o.serviceAt(ctx, asUser(p.URL, "a"), asUser(p.URL, "b"), 4, 128)
			}},
		{Name: "churn", Title: "10,000 wildcard subscriptions, 1,000 subscribes and 1,000 unsubscribes/s, publishing 128 B (delivered msgs/s)", Unit: "msgs/s", Goal: 1.5,
			Run: func(ctx context.Context, o *Options, p *Proc) (float64, error) {
				return churn(ctx, p.URL, 10000, 1000, 128, o.Duration)
			}},
		{Name: "mem-conn", Title: "RSS per idle connection (1,000 connections)", Unit: "bytes", Goal: 1, LowerIsBetter: true,
			Run: func(ctx context.Context, _ *Options, p *Proc) (float64, error) { return memoryPerConn(ctx, p, 1000) }},
		{Name: "mem-sub", Title: "RSS per subscription (100,000 subscriptions)", Unit: "bytes", Goal: 1, LowerIsBetter: true,
			Run: func(ctx context.Context, _ *Options, p *Proc) (float64, error) { return memoryPerSub(ctx, p, 100000) }},
	}, streamScenarios()...)
}

// accountsConfig gives both servers two accounts: A, with user a, exports
// bench.> as a stream and bench.svc as a service; B, with user b, imports
// both.
var accountsConfig = accountsWith("")

// accountsWith is accountsConfig with extra (keys and values followed by a
// comma) added to account A.
func accountsWith(extra string) string {
	return `accounts {
  A: { ` + extra + `users: [ { user: a, password: a } ], exports: [ { stream: "bench.>" }, { service: "bench.svc" } ] }
  B: { users: [ { user: b, password: b } ], imports: [ { stream: { account: A, subject: "bench.>" } }, { service: { account: A, subject: "bench.svc" } } ] }
}`
}

// accountsLabel names accountsConfig in the report's table.
const accountsLabel = "max_pending: 1GB, accounts A (exports bench.>, bench.svc) and B (imports both)"

// asUser returns the server URL u with user's credentials (the password
// is the user's name, as in accountsConfig).
func asUser(u, user string) string {
	return strings.Replace(u, "nats://", "nats://"+user+":"+user+"@", 1)
}

// Result is every sample of one scenario, by target name, and every run
// that produced none, with why.
type Result struct {
	Scenario Scenario
	Samples  map[string][]float64
	Failures map[string][]string
	// Notes are the runs' secondary measurements, by target and key;
	// NoteKeys their keys in the order the runs noted them.
	Notes    map[string]map[string][]float64
	NoteKeys []string
}

// addNotes files a successful run's notes under target.
func (r *Result) addNotes(target string, notes []note) {
	for _, n := range notes {
		if r.Notes == nil {
			r.Notes = map[string]map[string][]float64{}
		}
		if r.Notes[target] == nil {
			r.Notes[target] = map[string][]float64{}
		}
		if !slices.Contains(r.NoteKeys, n.key) {
			r.NoteKeys = append(r.NoteKeys, n.key)
		}
		r.Notes[target][n.key] = append(r.Notes[target][n.key], n.v)
	}
}

// Median returns the median sample of a target.
func (r *Result) Median(target string) float64 {
	if len(r.Samples[target]) == 0 {
		return math.NaN()
	}
	return gobench.Median(r.Samples[target])
}

// Ratio is Skiff's advantage: Skiff / nats-server, or the inverse when
// lower is better.
func (r *Result) Ratio() float64 {
	s, n := r.Median("skiff"), r.Median("nats-server")
	if r.Scenario.LowerIsBetter {
		return n / s
	}
	return s / n
}

// Run executes every selected scenario, alternating the targets run by
// run (skiff, nats-server, then nats-server, skiff, ...), each measurement
// on a freshly started server.
func Run(ctx context.Context, o Options) ([]*Result, error) { return run(ctx, o, Scenarios()) }

// RunCluster is Run for the cluster scenarios: each measurement on a
// freshly started cluster of each target.
func RunCluster(ctx context.Context, o Options) ([]*Result, error) {
	return run(ctx, o, ClusterScenarios())
}

func run(ctx context.Context, o Options, scenarios []Scenario) ([]*Result, error) {
	o.setDefaults()
	defer func() {
		if o.home != "" {
			_ = os.RemoveAll(o.home)
		}
	}()
	targets := Targets(&o)
	var results []*Result
	for _, sc := range scenarios {
		if len(o.Scenarios) > 0 && !slices.Contains(o.Scenarios, sc.Name) {
			continue
		}
		res := &Result{Scenario: sc, Samples: map[string][]float64{}, Failures: map[string][]string{}}
		for run := range o.Runs {
			order := targets
			if run%2 == 1 {
				order = []Target{targets[1], targets[0]}
			}
			for _, t := range order {
				o.notes = nil
				v, err := measure(ctx, &o, t, sc)
				if err != nil {
					// A run that fails is a result too (a server may cut a
					// client off by design): record it and go on.
					res.Failures[t.Name] = append(res.Failures[t.Name], firstLine(err.Error()))
					fmt.Fprintf(o.Log, "%-18s run %d  %-11s failed: %v\n", sc.Name, run+1, t.Name, err)
					continue
				}
				res.Samples[t.Name] = append(res.Samples[t.Name], v)
				res.addNotes(t.Name, o.notes)
				fmt.Fprintf(o.Log, "%-18s run %d  %-11s %14.0f %s\n", sc.Name, run+1, t.Name, v, sc.Unit)
			}
		}
		results = append(results, res)
	}
	return results, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func measure(ctx context.Context, o *Options, t Target, sc Scenario) (float64, error) {
	if sc.RunCluster != nil {
		c, err := t.StartCluster(ctx, sc.ClusterSize, sc.Config)
		if err != nil {
			return 0, err
		}
		defer c.Stop()
		return sc.RunCluster(ctx, o, c)
	}
	p, err := t.Start(ctx, sc.Config)
	if err != nil {
		return 0, err
	}
	defer p.Stop()
	return sc.Run(ctx, o, p)
}

// WriteTable writes the results as a markdown table.
func WriteTable(w io.Writer, results []*Result) error {
	var b strings.Builder
	b.WriteString("| scenario | config | Skiff | nats-server | Skiff's advantage | goal | met | samples |\n| --- | --- | ---: | ---: | ---: | ---: | --- | --- |\n")
	for _, r := range results {
		met := "yes"
		if !(r.Ratio() >= r.Scenario.Goal) {
			met = "**no**"
		}
		config := r.Scenario.Config
		if r.Scenario.ConfigLabel != "" {
			config = r.Scenario.ConfigLabel
		}
		if config == "" {
			config = "defaults"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %s | >= %.1fx | %s | skiff %s; nats-server %s |\n",
			r.Scenario.Title, config, r.cell("skiff"), r.cell("nats-server"),
			ratioText(r.Ratio(), r.Scenario.Goal), r.Scenario.Goal, met, r.samples("skiff"), r.samples("nats-server"))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// ratioText writes a ratio with two decimals, or with as many more (up
// to four) as it takes not to read as the goal when it misses it: 1.4994
// is "1.499x", not "1.50x" beside "no".
func ratioText(ratio, goal float64) string {
	for prec := 2; ; prec++ {
		text := strconv.FormatFloat(ratio, 'f', prec, 64)
		if shown, err := strconv.ParseFloat(text, 64); prec == 4 || err != nil || (shown >= goal) == (ratio >= goal) {
			return text + "x"
		}
	}
}

// WriteNotes writes the results' secondary measurements (Options.note),
// if any, as a markdown table: each one's median per target, and every
// sample.
func WriteNotes(w io.Writer, results []*Result) error {
	var b strings.Builder
	for _, r := range results {
		for _, k := range r.NoteKeys {
			if b.Len() == 0 {
				b.WriteString("| scenario | measured beside it | Skiff | nats-server | samples |\n| --- | --- | ---: | ---: | --- |\n")
			}
			sk, ns := r.Notes["skiff"][k], r.Notes["nats-server"][k]
			fmt.Fprintf(&b, "| %s | %s | %s | %s | skiff %s; nats-server %s |\n",
				r.Scenario.Name, k, noteMedian(sk), noteMedian(ns), noteList(sk), noteList(ns))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func noteMedian(xs []float64) string {
	if len(xs) == 0 {
		return "n/a"
	}
	return strconv.FormatFloat(gobench.Median(xs), 'f', 2, 64)
}

func noteList(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(x, 'f', 2, 64)
	}
	return strings.Join(s, ", ")
}

// cell is a target's median, or why it has none.
func (r *Result) cell(target string) string {
	if len(r.Samples[target]) == 0 && len(r.Failures[target]) > 0 {
		return "no result: " + r.Failures[target][0]
	}
	return commas(r.Median(target)) + " " + r.Scenario.Unit
}

// samples lists a target's samples and failed runs.
func (r *Result) samples(target string) string {
	s := list(r.Samples[target])
	if n := len(r.Failures[target]); n > 0 {
		if s != "" {
			s += "; "
		}
		s += fmt.Sprintf("%d run(s) failed", n)
	}
	return s
}

func list(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = commas(x)
	}
	return strings.Join(s, ", ")
}

func commas(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	s := fmt.Sprintf("%.0f", v)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}
