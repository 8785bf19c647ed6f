package multiraftest

import (
	"math"
	"sync"

	"go.etcd.io/raft/v3"

	"github.com/skiffmq/skiff/internal/multiraft"
)

// MemDisk is the raft log of one test server, in memory: every group's
// MemLog saves through it, in order, as the WAL writer of store/raftlog
// does. A save is durable once it completes; Crash drops the saves that
// have not, as a power loss drops what was not synced.
//
// NewMemDisk completes saves only when the test calls Flush or FlushOne;
// NewAsyncMemDisk completes them on a writer goroutine, at once.
type MemDisk struct {
	async bool
	wake  chan struct{}
	stop  chan struct{}
	wg    sync.WaitGroup
	mu    struct {
		sync.Mutex
		pending []pendingSave
		logs    map[uint64]*MemLog
		closed  bool
	}
}

type pendingSave struct {
	log  *MemLog
	u    multiraft.Update
	done func(error)
}

// NewMemDisk returns a disk whose saves complete when Flush or FlushOne
// is called.
func NewMemDisk() *MemDisk {
	d := &MemDisk{}
	d.mu.logs = map[uint64]*MemLog{}
	return d
}

// NewAsyncMemDisk returns a disk whose saves complete in order on a
// writer goroutine, until Close.
func NewAsyncMemDisk() *MemDisk {
	d := NewMemDisk()
	d.async = true
	d.wake = make(chan struct{}, 1)
	d.stop = make(chan struct{})
	d.wg.Add(1)
	go d.writer()
	return d
}

func (d *MemDisk) writer() {
	defer d.wg.Done()
	for {
		select {
		case <-d.wake:
			d.Flush()
		case <-d.stop:
			return
		}
	}
}

// Log returns group's log on this disk, the same one across calls (and
// across the Nodes a test restarts over the disk).
func (d *MemDisk) Log(group uint64) *MemLog {
	d.mu.Lock()
	defer d.mu.Unlock()
	l := d.mu.logs[group]
	if l == nil {
		l = &MemLog{MemoryStorage: raft.NewMemoryStorage(), disk: d}
		d.mu.logs[group] = l
	}
	return l
}

// Pending returns the number of saves not yet complete.
func (d *MemDisk) Pending() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.mu.pending)
}

// Flush completes every pending save, in order, and returns how many.
func (d *MemDisk) Flush() int {
	n := 0
	for d.FlushOne() {
		n++
	}
	return n
}

// FlushOne completes the oldest pending save, and reports whether there
// was one.
func (d *MemDisk) FlushOne() bool {
	d.mu.Lock()
	if len(d.mu.pending) == 0 {
		d.mu.Unlock()
		return false
	}
	s := d.mu.pending[0]
	d.mu.pending[0] = pendingSave{}
	d.mu.pending = d.mu.pending[1:]
	err := s.log.write(s.u)
	d.mu.Unlock()
	s.done(err)
	return true
}

// Crash drops the pending saves, whose done never runs, and returns how
// many: what a power loss takes from a log that had not synced them.
func (d *MemDisk) Crash() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := len(d.mu.pending)
	d.mu.pending = nil
	return n
}

// Wipe crashes the disk and forgets every log: a server that lost its
// disk. Logs returned before keep their old contents; call Log again.
func (d *MemDisk) Wipe() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.mu.pending = nil
	d.mu.logs = map[uint64]*MemLog{}
}

// LoseTail crashes the disk and drops group's entries after index last,
// and its commit index past last: what a power loss takes from a log
// whose tail was written but not synced (under store/raftlog's interval
// and never policies). The term, the vote and the snapshot stay: they are
// synced under every policy. Logs returned before keep their old
// contents; call Log again.
func (d *MemDisk) LoseTail(group, last uint64) error {
	d.Crash()
	old := d.Log(group)
	ms := raft.NewMemoryStorage()
	snap, err := old.Snapshot()
	if err != nil {
		return err
	}
	if !raft.IsEmptySnap(snap) {
		if err := ms.ApplySnapshot(snap); err != nil {
			return err
		}
	}
	first, err := old.FirstIndex()
	if err != nil {
		return err
	}
	if last >= first {
		ents, err := old.Entries(first, last+1, math.MaxUint64)
		if err != nil {
			return err
		}
		if err := ms.Append(ents); err != nil {
			return err
		}
	}
	hs, _, err := old.InitialState()
	if err != nil {
		return err
	}
	hs.Commit = new(min(hs.GetCommit(), max(last, snap.GetMetadata().GetIndex())))
	if err := ms.SetHardState(hs); err != nil {
		return err
	}
	d.mu.Lock()
	d.mu.logs[group] = &MemLog{MemoryStorage: ms, disk: d}
	d.mu.Unlock()
	return nil
}

// Close stops an async disk's writer; pending saves never complete.
func (d *MemDisk) Close() {
	d.mu.Lock()
	closed := d.mu.closed
	d.mu.closed = true
	d.mu.Unlock()
	if d.async && !closed {
		close(d.stop)
		d.wg.Wait()
	}
}

// MemLog is one group's log on a MemDisk: a raft.MemoryStorage that
// multiraft writes through Save.
type MemLog struct {
	*raft.MemoryStorage
	disk *MemDisk
}

var _ multiraft.Log = (*MemLog)(nil)

// Save queues u on the disk (multiraft.Log).
func (l *MemLog) Save(u multiraft.Update, done func(error)) {
	d := l.disk
	d.mu.Lock()
	if d.mu.closed {
		d.mu.Unlock()
		return
	}
	d.mu.pending = append(d.mu.pending, pendingSave{log: l, u: u, done: done})
	d.mu.Unlock()
	if d.async {
		select {
		case d.wake <- struct{}{}:
		default:
		}
	}
}

// write applies u to the storage, in Update's order.
func (l *MemLog) write(u multiraft.Update) error {
	if u.Snapshot != nil {
		if err := l.ApplySnapshot(u.Snapshot); err != nil {
			return err
		}
	}
	if err := l.Append(u.Entries); err != nil {
		return err
	}
	if u.HardState != nil {
		return l.SetHardState(u.HardState)
	}
	return nil
}
