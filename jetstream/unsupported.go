package jetstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
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

// passStrict are request fields Skiff's types do not have that a strict
// decode lets through: the reference server's, for the checks here to
// refuse them by name when they are set. Skiff's top-level sync and
// sync_interval of old (see syncmeta.go) are not among them: the API does
// not define them, so only a lenient server reads them in a request.
var passStrict = func() map[string]bool {
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
	f := unsupported(data, unsupportedStreamFields)
	if i := slices.Index(f, "persist_mode"); i >= 0 && persistModeDefault(data) {
		f = slices.Delete(f, i, i+1)
	}
	if len(f) > 0 {
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

// persistModeDefault reports whether a stream configuration's persist_mode
// is "default" (nats-server 2.12: written before the acknowledgement,
// which every Skiff sync policy does); "async" is refused.
func persistModeDefault(data []byte) bool {
	var v struct {
		Mode string `json:"persist_mode"`
	}
	return json.Unmarshal(data, &v) == nil && v.Mode == "default"
}
