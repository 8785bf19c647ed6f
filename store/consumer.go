package store

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/skiffmq/skiff/internal/logthrottle"
)

// SeqPair is a position in a consumer's delivery order and in its stream.
type SeqPair struct {
	Consumer, Stream uint64
}

// PendingEntry is a delivered message awaiting acknowledgement.
type PendingEntry struct {
	// ConsumerSeq is the consumer sequence of its first delivery.
	ConsumerSeq uint64
	// Timestamp is its last delivery, in Unix nanoseconds.
	Timestamp int64
}

// ConsumerSnapshot is a consumer's whole state.
type ConsumerSnapshot struct {
	// Delivered is the last message delivered.
	Delivered SeqPair
	// AckFloor is the acknowledgement floor: every message this consumer
	// delivered at or below it has been acknowledged. It never moves back.
	AckFloor SeqPair
	// Pending maps the stream sequence of each delivered, unacknowledged
	// message to its delivery.
	Pending map[uint64]PendingEntry
	// Redelivered maps the stream sequence of each pending message
	// delivered more than once to its redelivery count (deliveries - 1),
	// as JetStream's consumer state counts it.
	Redelivered map[uint64]uint64
}

// clone returns a deep copy.
func (st *ConsumerSnapshot) clone() ConsumerSnapshot {
	c := *st
	c.Pending = make(map[uint64]PendingEntry, len(st.Pending))
	for k, v := range st.Pending {
		c.Pending[k] = v
	}
	c.Redelivered = make(map[uint64]uint64, len(st.Redelivered))
	for k, v := range st.Redelivered {
		c.Redelivered[k] = v
	}
	return c
}

// ConsumerState keeps a consumer's delivery and acknowledgement state for
// the layer above, file-backed or in memory. It is safe for concurrent use:
// methods serialise on one mutex, held for the write of one log record
// (and, under SyncAlways, released before the fsync, which concurrent
// callers share).
//
// The file variant appends each change to consumer.log and, once the log
// outgrows the state, compacts it into consumer.snap; see consumerfmt.go.
// When it fsyncs follows its Durability: under SyncAlways, Ack, AckAll,
// Update and WaitDurable return once the changes so far are on stable
// storage, so an acknowledgement floor they report never moves back after
// a crash; Delivered and the NoWait variants do not wait (a delivery lost
// in a crash only means a redelivery), but any later fsync covers them.
// Under SyncInterval a background goroutine, started by
// OpenConsumerStateOptions and stopped by Close, fsyncs every interval
// whatever was written since the last fsync, and logs a failure (once in
// a while: a full disk fails every round); under SyncNever nothing is
// fsynced but snapshots.
type ConsumerState struct {
	fs      FS
	dir     string
	dur     Durability
	log     *slog.Logger
	existed bool // its directory had files when opened: not a new consumer
	// syncWarn throttles the errors of background fsyncs.
	syncWarn logthrottle.Throttle
	stop     chan struct{} // closed by Close to stop the background fsyncs
	done     chan struct{} // closed when they have stopped

	mu struct {
		sync.Mutex
		closed      bool
		st          ConsumerSnapshot
		order       []uint64 // pending stream sequences, ascending; may hold acked ones
		lsn         uint64   // last change written
		file        *appendFile
		buf         []byte
		snapSize    int  // size of the last snapshot
		needCompact bool // an fsync of the log failed: rewrite the state whole
	}
	gc        groupCommit
	closeOnce sync.Once
}

// compactMinBytes is the log size below which the consumer log is never
// compacted.
const compactMinBytes = 1 << 20

// NewMemoryConsumerState returns a ConsumerState kept only in memory.
func NewMemoryConsumerState() *ConsumerState {
	c := &ConsumerState{log: slog.Default()}
	c.mu.st = ConsumerSnapshot{Pending: map[uint64]PendingEntry{}, Redelivered: map[uint64]uint64{}}
	return c
}

// ConsumerOptions configures a file-backed ConsumerState.
type ConsumerOptions struct {
	// Dir is the consumer's directory, created if missing. It holds only
	// this consumer's files.
	Dir string
	// FS is the file system (default OSFS).
	FS FS
	// Durability is when its changes are fsynced (default SyncAlways);
	// see ConsumerState.
	Durability Durability
	// Logger receives recovery reports (default slog.Default()).
	Logger *slog.Logger
}

// OpenConsumerState opens or creates the file-backed state of a consumer in
// dir with fs (nil for OSFS) and durability d; see
// OpenConsumerStateOptions.
func OpenConsumerState(dir string, fs FS, d Durability) (*ConsumerState, error) {
	return OpenConsumerStateOptions(ConsumerOptions{Dir: dir, FS: fs, Durability: d})
}

// OpenConsumerStateOptions opens or creates the file-backed state of a
// consumer. It recovers the snapshot and replays the log after it,
// truncating a torn last record. A corrupt snapshot is an error (wrapping
// ErrCorrupt): starting over would move the ack floor back.
func OpenConsumerStateOptions(o ConsumerOptions) (*ConsumerState, error) {
	if o.FS == nil {
		o.FS = OSFS
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Durability.fill()
	if err := o.Durability.validate(); err != nil {
		return nil, err
	}
	if o.Dir == "" {
		return nil, fmt.Errorf("%w: consumer state needs a Dir", ErrInvalidConfig)
	}
	c := NewMemoryConsumerState()
	c.fs, c.dir, c.dur, c.log = o.FS, o.Dir, o.Durability, o.Logger
	fs, dir := o.FS, o.Dir
	// A directory with files in it is an existing consumer's (a new one's
	// may have been made empty by its caller).
	entries, _ := fs.ReadDir(dir)
	c.existed = len(entries) > 0
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("store: create %s: %w", dir, err)
	}
	snapLSN, current, err := c.loadSnapshot()
	if err != nil {
		return nil, err
	}
	if err := c.replayLog(snapLSN, current); err != nil {
		return nil, err
	}
	c.gc.durable.Store(c.mu.lsn)
	if c.dur.Sync == SyncInterval {
		c.stop, c.done = make(chan struct{}), make(chan struct{})
		go c.syncLoop()
	}
	return c, nil
}

// loadSnapshot loads the snapshot, if any, and returns its LSN and
// whether it is of the current version (its log begins with opStart).
func (c *ConsumerState) loadSnapshot() (uint64, bool, error) {
	name := filepath.Join(c.dir, consumerSnapName)
	f, err := c.fs.OpenFile(name, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("store: open %s: %w", name, err)
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(f)
	if err != nil {
		return 0, false, fmt.Errorf("store: read %s: %w", name, err)
	}
	lsn, st, current, err := decodeSnapshotVersion(b)
	if err != nil {
		return 0, false, fmt.Errorf("store: %s: %w", name, err)
	}
	c.mu.st, c.mu.lsn, c.mu.snapSize = st, lsn, len(b)
	c.mu.order = sortedKeys(st.Pending)
	return lsn, current, nil
}

func (c *ConsumerState) replayLog(snapLSN uint64, current bool) error {
	name := filepath.Join(c.dir, consumerLogName)
	if _, err := c.fs.Stat(name); errors.Is(err, os.ErrNotExist) && (snapLSN > 0 || c.existed) {
		// The log is created with the state and only ever emptied: gone,
		// it took with it whatever progress came after the snapshot.
		c.log.Error("store: consumer log missing; progress recorded after the snapshot is lost (messages may be delivered again)",
			"file", name, "snapshot_lsn", snapLSN, "ack_floor", c.mu.st.AckFloor.Stream)
	}
	f, err := c.fs.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("store: open %s: %w", name, err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		_ = f.Close()
		return fmt.Errorf("store: read %s: %w", name, err)
	}
	floorBefore := c.mu.st.AckFloor
	var start logStart
	apply := func(o consumerOp) {
		start.see(o)
		if o.lsn > max(snapLSN, c.mu.lsn) { // older ones are in the snapshot already
			c.applyLocked(o)
			c.mu.lsn = o.lsn
		}
	}
	good, derr := decodeOps(b, apply)
	damaged := false
	for derr != nil {
		// A bad record with good ones after it is damage, not a torn
		// tail: go on from the next good record (consumerresync.go).
		next, ok := nextGoodOp(b, good+1, c.mu.lsn)
		if !ok {
			break
		}
		damaged = true
		floor := c.mu.st.AckFloor.Stream
		c.log.Error("store: consumer log damaged; skipping the bad bytes and replaying the records after them",
			"file", name, "offset", good, "bytes", next-good, "ack_floor_before", floor, "err", derr)
		var n int
		n, derr = decodeOps(b[next:], apply)
		good = next + n
	}
	if derr != nil {
		c.log.Warn("store: truncating the consumer log's tail", "file", name, "offset", good, "err", derr)
	}
	c.mu.file = &appendFile{f: f, size: int64(good)}
	c.checkLogStart(name, &start, snapLSN, current, floorBefore)
	fresh := snapLSN == 0 && !current && !c.existed && len(b) == 0
	if damaged || fresh {
		// Damaged: keep the log for inspection, and start clean: the
		// state replayed becomes the snapshot, the log its start. New:
		// an empty snapshot and a log that says where it starts, so that
		// a log emptied later is told from one never written.
		if damaged {
			if werr := writeFileAtomic(c.fs, name+".damaged", b); werr != nil {
				c.log.Warn("store: keeping a copy of the damaged consumer log", "file", name, "err", werr)
			}
		}
		st := c.mu.st.clone()
		if err := c.compactLocked(&st, c.mu.lsn); err != nil {
			_ = f.Close()
			return err
		}
		if damaged {
			c.log.Error("store: consumer log recovered past damage", "file", name, "ack_floor", c.mu.st.AckFloor.Stream,
				"delivered", c.mu.st.Delivered.Stream)
		}
	} else if err := c.mu.file.rewind(); err != nil {
		_ = f.Close()
		return fmt.Errorf("store: truncate %s: %w", name, err)
	}
	if c.dur.Sync != SyncNever && len(b) == 0 {
		_ = syncDir(c.fs, c.dir) // the new log's directory entry; a failure only costs an empty log
	}
	return nil
}

// Delivered records a delivery of stream sequence sseq as consumer
// sequence dseq, its dc-th (1 for the first), at time ts. It does not wait
// for an fsync.
func (c *ConsumerState) Delivered(dseq, sseq, dc uint64, ts int64) error {
	_, err := c.write(consumerOp{op: opDelivered, dseq: dseq, sseq: sseq, dc: dc, ts: ts})
	return err
}

// Ack records the acknowledgement of one pending message (ack policy
// explicit, or a terminated message) and advances the ack floor past every
// acknowledged message below the oldest pending one. It returns
// ErrNotPending if sseq is not pending. Under SyncAlways it returns once
// the change is durable.
func (c *ConsumerState) Ack(dseq, sseq uint64) error {
	return c.writeAndWait(consumerOp{op: opAck, dseq: dseq, sseq: sseq})
}

// AckAll acknowledges every pending message up to stream sequence sseq
// (ack policy all) and moves the ack floor to at least (dseq, sseq). For a
// consumer without acks, calling it after each Delivered keeps the floor
// with the deliveries. Under SyncAlways it returns once the change is
// durable.
func (c *ConsumerState) AckAll(dseq, sseq uint64) error {
	return c.writeAndWait(consumerOp{op: opAckAll, dseq: dseq, sseq: sseq})
}

func (c *ConsumerState) writeAndWait(o consumerOp) error {
	lsn, err := c.write(o)
	if err != nil || c.mu.file == nil || c.dur.Sync != SyncAlways {
		return err
	}
	return c.gc.wait(lsn, c.syncRound)
}

// write logs and applies one change; it returns the change's LSN.
func (c *ConsumerState) write(o consumerOp) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return 0, ErrClosed
	}
	if o.op == opAck {
		if _, ok := c.mu.st.Pending[o.sseq]; !ok {
			return 0, fmt.Errorf("%w: stream sequence %d", ErrNotPending, o.sseq)
		}
	}
	o.lsn = c.mu.lsn + 1
	if f := c.mu.file; f != nil {
		if c.mu.needCompact {
			if err := c.compactLocked(&c.mu.st, c.mu.lsn); err != nil {
				return 0, err
			}
		}
		c.mu.buf = appendOp(c.mu.buf[:0], o)
		if err := f.append(c.mu.buf); err != nil {
			return 0, fmt.Errorf("%w: %s: %w", ErrWrite, consumerLogName, err)
		}
	}
	c.mu.lsn = o.lsn
	c.applyLocked(o)
	if f := c.mu.file; f != nil && f.size > compactMinBytes && f.size > 4*int64(c.mu.snapSize) {
		if err := c.compactLocked(&c.mu.st, c.mu.lsn); err != nil {
			c.log.Error("store: compact consumer state; will retry", "dir", c.dir, "err", err)
		}
	}
	return o.lsn, nil
}

// applyLocked applies a change to the in-memory state. Replay applies the
// same changes in the same order, so it reaches the same state.
func (c *ConsumerState) applyLocked(o consumerOp) {
	st := &c.mu.st
	switch o.op {
	case opDelivered:
		if o.dseq <= st.AckFloor.Consumer {
			return // a replay of something already acknowledged
		}
		if o.sseq > st.Delivered.Stream {
			st.Pending[o.sseq] = PendingEntry{ConsumerSeq: o.dseq, Timestamp: o.ts}
			c.mu.order = append(c.mu.order, o.sseq)
		} else if p, ok := st.Pending[o.sseq]; ok {
			p.Timestamp = o.ts // a redelivery keeps its first consumer sequence
			st.Pending[o.sseq] = p
		}
		st.Delivered.Consumer = max(st.Delivered.Consumer, o.dseq)
		st.Delivered.Stream = max(st.Delivered.Stream, o.sseq)
		if _, ok := st.Pending[o.sseq]; ok && o.dc > 1 {
			st.Redelivered[o.sseq] = max(st.Redelivered[o.sseq], o.dc-1)
		}
	case opAck:
		delete(st.Pending, o.sseq)
		delete(st.Redelivered, o.sseq)
		c.advanceFloorLocked()
	case opAckAll:
		for len(c.mu.order) > 0 && c.mu.order[0] <= o.sseq {
			delete(st.Pending, c.mu.order[0])
			delete(st.Redelivered, c.mu.order[0])
			c.mu.order = c.mu.order[1:]
		}
		st.AckFloor.Consumer = max(st.AckFloor.Consumer, o.dseq)
		st.AckFloor.Stream = max(st.AckFloor.Stream, o.sseq)
		c.advanceFloorLocked()
	}
}

// advanceFloorLocked moves the ack floor up to just below the oldest
// pending message, or to Delivered when nothing is pending. It never moves
// it down.
func (c *ConsumerState) advanceFloorLocked() {
	st := &c.mu.st
	for len(c.mu.order) > 0 {
		if _, ok := st.Pending[c.mu.order[0]]; ok {
			break
		}
		c.mu.order = c.mu.order[1:]
	}
	if len(c.mu.order) > 2*len(st.Pending)+64 {
		c.mu.order = slices.DeleteFunc(c.mu.order, func(q uint64) bool { _, ok := st.Pending[q]; return !ok })
	}
	floor := st.Delivered
	if len(c.mu.order) > 0 {
		oldest := c.mu.order[0]
		floor = SeqPair{Consumer: st.Pending[oldest].ConsumerSeq - 1, Stream: oldest - 1}
	}
	if floor.Stream > st.AckFloor.Stream {
		st.AckFloor.Stream = floor.Stream
	}
	if floor.Consumer > st.AckFloor.Consumer {
		st.AckFloor.Consumer = floor.Consumer
	}
}

// Update replaces the state with what f makes of a copy of it (for a reset
// or a change the finer methods do not express) and persists it whole, as
// a new snapshot. Under SyncAlways it returns once that is durable. Unlike
// the other methods, Update may move the ack floor back.
func (c *ConsumerState) Update(f func(*ConsumerSnapshot)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return ErrClosed
	}
	st := c.mu.st.clone()
	f(&st)
	if st.Pending == nil {
		st.Pending = map[uint64]PendingEntry{}
	}
	if st.Redelivered == nil {
		st.Redelivered = map[uint64]uint64{}
	}
	if c.mu.file != nil {
		if err := c.compactLocked(&st, c.mu.lsn+1); err != nil {
			return err
		}
	}
	c.mu.lsn++
	c.mu.st = st
	c.mu.order = sortedKeys(st.Pending)
	return nil
}

// compactLocked writes st as the snapshot as of lsn (to a temporary file,
// fsynced, then renamed over the old one) and empties the log. A crash at
// any point leaves either the old snapshot and the whole log, or the new
// snapshot and a log whose records it already covers (skipped by LSN).
func (c *ConsumerState) compactLocked(st *ConsumerSnapshot, lsn uint64) error {
	b := encodeSnapshot(lsn, st)
	tmp := filepath.Join(c.dir, consumerSnapName+".tmp")
	f, err := c.fs.Create(tmp)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrWrite, tmp, err)
	}
	_, err = f.Write(b)
	if err == nil && c.dur.Sync != SyncNever {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = c.fs.Rename(tmp, filepath.Join(c.dir, consumerSnapName))
	}
	if err == nil && c.dur.Sync != SyncNever {
		err = syncDir(c.fs, c.dir)
	}
	if err != nil {
		_ = c.fs.Remove(tmp)
		return fmt.Errorf("%w: consumer snapshot: %w", ErrWrite, err)
	}
	c.mu.snapSize, c.mu.needCompact = len(b), false
	// The log starts over with a record saying where it starts
	// (consumerlost.go), written over the old log's first bytes before the
	// rest is cut off, so that no crash leaves it empty beside the new
	// snapshot. On failure the next write compacts again; meanwhile the
	// snapshot covers the log's records.
	c.mu.buf = appendOp(c.mu.buf[:0], consumerOp{lsn: lsn, op: opStart, dseq: st.AckFloor.Consumer, sseq: st.AckFloor.Stream})
	lf := c.mu.file
	lf.size = 0
	_, err = lf.f.Seek(0, io.SeekStart)
	if err == nil {
		err = lf.append(c.mu.buf)
	}
	if err == nil {
		err = lf.rewind()
	}
	if err != nil {
		c.mu.needCompact = true
		c.log.Warn("store: start the consumer log again; will retry", "dir", c.dir, "err", err)
	}
	return nil
}

// syncRound fsyncs the log for the group commit; the caller holds gc.mu.
func (c *ConsumerState) syncRound() (uint64, error) {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return 0, ErrClosed
	}
	target, f := c.mu.lsn, c.mu.file.f
	c.mu.Unlock()
	if err := f.Sync(); err != nil {
		c.mu.Lock()
		c.mu.needCompact = true // the unsynced records may be gone; rewrite the state whole
		c.mu.Unlock()
		return target, fmt.Errorf("%w: %s: %w", ErrSync, consumerLogName, err)
	}
	return target, nil
}

// WaitDurable makes the changes so far as durable as the policy promises,
// for a caller that recorded them without waiting (Delivered, AckNoWait,
// AckAllNoWait): under SyncAlways it returns once they are fsynced
// (concurrent callers share one fsync); under SyncInterval and SyncNever it
// returns nil at once, the background fsync (SyncInterval) logging its own
// failures.
func (c *ConsumerState) WaitDurable() error {
	if c.dur.Sync != SyncAlways {
		return nil
	}
	return c.Sync()
}

// syncLoop is the background goroutine of SyncInterval: every interval
// it fsyncs what was written since the last fsync.
func (c *ConsumerState) syncLoop() {
	defer close(c.done)
	t := time.NewTicker(c.dur.Interval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			c.mu.Lock()
			dirty := c.mu.lsn > c.gc.durable.Load()
			c.mu.Unlock()
			if !dirty {
				continue
			}
			if err := c.Sync(); err != nil && !errors.Is(err, ErrClosed) {
				c.syncWarn.Log(c.log, slog.LevelError, "consumer state sync failed", "dir", c.dir, "err", err)
			}
		}
	}
}

// Sync makes every change so far durable now (unless SyncNever), whatever
// the policy: a checkpoint.
func (c *ConsumerState) Sync() error {
	c.mu.Lock()
	lsn, closed := c.mu.lsn, c.mu.closed
	c.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case c.mu.file == nil || c.dur.Sync == SyncNever:
		return nil
	}
	return c.gc.wait(lsn, c.syncRound)
}

// Load returns a deep copy of the state.
func (c *ConsumerState) Load() (ConsumerSnapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return ConsumerSnapshot{}, ErrClosed
	}
	return c.mu.st.clone(), nil
}

// Close stops the background fsyncs, syncs (unless SyncNever) and closes
// the state's files.
func (c *ConsumerState) Close() error {
	c.closeOnce.Do(func() {
		if c.stop != nil {
			close(c.stop)
			<-c.done
		}
	})
	err := c.Sync()
	if errors.Is(err, ErrClosed) {
		return nil
	}
	c.gc.mu.Lock() // no fsync in flight while the file closes
	defer c.gc.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.closed = true
	if c.mu.file != nil {
		err = errors.Join(err, c.mu.file.f.Close())
	}
	return err
}

// Destroy closes the state and removes its files and directory.
func (c *ConsumerState) Destroy() error {
	err := c.Close()
	if c.fs == nil {
		return err
	}
	for _, n := range []string{consumerLogName, consumerSnapName, consumerSnapName + ".tmp"} {
		if rerr := c.fs.Remove(filepath.Join(c.dir, n)); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	if rerr := c.fs.Remove(c.dir); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}
