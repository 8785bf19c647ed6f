package main

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

// Status is how one test ended on one server.
type Status int

const (
	// NotRun: the test was not run (ignored upstream, or filtered out).
	NotRun Status = iota
	// Passed: libtest said ok.
	Passed
	// Flaky: failed, then passed when run again.
	Flaky
	// Failed: libtest said FAILED, or the process died without saying.
	Failed
	// TimedOut: killed past its time bound.
	TimedOut
)

func (s Status) String() string {
	switch s {
	case Passed:
		return "passed"
	case Flaky:
		return "flaky"
	case Failed:
		return "failed"
	case TimedOut:
		return "timed out"
	}
	return "not run"
}

// ok is whether the test passed, at once or on its second run.
func (s Status) ok() bool { return s == Passed || s == Flaky }

// bad is whether the test failed or hung.
func (s Status) bad() bool { return s == Failed || s == TimedOut }

// parseList reads `TEST --list --format terse`: one `NAME: test` line per
// test (benchmarks and anything else are not tests).
func parseList(out string) []string {
	var names []string
	for _, line := range strings.Split(out, "\n") {
		if name, ok := strings.CutSuffix(strings.TrimSpace(line), ": test"); ok {
			names = append(names, name)
		}
	}
	return names
}

// parseOutcome reads what libtest printed for a run of the single test
// name: whether it said ok, and if not, the failure's message.
func parseOutcome(out, name string) (Status, string) {
	for _, line := range strings.Split(out, "\n") {
		rest, found := strings.CutPrefix(line, "test "+name+" ... ")
		if !found {
			// A #[should_panic] test: "test NAME - should panic ... ok".
			rest, found = strings.CutPrefix(line, "test "+name+" - should panic ... ")
		}
		if !found {
			continue
		}
		switch {
		case strings.HasPrefix(rest, "ok"):
			return Passed, ""
		case strings.HasPrefix(rest, "ignored"):
			return NotRun, ""
		}
		break
	}
	return Failed, failureMessage(out, name)
}

// panicLine is how Rust (1.73 on) starts a panic's message:
// `thread 'NAME' panicked at FILE:LINE:COL:`, the message on the next lines;
// Rust 1.89 on puts the thread's ID after its name: `'NAME' (1234)`.
var panicLine = regexp.MustCompile(`^thread '.*'(?: \(\d+\))? panicked at (.+):$`)

// messageLimit bounds a failure message in the report (clip); the whole
// output is in the test's log.
const messageLimit = 400

// failureMessage is the panic message (with where it happened) in a
// failed test's captured output, or else the last lines the process wrote.
func failureMessage(out, name string) string {
	lines := strings.Split(out, "\n")
	if i := indexOf(lines, "---- "+name+" stdout ----"); i >= 0 {
		lines = lines[i+1:]
	}
	for i, line := range lines {
		m := panicLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var msg []string
		for _, l := range lines[i+1:] {
			if strings.HasPrefix(l, "note: run with") || strings.HasPrefix(l, "stack backtrace:") ||
				strings.HasPrefix(l, "failures:") || strings.HasPrefix(l, "---- ") {
				break
			}
			msg = append(msg, l)
		}
		return oneLine(strings.Join(msg, " ")) + " (at " + m[1] + ")"
	}
	var tail []string
	for i := len(lines) - 1; i >= 0 && len(tail) < 5; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "running ") {
			tail = append([]string{l}, tail...)
		}
	}
	return oneLine(strings.Join(tail, " "))
}

func indexOf(lines []string, want string) int {
	for i, l := range lines {
		if l == want {
			return i
		}
	}
	return -1
}

// oneLine collapses runs of white space, so a message fits a table cell.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// clip shortens a message to messageLimit bytes, on a rune boundary.
func clip(s string) string {
	if len(s) <= messageLimit {
		return s
	}
	n := messageLimit
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + " …"
}
