package jetstream

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/skiffmq/skiff/server"
)

// JetStream lives in accounts, as in nats-server: each JetStream-enabled
// account has its own streams (the same name in two accounts is two
// streams), its own subject index (two accounts may capture the same
// subjects), its own limits, API counters and advisories, and its API,
// acknowledgement and flow control subscriptions are made in it, so that
// only its clients reach them and answers go back into it. Nothing is
// shared across accounts but the server-wide bounds (Options), the API
// workers, the file handle cache and the store directory's lock.
//
// Which accounts have JetStream (Options have no say):
//
//   - A server without configured accounts (the system account aside):
//     the global account, "$G".
//   - Otherwise: every account whose configuration gives it JetStream
//     (server.AccountConfig.JetStream); "$G" has none, as in nats-server.
//   - In operator mode: every account registered at start whose JWT has
//     JetStream limits (server.Account.JetStreamLimits); an account whose
//     limits do not fit in the server's beside those enabled before it
//     (by public key) is logged and has none, as nats-server logs it.
//   - The system account never has it.
//
// An account without JetStream answers every API request with 10039
// JetStream not enabled for account (503), as nats-server does.

// jsAccount is JetStream in one account.
type jsAccount struct {
	js   *JetStream
	acc  *server.Account
	name string
	dir  string // StoreDir/accounts/<name>/streams
	// limv are the account's limits, as configured: replaced whole when
	// its JWT is updated (accountUpdated).
	limv atomic.Pointer[limits]
	// subs are its API, acknowledgement and flow control subscriptions.
	subs []*server.InternalSub

	mu struct {
		sync.RWMutex
		streams map[string]*stream
		// creating holds the configurations of streams being created:
		// counted against the stream bounds and reservations, their
		// subjects already in subjects.
		creating map[string]StreamConfig
		// subjects indexes every stream's subjects (and those of the
		// streams being created), for the overlap check.
		subjects *subjectIndex
		// failed are streams that could not be opened at start: kept on
		// disk, reported, not served (failedstream.go).
		failed map[string]error
	}
	consumers atomic.Int64 // over the account's streams
	// memQuota and fileQuota count what the account's streams hold (see
	// quota.go).
	memQuota, fileQuota quota
	// peerMem and peerFile are what the account's streams hold on the
	// other servers of a cluster, as they last reported (cluster_usage.go).
	peerMem, peerFile atomic.Int64
	apiTotal, apiErrs atomic.Uint64
	adv               advisories
}

// limits are an account's JetStream limits in force: -1 (noLimit) where
// there is none of the account's own.
type limits struct {
	maxMemory, maxStore                    int64
	maxStreams, maxConsumers, maxAckPend   int
	memMaxStreamBytes, storeMaxStreamBytes int64
	maxBytesRequired                       bool
}

const noLimit = -1

// unlimited are the limits of an account without limits of its own.
var unlimited = limits{noLimit, noLimit, noLimit, noLimit, noLimit, noLimit, noLimit, false}

// limitsOf turns an account's configured limits into limits in force:
// zero, as in the configuration, is no limit.
func limitsOf(l server.JetStreamLimits) limits {
	i64 := func(n int64) int64 {
		if n <= 0 {
			return noLimit
		}
		return n
	}
	i := func(n int) int {
		if n <= 0 {
			return noLimit
		}
		return n
	}
	lim := limits{
		maxMemory: i64(l.MaxMemory), maxStore: i64(l.MaxStore),
		maxStreams: i(l.MaxStreams), maxConsumers: i(l.MaxConsumers), maxAckPend: i(l.MaxAckPending),
		memMaxStreamBytes: i64(l.MemoryMaxStreamBytes), storeMaxStreamBytes: i64(l.StoreMaxStreamBytes),
		maxBytesRequired: l.MaxBytesRequired,
	}
	if l.NoMemory {
		lim.maxMemory = 0
	}
	if l.NoStore {
		lim.maxStore = 0
	}
	return lim
}

// enabledAccounts returns the accounts of s that have JetStream, with
// their limits, by the rules above. The system account never has it.
func enabledAccounts(s *server.Server) map[*server.Account]limits {
	all := tenants(s)
	out := map[*server.Account]limits{}
	if len(all) == 1 && !s.OperatorMode() {
		out[s.GlobalAccount()] = unlimited
		return out
	}
	for _, a := range all {
		if l, ok := a.JetStreamLimits(); ok {
			out[a] = limitsOf(l)
		}
	}
	return out
}

// tenants returns the accounts of s but the system account: "$G" alone
// when no accounts are configured.
func tenants(s *server.Server) []*server.Account {
	all := s.Accounts()
	if sys := s.SystemAccount(); sys != nil {
		all = slices.DeleteFunc(all, func(a *server.Account) bool { return a == sys })
	}
	return all
}

// newAccount makes the JetStream of acc; enable recovers and subscribes
// it.
func (js *JetStream) newAccount(acc *server.Account, lim limits) *jsAccount {
	ja := &jsAccount{js: js, acc: acc, name: acc.Name(),
		dir: filepath.Join(js.opts.StoreDir, accountsDir, acc.Name(), streamsDir)}
	ja.limv.Store(&lim)
	ja.mu.streams = map[string]*stream{}
	ja.mu.creating = map[string]StreamConfig{}
	ja.mu.subjects = newSubjectIndex()
	return ja
}

// enable recovers the account's streams and subscribes its API,
// acknowledgement and flow control subjects, in the account.
func (ja *jsAccount) enable() error {
	if err := os.MkdirAll(ja.dir, 0o755); err != nil {
		return fmt.Errorf("%w: account %s: %v", ErrInvalidOptions, ja.name, err)
	}
	if err := ja.recover(); err != nil {
		return fmt.Errorf("account %s: %w", ja.name, err)
	}
	is, err := ja.js.subscribeAPI(ja.acc, ja.handleAPI)
	if err != nil {
		return err
	}
	ja.subs = append(ja.subs, is)
	for _, sub := range []struct {
		pattern string
		h       server.InternalHandler
	}{
		{"$JS.ACK.>", ja.handleAck},
		{"$JS.FC.>", ja.handleFlowControl},
	} {
		is, err := ja.acc.SubscribeInternal(sub.pattern, "", sub.h)
		if err != nil {
			return err
		}
		ja.subs = append(ja.subs, is)
	}
	return nil
}

// enableAccounts gives JetStream to the accounts that have it, and the
// answer 10039 to the API of those that do not.
func (js *JetStream) enableAccounts() error {
	enabled := enabledAccounts(js.srv)
	folded := map[string]string{}
	for a := range enabled {
		// Stores on macOS and Windows fold case: two accounts would share
		// one directory.
		f := strings.ToLower(a.Name())
		if other, ok := folded[f]; ok {
			return fmt.Errorf("%w: accounts %q and %q both have JetStream and differ only in case: their store directories would be one",
				ErrInvalidOptions, other, a.Name())
		}
		folded[f] = a.Name()
	}
	if js.srv.OperatorMode() {
		js.fitAccounts(enabled)
	} else if err := js.sufficientResources(enabled); err != nil {
		return err
	}
	for _, a := range js.srv.Accounts() {
		lim, ok := enabled[a]
		if !ok {
			if a == js.srv.SystemAccount() {
				continue
			}
			if err := js.subscribeNotEnabled(a); err != nil {
				return err
			}
			continue
		}
		ja := js.newAccount(a, lim)
		js.mu.Lock()
		js.mu.accounts[ja.name] = ja
		js.mu.Unlock()
		if err := ja.enable(); err != nil {
			return err
		}
	}
	js.findOrphans()
	return nil
}

// sufficientResources refuses accounts whose quotas add up past the
// server's, as nats-server refuses to start JetStream then: the server
// could not give every account what its configuration promises.
func (js *JetStream) sufficientResources(enabled map[*server.Account]limits) error {
	var mem, store int64
	for _, l := range enabled {
		mem += max(l.maxMemory, 0)
		store += max(l.maxStore, 0)
	}
	if o := js.opts; o.MaxMemory >= 0 && mem > o.MaxMemory {
		return fmt.Errorf("%w: the accounts' JetStream max_memory add up to %d, past the server's max_memory_store %d: insufficient memory resources available",
			ErrInvalidOptions, mem, o.MaxMemory)
	}
	if o := js.opts; o.MaxStore >= 0 && store > o.MaxStore {
		return fmt.Errorf("%w: the accounts' JetStream max_store add up to %d, past the server's max_file_store %d: insufficient storage resources available",
			ErrInvalidOptions, store, o.MaxStore)
	}
	return nil
}

// fitAccounts leaves out of enabled, in operator mode, the accounts whose
// quotas do not fit in the server's beside those of the accounts before
// them (by name), and logs each: one account JWT asking for more than the
// server has does not stop the server or the other accounts, as in
// nats-server, where that account's JetStream fails to enable.
func (js *JetStream) fitAccounts(enabled map[*server.Account]limits) {
	var mem, store int64
	for _, a := range js.srv.Accounts() {
		l, ok := enabled[a]
		if !ok {
			continue
		}
		m, f := mem+max(l.maxMemory, 0), store+max(l.maxStore, 0)
		var why string
		switch o := js.opts; {
		case o.MaxMemory >= 0 && m > o.MaxMemory:
			why = fmt.Sprintf("its max memory %d does not fit in the server's max_memory_store %d beside the other accounts' %d", l.maxMemory, o.MaxMemory, mem)
		case o.MaxStore >= 0 && f > o.MaxStore:
			why = fmt.Sprintf("its max storage %d does not fit in the server's max_file_store %d beside the other accounts' %d", l.maxStore, o.MaxStore, store)
		}
		if why != "" {
			js.log.Error("account has no JetStream: insufficient resources", "account", a.Name(), "reason", why)
			delete(enabled, a)
			continue
		}
		mem, store = m, f
	}
}

// findOrphans logs and records the directories under StoreDir/accounts
// that no JetStream-enabled account owns: an account renamed or removed
// from the configuration, or without JetStream now. They are never
// deleted; /jsz lists them.
func (js *JetStream) findOrphans() {
	entries, err := os.ReadDir(filepath.Join(js.opts.StoreDir, accountsDir))
	if err != nil {
		js.log.Warn("cannot list the accounts' store directories", "err", err)
		return
	}
	var orphans []string
	for _, e := range entries {
		if !e.IsDir() || js.account(e.Name()) != nil {
			continue
		}
		// One without streams holds nothing to lose.
		if streams, _ := os.ReadDir(filepath.Join(js.opts.StoreDir, accountsDir, e.Name(), streamsDir)); len(streams) > 0 {
			orphans = append(orphans, e.Name())
		}
	}
	sort.Strings(orphans)
	for _, name := range orphans {
		js.log.Warn("store directory of an account without JetStream: its streams are kept on disk and not served",
			"account", name, "dir", filepath.Join(js.opts.StoreDir, accountsDir, name))
	}
	js.orphans = orphans
}

// account returns the JetStream of the named account, or nil.
func (js *JetStream) account(name string) *jsAccount {
	js.mu.RLock()
	defer js.mu.RUnlock()
	return js.mu.accounts[name]
}

// sortedAccounts returns the JetStream-enabled accounts by name.
func (js *JetStream) sortedAccounts() []*jsAccount {
	js.mu.RLock()
	out := make([]*jsAccount, 0, len(js.mu.accounts))
	for _, ja := range js.mu.accounts {
		out = append(out, ja)
	}
	js.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// handleNotEnabled answers the API in an account without JetStream, as
// nats-server's: 10039 in the response type of the API asked, and no
// responders where nats-server has no subscription (pull requests, direct
// gets, APIs it does not have), and no answer where it gives none.
func (js *JetStream) handleNotEnabled(m *server.Msg) {
	if m.Reply == "" || js.refuseInternal(m) {
		return
	}
	reply := strings.Clone(m.Reply)
	route, _ := routeAPI(strings.TrimPrefix(m.Subject, apiPrefix))
	if route != nil && route.kind == unanswered {
		return
	}
	if route == nil || route.kind == "" {
		m.AfterRead(func(p *server.Publisher) { status(p, reply, 503, "") })
		return
	}
	body := errorResponse(route.kind+"_response", errNotEnabledForAccount())
	m.AfterRead(func(p *server.Publisher) { p.Publish(reply, "", nil, body) })
}

func errNotEnabledForAccount() *APIError {
	return apiErr(503, 10039, "JetStream not enabled for account")
}

// lookup returns a stream by name.
func (ja *jsAccount) lookup(name string) *stream {
	ja.mu.RLock()
	defer ja.mu.RUnlock()
	return ja.mu.streams[name]
}

// sortedStreamNames returns the names of the account's streams, sorted.
func (ja *jsAccount) sortedStreamNames() []string {
	ja.mu.RLock()
	defer ja.mu.RUnlock()
	return sortedKeys(ja.mu.streams)
}

// streams returns the account's streams.
func (ja *jsAccount) streams() []*stream {
	ja.mu.RLock()
	defer ja.mu.RUnlock()
	out := make([]*stream, 0, len(ja.mu.streams))
	for _, st := range ja.mu.streams {
		out = append(out, st)
	}
	return out
}

// closeStreams closes the account's streams (Close).
func (ja *jsAccount) closeStreams() error {
	ja.mu.Lock()
	streams := ja.mu.streams
	ja.mu.streams = map[string]*stream{}
	ja.mu.Unlock()
	var errs []error
	for _, st := range streams {
		errs = append(errs, st.close(false))
	}
	return errors.Join(errs...)
}

// recover opens every stream found in the account's store directory. One
// that cannot be opened is marked failed (failedstream.go); only an
// unreadable directory is an error.
func (ja *jsAccount) recover() error {
	js := ja.js
	entries, err := os.ReadDir(ja.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(ja.dir, e.Name())
		meta, err := readMeta[streamMeta](filepath.Join(dir, metaFile))
		if errors.Is(err, os.ErrNotExist) {
			js.ignoreStreamDir(dir)
			continue
		}
		if err == nil {
			err = syncOnDisk(filepath.Join(dir, metaFile), &meta.Config)
		}
		if err != nil {
			ja.failStream(e.Name(), err)
			continue
		}
		if iv := meta.Config.SyncInterval; iv > 0 && iv < MinSyncInterval {
			// Written by a version without the bound: kept running, at
			// the bound, rather than refused.
			js.log.Warn("stream sync interval below the minimum; using the minimum",
				"account", ja.name, "stream", meta.Config.Name, "sync_interval", iv, "minimum", MinSyncInterval)
			meta.Config.SyncInterval = MinSyncInterval
			syncToMetadata(&meta.Config)
		}
		st, err := ja.openStream(meta, false, nil)
		if err != nil {
			ja.failStream(e.Name(), err)
			continue
		}
		ja.mu.streams[st.name] = st
		ja.indexSubjectsLocked(st.name, meta.Config.Subjects)
		js.log.Info("stream recovered", "account", ja.name, "stream", st.name, "messages", st.store.State().Msgs,
			"consumers", st.numConsumers())
	}
	return nil
}
