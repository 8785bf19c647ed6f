package jetstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
)

// Features of the reference server that Skiff does not implement. A
// request that asks for one is refused with an error naming it: silently
// creating a stream without its mirror, or a consumer without its pause,
// would be worse than saying no.
var (
	unsupportedStreamFields = []string{
		"mirror", "sources", "subject_transform", "republish",
		"allow_msg_counter", "allow_atomic",
		"allow_msg_schedules", "persist_mode", "allow_batched",
	}
	unsupportedConsumerFields = []string{
		"direct", "sourcing", "priority_groups", "priority_timeout",
	}
)

// knownToReference are the request fields of the reference server that
// Skiff's types do not have: a strict decode lets them through, for the
// checks here to refuse them by name when they are set.
var knownToReference = func() map[string]bool {
	m := map[string]bool{"placement": true, "priority_policy": true}
	for _, f := range append(append([]string{}, unsupportedStreamFields...), unsupportedConsumerFields...) {
		m[f] = true
	}
	return m
}()

// unsupported returns the fields of a JSON object, among names, whose
// values are not empty (null, false, 0, "", [] or {}), sorted.
func unsupported(obj []byte, names []string) []string {
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return nil // the caller reports the JSON error
	}
	var out []string
	for _, n := range names {
		if v, ok := m[n]; ok && !emptyJSON(v) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

func emptyJSON(v json.RawMessage) bool {
	switch string(bytes.TrimSpace(v)) {
	case "null", "false", "0", `""`, "[]", "{}", `"0001-01-01T00:00:00Z"`:
		return true
	}
	return false
}

// unsupportedStream checks a STREAM.CREATE or UPDATE body.
func unsupportedStream(data []byte) *APIError {
	if f := unsupported(data, unsupportedStreamFields); len(f) > 0 {
		return errStreamConfig(fmt.Errorf("not supported by Skiff: %v", f))
	}
	return nil
}

// unsupportedConsumer checks a CONSUMER.CREATE body, whose configuration
// is under "config".
func unsupportedConsumer(data []byte) *APIError {
	var req struct {
		Config json.RawMessage `json:"config"`
	}
	if json.Unmarshal(data, &req) != nil || req.Config == nil {
		return nil
	}
	if f := unsupported(req.Config, unsupportedConsumerFields); len(f) > 0 {
		return errConsumerCreate(fmt.Errorf("not supported by Skiff: %v", f))
	}
	var pp struct {
		Policy string `json:"priority_policy"`
	}
	if json.Unmarshal(req.Config, &pp) == nil && pp.Policy != "" && pp.Policy != "none" {
		return errConsumerCreate(fmt.Errorf("not supported by Skiff: priority_policy %q", pp.Policy))
	}
	return nil
}
