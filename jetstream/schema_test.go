package jetstream_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	jsmschemas "github.com/nats-io/jsm.go/schemas"
	"github.com/santhosh-tekuri/jsonschema/v5"
	"github.com/stretchr/testify/require"
)

// Every JetStream API answer Skiff gives must validate against the JSON
// schema the NATS maintainers publish for it (github.com/nats-io/jsm.go's
// schemas/jetstream/api/v1), whose configurations allow no additional
// properties: strict clients (the newest Python packages) decode this way
// and refuse any field the API does not define. The differential tests
// check every answer of Skiff's they see (target.api and target.pub).

// schemas compiles the published schemas once, by type.
var schemas struct {
	sync.Mutex
	byType map[string]*jsonschema.Schema
}

// schemaFor returns the compiled schema of a response type such as
// io.nats.jetstream.api.v1.stream_create_response.
func schemaFor(t *testing.T, typ string) *jsonschema.Schema {
	t.Helper()
	schemas.Lock()
	defer schemas.Unlock()
	if s, ok := schemas.byType[typ]; ok {
		return s
	}
	path := strings.ReplaceAll(strings.TrimPrefix(typ, "io.nats."), ".", "/") + ".json"
	raw, err := jsmschemas.Load(path)
	require.NoError(t, err, "no published schema for %s", typ)
	c := jsonschema.NewCompiler()
	require.NoError(t, c.AddResource(path, bytes.NewReader(raw)))
	s, err := c.Compile(path)
	require.NoError(t, err, "schema %s", path)
	if schemas.byType == nil {
		schemas.byType = map[string]*jsonschema.Schema{}
	}
	schemas.byType[typ] = s
	return s
}

// validateAnswer checks a JetStream API answer against the schema its
// "type" names, or against typ when the answer has none (a PubAck), and
// for fields no schema defines. The reference server's error answers are
// not checked: they carry its response type's zero fields besides the
// error.
func validateAnswer(t *testing.T, data []byte, typ string, reference bool) error {
	t.Helper()
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if obj, ok := v.(map[string]any); ok {
		if named, ok := obj["type"].(string); ok {
			typ = named
		}
		if e, ok := obj["error"]; ok && obj["type"] != nil {
			if reference {
				return nil
			}
			// Some schemas' success branch requires nothing (the pause
			// response's), so an error answer matches both branches of
			// their oneOf, the reference server's too: check the error
			// branch's shape here, type and error and nothing else.
			return errorShape(obj, e, data)
		}
	}
	if typ == "" {
		return nil // a message read (DIRECT.GET), not a typed answer
	}
	if err := schemaFor(t, typ).Validate(v); err != nil {
		return fmt.Errorf("%s: %w\n%s", typ, err, data)
	}
	var extra []string
	for _, k := range extraKeys(rawSchema(t, typ), v) {
		if !referenceExtras[typ][k] {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		return fmt.Errorf("%s: fields the API does not define: %v\n%s", typ, extra, data)
	}
	return nil
}

// referenceExtras are fields nats-server 2.15 sends that the published
// schemas (jsm.go v0.4.1) do not define yet. The differential tests check
// nats-server's answers with the same closure, so every entry here is
// one the reference server was seen to send; Skiff sends them to be
// decoded as nats-server's answers are.
var referenceExtras = map[string]map[string]bool{
	// JetStreamAccountStats.ReservedMemory and ReservedStore (2.11).
	"io.nats.jetstream.api.v1.account_info_response": {"reserved_memory": true, "reserved_storage": true},
	// JSApiStreamCreateResponse.DidCreate (2.11).
	"io.nats.jetstream.api.v1.stream_create_response": {"did_create": true},
}

// The checker itself must catch what strict clients refuse.
func TestSchemaCatchesUnknownFields(t *testing.T) {
	good := `{"type":"io.nats.jetstream.api.v1.stream_delete_response","success":true}`
	require.NoError(t, validateAnswer(t, []byte(good), "", false))
	bad := `{"type":"io.nats.jetstream.api.v1.stream_info_response","config":{"name":"S","subjects":["s"],` +
		`"retention":"limits","max_consumers":-1,"max_msgs":-1,"max_bytes":-1,"max_age":0,"storage":"file",` +
		`"num_replicas":1,"sync":"always"},"created":"2026-01-01T00:00:00Z","state":{"messages":0,"bytes":0,` +
		`"first_seq":0,"last_seq":0,"consumer_count":0}, "ts":"2026-01-01T00:00:00Z"}`
	err := validateAnswer(t, []byte(bad), "", false)
	require.Error(t, err)
	require.Contains(t, err.Error(), "sync")
}

// errorShape checks an error answer: only "type" and "error", the error
// with an integer code (and optionally err_code and description).
func errorShape(obj map[string]any, e any, data []byte) error {
	for k := range obj {
		if k != "type" && k != "error" {
			return fmt.Errorf("an error answer with %q besides its error:\n%s", k, data)
		}
	}
	em, ok := e.(map[string]any)
	if !ok {
		return fmt.Errorf("error is not an object:\n%s", data)
	}
	if _, ok := em["code"].(float64); !ok {
		return fmt.Errorf("error without a code:\n%s", data)
	}
	for k := range em {
		if k != "code" && k != "err_code" && k != "description" {
			return fmt.Errorf("error with %q:\n%s", k, data)
		}
	}
	return nil
}
