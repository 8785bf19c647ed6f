package jetstream

import (
	"fmt"
	"os"
	"path/filepath"
)

// A stream that cannot be opened at start (its meta.json does not parse,
// its store refuses to open) must not keep the whole broker down, as a
// failed consumer does not (failed.go): the stream is marked failed and
// left on disk as it is, for an operator to look at, and every other
// stream serves. STREAM.INFO (and every other request naming it) answers
// 404 10059 with the reason; creating one of the same name is refused
// until STREAM.DELETE removes its directory; /jsz lists it
// (skiff_failed_streams) and /metrics counts it
// (skiff_jetstream_streams_failed). Its subjects are not captured.

// failStream records a stream that could not be recovered. ja.mu need not
// be held: recover runs before anything else can see ja.
func (ja *jsAccount) failStream(name string, err error) {
	ja.js.log.Error("stream not recovered: it is left on disk and not served", "account", ja.name, "stream", name,
		"dir", filepath.Join(ja.dir, name), "err", err)
	ja.mu.Lock()
	defer ja.mu.Unlock()
	if ja.mu.failed == nil {
		ja.mu.failed = map[string]error{}
	}
	ja.mu.failed[name] = err
}

// streamFailure returns why a stream failed at start, or nil.
func (ja *jsAccount) streamFailure(name string) error {
	ja.mu.RLock()
	defer ja.mu.RUnlock()
	return ja.mu.failed[name]
}

// failedStreams returns the failed streams' reasons by name.
func (ja *jsAccount) failedStreams() map[string]string {
	ja.mu.RLock()
	defer ja.mu.RUnlock()
	if len(ja.mu.failed) == 0 {
		return nil
	}
	out := make(map[string]string, len(ja.mu.failed))
	for n, err := range ja.mu.failed {
		out[n] = err.Error()
	}
	return out
}

// deleteFailedStream removes a failed stream's directory and its record,
// and reports whether there was one.
func (ja *jsAccount) deleteFailedStream(name string) (bool, error) {
	ja.mu.Lock()
	defer ja.mu.Unlock()
	if _, ok := ja.mu.failed[name]; !ok {
		return false, nil
	}
	if err := os.RemoveAll(filepath.Join(ja.dir, name)); err != nil {
		return true, err
	}
	delete(ja.mu.failed, name)
	return true, nil
}

// errNoStream is the error for a request naming a stream that is not
// served: failed at start (with the reason), or not there.
func (ja *jsAccount) errNoStream(name string) *APIError {
	if err := ja.streamFailure(name); err != nil {
		return errStreamFailed(err)
	}
	return errStreamNotFound()
}

func errStreamFailed(err error) *APIError {
	return apiErr(404, 10059, fmt.Sprintf("stream not found: its files could not be recovered (%v); delete it to start over", err))
}

// errStreamFailedExists refuses to create a stream over a failed one's
// files.
func errStreamFailedExists(err error) *APIError {
	return apiErr(400, 10058, fmt.Sprintf("stream name already in use: its files could not be recovered (%v); delete it to start over", err))
}
