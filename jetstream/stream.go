package jetstream

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skiffmq/skiff/internal/logthrottle"
	"github.com/skiffmq/skiff/internal/multiraft"
	"github.com/skiffmq/skiff/server"
	"github.com/skiffmq/skiff/store"
)

// stream is one stream at run time: its configuration, its store, the
// internal subscriptions that capture its subjects, and its consumers.
type stream struct {
	js      *JetStream
	ja      *jsAccount // the stream's account
	name    string
	dir     string
	created time.Time
	store   *store.Stream
	// group is the stream's group in the meta group of a cluster: the
	// index of the entry that assigned it; 0 for a stream the meta group
	// did not make (a single server's) until it is adopted
	// (cluster_adopt.go).
	group atomic.Uint64
	// configIndex is, for a replicated stream, the log index of the update
	// its configuration came from (replica_config.go).
	configIndex atomic.Uint64
	// repl is the stream's raft side when it has more than one replica
	// (replica.go), nil otherwise. Set before the stream is seen.
	repl *replica

	ackPrefix []byte // of every PubAck: {"stream":"<name>","seq":

	cfg atomic.Pointer[StreamConfig] // replaced whole on update
	mu  struct {
		sync.RWMutex
		subs      []*server.InternalSub
		consumers map[string]*consumer
		// failed are durable consumers whose state could not be read at
		// start (a corrupt snapshot): kept on disk, reported, not served
		// (failed.go).
		failed map[string]error
		closed bool
	}
	// clist is the consumers as a slice, replaced on every change, for
	// ingest to signal without a lock.
	clist atomic.Pointer[[]*consumer]
	// ingestMu orders ingest: expectations are checked and the message
	// appended in one step, so that two publishers expecting the same last
	// sequence cannot both succeed.
	ingestMu struct {
		sync.Mutex
		dedup     dedupWindow
		lastMsgID string
	}
	// closing is set once close has begun: what the store's expiry does
	// then is not told to consumers on their way out (expired).
	closing atomic.Bool
	// founding: the stream was turned replicated here and its group is
	// not yet known to be on disk (streamMeta.Founding).
	founding atomic.Bool
	// rebuilding is set once reads found the replica's store damaged and
	// its rebuild is on its way (replica_rebuild.go).
	rebuilding atomic.Bool
	// convertSeen is when reconcile first saw the stream placed on more
	// servers while it has no group here (Unix nanoseconds, 0: never).
	convertSeen atomic.Int64
	// Warnings repeated per publish (a full disk refuses them all).
	appendWarn, syncWarn logthrottle.Throttle
}

// openStream opens (or, with create, creates) a stream of the account, as
// meta describes it, and subscribes it, in the account. seed, if not nil,
// is a stopped store whose messages the new one takes before anything
// else reads it: a memory stream turned replicated (replica_convert.go).
func (ja *jsAccount) openStream(meta streamMeta, create bool, seed *store.Stream) (*stream, error) {
	js := ja.js
	cfg, created, group, configIndex := meta.Config, meta.Created, meta.Group, meta.ConfigIndex
	// A stream is replicated (has a raft group) with num_replicas above 1,
	// or once it had (scaled down to one).
	replicated := js.raft != nil && (cfg.Replicas > 1 || meta.Raft)
	dir := filepath.Join(ja.dir, cfg.Name)
	st := &stream{js: js, ja: ja, name: cfg.Name, dir: dir, created: created, ackPrefix: pubAckPrefix(cfg.Name)}
	st.group.Store(group)
	st.configIndex.Store(configIndex)
	st.cfg.Store(&cfg)
	st.mu.consumers = map[string]*consumer{}
	st.clist.Store(&[]*consumer{})
	if create {
		if err := os.MkdirAll(filepath.Join(dir, "consumers"), 0o755); err != nil {
			return nil, err
		}
		if err := writeMeta(filepath.Join(dir, metaFile), streamMeta{Config: cfg, Created: created, Group: group, Raft: replicated}); err != nil {
			return nil, err
		}
	}
	so := cfg.storeOptions(filepath.Join(dir, "msgs"))
	if replicated {
		so = cfg.replicaStoreOptions(filepath.Join(dir, "msgs"))
		so.CommitThrough = checkpointSeq(dir, group)
	}
	so.Logger = js.log.With("account", ja.name, "stream", cfg.Name) // recovery and corruption reports
	so.FS = js.opts.FS
	// The store applies max_age, TTLs and delete markers, and tells
	// expired what it did; not before the consumers are loaded
	// (StartExpiry below), and never between ingest's checks and its
	// append (AppendLock).
	so.OnExpire, so.AppendLock, so.HoldExpiry = st.expired, &st.ingestMu, true
	// A replica runs on its group's log's time (store/logclock.go): every
	// replica expires the same messages at the same place in the log.
	so.LogClock = replicated
	if replicated {
		so.OnCorrupt = st.corruptFound // replica_rebuild.go
	}
	open := so
	if seed != nil {
		open = takingOptions(so) // the limits once the messages are in
	}
	s, err := store.Open(open)
	if err != nil {
		return nil, err
	}
	// A replica's damaged store is rebuilt from its group (not a stream
	// just turned replicated: what it holds is in no log yet).
	rebuilt := replicated && !create && !meta.Founding && damaged(s, dir)
	if rebuilt {
		if rebuildsLog(dir, so) {
			// The replica diverged from its group, or its log points at
			// the store set aside: its log goes too (a restart after the
			// mark, before the rebuild dropped it).
			if err := js.raft.DropGroupLog(group); err != nil {
				_ = s.Close()
				return nil, fmt.Errorf("dropping the diverged replica's log: %w", err)
			}
		}
		if s, err = st.rebuildStore(s, so); err != nil {
			return nil, err
		}
	}
	if seed != nil {
		err := copyMessages(s, seed)
		if err == nil {
			err = s.UpdateConfig(so)
		}
		if err != nil {
			_ = s.Close()
			return nil, fmt.Errorf("taking the stream's messages: %w", err)
		}
	}
	st.store = s
	st.ingestMu.dedup.init(cfg.Duplicates)
	if create && cfg.FirstSeq > 1 {
		// The first message gets first_seq.
		if _, err := s.Purge(store.PurgeRequest{Seq: cfg.FirstSeq}); err != nil {
			_ = st.close(true)
			return nil, err
		}
	}
	if !create {
		st.rebuildDedup()
	}
	if err := st.loadConsumers(); err != nil {
		_ = st.close(false)
		return nil, err
	}
	// After the consumers: what came due while the server was down goes
	// at once, and an interest stream must see who wants its markers.
	s.StartExpiry()
	if replicated {
		// A replicated stream's leader subscribes, once ready. A new
		// group starts with its assigned peers, unless its members
		// changed since it was founded: this server then joins it empty;
		// a recovered one starts from its log.
		//
		// A replica without its group's log that may have been a member
		// before (its raft directory lost or wiped, or the stream made
		// before this server started) may have acknowledged entries or
		// voted, and lost that: it is held, voting for no one and never
		// campaigning, until it has caught up with the current leader
		// (multiraft.HoldWiped). It asks for multiraft.HoldLost: the raft
		// layer makes it wiped, or lost (released by time as well) when a
		// power loss may have taken its state (jscluster unsynced.go). A
		// server joining a group it never was a member of is held wiped
		// too, which costs nothing: it is a learner; and so is a replica
		// rebuilt, never released by time with a partial store.
		var peers []string
		held := multiraft.HoldNone
		switch {
		case create:
			if a := js.assignmentOf(ja.name, cfg.Name); a != nil && !a.Join {
				peers = a.Peers
				if !created.IsZero() && created.Before(js.started) {
					held = multiraft.HoldLost
				}
			} else {
				held = multiraft.HoldWiped
			}
		case meta.Founding && !js.raft.HasGroupLog(group):
			peers = []string{js.raft.Name()}
		case meta.Founding && seed == nil && cfg.Storage == MemoryStorage && !js.groupCompacted(group):
			// A memory stream turned replicated, restarted before its
			// group's first snapshot: the log's entries follow messages
			// the process took with it, and no other member was added
			// (a learner waits for that snapshot: logCompacted). The
			// group is founded again, over the empty store.
			if err := js.raft.DropGroupLog(group); err != nil {
				_ = st.close(false)
				return nil, fmt.Errorf("dropping the log of a memory stream's group never snapshotted: %w", err)
			}
			peers = []string{js.raft.Name()}
		case !js.raft.HasGroupLog(group):
			held = multiraft.HoldLost
		}
		if rebuilt {
			held = multiraft.HoldWiped
		}
		st.founding.Store(meta.Founding)
		if err := st.openReplica(group, peers, held); err != nil {
			_ = st.close(false)
			return nil, err
		}
		return st, nil
	}
	if err := st.subscribeLocked(cfg.Subjects); err != nil {
		_ = st.close(false)
		return nil, err
	}
	return st, nil
}

// subscribeLocked captures the stream's subjects. st.mu held (update),
// or the stream not yet visible (openStream).
func (st *stream) subscribeLocked(subjects []string) error {
	for _, subj := range subjects {
		is, err := st.ja.acc.SubscribeInternal(subj, "", st.ingest)
		if err != nil {
			return err
		}
		st.mu.subs = append(st.mu.subs, is)
	}
	return nil
}

// unsubscribeLocked drops the stream's subscriptions. st.mu held.
func (st *stream) unsubscribeLocked() {
	for _, is := range st.mu.subs {
		_ = is.Unsubscribe()
	}
	st.mu.subs = nil
}

// close stops the stream and its consumers; with destroy it removes their
// files.
func (st *stream) close(destroy bool) error {
	_, err := st.shut(destroy, false)
	return err
}

// shut is close, and returns the consumers it stopped; with keepStore the
// store stays open, for its messages to be read once the stream stopped
// (a memory stream turned replicated, replica_convert.go), and its owner
// closes it.
func (st *stream) shut(destroy, keepStore bool) ([]*consumer, error) {
	st.mu.Lock()
	if st.mu.closed {
		st.mu.Unlock()
		return nil, nil
	}
	st.mu.closed = true
	st.closing.Store(true)
	st.unsubscribeLocked()
	consumers := st.mu.consumers
	st.mu.consumers = map[string]*consumer{}
	st.clist.Store(&[]*consumer{})
	st.mu.Unlock()
	// A publish that took ingestMu before closing was set has appended
	// once this returns; one after it sees closing (ingest).
	st.ingestMu.Lock()
	st.ingestMu.Unlock() //nolint:staticcheck // a barrier
	var errs []error
	if st.repl != nil {
		// The group first: nothing more is applied to the store.
		errs = append(errs, st.repl.close(destroy))
	}
	for _, c := range consumers {
		errs = append(errs, c.close(destroy))
		st.js.consumers.Add(-1)
		st.ja.consumers.Add(-1)
	}
	if st.store != nil && !keepStore {
		if destroy {
			errs = append(errs, st.store.Destroy())
		} else {
			errs = append(errs, st.store.Close())
		}
	}
	if destroy {
		errs = append(errs, os.RemoveAll(st.dir))
	}
	stopped := make([]*consumer, 0, len(consumers))
	for _, k := range sortedKeys(consumers) {
		stopped = append(stopped, consumers[k])
	}
	return stopped, errors.Join(errs...)
}

func (st *stream) config() StreamConfig { return *st.cfg.Load() }

func (st *stream) retention() RetentionPolicy { return st.cfg.Load().Retention }

func (st *stream) numConsumers() int { return len(*st.clist.Load()) }

// consumer returns a consumer by name.
func (st *stream) consumer(name string) *consumer {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return st.mu.consumers[name]
}

// setConsumersLocked publishes the consumer list for ingest. st.mu held.
func (st *stream) setConsumersLocked() {
	l := make([]*consumer, 0, len(st.mu.consumers))
	for _, k := range sortedKeys(st.mu.consumers) {
		l = append(l, st.mu.consumers[k])
	}
	st.clist.Store(&l)
}

// info returns the stream's configuration and state.
func (st *stream) info() *StreamInfo {
	s := st.store.State()
	cfg, n := st.config(), st.numConsumers()
	si := &StreamInfo{Config: cfg, Created: st.created.UTC(), TimeStamp: time.Now().UTC(), State: StreamState{
		Msgs: s.Msgs, Bytes: s.Bytes, FirstSeq: s.FirstSeq, LastSeq: s.LastSeq,
		NumSubjects: s.NumSubjects, NumDeleted: s.NumDeleted, Consumers: n,
	}}
	if s.LastSeq == 0 && s.Msgs == 0 {
		si.State.FirstSeq = 0 // never held a message, as the reference server says
	}
	if !s.FirstTime.IsZero() {
		si.State.FirstTime = s.FirstTime.UTC()
	}
	if !s.LastTime.IsZero() {
		si.State.LastTime = s.LastTime.UTC()
	}
	si.Cluster = st.clusterInfo()
	return si
}

// expired hears from the store what an expiry round did
// (store.Options.OnExpire). It runs on the store's goroutine with ingestMu
// held (the store's AppendLock), so that a marker becomes the last
// message for the expectations of publishers at once. The markers are
// durable by now, under every sync policy that makes them so.
func (st *stream) expired(e store.Expired) {
	if len(e.Markers) > 0 {
		st.ingestMu.lastMsgID = ""
	}
	if st.closing.Load() {
		return
	}
	cfg := st.config()
	for _, m := range e.Markers {
		st.arrived(m.Subject, m.Seq, &cfg)
	}
	st.changed()
}

// changed tells every consumer that messages were removed.
func (st *stream) changed() {
	for _, c := range *st.clist.Load() {
		c.changed()
	}
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
