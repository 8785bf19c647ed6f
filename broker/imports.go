package broker

import (
	"strings"
	"time"

	"github.com/skiffmq/skiff/server"
)

// Exports and imports are read as nats-server's parseExportStreamOrService
// and parseImportStreamOrService read them, with their messages; what
// nats-server ignores without a word (a share on a stream, a prefix on a
// service, an entry with neither stream nor service) is refused here.
// server.New checks what spans accounts (an import covered by an export
// the importer may use, cycles, duplicates).

// exportEntry is one export while it is read.
type exportEntry struct {
	server.Export
	stream, service, response, threshold value // as written, for errors
}

func exports(v value) ([]server.Export, error) {
	items, err := v.list(false)
	if err != nil {
		return nil, v.errorf(ErrInvalidValue, "Exports should be an array, got %s", describe(v.v))
	}
	var out []server.Export
	for _, it := range items {
		if _, ok := it.v.(map[string]any); !ok {
			return nil, it.errorf(ErrInvalidValue, "Export Items should be a map with type entry, got %s", describe(it.v))
		}
		var e exportEntry
		if err := exportKeys.apply(&e, it); err != nil {
			return nil, err
		}
		switch {
		case e.stream.v != nil && e.service.v != nil:
			return nil, e.service.errorf(ErrInvalidValue, "Detected service %q but already saw a stream", e.Subject)
		case e.stream.v == nil && e.service.v == nil:
			return nil, it.errorf(ErrInvalidValue, "an export needs a stream or a service subject")
		case e.stream.v != nil && e.response.v != nil:
			return nil, e.response.errorf(ErrInvalidValue, "Detected response directive on non-service")
		case e.stream.v != nil && e.threshold.v != nil:
			return nil, e.threshold.errorf(ErrInvalidValue, "Detected response directive on non-service")
		}
		out = append(out, e.Export)
	}
	return out, nil
}

var exportKeys = func() keys[*exportEntry] {
	k := newKeys[*exportEntry]()
	k.on(func(e *exportEntry, v value) (err error) {
		e.Subject, err = exportSubject(v, "stream")
		e.stream = v
		return
	}, "stream")
	k.on(func(e *exportEntry, v value) (err error) {
		e.Subject, err = exportSubject(v, "service")
		e.Service, e.service = true, v
		return
	}, "service")
	k.on(func(e *exportEntry, v value) error {
		s, err := v.str()
		if err != nil {
			return v.errorf(ErrInvalidValue, "Expected response type to be string, got %s", describe(v.v))
		}
		switch strings.ToLower(s) {
		case "single", "singleton":
			e.Response = server.Singleton
		case "stream":
			e.Response = server.Streamed
		case "chunk", "chunked":
			e.Response = server.Chunked
		default:
			return v.errorf(ErrInvalidValue, "Unknown response type: %q", s)
		}
		e.response = v
		return nil
	}, "response", "response_type")
	k.on(func(e *exportEntry, v value) error {
		s, ok := v.v.(string)
		if !ok {
			return v.errorf(ErrInvalidValue, "Expected response threshold to be a parseable time duration, got %s", describe(v.v))
		}
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return v.errorf(ErrInvalidValue, "Expected response threshold to be a parseable time duration, got %q", s)
		}
		e.Threshold, e.threshold = d, v
		return nil
	}, "threshold", "response_threshold", "response_max_time", "response_time")
	k.on(func(e *exportEntry, v value) (err error) { e.Accounts, err = v.strings(); return }, "accounts")
	k.on(func(e *exportEntry, v value) (err error) {
		e.TokenPosition, err = v.intIn(1, 1<<16)
		return
	}, "account_token_position")
	k.refuse(whyLatency, "latency")
	k.refuse(whyAccountTrace, "allow_trace")
	return k
}()

func exportSubject(v value, kind string) (string, error) {
	s, ok := v.v.(string)
	if !ok {
		return "", v.errorf(ErrInvalidValue, "Expected %s name to be string, got %s", kind, describe(v.v))
	}
	return s, nil
}

// importEntry is one import while it is read.
type importEntry struct {
	server.Import
	stream, service, prefix, to, share value
}

func imports(v value) ([]server.Import, error) {
	items, err := v.list(false)
	if err != nil {
		return nil, v.errorf(ErrInvalidValue, "Imports should be an array, got %s", describe(v.v))
	}
	var out []server.Import
	for _, it := range items {
		if _, ok := it.v.(map[string]any); !ok {
			return nil, it.errorf(ErrInvalidValue, "Import Items should be a map with type entry, got %s", describe(it.v))
		}
		var im importEntry
		if err := importKeys.apply(&im, it); err != nil {
			return nil, err
		}
		switch {
		case im.stream.v != nil && im.service.v != nil:
			return nil, im.service.errorf(ErrInvalidValue, "Detected service but already saw a stream")
		case im.stream.v == nil && im.service.v == nil:
			return nil, it.errorf(ErrInvalidValue, "an import needs a stream or a service")
		case im.prefix.v != nil && im.to.v != nil:
			return nil, im.to.errorf(ErrInvalidValue, "Stream import can not have a 'prefix' and a 'to' property")
		case im.service.v != nil && im.prefix.v != nil:
			return nil, im.prefix.errorf(ErrInvalidValue, "prefix is for stream imports; a service import maps its subject with to")
		case im.stream.v != nil && im.share.v != nil:
			return nil, im.share.errorf(ErrInvalidValue, "share is for service imports")
		}
		out = append(out, im.Import)
	}
	return out, nil
}

var importKeys = func() keys[*importEntry] {
	k := newKeys[*importEntry]()
	k.on(func(im *importEntry, v value) error { im.stream = v; return importSource(&im.Import, v, "Stream") }, "stream")
	k.on(func(im *importEntry, v value) error {
		im.service, im.Service = v, true
		return importSource(&im.Import, v, "Service")
	}, "service")
	k.on(func(im *importEntry, v value) (err error) { im.Prefix, err = v.str(); im.prefix = v; return }, "prefix")
	k.on(func(im *importEntry, v value) (err error) { im.To, err = v.str(); im.to = v; return }, "to")
	k.on(func(im *importEntry, v value) (err error) { im.Share, err = v.boolean(); im.share = v; return }, "share")
	k.refuse(whyAccountTrace, "allow_trace")
	return k
}()

// importSource reads {account: A, subject: S}.
func importSource(im *server.Import, v value, kind string) error {
	if _, ok := v.v.(map[string]any); !ok {
		return v.errorf(ErrInvalidValue, "%s entry should be an account map, got %s", kind, describe(v.v))
	}
	if err := importSourceKeys.apply(im, v); err != nil {
		return err
	}
	if im.Account == "" || im.Subject == "" {
		return v.errorf(ErrInvalidValue, "Expect an account name and a subject")
	}
	return nil
}

var importSourceKeys = func() keys[*server.Import] {
	k := newKeys[*server.Import]()
	k.on(func(im *server.Import, v value) (err error) { im.Account, err = v.str(); return }, "account")
	k.on(func(im *server.Import, v value) (err error) { im.Subject, err = v.str(); return }, "subject")
	return k
}()
