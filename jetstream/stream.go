package jetstream

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skiffmq/skiff/internal/logthrottle"
	"github.com/skiffmq/skiff/server"
	"github.com/skiffmq/skiff/store"
	"github.com/skiffmq/skiff/subject"
)

// stream is one stream at run time: its configuration, its store, the
// internal subscriptions that capture its subjects, and its consumers.
type stream struct {
	js      *JetStream
	name    string
	dir     string
	created time.Time
	store   *store.Stream

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
	dedup dedupWindow // guarded by ingestMu
	// ingestMu orders ingest: expectations are checked and the message
	// appended in one step, so that two publishers expecting the same last
	// sequence cannot both succeed.
	ingestMu  sync.Mutex
	lastMsgID string // guarded by ingestMu
	ttl       ttls   // per-message TTLs waiting to run out
	// Warnings repeated per publish (a full disk refuses them all).
	appendWarn, syncWarn logthrottle.Throttle
}

// normalize fills a stream configuration's defaults and checks it.
func (js *JetStream) normalize(cfg StreamConfig) (StreamConfig, *APIError) {
	if err := validName(cfg.Name); err != nil {
		return cfg, errStreamConfig(fmt.Errorf("invalid stream name %q: %w", cfg.Name, err))
	}
	if len(cfg.Subjects) == 0 {
		cfg.Subjects = []string{cfg.Name}
	}
	if len(cfg.Subjects) > MaxStreamSubjects {
		return cfg, errStreamConfig(fmt.Errorf("too many subjects: %d, at most %d per stream", len(cfg.Subjects), MaxStreamSubjects))
	}
	seen := map[string]bool{}
	for _, s := range cfg.Subjects {
		if err := subject.ValidatePattern(s); err != nil {
			return cfg, errStreamConfig(fmt.Errorf("invalid subject %q: %w", s, err))
		}
		for _, reserved := range []string{"$JS.API.>", "$JS.ACK.>", "$JS.FC.>"} {
			if subject.Intersects(s, reserved) {
				return cfg, errStreamConfig(fmt.Errorf("subject %q overlaps the reserved %q", s, reserved))
			}
		}
		if seen[s] {
			return cfg, errStreamConfig(fmt.Errorf("duplicate subject %q", s))
		}
		seen[s] = true
	}
	own := newSubjectIndex()
	for _, s := range cfg.Subjects {
		if other, _, ok := own.intersecting(s); ok {
			return cfg, errStreamConfig(fmt.Errorf("subjects %q and %q overlap", other, s))
		}
		own.add(s, cfg.Name)
	}
	for _, v := range []*int64{&cfg.MaxMsgs, &cfg.MaxBytes, &cfg.MaxMsgsPerSubject} {
		if *v <= 0 {
			*v = -1
		}
	}
	if cfg.MaxMsgSize <= 0 {
		cfg.MaxMsgSize = -1
	}
	if cfg.MaxConsumers <= 0 {
		cfg.MaxConsumers = -1
	}
	if cfg.MaxAge < 0 {
		return cfg, errStreamConfig(errors.New("max_age can not be negative"))
	}
	if cfg.Duplicates == 0 {
		cfg.Duplicates = DefaultDupWindow
		if cfg.MaxAge > 0 && cfg.MaxAge < cfg.Duplicates {
			cfg.Duplicates = cfg.MaxAge
		}
	}
	if cfg.Duplicates < 0 || (cfg.MaxAge > 0 && cfg.Duplicates > cfg.MaxAge) {
		return cfg, errStreamConfig(errors.New("duplicates window can not be larger then max age"))
	}
	if cfg.DiscardNewPer {
		if cfg.Discard != DiscardNew {
			return cfg, errStreamConfig(errors.New("discard new per subject requires discard new policy to be set"))
		}
		if cfg.MaxMsgsPerSubject <= 0 {
			return cfg, errStreamConfig(errors.New("discard new per subject requires max msgs per subject > 0"))
		}
	}
	switch {
	case cfg.Replicas > 1:
		return cfg, apiErr(500, 10074, "replicas > 1 not supported in non-clustered mode")
	case cfg.Replicas < 0:
		return cfg, apiErr(400, 10133, "replicas count cannot be negative")
	}
	cfg.Replicas = 1
	if cfg.Compression == "" {
		cfg.Compression = "none"
	}
	if cfg.Compression != "none" {
		return cfg, errStreamConfig(fmt.Errorf("compression %q is not supported", cfg.Compression))
	}
	switch sdm := cfg.SubjectDeleteMarkerTTL; {
	case sdm < 0:
		return cfg, errStreamConfig(errors.New("subject delete marker TTL must not be negative"))
	case sdm > 0 && sdm < time.Second:
		return cfg, errStreamConfig(errors.New("subject delete marker TTL must be at least 1 second"))
	case sdm > 0:
		// Markers are TTL'd rollups: both come with them, as in the
		// reference server.
		cfg.AllowMsgTTL, cfg.AllowRollup, cfg.DenyPurge = true, true, false
	}
	if cfg.Sealed {
		// A sealed stream changes no more: as the reference server,
		// its configuration says so.
		cfg.MaxAge, cfg.Discard = 0, DiscardNew
		cfg.DenyDelete, cfg.DenyPurge, cfg.AllowRollup = true, true, false
	}
	if cfg.AllowRollup && cfg.DenyPurge {
		return cfg, errStreamConfig(errors.New("roll-ups require the purge permission"))
	}
	if err := syncFromMetadata(&cfg); err != nil {
		return cfg, errStreamConfig(err)
	}
	switch {
	case cfg.SyncInterval <= 0:
		cfg.SyncInterval = DefaultSyncInterval
	case cfg.SyncInterval < MinSyncInterval:
		return cfg, errStreamConfig(fmt.Errorf("sync_interval %v is below the minimum %v", cfg.SyncInterval, MinSyncInterval))
	}
	syncToMetadata(&cfg)
	return cfg, nil
}

// validName checks a stream or consumer name: it names a directory and a
// subject token.
func validName(name string) error {
	switch {
	case name == "":
		return errors.New("empty")
	case len(name) > 255:
		return errors.New("longer than 255 bytes")
	case strings.ContainsAny(name, ".*> \t\r\n/\\\x00"):
		return errors.New("contains '.', '*', '>', whitespace or a path separator")
	}
	return nil
}

// storeOptions maps a stream configuration onto the storage engine's.
func (cfg *StreamConfig) storeOptions(dir string) store.Options {
	unl := func(v int64) int64 { return max(v, 0) }
	o := store.Options{
		Dir:               dir,
		MaxMsgs:           unl(cfg.MaxMsgs),
		MaxBytes:          unl(cfg.MaxBytes),
		MaxMsgsPerSubject: unl(cfg.MaxMsgsPerSubject),
		MaxAge:            cfg.MaxAge,
		// ingest checks max_msg_size (headers and data); the store's own
		// bound counts the subject too, so it keeps only its hard cap.
		MaxMsgSize:   0,
		SyncInterval: cfg.SyncInterval,
	}
	if cfg.Storage == MemoryStorage {
		o.Storage = store.MemoryStorage
	} else {
		o.Storage = store.FileStorage
	}
	o.DiscardNewPerSubject = cfg.DiscardNewPer
	if cfg.SubjectDeleteMarkerTTL > 0 {
		o.MaxAge = 0 // the stream applies max_age itself, leaving markers (ttl.go)
	}
	if cfg.Discard == DiscardNew {
		o.Discard = store.DiscardNew
	} else {
		o.Discard = store.DiscardOld
	}
	switch cfg.Sync {
	case SyncAlways:
		o.Sync = store.SyncAlways
	case SyncNever:
		o.Sync = store.SyncNever
	default:
		o.Sync = store.SyncInterval
	}
	return o
}

// openStream opens (or, with create, creates) a stream and subscribes it.
func (js *JetStream) openStream(cfg StreamConfig, created time.Time, create bool) (*stream, error) {
	dir := filepath.Join(js.opts.StoreDir, "streams", cfg.Name)
	st := &stream{js: js, name: cfg.Name, dir: dir, created: created, ackPrefix: pubAckPrefix(cfg.Name)}
	st.cfg.Store(&cfg)
	st.mu.consumers = map[string]*consumer{}
	st.clist.Store(&[]*consumer{})
	if create {
		if err := os.MkdirAll(filepath.Join(dir, "consumers"), 0o755); err != nil {
			return nil, err
		}
		if err := writeMeta(filepath.Join(dir, metaFile), streamMeta{Config: cfg, Created: created}); err != nil {
			return nil, err
		}
	}
	so := cfg.storeOptions(filepath.Join(dir, "msgs"))
	so.Logger = js.log.With("stream", cfg.Name) // recovery and corruption reports
	so.FS = js.opts.FS
	s, err := store.Open(so)
	if err != nil {
		return nil, err
	}
	st.store = s
	st.dedup.init(cfg.Duplicates)
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
	if !create && (cfg.AllowMsgTTL || cfg.SubjectDeleteMarkerTTL > 0) {
		// After the consumers: what came due while the server was down
		// goes at once, and an interest stream must see who wants its
		// markers.
		st.rebuildTTLs()
	}
	if err := st.subscribe(cfg.Subjects); err != nil {
		_ = st.close(false)
		return nil, err
	}
	return st, nil
}

// subscribe captures the stream's subjects. Lock not needed: called before
// the stream is visible, or with st.mu held by update.
func (st *stream) subscribe(subjects []string) error {
	for _, subj := range subjects {
		is, err := st.js.srv.SubscribeInternal(subj, "", st.ingest)
		if err != nil {
			return err
		}
		st.mu.subs = append(st.mu.subs, is)
	}
	return nil
}

func (st *stream) unsubscribe() {
	for _, is := range st.mu.subs {
		_ = is.Unsubscribe()
	}
	st.mu.subs = nil
}

// close stops the stream and its consumers; with destroy it removes their
// files.
func (st *stream) close(destroy bool) error {
	st.mu.Lock()
	if st.mu.closed {
		st.mu.Unlock()
		return nil
	}
	st.mu.closed = true
	st.unsubscribe()
	st.stopTTLs()
	consumers := st.mu.consumers
	st.mu.consumers = map[string]*consumer{}
	st.clist.Store(&[]*consumer{})
	st.mu.Unlock()
	var errs []error
	for _, c := range consumers {
		errs = append(errs, c.close(destroy))
		st.js.consumers.Add(-1)
	}
	if st.store != nil {
		if destroy {
			errs = append(errs, st.store.Destroy())
		} else {
			errs = append(errs, st.store.Close())
		}
	}
	if destroy {
		errs = append(errs, os.RemoveAll(st.dir))
	}
	return errors.Join(errs...)
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

// setConsumers publishes the consumer list for ingest. st.mu held.
func (st *stream) setConsumers() {
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
	return si
}

// sameConfig reports whether two normalized configurations are equal, for
// an idempotent CREATE.
func sameConfig(a, b StreamConfig) bool { return reflect.DeepEqual(a, b) }

// ingest stores a message published on one of the stream's subjects. It
// runs on the publisher's goroutine (see server.InternalHandler): checks
// and the append happen at once; the acknowledgement waits until the end
// of the publisher's read, when one fsync covers every message of the
// read (SyncAlways).
func (st *stream) ingest(m *server.Msg) {
	if !m.Permitted() {
		// The server published this for a client that may not publish
		// here (a consumer's delivery, a pull request's reply): storing
		// it would let that client write to a stream through the server.
		st.js.dropInternal(m, "stream", st.name)
		return
	}
	var hdr headers
	if m.Header != nil {
		hdr = parseHeaders(m.Header)
	}
	reply := ""
	if m.Reply != "" {
		reply = strings.Clone(m.Reply)
	}
	cfg := st.config()
	if cfg.Sealed {
		st.nack(m, reply, errSealed())
		return
	}
	// Headers and data count, not the subject, as in the reference server.
	if cfg.MaxMsgSize > 0 && len(m.Header)+len(m.Data) > int(cfg.MaxMsgSize) {
		st.nack(m, reply, errMsgTooBig())
		return
	}
	if v, ok := hdr.get("Nats-Expected-Stream"); ok && v != st.name {
		st.nack(m, reply, errStreamNotMatch())
		return
	}
	if st.js.quotaReached(cfg.Storage) {
		st.nack(m, reply, errInsufficientResources())
		return
	}
	msgID, hasID := hdr.get("Nats-Msg-Id")

	st.ingestMu.Lock()
	now := time.Now()
	if hasID {
		if seq, dup := st.dedup.lookup(msgID, now); dup {
			st.ingestMu.Unlock()
			st.ackDuplicate(m, reply, seq)
			return
		}
	}
	if aerr := st.checkExpected(hdr, m.Subject); aerr != nil {
		st.ingestMu.Unlock()
		st.nack(m, reply, aerr)
		return
	}
	roll, aerr := rollupOf(hdr, &cfg)
	var ttl int64
	if aerr == nil {
		ttl, aerr = ttlOf(hdr, &cfg)
	}
	if aerr != nil {
		st.ingestMu.Unlock()
		st.nack(m, reply, aerr)
		return
	}
	seq, ts, err := st.store.Append(m.Subject, m.Header, m.Data)
	if err != nil {
		st.ingestMu.Unlock()
		st.nack(m, reply, st.appendError(err))
		return
	}
	st.js.stored(cfg.Storage, len(m.Subject)+len(m.Header)+len(m.Data))
	// The config as now, under ingestMu: the one rebuildTTLs follows.
	if scfg := st.cfg.Load(); ttl > 0 || scfg.SubjectDeleteMarkerTTL > 0 {
		st.schedule(seq, ts, ttl, scfg)
	}
	st.lastMsgID = "" // the ID of the last message, if it had one
	if hasID {
		st.dedup.add(strings.Clone(msgID), seq, now)
		st.lastMsgID = st.dedup.last
	}
	var rollErr error
	if roll != noRollup {
		rollErr = st.roll(roll, seq, m.Subject)
	}
	st.ingestMu.Unlock()
	if rollErr != nil {
		// The message is stored, but what it replaces may not all be
		// gone: the publisher hears so rather than a PubAck.
		st.js.log.Warn("rollup purge failed", "stream", st.name, "seq", seq, "err", rollErr)
		st.nack(m, reply, errRollup(fmt.Errorf("stored as %d, rollup purge failed: %w", seq, rollErr)))
		st.arrived(m.Subject, seq, cfg)
		return
	}
	if cfg.Sync == SyncAlways && cfg.Storage == FileStorage {
		// Consumers read only what an fsync covered (nextFrom), so they
		// hear of the message once it is durable, with or without an ack
		// to send: one fsync still covers the publisher's whole read.
		subj := strings.Clone(m.Subject)
		m.AfterRead(func(p *server.Publisher) {
			err := st.store.WaitDurable(seq)
			st.arrived(subj, seq, cfg)
			if reply == "" || cfg.NoAck {
				return
			}
			st.pubAck(p, reply, seq, err)
		})
		return
	}
	st.arrived(m.Subject, seq, cfg)
	if reply == "" || cfg.NoAck {
		return
	}
	m.AfterRead(func(p *server.Publisher) { st.pubAck(p, reply, seq, st.store.WaitDurable(seq)) })
}

// arrived tells the consumers of a stored message; under interest
// retention a message nobody is interested in is acknowledged, with its
// sequence, and not kept.
func (st *stream) arrived(subj string, seq uint64, cfg StreamConfig) {
	if !st.notify(subj) && cfg.Retention == InterestPolicy {
		_ = st.store.Remove(seq)
	}
}

// pubAck answers a publish once WaitDurable returned err for it.
func (st *stream) pubAck(p *server.Publisher, reply string, seq uint64, err error) {
	if err != nil {
		st.syncWarn.Log(st.js.log, slog.LevelWarn, "stream sync failed", "stream", st.name, "err", err)
		p.Publish(reply, "", nil, pubAckError(st.name, errStreamStore(err)))
		return
	}
	p.Publish(reply, "", nil, st.pubAckJSON(seq, false))
}

// appendError turns a refused append into the reference server's error:
// the limits with its texts, anything else (a failed write, a full disk)
// as the store says it.
func (st *stream) appendError(err error) *APIError {
	switch {
	case errors.Is(err, store.ErrMaxMsgSize):
		return errMsgTooBig()
	case errors.Is(err, store.ErrMaxMsgs):
		return errStreamStore(errors.New("maximum messages exceeded"))
	case errors.Is(err, store.ErrMaxBytes):
		return errStreamStore(errors.New("maximum bytes exceeded"))
	case errors.Is(err, store.ErrMaxMsgsPerSubject):
		return errStreamStore(errors.New("maximum messages per subject exceeded"))
	}
	st.appendWarn.Log(st.js.log, slog.LevelWarn, "stream append failed", "stream", st.name, "err", err)
	return errStreamStore(err)
}

// rebuildDedup refills the duplicate window from the stored messages'
// Nats-Msg-Id headers after a restart, so that a publisher retrying
// across the restart is still deduplicated.
func (st *stream) rebuildDedup() {
	window := st.config().Duplicates
	if window <= 0 {
		return
	}
	now := time.Now()
	for seq := st.store.SeqAtOrAfterTime(now.Add(-window)); ; {
		m, err := st.store.Next(seq, "")
		if err != nil {
			return
		}
		seq = m.Seq + 1
		if len(m.Header) == 0 {
			st.lastMsgID = ""
			continue
		}
		id, ok := parseHeaders(m.Header).get("Nats-Msg-Id")
		st.lastMsgID = id
		if ok {
			st.dedup.add(id, m.Seq, time.Unix(0, m.Timestamp))
		}
	}
}

// checkExpected checks the Nats-Expected-* headers. ingestMu held.
func (st *stream) checkExpected(hdr headers, subj string) *APIError {
	if v, ok := hdr.get("Nats-Expected-Last-Sequence"); ok {
		want, err := strconv.ParseUint(v, 10, 64)
		last := st.store.State().LastSeq
		if err != nil || want != last {
			return errWrongLastSeq(last)
		}
	}
	if v, ok := hdr.get("Nats-Expected-Last-Subject-Sequence"); ok {
		want, err := strconv.ParseUint(v, 10, 64)
		var last uint64
		if m, gerr := st.store.LastBySubject(subj); gerr == nil {
			last = m.Seq
		}
		if err != nil || want != last {
			return errWrongLastSeq(last)
		}
	}
	if v, ok := hdr.get("Nats-Expected-Last-Msg-Id"); ok && v != st.lastMsgID {
		return errWrongLastMsgID(st.lastMsgID)
	}
	return nil
}

// ackDuplicate answers a duplicate publish (one stored before as seq)
// after the read, nack at once: neither stored anything, so there is
// nothing to wait for.
func (st *stream) ackDuplicate(m *server.Msg, reply string, seq uint64) {
	if reply == "" || st.cfg.Load().NoAck {
		return
	}
	b := st.pubAckJSON(seq, true)
	m.AfterRead(func(p *server.Publisher) { p.Publish(reply, "", nil, b) })
}

func (st *stream) nack(m *server.Msg, reply string, e *APIError) {
	if reply == "" || st.cfg.Load().NoAck {
		return
	}
	b := pubAckError(st.name, e)
	m.AfterRead(func(p *server.Publisher) { p.Publish(reply, "", nil, b) })
}

// notify tells the consumers whose filters match that a message arrived,
// and reports whether there were any.
func (st *stream) notify(subj string) bool {
	any := false
	for _, c := range *st.clist.Load() {
		if c.stored(subj) {
			any = true
		}
	}
	return any
}

// changed tells every consumer that messages were removed.
func (st *stream) changed() {
	for _, c := range *st.clist.Load() {
		c.changed()
	}
}

// pubAckPrefix is the start of every PubAck of a stream, up to the
// sequence.
func pubAckPrefix(stream string) []byte {
	b := append([]byte(`{"stream":`), strconv.Quote(stream)...)
	return append(b, `,"seq":`...)
}

// pubAckJSON is the PubAck (the JSON of type PubAck) of seq, built on the
// stream's ackPrefix.
func (st *stream) pubAckJSON(seq uint64, dup bool) []byte {
	b := make([]byte, 0, len(st.ackPrefix)+40)
	b = append(b, st.ackPrefix...)
	b = strconv.AppendUint(b, seq, 10)
	if dup {
		b = append(b, `,"duplicate":true`...)
	}
	return append(b, '}')
}

// pubAckError is a refused publish's answer: the error, and the stream
// with sequence 0, as the reference server answers.
func pubAckError(stream string, e *APIError) []byte {
	b, _ := jsonMarshal(struct {
		Error  *APIError `json:"error"`
		Stream string    `json:"stream"`
		Seq    uint64    `json:"seq"`
	}{e, stream, 0})
	return b
}

// dedupWindow remembers message IDs for a stream's duplicate window, in
// arrival order so that expiry pops from the front. Its size is bounded by
// MaxDedupIDs whatever the window. Not safe for concurrent use.
type dedupWindow struct {
	window time.Duration
	ids    map[string]uint64
	order  []dedupEntry
	head   int
	last   string // the most recent ID, for Nats-Expected-Last-Msg-Id
}

type dedupEntry struct {
	id  string
	at  time.Time
	seq uint64
}

func (d *dedupWindow) init(window time.Duration) {
	d.window, d.ids = window, map[string]uint64{}
}

func (d *dedupWindow) expire(now time.Time) {
	for d.head < len(d.order) && (now.Sub(d.order[d.head].at) > d.window || len(d.ids) > MaxDedupIDs) {
		e := d.order[d.head]
		if d.ids[e.id] == e.seq {
			delete(d.ids, e.id)
		}
		d.order[d.head] = dedupEntry{}
		d.head++
	}
	if d.head > 1024 && d.head > len(d.order)/2 {
		d.order = append([]dedupEntry(nil), d.order[d.head:]...)
		d.head = 0
	}
}

func (d *dedupWindow) lookup(id string, now time.Time) (uint64, bool) {
	d.expire(now)
	seq, ok := d.ids[id]
	return seq, ok
}

func (d *dedupWindow) add(id string, seq uint64, now time.Time) {
	d.ids[id] = seq
	d.order = append(d.order, dedupEntry{id: id, at: now, seq: seq})
	d.last = id
	d.expire(now)
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
