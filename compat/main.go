// Command compat runs the async-nats (Rust) client's own integration tests
// against the reference nats-server and against Skiff, and writes the result
// to docs/compat.md: passed and failed per test file for both servers, and
// every test that fails only on Skiff with its reason. `make compat` runs it
// (see docs/compat.md for what it measures and how to read it).
//
// The steps, each in its own file:
//
//	crate.go    fetch the published async-nats crate with cargo, unpack it
//	            under compat/build and point its nats-server dev-dependency
//	            at compat/nats-server, our helper crate
//	cargo.go    build its test binaries (one per tests/*.rs)
//	run.go      run every test in its own process, once with tools/bin's
//	            nats-server first in PATH and once with compat/bin's, which
//	            runs `skiff serve`; each bounded in time
//	libtest.go  read the tests' names and results from libtest's output
//	reasons.go  why a test fails only on Skiff: compat/reasons.txt, or what
//	            the failure says; compat/skip.txt, the tests not run here
//	report.go   write docs/compat.md
//
// Nothing it downloads or builds is committed: it all lives in compat/build,
// which git ignores.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Options are compat's settings; main fills them from flags.
type Options struct {
	// Root is the Skiff checkout (default: the working directory).
	Root string
	// CrateVersion is the async-nats version whose tests run.
	CrateVersion string
	// BuildDir holds the unpacked crate, cargo's target directory and the
	// tests' logs (default Root/compat/build).
	BuildDir string
	// Out is the report (default Root/docs/compat.md).
	Out string
	// Jobs is how many tests run at once, and cargo's -j.
	Jobs int
	// Timeout bounds one test on nats-server, and on Skiff a test that has
	// no nats-server time to scale from.
	Timeout time.Duration
	// Features are extra cargo features of async-nats for the tests
	// (comma-separated; upstream's CI adds slow_tests).
	Features string
	// Filter, when set, runs only the tests whose file::name contains it
	// (for working on one test; the report then covers only those).
	Filter string
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("compat", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o Options
	fs.StringVar(&o.Root, "root", ".", "the Skiff checkout")
	fs.StringVar(&o.CrateVersion, "crate", "0.49.1", "async-nats version whose tests run")
	fs.StringVar(&o.BuildDir, "build", "", "build directory (default ROOT/compat/build)")
	fs.StringVar(&o.Out, "out", "", "report (default ROOT/docs/compat.md)")
	fs.IntVar(&o.Jobs, "j", 2, "tests run at once, and cargo's -j")
	fs.DurationVar(&o.Timeout, "timeout", 3*time.Minute, "bound on one test")
	fs.StringVar(&o.Features, "features", "", "extra async-nats features for the tests (e.g. slow_tests)")
	fs.StringVar(&o.Filter, "run", "", "only tests whose FILE::NAME contains this")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := compat(o, stdout); err != nil {
		fmt.Fprintln(stderr, "compat:", err)
		return 1
	}
	return 0
}

func compat(o Options, log io.Writer) error {
	root, err := filepath.Abs(o.Root)
	if err != nil {
		return err
	}
	o.Root = root
	if o.BuildDir == "" {
		o.BuildDir = filepath.Join(root, "compat", "build")
	}
	if o.Out == "" {
		o.Out = filepath.Join(root, "docs", "compat.md")
	}
	start := time.Now()
	if _, err := exec.LookPath("cargo"); err != nil {
		return fmt.Errorf("%w: cargo is not in PATH: make compat builds the Rust client's tests with the machine's Rust toolchain (rustup's cargo, as Go is for make test)", ErrBuild)
	}

	crate, err := prepareCrate(o, log)
	if err != nil {
		return err
	}
	binaries, err := buildTests(o, crate, log)
	if err != nil {
		return err
	}
	env, err := describeEnvironment(o)
	if err != nil {
		return err
	}
	reasons, err := loadReasons(filepath.Join(root, "compat", "reasons.txt"))
	if err != nil {
		return err
	}
	skip, err := loadReasons(filepath.Join(root, "compat", "skip.txt"))
	if err != nil {
		return err
	}
	results, err := runAll(o, crate, binaries, skip, log)
	if err != nil {
		return err
	}
	env.Took = time.Since(start).Round(time.Second)
	r := buildReport(o, env, results, reasons)
	if err := os.WriteFile(o.Out, []byte(r.Markdown()), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(log, "compat: %s in %s: nats-server %d passed, %d failed; Skiff %d passed, %d failed; %d fail only on Skiff\n",
		o.Out, env.Took, r.Total.Ref.Passed, r.Total.Ref.Failed, r.Total.Skiff.Passed, r.Total.Skiff.Failed, len(r.SkiffOnly))
	return nil
}
