package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrRun is returned when a test binary cannot be listed or run at all (a
// test failing is a result, not an error).
var ErrRun = errors.New("compat: running the tests")

// pass is one run of the tests: on which server, with what environment,
// which tests, and where each outcome goes.
type pass struct {
	// Name names the pass in logs and log directories.
	Name string
	// Env is the tests' environment; its PATH picks the server.
	Env []string
	// Selects says which tests run in this pass.
	Selects func(*Result) bool
	// Timeout bounds one test.
	Timeout func(*Result) time.Duration
	// Outcome is where the pass keeps a test's outcome.
	Outcome func(*Result) *Outcome
}

// Outcome is how one test ended on one server.
type Outcome struct {
	Status Status
	// Took is the run's wall time (the passing run's, for a flaky test).
	Took time.Duration
	// Message is the failure's panic message (the first failure's, for a
	// flaky test).
	Message string
	// Log is the file holding everything the test printed.
	Log string
}

// Result is one test on both servers.
type Result struct {
	// File is the test binary's name (tests/FILE.rs).
	File string
	// Name is libtest's name for the test, module path included.
	Name string
	// Ignored is whether upstream marks it #[ignore] (then neither runs it).
	Ignored bool
	// Skipped is why compat does not run it (compat/skip.txt), or "".
	Skipped string
	// Ref is the reference nats-server's outcome, Skiff Skiff's.
	Ref, Skiff Outcome
	// Lenient is Skiff's outcome with compat/lenient's stand-ins for the
	// configuration files Skiff refused (NotRun unless Skiff refused one).
	Lenient Outcome
}

// Key is the test's name in compat/reasons.txt and the report.
func (r Result) Key() string { return r.File + " " + r.Name }

// skiffGrace is what a test may take on Skiff beyond skiffFactor times
// its time on nats-server, before it counts as hung.
const (
	skiffFactor = 3
	skiffGrace  = 30 * time.Second
)

// runAll runs every test of every binary on nats-server, then on Skiff,
// then, for the tests Skiff failed only because it refused a key of their
// configuration file, on Skiff again with compat/lenient's stand-in for
// that file: the diagnostic pass, which says what fails behind the refusal.
//
// A test runs in a process of its own (`BINARY NAME --exact`), so one test
// hanging or crashing costs only itself; o.Jobs of them run at once, as
// libtest runs a file's tests on as many threads. Each process (and every
// server it started) runs in its own process group, killed past the test's
// time bound. On Skiff the bound scales from the test's time on nats-server.
func runAll(o Options, crate string, bins []testBinary, skip Reasons, log io.Writer) ([]Result, error) {
	skiff := filepath.Join(o.Root, "bin", "skiff")
	refBin := filepath.Join(o.Root, "tools", "bin")
	skiffBin := filepath.Join(o.Root, "compat", "bin")
	for _, f := range []string{filepath.Join(refBin, "nats-server"), filepath.Join(skiffBin, "nats-server"), skiff} {
		if _, err := os.Stat(f); err != nil {
			return nil, fmt.Errorf("%w: %w (make build tools)", ErrRun, err)
		}
	}
	logs := filepath.Join(o.BuildDir, "logs")
	if err := os.RemoveAll(logs); err != nil {
		return nil, err
	}

	var results []Result
	for _, b := range bins {
		rs, err := listTests(b, crate, o.Filter)
		if err != nil {
			return nil, err
		}
		for i := range rs {
			rs[i].Skipped = skip[rs[i].Key()]
		}
		results = append(results, rs...)
	}
	runs := func(r *Result) bool { return !r.Ignored && r.Skipped == "" }
	skiffTimeout := func(r *Result) time.Duration {
		if r.Ref.Status != Passed {
			return o.Timeout
		}
		return min(o.Timeout, skiffFactor*r.Ref.Took+skiffGrace)
	}
	passes := []pass{{
		Name:    "nats-server",
		Env:     testEnv(refBin, skiff),
		Selects: runs,
		Timeout: func(*Result) time.Duration { return o.Timeout },
		Outcome: func(r *Result) *Outcome { return &r.Ref },
	}, {
		Name:    "skiff",
		Env:     testEnv(skiffBin, skiff),
		Selects: runs,
		Timeout: skiffTimeout,
		Outcome: func(r *Result) *Outcome { return &r.Skiff },
	}, {
		Name: "skiff-lenient",
		Env:  append(testEnv(skiffBin, skiff), "COMPAT_LENIENT="+filepath.Join(o.Root, "compat", "lenient")),
		Selects: func(r *Result) bool {
			return r.Ref.Status.ok() && r.Skiff.Status.bad() && hasStandIn(o.Root, r.Skiff.Message)
		},
		Timeout: skiffTimeout,
		Outcome: func(r *Result) *Outcome { return &r.Lenient },
	}}
	for _, p := range passes {
		for _, b := range bins {
			runPass(o, p, b, crate, results, filepath.Join(logs, p.Name), log)
		}
	}
	return results, nil
}

// runPass runs the tests of one binary that the pass selects.
func runPass(o Options, p pass, b testBinary, crate string, results []Result, logs string, log io.Writer) {
	start := time.Now()
	var todo []*Result
	for i := range results {
		if r := &results[i]; r.File == b.Name && p.Selects(r) {
			todo = append(todo, r)
		}
	}
	if len(todo) == 0 {
		return
	}
	parallel(o.Jobs, todo, func(r *Result) {
		logFile := filepath.Join(logs, r.File, safeName(r.Name)+".log")
		out := runTest(b.Path, r.Name, crate, p.Env, p.Timeout(r), logFile)
		if out.Status == Failed {
			// Once more, to tell a broken test from a flaky one.
			again := runTest(b.Path, r.Name, crate, p.Env, p.Timeout(r), logFile+".2")
			if again.Status == Passed {
				out.Status, out.Took = Flaky, again.Took
			}
		}
		// Paths under the checkout read the same on every machine.
		out.Message = strings.ReplaceAll(out.Message, o.Root+string(filepath.Separator), "")
		*p.Outcome(r) = out
	})
	counts := map[Status]int{}
	for _, r := range todo {
		counts[p.Outcome(r).Status]++
	}
	fmt.Fprintf(log, "compat: %-13s %-26s %3d passed, %d flaky, %d failed, %d timed out (%s)\n",
		p.Name, b.Name, counts[Passed], counts[Flaky], counts[Failed], counts[TimedOut],
		time.Since(start).Round(time.Second))
}

// listTests asks a test binary for its tests and which of them upstream
// ignores.
func listTests(b testBinary, crate, filter string) ([]Result, error) {
	list := func(extra ...string) ([]string, error) {
		cmd := exec.Command(b.Path, append([]string{"--list", "--format", "terse"}, extra...)...)
		cmd.Dir = crate
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("%w: %s --list: %w", ErrRun, b.Name, err)
		}
		return parseList(string(out)), nil
	}
	all, err := list()
	if err != nil {
		return nil, err
	}
	ignoredNames, err := list("--ignored")
	if err != nil {
		return nil, err
	}
	ignored := map[string]bool{}
	for _, n := range ignoredNames {
		ignored[n] = true
	}
	var rs []Result
	for _, n := range all {
		r := Result{File: b.Name, Name: n, Ignored: ignored[n]}
		if filter == "" || strings.Contains(r.File+"::"+r.Name, filter) {
			rs = append(rs, r)
		}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].Name < rs[j].Name })
	return rs, nil
}

// testEnv is the tests' environment: bin first in PATH, so the helper
// starts its nats-server; SKIFF for compat/bin's wrapper; short panics.
func testEnv(bin, skiff string) []string {
	var env []string
	for _, kv := range os.Environ() {
		switch strings.SplitN(kv, "=", 2)[0] {
		case "PATH", "SKIFF", "RUST_BACKTRACE", "RUST_LOG":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"SKIFF="+skiff, "RUST_BACKTRACE=0")
}

// runTest runs one test in its own process group, killing the group past
// timeout, and keeps its output in logFile.
func runTest(bin, name, dir string, env []string, timeout time.Duration, logFile string) Outcome {
	cmd := exec.Command(bin, name, "--exact", "--test-threads=1")
	cmd.Dir = dir
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	o := Outcome{Log: logFile}
	if err := cmd.Start(); err != nil {
		o.Status, o.Message = Failed, err.Error()
		return o
	}
	pgid := cmd.Process.Pid
	timer := time.AfterFunc(timeout, func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	err := cmd.Wait()
	timedOut := !timer.Stop()
	// A server the test left behind (its Drop never ran) goes too.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	o.Took = time.Since(start)

	switch {
	case timedOut:
		o.Status = TimedOut
		o.Message = fmt.Sprintf("killed after %s", timeout.Round(time.Second))
	default:
		o.Status, o.Message = parseOutcome(out.String(), name)
		if o.Status == Passed && err != nil {
			o.Status, o.Message = Failed, fmt.Sprintf("libtest said ok but the process ended with %v", err)
		}
	}
	if mkErr := os.MkdirAll(filepath.Dir(logFile), 0o755); mkErr == nil {
		header := fmt.Sprintf("# %s %s --exact: %s in %s\n", bin, name, o.Status, o.Took.Round(time.Millisecond))
		_ = os.WriteFile(logFile, append([]byte(header), out.Bytes()...), 0o644)
	}
	return o
}

// parallel calls f on every item, jobs at a time.
func parallel[T any](jobs int, items []T, f func(T)) {
	ch := make(chan T)
	var wg sync.WaitGroup
	for range max(jobs, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range ch {
				f(it)
			}
		}()
	}
	for _, it := range items {
		ch <- it
	}
	close(ch)
	wg.Wait()
}

// safeName makes a test name a file name.
func safeName(name string) string {
	return strings.NewReplacer("/", "_", "::", ".").Replace(name)
}

// helperConfig is how compat/nats-server names the configuration file of
// a server that exited before listening.
var helperConfig = regexp.MustCompile(`before listening: config "([^"]*)"`)

// hasStandIn is whether a failure is Skiff refusing a key of a test's
// configuration file that compat/lenient has a stand-in for.
func hasStandIn(root, msg string) bool {
	m := helperConfig.FindStringSubmatch(msg)
	if m == nil || m[1] == "" || !refusedKey.MatchString(msg) {
		return false
	}
	_, err := os.Stat(filepath.Join(root, "compat", "lenient", filepath.Base(m[1])))
	return err == nil
}
