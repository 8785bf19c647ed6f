package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
)

// ErrBuild is returned when the tests do not build.
var ErrBuild = errors.New("compat: building the tests")

// testBinary is one tests/*.rs file, compiled.
type testBinary struct {
	// Name is the file's name without .rs (cargo's target name).
	Name string
	// Path is the executable.
	Path string
}

// buildTests compiles every integration test file of the crate (cargo's
// `--test '*'`) and the library's unit tests (`--lib`; some start a
// server), not the doc tests, into BuildDir/target, incrementally, and
// returns the executables by name.
func buildTests(o Options, crate string, log io.Writer) ([]testBinary, error) {
	args := []string{"test", "--lib", "--test", "*", "--no-run", "-j", strconv.Itoa(o.Jobs),
		"--message-format=json-render-diagnostics"}
	if o.Features != "" {
		args = append(args, "--features", o.Features)
	}
	fmt.Fprintf(log, "compat: cargo %v (the first build takes about 10 minutes on 2 cores)\n", args)
	cmd := exec.Command("cargo", args...)
	cmd.Dir = crate
	cmd.Env = append(os.Environ(), "CARGO_TARGET_DIR="+filepath.Join(o.BuildDir, "target"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, log
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%w: cargo test --no-run: %w", ErrBuild, err)
	}
	bins, err := parseCargoArtifacts(&out)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBuild, err)
	}
	if len(bins) == 0 {
		return nil, fmt.Errorf("%w: cargo reported no test executables", ErrBuild)
	}
	return bins, nil
}

// parseCargoArtifacts reads cargo's JSON messages and returns the test
// executables it built, sorted by name.
func parseCargoArtifacts(r io.Reader) ([]testBinary, error) {
	var bins []testBinary
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	for sc.Scan() {
		var msg struct {
			Reason string `json:"reason"`
			Target struct {
				Name string   `json:"name"`
				Kind []string `json:"kind"`
			} `json:"target"`
			Executable *string `json:"executable"`
		}
		if err := json.Unmarshal(sc.Bytes(), &msg); err != nil {
			return nil, fmt.Errorf("cargo message %q: %w", sc.Text(), err)
		}
		if msg.Reason != "compiler-artifact" || msg.Executable == nil {
			continue
		}
		for _, k := range msg.Target.Kind {
			// A library with an executable is the crate's own, built
			// as its unit tests (dependencies have none).
			if k == "test" || k == "lib" {
				bins = append(bins, testBinary{Name: msg.Target.Name, Path: *msg.Executable})
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	sort.Slice(bins, func(i, j int) bool { return bins[i].Name < bins[j].Name })
	return bins, nil
}

// fileLabel names a test binary in the report: tests/NAME.rs, or the
// library's unit tests.
func fileLabel(name string) string {
	if name == libTests {
		return "`src/` (unit tests)"
	}
	return "`tests/" + name + ".rs`"
}

// libTests is the name cargo gives the library's unit-test binary.
const libTests = "async_nats"
