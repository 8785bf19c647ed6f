package jetstream

import "github.com/skiffmq/skiff/store"

// TTLHeapLen returns how many expiries the named stream keeps (tests only).
func (js *JetStream) TTLHeapLen(name string) int {
	st := js.lookup(name)
	if st == nil {
		return -1
	}
	st.ttl.mu.Lock()
	defer st.ttl.mu.Unlock()
	return len(st.ttl.heap)
}

// HandleStats returns the counters of the streams' handle cache (tests
// only).
func (js *JetStream) HandleStats() store.HandleStats { return js.handles.Stats() }

// StreamWorkerOf returns the stream worker that answers the requests about
// the named stream (tests only).
func StreamWorkerOf(name string) uint32 { return nameHash(name) % streamWorkers }
