package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// benchBinary is the benchmark harness's binary. The harness is a Go
// module of its own (bench/), so that the broker's module carries none of
// its dependencies; `make build` puts it beside bin/skiff.
const benchBinary = "skiff-bench"

// benchCmd runs `skiff-bench ARGS` for `skiff bench ARGS`, with this
// process's standard streams, and returns its exit code.
func benchCmd(args []string, stdout, stderr io.Writer) int {
	bin, err := findBench()
	if err != nil {
		fmt.Fprintln(stderr, "skiff bench:", err)
		return 2
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		fmt.Fprintln(stderr, "skiff bench:", err)
		return 1
	}
	return 0
}

// findBench looks for the harness beside this binary, then in PATH.
func findBench() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), benchBinary)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath(benchBinary); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("the harness %s is neither beside this binary nor in PATH; `make build` builds it into bin/", benchBinary)
}
