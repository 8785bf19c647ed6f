package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/skiffmq/skiff/bench/internal/gobench"
	"github.com/skiffmq/skiff/bench/internal/matchreport"
	"github.com/skiffmq/skiff/bench/internal/sysinfo"
)

// benchMatchCmd runs the matching benchmarks with `go test -bench` (so the
// nats-server peer stays a test-only dependency) and writes
// matching.md, the raw output and the charts.
func benchMatchCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("skiff bench match", flag.ContinueOnError)
	fs.SetOutput(stderr)
	count := fs.Int("count", 5, "runs of each benchmark; the report quotes medians")
	benchtime := fs.String("benchtime", "", "go test -benchtime for each benchmark (default go's 1s)")
	filter := fs.String("bench", "^Benchmark(Match|Throughput|Memory|Concurrent|Contention)$", "go test -bench regexp")
	in := fs.String("in", "", "render this saved go test output instead of running the benchmarks")
	out := fs.String("out", "docs/benchmarks", "directory for matching.md, matching-raw.txt and the charts")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	command := strings.TrimSpace("skiff bench match " + strings.Join(args, " "))
	if err := benchMatch(command, *count, *benchtime, *filter, *in, *out, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "skiff bench match:", err)
		return 1
	}
	return 0
}

func benchMatch(command string, count int, benchtime, filter, in, out string, stdout, stderr io.Writer) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	rawName := "matching-raw.txt"
	var raw []byte
	if in != "" {
		b, err := os.ReadFile(in)
		if err != nil {
			return err
		}
		raw = b
		command = fmt.Sprintf("skiff bench match -in %s (rendering an earlier run)", in)
	} else {
		root, err := moduleRoot()
		if err != nil {
			return err
		}
		goArgs := []string{"test", "-run", "^$", "-bench", filter, "-benchmem", "-timeout", "0", "-count", fmt.Sprint(count)}
		if benchtime != "" {
			goArgs = append(goArgs, "-benchtime", benchtime)
		}
		goArgs = append(goArgs, "./match/")
		fmt.Fprintf(stderr, "running: go %s (in %s)\n", strings.Join(goArgs, " "), root)
		var buf bytes.Buffer
		cmd := exec.Command("go", goArgs...)
		cmd.Dir = root
		cmd.Stdout = io.MultiWriter(&buf, stderr)
		cmd.Stderr = stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go test: %w", err)
		}
		raw = buf.Bytes()
		command = fmt.Sprintf("%s\n# which ran: go %s", command, strings.Join(goArgs, " "))
		if err := os.WriteFile(filepath.Join(out, rawName), raw, 0o644); err != nil {
			return err
		}
	}
	set, err := gobench.Parse(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	if len(set.Names) == 0 {
		return errors.New("no benchmark results found")
	}
	r := &matchreport.Report{
		Set:     set,
		Command: command,
		Date:    time.Now().UTC().Format("2006-01-02"),
		Machine: sysinfo.Read().Markdown(),
		RawFile: rawName,
		Count:   set.Runs(),
	}
	var md bytes.Buffer
	if err := r.WriteMarkdown(&md); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "matching.md"), md.Bytes(), 0o644); err != nil {
		return err
	}
	if err := r.Charts(out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", filepath.Join(out, "matching.md"))
	return nil
}

// moduleRoot finds the directory holding the broker module's go.mod
// (module github.com/skiffmq/skiff, not the harness's), from the working
// directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			bytes.HasPrefix(b, []byte("module github.com/skiffmq/skiff\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the skiff source tree (no go.mod found); use -in to render saved output")
		}
		dir = parent
	}
}
