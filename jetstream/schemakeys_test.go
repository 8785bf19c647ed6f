package jetstream_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	jsmschemas "github.com/nats-io/jsm.go/schemas"
	"github.com/stretchr/testify/require"
)

// The published schemas forbid additional properties only in some objects
// (stream configurations and states, the PubAck); a consumer's
// configuration, every answer's top level and most nested objects are
// open. A strict client decodes every object into a type of its own, so an
// answer must carry no field the API does not define anywhere. extraKeys
// closes every object of a schema: a key is allowed at a place if some
// branch of the schema (allOf, anyOf, oneOf, or the object itself) names
// it there, or the schema gives that place a map (additionalProperties or
// patternProperties with a schema); a key some branch requires is defined
// too. Objects the schema says nothing about (no properties in any branch)
// are free-form.

// rawSchema returns the decoded schema of a type such as
// io.nats.jetstream.api.v1.stream_create_response.
func rawSchema(t *testing.T, typ string) any {
	t.Helper()
	path := strings.ReplaceAll(strings.TrimPrefix(typ, "io.nats."), ".", "/") + ".json"
	raw, err := jsmschemas.Load(path)
	require.NoError(t, err, "no published schema for %s", typ)
	var v any
	require.NoError(t, json.Unmarshal(raw, &v))
	return v
}

// extraKeys returns the paths of v's keys that no branch of schema names.
func extraKeys(schema, v any) []string {
	var extra []string
	walkKeys([]any{schema}, v, "", &extra)
	sort.Strings(extra)
	return extra
}

// branches flattens a schema node into itself and every schema its
// allOf, anyOf and oneOf hold, recursively.
func branches(nodes []any) []map[string]any {
	var out []map[string]any
	var add func(n any)
	add = func(n any) {
		m, ok := n.(map[string]any)
		if !ok {
			return
		}
		out = append(out, m)
		for _, k := range []string{"allOf", "anyOf", "oneOf"} {
			if list, ok := m[k].([]any); ok {
				for _, b := range list {
					add(b)
				}
			}
		}
	}
	for _, n := range nodes {
		add(n)
	}
	return out
}

func walkKeys(nodes []any, v any, path string, extra *[]string) {
	bs := branches(nodes)
	switch v := v.(type) {
	case map[string]any:
		props := map[string][]any{}
		var maps []any // schemas of map values
		var patterns []*regexp.Regexp
		var patternSchemas []any
		named := false
		for _, b := range bs {
			if p, ok := b["properties"].(map[string]any); ok {
				named = true
				for k, s := range p {
					props[k] = append(props[k], s)
				}
			}
			// A key a branch requires is defined even where the branch
			// forgets to describe it (stream_names_response's "streams").
			if req, ok := b["required"].([]any); ok {
				for _, k := range req {
					if k, ok := k.(string); ok {
						named = true
						props[k] = append(props[k], map[string]any{})
					}
				}
			}
			if ap, ok := b["additionalProperties"].(map[string]any); ok {
				maps = append(maps, ap)
			} else if ap, ok := b["additionalProperties"].(bool); ok && ap {
				maps = append(maps, map[string]any{})
			}
			if pp, ok := b["patternProperties"].(map[string]any); ok {
				for re, s := range pp {
					patterns = append(patterns, regexp.MustCompile(re))
					patternSchemas = append(patternSchemas, s)
				}
			}
		}
		if !named && len(maps) == 0 && len(patterns) == 0 {
			return // free-form
		}
		for k, child := range v {
			p := path + "." + k
			if s, ok := props[k]; ok {
				walkKeys(s, child, p, extra)
				continue
			}
			var sub []any
			for i, re := range patterns {
				if re.MatchString(k) {
					sub = append(sub, patternSchemas[i])
				}
			}
			sub = append(sub, maps...)
			if len(sub) == 0 {
				*extra = append(*extra, strings.TrimPrefix(p, "."))
				continue
			}
			walkKeys(sub, child, p, extra)
		}
	case []any:
		var items []any
		for _, b := range bs {
			if it, ok := b["items"]; ok {
				items = append(items, it)
			}
		}
		for i, e := range v {
			walkKeys(items, e, fmt.Sprintf("%s[%d]", path, i), extra)
		}
	}
}

// The closure catches a field in an object the published schema leaves
// open, and accepts what it names, maps (metadata) included.
func TestSchemaKeysClosed(t *testing.T) {
	schema := rawSchema(t, "io.nats.jetstream.api.v1.consumer_info_response")
	good := `{"type":"io.nats.jetstream.api.v1.consumer_info_response","stream_name":"S","name":"C",
		"config":{"ack_policy":"explicit","deliver_policy":"all","metadata":{"_skiff.x":"y"}},
		"delivered":{"consumer_seq":0,"stream_seq":0},"ack_floor":{"consumer_seq":0,"stream_seq":0}}`
	var v any
	require.NoError(t, json.Unmarshal([]byte(good), &v))
	require.Empty(t, extraKeys(schema, v))

	bad := strings.Replace(good, `"ack_policy"`, `"skiff_extension":1,"ack_policy"`, 1)
	bad = strings.Replace(bad, `"stream_name"`, `"top_extra":true,"stream_name"`, 1)
	require.NoError(t, json.Unmarshal([]byte(bad), &v))
	require.Equal(t, []string{"config.skiff_extension", "top_extra"}, extraKeys(schema, v))
}
