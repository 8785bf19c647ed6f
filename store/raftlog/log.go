package raftlog

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/skiffmq/skiff/store"
	"github.com/skiffmq/skiff/store/vfs"
)

// Log is the raft log of every group of a server: one directory of
// segments, one writer goroutine. Safe for concurrent use.
type Log struct {
	opts Options
	log  *slog.Logger

	mu struct {
		sync.Mutex
		groups  map[uint64]*Group
		queue   []*write
		queued  int64
		closed  bool
		onBatch func()
		stats   Stats
	}
	wake   chan struct{} // cap 1: the queue is not empty, or the log closed
	exited chan struct{} // closed when the writer returns
	bg     *bgSyncer     // fsyncs off the writer goroutine (bgsync.go)

	cacheBytes atomic.Int64

	// The writer goroutine's (and, before it starts, Open's).
	segs []*segment // oldest first; the last is active
	free []string   // base names of free files to recycle, oldest first
	buf  []byte
	lru  struct{ head, tail *Group } // groups with cached entries (cache.go)
	// hooks are the Payloads that stripped entries of the batch being
	// encoded, flushed before it is written (payloads.go).
	hooks []Payloads
	// hks are the hooks an fsync must sync first (payloads.go).
	hks hookSet
	// lastSync is when SyncInterval's background fsync last ran.
	lastSync time.Time
	// degraded: a write or fsync failed. Segments are no longer removed
	// until the log is reopened, so that the failed groups' records (and
	// the checkpoints that speak for them) stay as they were on disk.
	degraded bool
	// pendingBoot is the boot ID Open did not record (Options.HoldRecovery),
	// until AckRecovery; "" when none is pending. Guarded by mu.
	pendingBoot string
	pressured   uint64 // segment number OnPressure was last called for
	report      Report
	// damagedSeg is the segment recovery is replaying after damage it
	// could not attribute to groups (see Log.damage); Open only.
	damagedSeg *segment
}

// Stats counts what the log did since Open.
type Stats struct {
	Segments     int   // segment files
	Bytes        int64 // their total size
	Batches      int64 // writes to the active segment
	Records      int64
	Fsyncs       int64
	Recycled     int64 // segments started by writing over a free file
	Carried      int64 // entries of idle groups copied forward (carry.go)
	FailedWrites int64 // batches whose write or fsync failed
	CacheBytes   int64
	Groups       int
}

// Report is what Open found on disk.
type Report struct {
	// Unclean: the log was not closed by Close (a crash, a kill), and
	// Rebooted: the operating system has restarted since the log was
	// last opened (or its boot ID is unknown). Both are false for a new
	// log. Writes acknowledged under SyncInterval or SyncNever may have
	// been lost only if both hold; under SyncAlways, never.
	Unclean, Rebooted bool

	Segments       int   // segment files replayed
	Records        int64 // records replayed
	TruncatedBytes int64 // torn tail cut from the last segment
	Leftovers      int   // segments before a gap in the numbering, removed
	Damage         []Damage
	DamagedGroups  []uint64
}

// Damage is a span of bad records with good records after it, or at the
// end of a segment that was not the last.
type Damage struct {
	Segment string
	Offset  int64
	Bytes   int64
	Err     error
	// Groups are the groups whose records the span held, when the framing
	// of every one of them was intact (only their bodies went bad); nil
	// when it was not, and every group known then was marked damaged.
	Groups []uint64
}

// Open opens or creates the log in opts.Dir, recovers every group's state
// (see Recovery in doc.go), starts a new segment and the writer goroutine.
func Open(opts Options) (*Log, error) {
	opts.fill()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	l := &Log{opts: opts, log: opts.Logger, wake: make(chan struct{}, 1), exited: make(chan struct{})}
	l.mu.groups = make(map[uint64]*Group)
	if err := opts.FS.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("raftlog: create %s: %w", opts.Dir, err)
	}
	clean, lastBoot, err := l.readMarkers()
	if err != nil {
		return nil, err
	}
	if err := l.recover(); err != nil {
		l.closeFiles()
		return nil, err
	}
	boot := opts.BootID()
	if l.report.Segments > 0 {
		l.report.Unclean = !clean
		l.report.Rebooted = lastBoot == "" || boot == "" || lastBoot != boot
	}
	if err := l.roll(); err != nil {
		l.closeFiles()
		return nil, err
	}
	record := boot
	if opts.HoldRecovery && l.report.Unclean && l.report.Rebooted {
		record, l.pendingBoot = lastBoot, cmp.Or(boot, "unknown")
	}
	if err := l.markOpen(record); err != nil {
		l.closeFiles()
		return nil, err
	}
	l.gc()
	l.bg = newBGSyncer(l)
	// The first interval runs from the open: a zero time had the writer
	// fsync after its first batch, whatever the interval (and a test that
	// armed a failing fsync then met that one instead of its own).
	l.lastSync = time.Now()
	go l.run()
	return l, nil
}

// Recovery returns what Open found.
func (l *Log) Recovery() Report {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.report
	r.Damage = slices.Clone(r.Damage)
	r.DamagedGroups = slices.Clone(r.DamagedGroups)
	return r
}

// Stats returns the log's counters.
func (l *Log) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.mu.stats
	s.CacheBytes = l.cacheBytes.Load()
	s.Groups = len(l.mu.groups)
	return s
}

// Group returns group id's log, recovered or, if the log has no record of
// it, new and empty (nothing is written until its first update).
func (l *Log) Group(id uint64) *Group {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.groupLocked(id)
}

func (l *Log) groupLocked(id uint64) *Group {
	g, ok := l.mu.groups[id]
	if !ok {
		g = &Group{id: id, log: l}
		g.mu.st = newGroupState()
		l.mu.groups[id] = g
	}
	return g
}

// Groups returns the IDs of the groups the log holds, sorted.
func (l *Log) Groups() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Sorted(maps.Keys(l.mu.groups))
}

// groups returns the groups, for the writer to walk without l.mu.
func (l *Log) groups() []*Group {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.SortedFunc(maps.Values(l.mu.groups), func(a, b *Group) int { return cmp.Compare(a.id, b.id) })
}

// Remove deletes group id: a record says so, its entries stop pinning
// segments, and a later Group(id) starts empty. It returns once the
// record is written (and fsynced under SyncAlways).
func (l *Log) Remove(id uint64) error {
	return l.Group(id).wait(&write{op: opRemove})
}

// Sync fsyncs the active segment, whatever the policy, and returns once
// every write queued before it is durable.
func (l *Log) Sync() error {
	ch := make(chan error, 1)
	l.submit(&write{op: opSync, done: func(err error) { ch <- err }})
	return <-ch
}

// Room reports whether the writer's queue is below Options.QueueBytes: a
// caller that can hold its writes back (raft keeps a Ready until asked
// for it) asks before queueing more, so that Save never has to block.
func (l *Log) Room() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.queued < l.opts.QueueBytes
}

// OnBatch registers f to run on the writer goroutine after the callbacks
// of each batch: the multi-raft node flushes the messages those callbacks
// queued, one frame per peer for the whole batch. f must not block.
func (l *Log) OnBatch(f func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.onBatch = f
}

// submit queues w for the writer.
func (l *Log) submit(w *write) {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		if w.done != nil {
			w.done(ErrClosed)
		}
		return
	}
	l.mu.queue = append(l.mu.queue, w)
	l.mu.queued += w.bytes
	l.mu.Unlock()
	l.wakeWriter()
}

// wakeWriter makes the writer look at its queue (and the background
// syncer's failures) soon.
func (l *Log) wakeWriter() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Close writes what is queued, fsyncs under every policy, stops the
// writer and closes the files; then, unless a write or fsync failed while
// the log was open, it marks the log closed cleanly (Report.Unclean).
// Groups are unusable afterwards.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.mu.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.mu.closed = true
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	<-l.exited
	var err error
	if a := l.active(); a != nil {
		err = l.cutRecycled(a)
	}
	if a := l.active(); a != nil && a.dirty && err == nil {
		if err = l.syncAllHooks(); err != nil {
			l.log.Error("raftlog: payloads not synced at close", "err", err)
		}
		if err = a.f.Sync(); err != nil {
			err = fmt.Errorf("%w: %s: %w", ErrSync, a.name, err)
		}
	}
	l.closeFiles()
	l.mu.Lock()
	pending := l.pendingBoot != ""
	l.mu.Unlock()
	if err == nil && !l.degraded && !pending { // the writer has exited: its fields are ours
		err = l.writeMarker(cleanFile, "")
	}
	return err
}

// AckRecovery records that the caller has acted on a report of a lost
// tail (Options.HoldRecovery): the boot Open left unrecorded is recorded,
// and the next Close marks the log closed cleanly again.
func (l *Log) AckRecovery() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pendingBoot == "" {
		return nil
	}
	if err := l.writeMarker(bootIDFile, l.pendingBoot+"\n"); err != nil {
		return err
	}
	l.pendingBoot = ""
	return nil
}

func (l *Log) closeFiles() {
	for _, s := range l.segs {
		s.retire()
	}
	l.segs = nil
}

func (l *Log) active() *segment {
	if len(l.segs) == 0 {
		return nil
	}
	return l.segs[len(l.segs)-1]
}

// roll starts a new active segment whose first record is a checkpoint of
// every group. The old active segment is fsynced first, the new one and
// the directory after, whatever the policy, so that every segment but the
// active one is durable and its successor's checkpoint covers it: only
// then may GC remove segments. It runs once a segment (SegmentBytes).
func (l *Log) roll() error {
	old := l.active()
	if old != nil {
		if err := l.cutRecycled(old); err != nil {
			if !l.degraded {
				return err
			}
			l.log.Warn("raftlog: leaving a recycled segment uncut", "file", old.name, "err", err)
		}
	}
	if old != nil && old.dirty {
		if err := l.syncAllHooks(); err != nil {
			// The records pointing at them end the groups' logs at the
			// next Open if they are lost (SetPayloads).
			l.log.Error("raftlog: payloads not synced before a roll", "err", err)
		}
		err := old.f.Sync()
		l.count(func(s *Stats) { s.Fsyncs++ })
		switch {
		case err == nil:
			old.dirty = false
		case !l.degraded:
			return fmt.Errorf("%w: %s: %w", ErrSync, old.name, err)
		default:
			// A write or fsync failed before: leave the failing file
			// behind. GC is off, so nothing relies on it being durable.
			l.log.Warn("raftlog: leaving a segment whose fsync failed", "file", old.name, "err", err)
		}
	}
	num := uint64(1)
	if old != nil {
		num = old.num + 1
	}
	s := &segment{num: num, name: segmentName(num), seed: segmentSeed(num)}
	f, err := l.newSegmentFile(s)
	if err != nil {
		return fmt.Errorf("%w: create %s: %w", ErrWrite, s.name, err)
	}
	s.f = f
	body := appendCheckpoint(nil, l.images())
	b := appendRecord(nil, s.seed, kindCheckpoint, 0, num, 0, body)
	if len(b) > MaxRecordSize {
		err = fmt.Errorf("%w: checkpoint of %d bytes", ErrInvalid, len(b))
	} else if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = vfs.SyncDir(l.opts.FS, l.opts.Dir)
	}
	if err != nil {
		_ = f.Close()
		_ = l.opts.FS.Remove(l.segPath(s))
		return fmt.Errorf("%w: start %s: %w", ErrWrite, s.name, err)
	}
	s.size = int64(len(b))
	l.segs = append(l.segs, s)
	l.count(func(st *Stats) { st.Fsyncs++; st.Records++; st.Segments = len(l.segs); st.Bytes += s.size })
	return nil
}

// images returns every group's checkpoint image.
func (l *Log) images() []image {
	gs := l.groups()
	imgs := make([]image, 0, len(gs))
	for _, g := range gs {
		g.mu.Lock()
		if !g.mu.st.removed && g.id != 0 {
			imgs = append(imgs, g.mu.st.image(g.id))
		}
		g.mu.Unlock()
	}
	return imgs
}

// gc removes the oldest segments while no group has an entry in them.
func (l *Log) gc() {
	if len(l.segs) < 2 || l.degraded {
		return
	}
	l.carry()
	keep := l.active().num
	var pinning []uint64
	for _, g := range l.groups() {
		g.mu.Lock()
		st := &g.mu.st
		if len(st.locs) > 0 && !st.removed {
			if n := st.locs[0].seg.num; n < keep {
				keep, pinning = n, pinning[:0]
			}
			if st.locs[0].seg.num == keep {
				pinning = append(pinning, g.id)
			}
		}
		g.mu.Unlock()
	}
	n := 0
	for n < len(l.segs)-1 && l.segs[n].num < keep {
		n++
	}
	if n > 0 {
		// The records that let these go (compactions, the checkpoints
		// after them) must be durable before they are.
		if a := l.active(); a.dirty {
			if err := l.syncAllHooks(); err != nil {
				l.log.Error("raftlog: payloads not synced before removing segments; keeping them", "dir", l.opts.Dir, "err", err)
				return
			}
			if err := a.f.Sync(); err != nil {
				l.log.Error("raftlog: sync before removing segments; keeping them", "dir", l.opts.Dir, "err", err)
				return
			}
			a.dirty = false
			l.count(func(s *Stats) { s.Fsyncs++ })
		}
		for _, s := range l.segs[:n] {
			l.discard(s)
			size := s.size
			l.count(func(st *Stats) { st.Bytes -= size })
		}
		l.segs = append(l.segs[:0:0], l.segs[n:]...)
		l.count(func(st *Stats) { st.Segments = len(l.segs) })
		if err := vfs.SyncDir(l.opts.FS, l.opts.Dir); err != nil {
			l.log.Warn("raftlog: sync directory", "dir", l.opts.Dir, "err", err)
		}
	}
	l.checkPressure(pinning)
}

// checkPressure calls OnPressure once per oldest segment while the log is
// over MaxBytes.
func (l *Log) checkPressure(pinning []uint64) {
	if l.opts.OnPressure == nil || len(pinning) == 0 {
		return
	}
	var total int64
	for _, s := range l.segs {
		total += s.size
	}
	if oldest := l.segs[0].num; total > l.opts.MaxBytes && l.pressured != oldest {
		l.pressured = oldest
		l.opts.OnPressure(slices.Clone(pinning))
	}
}

func (l *Log) count(f func(*Stats)) {
	l.mu.Lock()
	f(&l.mu.stats)
	l.mu.Unlock()
}

// Update is what a MsgStorageAppend asks a group's storage to persist, in
// this order: a received snapshot, which replaces the whole log; entries,
// which replace those at their indexes and after; a HardState.
type Update struct {
	Snapshot  *pb.Snapshot
	Entries   []*pb.Entry
	HardState *pb.HardState
}

// UpdateOf returns the update a MsgStorageAppend carries.
func UpdateOf(m *pb.Message) Update {
	u := Update{Entries: m.GetEntries()}
	if m.Term != nil || m.Vote != nil || m.Commit != nil {
		u.HardState = &pb.HardState{Term: new(m.GetTerm()), Vote: new(m.GetVote()), Commit: new(m.GetCommit())}
	}
	if s := m.GetSnapshot(); s != nil && s.GetMetadata().GetIndex() != 0 {
		u.Snapshot = s
	}
	return u
}

func (u *Update) size() int64 {
	n := int64(recHeaderSize + 8)
	for _, e := range u.Entries {
		n += recHeaderSize + 2 + int64(len(e.GetData()))
	}
	if u.Snapshot != nil {
		n += 2*recHeaderSize + int64(len(u.Snapshot.GetData()))
	}
	return n
}

// Save queues u for the writer and returns at once. done, if not nil,
// runs on the writer goroutine once u is written and, if the policy or u
// asks for it (Options.Durability), fsynced; with an error, wrapping
// ErrWrite, ErrSync or ErrInvalid, if it was not, and then the group is
// failed. done must not block. Updates of one group are written in the
// order they were saved.
func (g *Group) Save(u Update, done func(error)) {
	g.log.submit(&write{g: g, op: opSave, u: u, done: done, bytes: u.size()})
}

// SaveWait is Save that waits for the write.
func (g *Group) SaveWait(u Update) error {
	return g.wait(&write{op: opSave, u: u, bytes: u.size()})
}

// CreateSnapshot records that the state machine's state at index i, with
// conf state cs and data, is a snapshot raft may send to a follower that
// needs entries before the first one. It does not drop entries: Compact
// does. Like raft.MemoryStorage.CreateSnapshot, it keeps the previous
// snapshot's conf state if cs is nil, and fails with
// raft.ErrSnapOutOfDate if i is not after the last snapshot.
func (g *Group) CreateSnapshot(i uint64, cs *pb.ConfState, data []byte) (*pb.Snapshot, error) {
	w := &write{op: opSnapshot, index: i, data: data, bytes: int64(len(data)), keepConf: cs == nil}
	if cs != nil {
		conf, err := proto.Marshal(cs)
		if err != nil {
			return nil, fmt.Errorf("%w: conf state: %w", ErrInvalid, err)
		}
		w.conf = conf
	}
	if err := g.wait(w); err != nil {
		return nil, err
	}
	return g.Snapshot()
}

// Compact drops the entries up to and including i, which the state
// machine must have applied (and made durable, if a restart is not to
// need them). Like raft.MemoryStorage.Compact, it fails with
// raft.ErrCompacted if they are gone already. It returns once the
// compaction is written; the segments it frees are removed just after,
// before any later write returns.
func (g *Group) Compact(i uint64) error {
	return g.wait(&write{op: opCompact, index: i})
}

// Reset empties the group's log: no entries, no snapshot, no conf state,
// commit 0, term and vote kept, and clears its damage mark. It is how a
// damaged replica starts over to be rebuilt from its peers.
func (g *Group) Reset() error {
	return g.wait(&write{op: opReset})
}

// wait submits w for g and waits for it.
func (g *Group) wait(w *write) error {
	ch := make(chan error, 1)
	w.g, w.done = g, func(err error) { ch <- err }
	g.log.submit(w)
	return <-ch
}

// The writer's deadline for a background sync under SyncInterval.
func (l *Log) syncTicker() (<-chan time.Time, func()) {
	if l.opts.Durability.Sync != store.SyncInterval {
		return nil, func() {}
	}
	t := time.NewTicker(l.opts.Durability.Interval)
	return t.C, t.Stop
}
