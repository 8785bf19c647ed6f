package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
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
	defer func() { _ = f.Close() }()
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

// reasonFor is why r fails only on Skiff: what Skiff's own refusal says,
// or else the person's reason from reasons.txt, or else "". A test whose
// file Skiff refused keeps reasons.txt's reason for its diagnostic run
// (lenientReason).
func (rs Reasons) reasonFor(r Result) string {
	if why := autoReason(r.Skiff.Message); why != "" {
		return why
	}
	return rs[r.Key()]
}

// lenientReason is why r still fails on Skiff with compat/lenient's
// stand-in for its configuration file.
func (rs Reasons) lenientReason(r Result) string {
	if why := autoReason(r.Lenient.Message); why != "" {
		return why
	}
	return rs[r.Key()]
}

// autoReason classifies a failure from its message alone, where the
// message says it all: configuration keys Skiff refuses, named with the
// feature they wait for, a replicated stream, which Skiff refuses until
// streams are replicated, or a cluster flag compat/bin's wrapper refuses.
func autoReason(msg string) string {
	if strings.Contains(msg, "ErrorCode(10036)") {
		return "waits for replicated streams: Skiff refuses num_replicas above 1 (10036)"
	}
	if strings.Contains(msg, "is not implemented by Skiff's clustering") {
		return "waits for clustering: compat's wrapper refuses a cluster flag Skiff does not have"
	}
	if why := refusedFeature(msg); why != "" {
		return why
	}
	seen := map[string]bool{}
	var keys, features []string
	for _, m := range refusedKey.FindAllStringSubmatch(msg, -1) {
		if seen[m[1]] {
			continue
		}
		seen[m[1]] = true
		keys = append(keys, m[1])
		f := featureOf(m[1])
		if !seen["feature "+f] {
			seen["feature "+f] = true
			features = append(features, f)
		}
	}
	if len(keys) == 0 {
		return ""
	}
	sort.Strings(keys)
	sort.Strings(features)
	return "waits for " + strings.Join(features, " and ") + ": Skiff refuses " + strings.Join(keys, ", ")
}

// featureOf names the feature a refused configuration key belongs to.
func featureOf(key string) string {
	if key == "resolver" || key == "resolver_tls" || strings.HasPrefix(key, "resolver.") {
		// The MEMORY and full resolvers are implemented; these are not.
		return "the URL and cache account resolvers (JWT)"
	}
	last := key[strings.LastIndex(key, ".")+1:]
	switch last {
	case "cluster", "routes", "gateway":
		return "clustering"
	case "exports", "imports":
		return "account exports and imports"
	case "system_account", "system", "no_system_account", "no_system", "no_sys_acc":
		return "the system account"
	case "leafnodes", "domain":
		return "leaf nodes and JetStream domains"
	case "max_mem_store", "max_memory_store", "max_mem", "max_file_store", "max_file", "strict":
		return "JetStream storage quotas and strict mode"
	}
	return "the key " + key
}

// refusedField is how the JetStream API refuses a configuration field
// Skiff does not implement: `not supported by Skiff: [mirror sources]`,
// or `sample_freq is not supported`.
var (
	refusedField  = regexp.MustCompile(`not supported by Skiff: \[([a-z_ ]+)\]`)
	refusedSample = regexp.MustCompile(`sample_freq is not supported`)
)

// fieldFeatures names the feature each refused field waits for.
var fieldFeatures = map[string]string{
	"mirror": "mirrors and sources", "sources": "mirrors and sources",
	"subject_transform": "subject transforms", "republish": "republish",
	"allow_batched": "batch publishing", "allow_atomic": "batch publishing",
	"allow_msg_counter": "counters", "allow_msg_schedules": "message schedules",
	"priority_groups": "priority groups (pinned and overflow consumers)", "priority_policy": "priority groups (pinned and overflow consumers)",
	"priority_timeout": "priority groups (pinned and overflow consumers)",
}

// refusedFeature classifies a failure where the JetStream API refused a
// field by name.
func refusedFeature(msg string) string {
	if refusedSample.MatchString(msg) {
		return "waits for ack sampling: Skiff refuses sample_freq"
	}
	m := refusedField.FindStringSubmatch(msg)
	if m == nil {
		return ""
	}
	fields := strings.Fields(m[1])
	var features []string
	for _, f := range fields {
		name := fieldFeatures[f]
		if name == "" {
			name = "the field " + f
		}
		if !slices.Contains(features, name) {
			features = append(features, name)
		}
	}
	sort.Strings(features)
	return "waits for " + strings.Join(features, " and ") + ": Skiff refuses " + strings.Join(fields, ", ")
}
