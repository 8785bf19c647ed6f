package jetstream

import (
	"sync/atomic"
	"time"
)

// Server-wide storage quotas (Options.MaxMemory, Options.MaxStore), as
// nats-server's max_memory_store and max_file_store:
//
//   - A stream reserves its max_bytes (1 byte when it has none) at create
//     and update; past the quota of its storage type the request is
//     refused (10028 memory, 10047 file), as the reference server.
//   - A publish to a stream whose storage type holds its quota already is
//     refused with 503 insufficient resources (10023).
//
// What streams hold is counted cheaply: every append adds its size at
// once, and quotaInterval recounts from the streams (which takes in what
// limits, purges, deletes and expiries removed). So the count is never
// below what is stored, by more than what arrives between two recounts
// and the bound holds; space freed is seen at the next recount.

// quotaInterval is how often usage is recounted.
const quotaInterval = time.Second

// quota is what streams of one storage type hold, as counted.
type quota struct {
	used atomic.Int64
}

// quotaFor returns the quota counter and bound of a storage type.
func (js *JetStream) quotaFor(t StorageType) (*quota, int64) {
	if t == MemoryStorage {
		return &js.memQuota, js.opts.MaxMemory
	}
	return &js.fileQuota, js.opts.MaxStore
}

// quotaReached reports whether streams of type t hold their quota.
func (js *JetStream) quotaReached(t StorageType) bool {
	q, limit := js.quotaFor(t)
	return limit >= 0 && q.used.Load() >= limit
}

// stored counts a message just appended to a stream of type t.
func (js *JetStream) stored(t StorageType, size int) {
	q, _ := js.quotaFor(t)
	q.used.Add(int64(size))
}

// recountQuotas sets the counters to what streams hold.
func (js *JetStream) recountQuotas() {
	u := js.usage()
	js.memQuota.used.Store(int64(u.memory))
	js.fileQuota.used.Store(int64(u.storage))
}

// quotaLoop recounts usage until Close.
func (js *JetStream) quotaLoop() {
	defer js.wg.Done()
	t := time.NewTicker(quotaInterval)
	defer t.Stop()
	for {
		select {
		case <-js.stop:
			return
		case <-t.C:
			js.recountQuotas()
		}
	}
}

// reservedLocked sums the reservations of the streams of type t but
// skip (a stream being updated). js.mu held.
func (js *JetStream) reservedLocked(t StorageType, skip string) int64 {
	var sum int64
	for name, st := range js.mu.streams {
		if cfg := st.config(); name != skip && cfg.Storage == t {
			sum += reservation(cfg.MaxBytes)
		}
	}
	return sum
}

// reservation is what a stream's max_bytes reserves.
func reservation(maxBytes int64) int64 {
	if maxBytes <= 0 {
		return 1 // as the reference server: room for something
	}
	return maxBytes
}

// checkReserveLocked refuses a stream configuration whose reservation does
// not fit the quota of its storage type beside the other streams'. js.mu
// held.
func (js *JetStream) checkReserveLocked(cfg *StreamConfig) *APIError {
	_, limit := js.quotaFor(cfg.Storage)
	if limit < 0 {
		return nil
	}
	reserved := js.reservedLocked(cfg.Storage, cfg.Name)
	if add := reservation(cfg.MaxBytes); reserved > limit || add > limit-reserved {
		if cfg.Storage == MemoryStorage {
			return apiErr(500, 10028, "insufficient memory resources available")
		}
		return apiErr(500, 10047, "insufficient storage resources available")
	}
	return nil
}

// errInsufficientResources refuses a publish while the quota is reached.
func errInsufficientResources() *APIError { return apiErr(503, 10023, "insufficient resources") }
