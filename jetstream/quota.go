package jetstream

import (
	"sync/atomic"
	"time"
)

// Storage quotas. Server-wide (Options.MaxMemory, Options.MaxStore), as
// nats-server's max_memory_store and max_file_store, and per account (its
// max_memory and max_store), as nats-server's account limits:
//
//   - A stream reserves its max_bytes (1 byte when it has none) at create
//     and update; past the quota of its storage type the request is
//     refused (10028 memory, 10047 file), the account's quota checked
//     first, as the reference server.
//   - A publish to a stream whose storage type holds the server's quota
//     already is refused with 503 insufficient resources (10023); one that
//     would take its account past the account's quota with 400 resource
//     limits exceeded for account (10002).
//
// What streams hold is counted cheaply: every append adds its size at
// once to the server's count, and, in an account with a quota of that
// storage, what it changed the stream's bytes by (less what its limits
// removed) to the account's; quotaInterval recounts from the streams
// (which takes in what purges, deletes and expiries removed). So the
// count is never below what is stored, by more than what arrives between
// two recounts and the bound holds; space freed is seen at the next
// recount.

// quotaInterval is how often usage is recounted.
const quotaInterval = time.Second

// quota is what streams of one storage type hold, as counted.
type quota struct {
	used atomic.Int64
}

// quotaFor returns the server's quota counter and bound of a storage type.
func (js *JetStream) quotaFor(t StorageType) (*quota, int64) {
	if t == MemoryStorage {
		return &js.memQuota, js.opts.MaxMemory
	}
	return &js.fileQuota, js.opts.MaxStore
}

// quotaFor returns the account's quota counter and bound of a storage
// type (-1: none).
func (ja *jsAccount) quotaFor(t StorageType) (*quota, int64) {
	if t == MemoryStorage {
		return &ja.memQuota, ja.lim().maxMemory
	}
	return &ja.fileQuota, ja.lim().maxStore
}

// quotaReached reports whether streams of type t hold the server's quota.
func (js *JetStream) quotaReached(t StorageType) bool {
	q, limit := js.quotaFor(t)
	return limit >= 0 && q.used.Load() >= limit
}

// wouldExceed reports whether a message of size bytes would take the
// account's streams of type t past its quota, as nats-server's
// wouldExceedLimits.
func (ja *jsAccount) wouldExceed(t StorageType, size int) bool {
	q, limit := ja.quotaFor(t)
	return limit >= 0 && q.used.Load()+ja.peerUsed(t)+int64(size) > limit
}

// quota returns the account's counter of streams of type t, or nil if
// the account has no quota for them.
func (ja *jsAccount) quota(t StorageType) *quota {
	if q, limit := ja.quotaFor(t); limit >= 0 {
		return q
	}
	return nil
}

// stored counts a message of size bytes just appended to a stream of
// type t, against the server's quota.
func (js *JetStream) stored(t StorageType, size int) {
	q, _ := js.quotaFor(t)
	q.used.Add(int64(size))
}

// recountQuotas sets the counters, the accounts' and the server's, to
// what streams hold, in one pass.
func (js *JetStream) recountQuotas() {
	var mem, file int64
	for _, ja := range js.sortedAccounts() {
		u := ja.usage()
		ja.memQuota.used.Store(int64(u.memory))
		ja.fileQuota.used.Store(int64(u.storage))
		mem += int64(u.memory)
		file += int64(u.storage)
	}
	js.memQuota.used.Store(mem)
	js.fileQuota.used.Store(file)
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
			js.reportUsage()
			js.checkpointReplicas()
		}
	}
}

// reservation is what a stream's max_bytes reserves of the server's
// quota.
func reservation(maxBytes int64) int64 {
	if maxBytes <= 0 {
		return 1 // as the reference server: room for something
	}
	return maxBytes
}

// reservedLocked sums the server-wide reservations of the account's
// streams (and those being created) of type t but skip (a stream being
// updated). ja.mu held, for reading at least.
func (ja *jsAccount) reservedLocked(t StorageType, skip string) int64 {
	var sum int64
	for name, st := range ja.mu.streams {
		if cfg := st.config(); name != skip && cfg.Storage == t {
			sum += reservation(cfg.MaxBytes)
		}
	}
	for name, cfg := range ja.mu.creating {
		if name != skip && cfg.Storage == t {
			sum += reservation(cfg.MaxBytes)
		}
	}
	return sum
}

// accountReservedLocked sums what the account's streams of type t but
// skip reserve of the account's quota: their max_bytes, those without
// counting nothing, as nats-server's tieredReservation. ja.mu held, for
// reading at least.
func (ja *jsAccount) accountReservedLocked(t StorageType, skip string) int64 {
	var sum int64
	add := func(name string, cfg StreamConfig) {
		if name != skip && cfg.Storage == t && cfg.MaxBytes > 0 {
			sum += cfg.MaxBytes
		}
	}
	for name, st := range ja.mu.streams {
		add(name, st.config())
	}
	for name, cfg := range ja.mu.creating {
		add(name, cfg)
	}
	return sum
}

// eachAccountLocked calls f with every account, ja among them, with its
// mu held for reading (ja's is held by the caller). js.reserveMu held: no
// one else takes two accounts' locks.
func (js *JetStream) eachAccountLocked(ja *jsAccount, f func(o *jsAccount)) {
	for _, o := range js.sortedAccounts() {
		if o == ja {
			f(o)
			continue
		}
		o.mu.RLock()
		f(o)
		o.mu.RUnlock()
	}
}

// numStreamsLocked counts the streams of every account, and those being
// created, against Options.MaxStreams. js.reserveMu and ja.mu held.
func (js *JetStream) numStreamsLocked(ja *jsAccount) int {
	n := 0
	js.eachAccountLocked(ja, func(o *jsAccount) { n += len(o.mu.streams) + len(o.mu.creating) })
	return n
}

// checkReserveLocked refuses a stream configuration past the account's
// limits or the server's quotas: a max_consumers above the account's
// (10026), then a reservation that does not fit the account's quota of
// its storage type, then one that does not fit the server's beside every
// other stream's (10028 memory, 10047 file), in nats-server's order.
// js.reserveMu and ja.mu held.
func (ja *jsAccount) checkReserveLocked(cfg *StreamConfig) *APIError {
	if l := ja.lim().maxConsumers; l != noLimit && cfg.MaxConsumers > l {
		return errMaxConsumers()
	}
	add := reservation(cfg.MaxBytes)
	if _, limit := ja.quotaFor(cfg.Storage); limit >= 0 {
		if reserved := ja.accountReservedLocked(cfg.Storage, cfg.Name); reserved > limit || add > limit-reserved {
			return errInsufficient(cfg.Storage)
		}
	}
	js := ja.js
	_, limit := js.quotaFor(cfg.Storage)
	if limit < 0 {
		return nil
	}
	var reserved int64
	js.eachAccountLocked(ja, func(o *jsAccount) {
		skip := ""
		if o == ja {
			skip = cfg.Name
		}
		reserved += o.reservedLocked(cfg.Storage, skip)
	})
	if reserved > limit || add > limit-reserved {
		return errInsufficient(cfg.Storage)
	}
	return nil
}

// errInsufficient refuses a stream whose reservation does not fit a quota
// of its storage type.
func errInsufficient(t StorageType) *APIError {
	if t == MemoryStorage {
		return apiErr(500, 10028, "insufficient memory resources available")
	}
	return apiErr(500, 10047, "insufficient storage resources available")
}

// checkMaxBytes refuses a stream configuration the account's max_bytes
// limits do not allow: none when the account requires one (10113), or one
// above the account's per-stream bound (10122).
func (ja *jsAccount) checkMaxBytes(cfg *StreamConfig) *APIError {
	limit := ja.lim().storeMaxStreamBytes
	if cfg.Storage == MemoryStorage {
		limit = ja.lim().memMaxStreamBytes
	}
	switch {
	case ja.lim().maxBytesRequired && cfg.MaxBytes <= 0:
		return apiErr(400, 10113, "account requires a stream config to have max bytes set")
	case limit > 0 && cfg.MaxBytes > limit:
		return apiErr(400, 10122, "stream max bytes exceeds account limit max stream bytes")
	}
	return nil
}

// errInsufficientResources refuses a publish while the server's quota is
// reached.
func errInsufficientResources() *APIError { return apiErr(503, 10023, "insufficient resources") }

// errAccountResources refuses a publish past the account's quota.
func errAccountResources() *APIError {
	return apiErr(400, 10002, "resource limits exceeded for account")
}
