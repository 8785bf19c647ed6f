package jetstream

import (
	"fmt"
	"sort"
)

// A durable consumer whose state cannot be read at start (its snapshot is
// corrupt, its metadata unreadable) must not keep the whole broker down:
// the consumer is marked failed and left on disk as it is, for an operator
// to look at, and everything else serves. CONSUMER.INFO of it answers
// 404 10014 with the reason; creating one of the same name is refused
// until its directory is removed (CONSUMER.DELETE removes it); /jsz lists
// it and /metrics counts it (skiff_jetstream_consumers_failed).

// failConsumer records a consumer that could not be recovered.
func (st *stream) failConsumer(name string, err error) {
	st.js.log.Error("consumer not recovered: its state is unreadable; it is left on disk and not served",
		"stream", st.name, "consumer", name, "dir", st.consumerDir(name), "err", err)
	st.mu.Lock()
	if st.mu.failed == nil {
		st.mu.failed = map[string]error{}
	}
	st.mu.failed[name] = err
	st.mu.Unlock()
}

// failure returns why a consumer failed at start, or nil.
func (st *stream) failure(name string) error {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return st.mu.failed[name]
}

// failedConsumers lists the failed consumers by name.
func (st *stream) failedConsumers() []string {
	st.mu.RLock()
	defer st.mu.RUnlock()
	names := make([]string, 0, len(st.mu.failed))
	for n := range st.mu.failed {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// forgetFailed removes a failed consumer's record (its directory is being
// removed) and reports whether there was one.
func (st *stream) forgetFailed(name string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	_, ok := st.mu.failed[name]
	delete(st.mu.failed, name)
	return ok
}

func errConsumerFailed(err error) *APIError {
	return apiErr(404, 10014, fmt.Sprintf("consumer not found: its state could not be recovered (%v); delete it to start over", err))
}
