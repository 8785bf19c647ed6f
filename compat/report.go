package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Environment is what a run measured and with what: the report's header.
type Environment struct {
	Date         string
	Took         time.Duration
	CrateVersion string
	NatsServer   string
	Skiff        string
	Rust         string
	Features     string
	Jobs         int
	Timeout      time.Duration
	Filter       string
	CPUs         int
}

// describeEnvironment asks the binaries and tools for their versions.
func describeEnvironment(o Options) (Environment, error) {
	output := func(dir, name string, args ...string) (string, error) {
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("compat: %s %s: %w", name, strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	env := Environment{
		Date:         time.Now().UTC().Format("2006-01-02"),
		CrateVersion: o.CrateVersion,
		Features:     o.Features,
		Jobs:         o.Jobs,
		Timeout:      o.Timeout,
		Filter:       o.Filter,
		CPUs:         runtime.NumCPU(),
	}
	var err error
	if env.NatsServer, err = output(o.Root, filepath.Join(o.Root, "tools", "bin", "nats-server"), "--version"); err != nil {
		return env, err
	}
	if env.Rust, err = output(o.Root, "rustc", "--version"); err != nil {
		return env, err
	}
	version, err := output(o.Root, filepath.Join(o.Root, "bin", "skiff"), "version")
	if err != nil {
		return env, err
	}
	// The commit says which Skiff; a checkout with changes says so.
	commit, err := output(o.Root, "git", "describe", "--always", "--dirty", "--exclude", "*")
	if err != nil {
		commit = "unknown commit"
	}
	env.Skiff = version + " at " + commit
	return env, nil
}

// Counts are one server's results over some tests.
type Counts struct {
	// Passed counts flaky tests too (they passed when run again).
	Passed int
	// Failed counts tests that timed out too.
	Failed int
}

func (c *Counts) add(s Status) {
	switch {
	case s.ok():
		c.Passed++
	case s.bad():
		c.Failed++
	}
}

// FileRow is the summary of one test file.
type FileRow struct {
	File       string
	Tests      int
	Ignored    int
	Skipped    int
	Ref, Skiff Counts
	SkiffOnly  int
}

// Failure is a test in one of the report's lists.
type Failure struct {
	Result
	// Reason is why it fails only on Skiff ("" when nobody has said yet).
	Reason string
}

// Report is a run's results, summarized.
type Report struct {
	Env   Environment
	Files []FileRow
	Total FileRow
	// SkiffOnly fails on Skiff and passes on nats-server; Both fails on
	// both; RefOnly passes on Skiff and fails on nats-server; Flaky passed
	// on either only when run again.
	SkiffOnly, Both, RefOnly, Flaky []Failure
	// Skipped are the tests compat does not run (Result.Skipped says why).
	Skipped []Result
	// Lenient are the Skiff-only failures that Skiff's refusal of a key
	// explains and that ran again with compat/lenient's stand-in file;
	// their Reason is why they still fail ("" if they pass).
	Lenient []Failure
	// StaleReasons are reasons.txt entries for tests that no longer fail
	// only on Skiff.
	StaleReasons []string
}

func buildReport(o Options, env Environment, results []Result, reasons Reasons) Report {
	r := Report{Env: env, Total: FileRow{File: "total"}}
	rows := map[string]*FileRow{}
	used := map[string]bool{}
	for _, res := range results {
		row := rows[res.File]
		if row == nil {
			row = &FileRow{File: res.File}
			rows[res.File] = row
		}
		row.Tests++
		if res.Ignored {
			row.Ignored++
			continue
		}
		if res.Skipped != "" {
			row.Skipped++
			r.Skipped = append(r.Skipped, res)
			continue
		}
		row.Ref.add(res.Ref.Status)
		row.Skiff.add(res.Skiff.Status)
		f := Failure{Result: res}
		switch {
		case res.Ref.Status.ok() && res.Skiff.Status.bad():
			row.SkiffOnly++
			f.Reason = reasons.reasonFor(res)
			used[res.Key()] = used[res.Key()] || f.Reason == reasons[res.Key()]
			r.SkiffOnly = append(r.SkiffOnly, f)
			if res.Lenient.Status != NotRun {
				lf := Failure{Result: res}
				if res.Lenient.Status.bad() {
					lf.Reason = reasons.lenientReason(res)
					used[res.Key()] = used[res.Key()] || lf.Reason == reasons[res.Key()]
				}
				r.Lenient = append(r.Lenient, lf)
			}
		case res.Ref.Status.bad() && res.Skiff.Status.bad():
			r.Both = append(r.Both, f)
		case res.Ref.Status.bad():
			r.RefOnly = append(r.RefOnly, f)
		}
		if res.Ref.Status == Flaky || res.Skiff.Status == Flaky {
			r.Flaky = append(r.Flaky, f)
		}
	}
	for _, row := range rows {
		r.Files = append(r.Files, *row)
		r.Total.Tests += row.Tests
		r.Total.Ignored += row.Ignored
		r.Total.Skipped += row.Skipped
		r.Total.Ref.Passed += row.Ref.Passed
		r.Total.Ref.Failed += row.Ref.Failed
		r.Total.Skiff.Passed += row.Skiff.Passed
		r.Total.Skiff.Failed += row.Skiff.Failed
		r.Total.SkiffOnly += row.SkiffOnly
	}
	sort.Slice(r.Files, func(i, j int) bool { return r.Files[i].File < r.Files[j].File })
	if o.Filter == "" {
		for k := range reasons {
			if !used[k] {
				r.StaleReasons = append(r.StaleReasons, k)
			}
		}
		sort.Strings(r.StaleReasons)
	}
	return r
}

// Markdown renders the report as docs/compat.md.
func (r Report) Markdown() string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	e := r.Env
	p("# Compatibility: the async-nats client's own tests\n\n")
	p("`make compat` runs the integration tests of the official Rust client,\n")
	p("[async-nats](https://crates.io/crates/async-nats) %s, as published (its\n", e.CrateVersion)
	p("`tests/*.rs`, `tests/configs/` and the library's unit tests), against the reference nats-server and\n")
	p("against Skiff, and writes this page. The tests are the client's, not ours: each\n")
	p("starts a server through a helper crate, `nats-server`, that nats.rs does not\n")
	p("publish; `compat/nats-server` is ours, with the same API. It starts the first\n")
	p("`nats-server` in PATH: `tools/bin/nats-server` for the reference run,\n")
	p("`compat/bin/nats-server` for Skiff's, a wrapper that translates nats-server's\n")
	p("flags into `skiff serve` and passes the test's configuration file through\n")
	p("untouched. A key Skiff does not implement is refused at start\n")
	p("([config.md](config.md#fail-closed)), so such a test fails on Skiff, and the\n")
	p("list below says which key.\n\n")
	p("Each test runs in a process of its own, %d at a time, on each server in turn;\n", e.Jobs)
	p("a test is killed past %s on nats-server, and on Skiff past %d times its\n", e.Timeout, skiffFactor)
	p("nats-server time plus %s (at most %s). A failed test runs once more:\n", skiffGrace, e.Timeout)
	p("passing then makes it *flaky*, counted as passed and listed below. Tests that\n")
	p("upstream marks `#[ignore]` run on neither. Everything it builds and downloads\n")
	p("stays in `compat/build` (git-ignored), with each test's output in\n")
	p("`compat/build/logs/SERVER/FILE/TEST.log`. `make compat` is not part of\n")
	p("`make test`: the first build of the client's tests takes several minutes.\n\n")
	p("| | |\n| --- | --- |\n")
	p("| date | %s |\n", e.Date)
	p("| took | %s (`make compat`, building included, %d CPUs) |\n", e.Took, e.CPUs)
	p("| async-nats | %s, default features%s |\n", e.CrateVersion, plusFeatures(e.Features))
	p("| nats-server | %s (`tools/bin/nats-server`) |\n", e.NatsServer)
	p("| Skiff | %s |\n", e.Skiff)
	p("| Rust | %s |\n", e.Rust)
	if e.Filter != "" {
		p("| only tests matching | `%s` |\n", e.Filter)
	}
	p("\n## Results by test file\n\n")
	p("Ignored: marked `#[ignore]` upstream. Skipped: not run here (listed below).\n\n")
	p("| file | tests | ignored | skipped | nats-server passed | nats-server failed | Skiff passed | Skiff failed | fail only on Skiff |\n")
	p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, f := range append(r.Files, r.Total) {
		name := fileLabel(f.File)
		if f.File == "total" {
			name = "**total**"
		}
		p("| %s | %d | %d | %d | %d | %d | %d | %d | %d |\n", name, f.Tests, f.Ignored, f.Skipped,
			f.Ref.Passed, f.Ref.Failed, f.Skiff.Passed, f.Skiff.Failed, f.SkiffOnly)
	}

	p("\n## Fail only on Skiff (%d)\n\n", len(r.SkiffOnly))
	if len(r.SkiffOnly) == 0 {
		p("None.\n")
	}
	for _, g := range groupByReason(r.SkiffOnly) {
		p("### %s (%d)\n\n", g.reason, len(g.tests))
		if autoReason(g.tests[0].Skiff.Message) == g.reason {
			// Skiff's refusal is the whole message: the names suffice.
			var names []string
			for _, f := range g.tests {
				names = append(names, "`"+f.File+"` `"+f.Name+"`")
			}
			p("%s\n\n", strings.Join(names, ", "))
			continue
		}
		for _, f := range g.tests {
			p("- `%s` `%s`%s: %s\n", f.File, f.Name, statusNote(f.Skiff.Status), quote(f.Skiff.Message))
		}
		p("\n")
	}

	if len(r.Lenient) > 0 {
		r.renderLenient(p)
	}

	p("\n## Fail on both servers (%d)\n\n", len(r.Both))
	p("Not Skiff's doing: the test needs what this machine lacks, or fails on the\n")
	p("reference server too.\n\n")
	if len(r.Both) == 0 {
		p("None.\n")
	}
	for _, f := range r.Both {
		p("- `%s` `%s`: nats-server%s: %s\n", f.File, f.Name, statusNote(f.Ref.Status), quote(f.Ref.Message))
	}

	p("\n## Fail only on nats-server (%d)\n\n", len(r.RefOnly))
	if len(r.RefOnly) == 0 {
		p("None.\n")
	}
	for _, f := range r.RefOnly {
		p("- `%s` `%s`%s: %s\n", f.File, f.Name, statusNote(f.Ref.Status), quote(f.Ref.Message))
	}

	p("\n## Flaky (%d)\n\n", len(r.Flaky))
	p("Failed once, passed when run again; counted as passed.\n\n")
	if len(r.Flaky) == 0 {
		p("None.\n")
	}
	for _, f := range r.Flaky {
		var on []string
		if f.Ref.Status == Flaky {
			on = append(on, "nats-server: "+quote(f.Ref.Message))
		}
		if f.Skiff.Status == Flaky {
			on = append(on, "Skiff: "+quote(f.Skiff.Message))
		}
		p("- `%s` `%s`: %s\n", f.File, f.Name, strings.Join(on, "; "))
	}
	p("\n## Not run here (%d)\n\n", len(r.Skipped))
	p("`compat/skip.txt` lists them: they reach hosts off this machine.\n\n")
	for _, s := range r.Skipped {
		p("- `%s` `%s`: %s\n", s.File, s.Name, s.Skipped)
	}
	if len(r.StaleReasons) > 0 {
		p("\n## Reasons no longer needed\n\n")
		p("`compat/reasons.txt` explains these, but they no longer fail only on Skiff:\n\n")
		for _, k := range r.StaleReasons {
			p("- `%s`\n", k)
		}
	}
	return b.String()
}

type reasonGroup struct {
	reason string
	tests  []Failure
}

// groupByReason groups failures by reason, the largest group first; tests
// nobody has explained yet come last.
func groupByReason(fs []Failure) []reasonGroup {
	byReason := map[string][]Failure{}
	for _, f := range fs {
		reason := f.Reason
		if reason == "" {
			reason = "not yet classified"
		}
		byReason[reason] = append(byReason[reason], f)
	}
	var gs []reasonGroup
	for reason, tests := range byReason {
		gs = append(gs, reasonGroup{reason, tests})
	}
	sort.Slice(gs, func(i, j int) bool {
		ui, uj := gs[i].reason == "not yet classified", gs[j].reason == "not yet classified"
		if ui != uj {
			return uj
		}
		if len(gs[i].tests) != len(gs[j].tests) {
			return len(gs[i].tests) > len(gs[j].tests)
		}
		return gs[i].reason < gs[j].reason
	})
	return gs
}

func statusNote(s Status) string {
	switch s {
	case TimedOut:
		return " (timed out)"
	case Flaky:
		return " (flaky)"
	}
	return ""
}

// quote puts a failure message in a code span, clipped, so that Markdown
// leaves it alone.
func quote(msg string) string {
	msg = strings.ReplaceAll(clip(msg), "`", "'")
	if msg == "" {
		return "(no message)"
	}
	return "`" + msg + "`"
}

func plusFeatures(f string) string {
	if f == "" {
		return ""
	}
	return " plus `" + f + "`"
}

// renderLenient writes the diagnostic section: the tests whose file Skiff
// refused, run again with compat/lenient's stand-in.
func (r Report) renderLenient(p func(string, ...any)) {
	var failed, passed []Failure
	perFile := map[string]*[2]int{}
	var files []string
	for _, f := range r.Lenient {
		c := perFile[f.File]
		if c == nil {
			c = &[2]int{}
			perFile[f.File] = c
			files = append(files, f.File)
		}
		if f.Lenient.Status.bad() {
			failed = append(failed, f)
			c[1]++
		} else {
			passed = append(passed, f)
			c[0]++
		}
	}
	p("\n## Behind the refused keys: a diagnostic run (%d)\n\n", len(r.Lenient))
	p("Not part of the results above. These tests failed on Skiff only because it\n")
	p("refused a key of their configuration file that compat/lenient has a stand-in\n")
	p("for: the same file without the refused keys (such as `tests/configs/jetstream.conf`\n")
	p("without `strict`, `max_mem_store` and `max_file_store`). Run again with the\n")
	p("stand-in, they show what implementing those keys would leave to fix.\n\n")
	p("| file | refused | pass with the stand-in | fail with the stand-in |\n| --- | ---: | ---: | ---: |\n")
	sort.Strings(files)
	for _, file := range files {
		c := perFile[file]
		p("| %s | %d | %d | %d |\n", fileLabel(file), c[0]+c[1], c[0], c[1])
	}
	p("| **total** | %d | %d | %d |\n\n", len(r.Lenient), len(passed), len(failed))
	for _, g := range groupByReason(failed) {
		p("### %s (%d)\n\n", g.reason, len(g.tests))
		for _, f := range g.tests {
			p("- `%s` `%s`%s: %s\n", f.File, f.Name, statusNote(f.Lenient.Status), quote(f.Lenient.Message))
		}
		p("\n")
	}
}
