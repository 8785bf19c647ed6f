package jetstream

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skiffmq/skiff/internal/jscluster"
	"github.com/skiffmq/skiff/server"
	"github.com/skiffmq/skiff/store"
)

// Defaults of the Options.
const (
	DefaultStoreDir     = "./skiff-data"
	DefaultMaxStreams   = 10_000
	DefaultMaxConsumers = 100_000 // over all streams
	// DefaultMaxConsumersPerStream bounds the consumers of a stream whose
	// max_consumers is unset, as nats-server 2.15's default.
	DefaultMaxConsumersPerStream = 1_000
	DefaultMaxAckPending         = 1_000   // per consumer, when its config says 0
	MaxAckPendingLimit           = 100_000 // the most a consumer may ask for
	DefaultMaxWaiting            = 512     // pull requests waiting per consumer
	DefaultAPIQueue              = 4_096
	DefaultDupWindow             = 2 * time.Minute
	DefaultAckWait               = 30 * time.Second
	DefaultSyncInterval          = 100 * time.Millisecond
	DefaultMaxStore              = 1 << 40 // 1 TiB of file streams, as nats-server
	DefaultMaxMemory             = 4 << 30 // of memory streams, when the machine's memory is unknown
	// MinSyncInterval is the shortest sync interval a stream or the
	// server may set: every file stream (and every consumer of one) runs
	// a timer at its interval even when idle, so a shorter one spins a
	// core for nothing.
	MinSyncInterval = 10 * time.Millisecond
	// MaxStreamSubjects bounds the subjects of one stream: each is a
	// subscription and an entry of the overlap index.
	MaxStreamSubjects = 10_000
	// MaxConsumerFilters bounds a consumer's filter subjects, for the
	// same reason as MaxStreamSubjects.
	MaxConsumerFilters = 10_000
	// MaxDedupIDs bounds the message IDs a stream remembers for
	// deduplication, whatever its window.
	MaxDedupIDs = 1 << 20
)

// Options configure JetStream. Zero values mean the defaults.
type Options struct {
	// StoreDir holds every stream's files (default ./skiff-data, created
	// if missing).
	StoreDir string
	// MaxStreams and MaxConsumers bound how many exist (defaults 10,000
	// streams and 100,000 consumers).
	MaxStreams   int
	MaxConsumers int
	// MaxConsumersPerStream bounds the consumers of a stream whose
	// max_consumers is unset (default 1,000, nats-server's
	// default_max_consumers); a stream's own max_consumers overrides it.
	MaxConsumersPerStream int
	// APIQueue bounds the API requests waiting for the API worker
	// (default 4,096), and a quarter of it those waiting for each of the
	// four stream workers (stream create, update and delete); past it
	// requests are refused with 503.
	APIQueue int
	// Sync and SyncInterval are the sync policy of a stream whose
	// configuration does not name one (default SyncInterval, every
	// 100 ms); nats-server's `sync_interval` sets the same for all.
	// SyncInterval may not be below MinSyncInterval.
	Sync         SyncPolicy
	SyncInterval time.Duration
	// MaxMemory and MaxStore bound the bytes of every memory stream and
	// of every file stream together (nats-server's max_memory_store and
	// max_file_store). A stream's max_bytes reserves its share at create,
	// refused past the bound (10028, 10047); a publish while the bound is
	// reached is refused (503, 10023). Defaults: 75% of the machine's
	// memory (DefaultMaxMemory when it cannot be read) and
	// DefaultMaxStore; a negative value is no bound.
	MaxMemory int64
	MaxStore  int64
	// UniqueTag, if set, is a server tag prefix (nats-server's
	// `unique_tag`, e.g. "az:"): the replicas of a stream are placed on
	// servers with different tags of that prefix, and never on a server
	// without one, unless the stream's placement names such a tag itself.
	// Compared lower-cased, as server_tags are. It matters on the meta
	// leader, which places streams: give every server the same.
	UniqueTag string
	// HoldTimeout is how long, in a cluster, the replicas of a server
	// whose machine restarted from an unclean stop under the interval or
	// never policy (their raft log may miss a tail it acknowledged) wait
	// for a leader, voting for none, before they are released all the
	// same (default 10 s): when every replica of a group lost power, none
	// would ever campaign otherwise, and releasing them is the loss the
	// policy allows (docs/cluster.md).
	HoldTimeout time.Duration
	// Lenient accepts API requests with fields their type does not have,
	// ignoring them (nats-server's `strict: false`). By default such a
	// request is refused as invalid JSON (10025).
	Lenient bool
	// FS is the file system of streams' messages and consumers' state
	// (default store.OSFS), and of a clustered server's raft log unless
	// Cluster names another; tests wrap it to inject faults or cut the
	// power (internal/chaosfs).
	FS store.FS
	// MaxOpenFiles bounds the files of streams and consumers open at once
	// (default: half the process's limit of open files, at most 65,536,
	// or 4,096 where the limit is unknown; at least
	// store.MinHandleCache): past it the least recently used are closed
	// and reopened when next needed (store.HandleCache), so that the
	// rest of the descriptors stay free for clients.
	MaxOpenFiles int
	// Logger receives structured logs (default: the server's, or discard).
	Logger *slog.Logger

	// Cluster tunes the raft layer of a clustered server
	// (internal/jscluster: ticks, bootstrap wait, snapshots); New uses its
	// defaults when it is nil and the server is clustered, in
	// StoreDir/raft unless it names another directory. The server joins
	// the cluster's meta group, which places every stream on its servers.
	// Set on a server that is not
	// clustered, New refuses it. Its type is internal: tests tune it.
	Cluster *jscluster.Options
}

func (o *Options) setDefaults() {
	if o.StoreDir == "" {
		o.StoreDir = DefaultStoreDir
	}
	if o.MaxStreams <= 0 {
		o.MaxStreams = DefaultMaxStreams
	}
	if o.MaxConsumers <= 0 {
		o.MaxConsumers = DefaultMaxConsumers
	}
	if o.MaxConsumersPerStream <= 0 {
		o.MaxConsumersPerStream = DefaultMaxConsumersPerStream
	}
	if o.APIQueue <= 0 {
		o.APIQueue = DefaultAPIQueue
	}
	if o.SyncInterval <= 0 {
		o.SyncInterval = DefaultSyncInterval
	}
	if o.MaxMemory == 0 {
		o.MaxMemory = defaultMaxMemory()
	}
	if o.MaxStore == 0 {
		o.MaxStore = DefaultMaxStore
	}
	if o.FS == nil {
		o.FS = store.OSFS
	}
	o.UniqueTag = strings.ToLower(strings.TrimSpace(o.UniqueTag))
	if o.MaxOpenFiles <= 0 {
		o.MaxOpenFiles = defaultMaxOpenFiles()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// defaultMaxOpenFiles is Options.MaxOpenFiles's default.
func defaultMaxOpenFiles() int {
	lim, _, ok := openFileLimits()
	if !ok {
		return 4096
	}
	return int(min(lim/2, 65536))
}

// JetStream is the stream layer of one server. Create it with New before
// the server starts; Close it after the server shut down. Streams live in
// accounts (account.go).
type JetStream struct {
	srv  *server.Server
	opts Options
	log  *slog.Logger

	mu struct {
		sync.RWMutex
		// accounts are the JetStream-enabled accounts, by name.
		accounts map[string]*jsAccount
		// notEnabled are the API subscriptions of the accounts without
		// JetStream, which answer that it is not enabled.
		notEnabled map[*server.Account]*server.InternalSub
	}
	closed atomic.Bool
	// reserveMu is held while a stream create or update checks the bounds
	// that span accounts (Options.MaxStreams, MaxMemory, MaxStore), which
	// it reads from every account. Lock order: reserveMu, then a
	// jsAccount's mu (never two jsAccount locks but under reserveMu).
	reserveMu sync.Mutex
	consumers atomic.Int64       // over all accounts, against MaxConsumers
	handles   *store.HandleCache // opts.FS: bounds the files open at once
	lock      *dirLock           // on StoreDir, until Close
	// orphans are the directories under StoreDir/accounts of no
	// JetStream-enabled account (findOrphans).
	orphans []string
	// multi: the server has configured accounts. Metrics then carry an
	// account label, and have per-account series.
	multi bool

	apiQueue chan apiRequest // never closed: handlers may still send
	// streamQueues feed the stream workers (stream create, update,
	// delete), chosen by the account and stream's names; never closed
	// either.
	streamQueues [streamWorkers]chan apiRequest
	stop         chan struct{}
	// internalDropped counts the server's own messages that reached the
	// API, ack or flow control subjects, or a stream their principal may
	// not publish to, and were dropped (see server/principal.go).
	internalDropped atomic.Uint64
	// foreignRefused counts the clients' messages of other accounts that
	// reached an account's API, acks or flow control through an import,
	// refused (foreign.go).
	foreignRefused atomic.Uint64
	// memQuota and fileQuota count what every account's streams hold
	// (see quota.go).
	memQuota, fileQuota quota
	wg                  sync.WaitGroup

	// raft is the raft layer of a clustered server (Options.Cluster).
	raft *jscluster.Cluster
	// started is when New was called: a replicated stream made before it
	// whose group log is not here lost that log (stream.go).
	started time.Time
	clustered
}

// New attaches JetStream to s: it recovers the streams and consumers in
// opts.StoreDir, subscribes to the API subjects and to every stream's
// subjects, and makes INFO advertise JetStream. Call it before s.Start.
func New(s *server.Server, opts Options) (*JetStream, error) {
	// Before the default bound of open files is taken from the limit.
	softBefore, raiseErr := raiseOpenFileLimit()
	opts.setDefaults()
	if s.Clustered() && opts.Cluster == nil {
		// A clustered server joins the cluster's meta group, with the
		// raft layer's defaults (docs/cluster.md), and its raft log
		// synced as the server's streams are (sync_interval): a
		// replicated PubAck is as durable on each replica as a
		// single-server one is on its server; on the streams' file
		// system.
		opts.Cluster = &jscluster.Options{Durability: (&StreamConfig{Sync: opts.Sync, SyncInterval: opts.SyncInterval}).durability(),
			FS: opts.FS, HoldTimeout: opts.HoldTimeout}
	}
	if opts.HoldTimeout < 0 {
		return nil, fmt.Errorf("%w: hold timeout %v is negative", ErrInvalidOptions, opts.HoldTimeout)
	}
	if opts.SyncInterval < MinSyncInterval {
		return nil, fmt.Errorf("%w: sync interval %v is below the minimum %v", ErrInvalidOptions, opts.SyncInterval, MinSyncInterval)
	}
	if err := os.MkdirAll(opts.StoreDir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: store_dir %s: %v", ErrInvalidOptions, opts.StoreDir, err)
	}
	lock, err := lockStoreDir(opts.StoreDir)
	if err != nil {
		return nil, err
	}
	if err := prepareLayout(opts.StoreDir, opts.Logger); err != nil {
		_ = lock.release()
		return nil, err
	}
	handles := store.NewHandleCache(opts.FS, opts.MaxOpenFiles)
	opts.FS = handles
	js := &JetStream{srv: s, opts: opts, handles: handles, log: opts.Logger, lock: lock, apiQueue: make(chan apiRequest, opts.APIQueue),
		stop: make(chan struct{}), multi: len(tenants(s)) > 1, started: time.Now()}
	for i := range js.streamQueues {
		js.streamQueues[i] = make(chan apiRequest, max(opts.APIQueue/streamWorkers, 1))
	}
	js.mu.accounts = map[string]*jsAccount{}
	js.mu.notEnabled = map[*server.Account]*server.InternalSub{}
	if err := js.startCluster(); err != nil {
		_ = js.Close()
		return nil, err
	}
	if err := js.enableAccounts(); err != nil {
		_ = js.Close()
		return nil, err
	}
	s.OnAccountUpdate(js.accountUpdated)
	if err := s.HandleMonitor(jszPath, js.handleJsz); err != nil {
		_ = js.Close()
		return nil, err
	}
	if err := s.HandleSysRequest("JSZ", js.sysJsz); err != nil {
		_ = js.Close()
		return nil, err
	}
	if js.raft != nil {
		if err := s.HandleSysRequest("RAFTZ", js.sysRaftz); err != nil {
			_ = js.Close()
			return nil, err
		}
	}
	if err := s.RegisterMetrics(newMetricsCollector(js)); err != nil {
		_ = js.Close()
		return nil, err
	}
	s.OnShutdown(js.shutdown)
	js.recountQuotas()
	js.runCluster()
	js.wg.Add(2)
	go js.apiWorker(js.apiQueue)
	go js.quotaLoop()
	for _, q := range js.streamQueues {
		js.wg.Add(1)
		go js.apiWorker(q)
	}
	s.AdvertiseJetStream()
	js.logStart(softBefore, raiseErr)
	return js, nil
}

// logStart logs that JetStream started, with the process's limit of open
// files as it now stands and the share of it streams and consumers may
// use (the rest is for clients).
func (js *JetStream) logStart(softBefore uint64, raiseErr error) {
	streams := 0
	for _, ja := range js.sortedAccounts() {
		streams += len(ja.sortedStreamNames())
	}
	args := []any{"store_dir", js.opts.StoreDir, "accounts", len(js.sortedAccounts()), "streams", streams,
		"max_open_files", js.opts.MaxOpenFiles}
	if soft, hard, ok := openFileLimits(); ok {
		args = append(args, "open_files_soft_limit", soft, "open_files_hard_limit", hard)
		if softBefore < soft {
			args = append(args, "raised_from", softBefore)
		}
	}
	if raiseErr != nil {
		js.log.Warn("could not raise the soft limit of open files to the hard limit", "err", raiseErr)
	}
	js.log.Info("jetstream started", args...)
}

// ignoreStreamDir handles a stream directory without metadata: the
// leftover of a create that failed before it was written (older versions
// left it), which holds no file but a temporary metadata file, is
// removed; anything else is kept, for an operator to look at.
func (js *JetStream) ignoreStreamDir(dir string) {
	leftover := true
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || (!d.IsDir() && d.Name() != metaFile+".tmp") {
			leftover = false
			return filepath.SkipAll
		}
		return nil
	})
	if leftover {
		if err := os.RemoveAll(dir); err == nil {
			js.log.Info("removed the empty directory of a failed stream create", "dir", filepath.Base(dir))
			return
		}
	}
	js.log.Warn("ignoring a stream directory without metadata", "dir", filepath.Base(dir))
}

// Close stops the API, closes every stream and consumer, and flushes
// their files. Call it after the server shut down.
func (js *JetStream) Close() error {
	if js.closed.Swap(true) {
		return nil
	}
	js.mu.Lock()
	for _, is := range js.mu.notEnabled {
		_ = is.Unsubscribe()
	}
	for _, ja := range js.mu.accounts {
		for _, is := range ja.subs {
			_ = is.Unsubscribe()
		}
	}
	js.mu.Unlock()
	close(js.stop)
	js.wg.Wait()
	var errs []error
	for _, ja := range js.sortedAccounts() {
		errs = append(errs, ja.closeStreams())
	}
	if js.raft != nil {
		errs = append(errs, js.raft.Close())
	}
	return errors.Join(append(errs, js.lock.release())...)
}

// shutdown runs when the server shuts down, before its clients close:
// pull requests waiting are told so, in their accounts.
func (js *JetStream) shutdown() {
	for _, ja := range js.sortedAccounts() {
		pub := ja.acc.NewPublisher()
		for _, st := range ja.streams() {
			for _, name := range st.consumerNames() {
				if c := st.consumer(name); c != nil {
					c.shutdown(pub)
				}
			}
		}
		pub.Flush()
	}
}

// metaFile is the JSON file with a stream's or consumer's configuration.
const metaFile = "meta.json"

type streamMeta struct {
	Config  StreamConfig `json:"config"`
	Created time.Time    `json:"created"`
	// Group is the stream's group in a cluster's meta group (stream.group).
	Group uint64 `json:"group,omitempty"`
	// ConfigIndex is, for a replicated stream, the index in its group's
	// log of the update Config came from (replica_config.go): a replayed
	// update at or below it is not applied again.
	ConfigIndex uint64 `json:"config_index,omitempty"`
	// Raft: the stream has a raft group in its cluster, whatever its
	// num_replicas (jscluster.StreamAssignment.Raft).
	Raft bool `json:"raft,omitempty"`
	// Founding: the stream was turned replicated here (replica_convert.go)
	// and its group is not yet known to be on disk: opened without the
	// group's log, this server founds it, as its only voter, over the
	// store and the consumers it holds.
	Founding bool `json:"founding,omitempty"`
}

type consumerMeta struct {
	Config  ConsumerConfig `json:"config"`
	Created time.Time      `json:"created"`
	// Owner is the user who created the consumer or last set its deliver
	// subject: deliveries act for it, within its publish permissions as
	// configured when the server starts.
	Owner consumerOwner `json:"owner"`
}

// consumerOwner is a consumer's owner: a user ("" for no user) of an
// account. Versions before accounts wrote the user alone, a string: a user
// of the global account. An owner in the global account is still written
// so, so that such a version, run again on the store moved back
// (docs/streams.md), reads the consumers of the only account it serves.
type consumerOwner struct {
	User    string `json:"user,omitempty"`
	Account string `json:"account"`
}

// MarshalJSON writes an owner of the global account as its user name, as
// versions before accounts did, and any other as an object.
func (o consumerOwner) MarshalJSON() ([]byte, error) {
	if o.Account == server.GlobalAccountName {
		return json.Marshal(o.User)
	}
	type plain consumerOwner
	return json.Marshal(plain(o))
}

// UnmarshalJSON reads an owner, or the user name versions before accounts
// wrote.
func (o *consumerOwner) UnmarshalJSON(b []byte) error {
	var user string
	if err := json.Unmarshal(b, &user); err == nil {
		*o = consumerOwner{User: user, Account: server.GlobalAccountName}
		return nil
	}
	type plain consumerOwner
	return json.Unmarshal(b, (*plain)(o))
}

// ownerOf records pr, the owner of a consumer of the account ja: a user
// of the account pr acts in, which is ja's unless the request came from
// another account (through an import), where it acts for nobody once
// recovered (principalOf).
func (ja *jsAccount) ownerOf(pr server.Principal) consumerOwner {
	acc := ja.name
	if a := pr.Account(); a != nil {
		acc = a.Name()
	}
	return consumerOwner{User: pr.User(), Account: acc}
}

// principalOf returns the principal a recorded owner stands for now, in
// the account ja: its user's, or nobody (whose deliveries fail closed) if
// the owner was recorded in another account (a stream directory moved
// between accounts by hand).
func (ja *jsAccount) principalOf(o consumerOwner) server.Principal {
	// A meta.json of a version before accounts without an owner: no user
	// of the global account.
	if cmp.Or(o.Account, server.GlobalAccountName) != ja.name {
		return server.Principal{}
	}
	return ja.acc.PrincipalOf(o.User)
}

func readMeta[T any](path string) (T, error) {
	var v T
	b, err := os.ReadFile(path)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// writeMeta writes a metadata file atomically (writeFileAtomic).
func writeMeta(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, b)
}

// writeFileAtomic writes a file atomically: a temporary file, fsynced,
// renamed over the old one, and the directory fsynced.
func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// StoreDir returns the directory of the streams' files.
func (js *JetStream) StoreDir() string { return js.opts.StoreDir }
