package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
)

// ErrReasons is returned for a malformed compat/reasons.txt.
var ErrReasons = errors.New("compat: reasons.txt")

// Reasons say why tests fail only on Skiff: what a person found by reading
// the test and its failure, keyed by "FILE NAME" (Result.Key).
type Reasons map[string]string

// loadReasons reads compat/reasons.txt: `#` comments, blank lines, and one
// line per test, `FILE NAME REASON...` (the test file without .rs,
// libtest's name, then the reason, separated by white space).
func loadReasons(path string) (Reasons, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return Reasons{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rs := Reasons{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 3 {
			return nil, fmt.Errorf("%w: line %d: want FILE NAME REASON, got %q", ErrReasons, n, line)
		}
		key := fields[0] + " " + fields[1]
		if _, dup := rs[key]; dup {
			return nil, fmt.Errorf("%w: line %d: %s twice", ErrReasons, n, key)
		}
		rs[key] = strings.Join(fields[2:], " ")
	}
	return rs, sc.Err()
}

// refusedKey is how Skiff refuses a configuration key it does not
// implement: `FILE:LINE: KEY: not supported by Skiff: WHY`.
var refusedKey = regexp.MustCompile(`:\d+: ([A-Za-z0-9_.\[\]]+): not supported by Skiff`)

// reasonFor is why r fails only on Skiff: the person's reason from
// reasons.txt, or else what Skiff's own refusal says, or else "".
func (rs Reasons) reasonFor(r Result) string {
	if why, ok := rs[r.Key()]; ok {
		return why
	}
	return autoReason(r.Skiff.Message)
}

// autoReason classifies a failure from its message alone, where the
// message says it all: a configuration key Skiff refuses, or clustering,
// which compat/bin's wrapper refuses.
func autoReason(msg string) string {
	if strings.Contains(msg, "clustering is not implemented by Skiff") {
		return "needs clustering: compat's wrapper refuses --routes/--cluster (Skiff has no clustering)"
	}
	seen := map[string]bool{}
	var keys []string
	for _, m := range refusedKey.FindAllStringSubmatch(msg, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			keys = append(keys, m[1])
		}
	}
	if len(keys) == 0 {
		return ""
	}
	sort.Strings(keys)
	return "configuration refused by Skiff: " + strings.Join(keys, ", ")
}
