package jetstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/skiffmq/skiff/store"
)

// Checkpoints of replicated streams (design 3.6). Once a second a
// replica of a file stream records the last raft index whose effects its
// store holds on disk: the index applied is read first, then the store is
// fsynced, the durable consumers as applied written (consumersFile), then
// the index written (raft.ckpt, atomically). At a start raft
// hands over only the entries after it (replicaFSM.Checkpoint) instead of
// the group's whole log. The store is fsynced for it whatever the
// stream's sync policy (which applies to the raft log). A memory stream
// has no checkpoint: at a restart its store is empty, and it catches up
// from a peer (replica_catchup.go) or, while the log is not compacted
// yet, replays it. A replica whose group log is gone (a wiped raft
// directory) ignores its checkpoint and takes what the leader sends from
// the start, every op idempotent.

// checkpointFile is a replica's checkpoint, in its stream's directory.
const checkpointFile = "raft.ckpt"

// replicaCheckpoint is the file's content: Seq is the store's last
// sequence at Index, through which it is committed for good
// (store.Options.CommitThrough: what its files hold after it was staged
// or committed since, and comes back staged at the next start).
type replicaCheckpoint struct {
	Group uint64 `json:"group"`
	Index uint64 `json:"index"`
	Seq   uint64 `json:"seq"`
}

// checkpointMark is a checkpoint's raft index and store sequence.
type checkpointMark struct{ index, seq uint64 }

// maxMarks bounds the checkpoints a replica remembers; the oldest go
// first (the log is compacted a checkpoint or two behind the last).
const maxMarks = 16

// markCheckpoint remembers a checkpoint written. snapMu held.
func (r *replica) markCheckpoint(idx, seq uint64) {
	if len(r.marks) == maxMarks {
		r.marks = append(r.marks[:0], r.marks[1:]...)
	}
	r.marks = append(r.marks, checkpointMark{idx, seq})
}

// releaseThrough tells the store that the log was compacted through
// index: no replay needs the records of the last checkpoint at or below
// it again (store.ReleaseThrough), and the segments kept for one may go.
// snapMu held.
func (r *replica) releaseThrough(index uint64) {
	k := -1
	for i, m := range r.marks {
		if m.index <= index {
			k = i
		}
	}
	if k < 0 {
		return
	}
	r.st.store.ReleaseThrough(r.marks[k].seq)
	r.marks = append(r.marks[:0], r.marks[k:]...)
}

// checkpointSeq returns the store sequence of the replica's checkpoint of
// group in dir, 0 if it has none.
func checkpointSeq(dir string, group uint64) uint64 {
	b, err := os.ReadFile(filepath.Join(dir, checkpointFile))
	if err != nil {
		return 0
	}
	var c replicaCheckpoint
	if err := json.Unmarshal(b, &c); err != nil || c.Group != group {
		return 0
	}
	return c.Seq
}

// checkpoints reports whether a stream's replica keeps checkpoints: one
// of a file stream does, whatever its sync policy (a checkpoint fsyncs
// the store).
func (st *stream) checkpoints() bool {
	return st.config().Storage == FileStorage
}

// loadCheckpoint returns the index of the replica's checkpoint of group,
// 0 if it has none (or one of another group: the stream was made anew).
func (st *stream) loadCheckpoint(group uint64) uint64 {
	if !st.checkpoints() {
		return 0
	}
	b, err := os.ReadFile(filepath.Join(st.dir, checkpointFile))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			st.js.log.Warn("replica checkpoint not read: the group's log is replayed", "stream", st.name, "err", err)
		}
		return 0
	}
	var c replicaCheckpoint
	if err := json.Unmarshal(b, &c); err != nil || c.Group != group {
		st.js.log.Warn("replica checkpoint not used: the group's log is replayed", "stream", st.name, "err", err)
		return 0
	}
	return c.Index
}

// checkpoint records the replica's applied index once its store holds it
// on disk, if it moved since the last (syncState).
func (r *replica) checkpoint() {
	r.snapMu.Lock()
	defer r.snapMu.Unlock()
	st := r.st
	if !st.checkpoints() || r.fsm.restoring() {
		return
	}
	idx, seq, cons, err := r.syncState()
	if err != nil {
		if !errors.Is(err, store.ErrClosed) {
			st.js.log.Warn("replica checkpoint: sync failed", "stream", st.name, "err", err)
		}
		return
	}
	if idx <= r.saved.Load() {
		return
	}
	// The consumers as applied at idx, before the index that names them.
	if err := r.fsm.cons.saveSnapshot(st.dir, cons); err != nil {
		st.js.log.Warn("replica checkpoint: consumers not written", "stream", st.name, "err", err)
		return
	}
	b, err := json.Marshal(replicaCheckpoint{Group: r.group, Index: idx, Seq: seq})
	if err == nil {
		err = writeFileAtomic(filepath.Join(st.dir, checkpointFile), b)
	}
	if err != nil {
		st.js.log.Warn("replica checkpoint not written", "stream", st.name, "err", err)
		return
	}
	r.saved.Store(idx)
	r.markCheckpoint(idx, seq)
	r.founded()
}

// syncState makes what the replica applied durable for a checkpoint, and
// returns the index applied and the consumers as of it (nil if nothing
// was applied since the last checkpoint). The raft log is fsynced first:
// it then holds the index's entries and a commit at least as far, so a
// checkpoint never runs ahead of the log behind it (design 3.6; a restart
// refuses a state machine ahead of its log's commit, which a power loss
// of the log's unsynced tail would otherwise leave). Then the store.
//
// Under a policy that acknowledges before fsyncing, the store must never
// hold on disk an entry its log may lose: a power loss of a quorum may
// take such entries from the group, which then commits others at the same
// sequences, and a store that had kept them would take those for messages
// it holds (AppendAt) and differ from its peers for good. So the store's
// files are frozen at the index while both fsyncs run: between two
// batches of applied entries, its writes are held (store HoldWrites, with
// everything applied so far written), and it goes on applying in memory
// meanwhile; only an op that writes the files at once waits for the
// release (writeGate). Applies do not stop for the fsyncs (they did: two
// fsyncs a second during which no PubAck went out). Under always, every
// entry applied was fsynced in the log before it applied.
func (r *replica) syncState() (idx, seq uint64, cons *consumersSnapshot, err error) {
	hold := r.c.LogDurability().Sync != store.SyncAlways
	r.fsm.restore.Lock() // no batch of entries half applied
	idx = r.fsm.applied.Load()
	if idx <= r.saved.Load() {
		r.fsm.restore.Unlock()
		return idx, 0, nil, nil
	}
	seq = r.st.store.State().LastSeq
	cons, err = r.fsm.cons.snapshot()
	if err == nil && hold {
		if err = r.st.store.HoldWrites(); err == nil {
			r.fsm.writes.hold()
			defer func() {
				if rerr := r.st.store.ReleaseWrites(); rerr != nil && !errors.Is(rerr, store.ErrClosed) {
					r.st.js.log.Warn("replica checkpoint: held writes not written; written at the next flush", "stream", r.st.name, "err", rerr)
				}
				r.fsm.writes.release()
			}()
		}
	}
	r.fsm.restore.Unlock()
	if err != nil {
		return 0, 0, nil, err
	}
	if err := r.c.SyncLog(); err != nil {
		return 0, 0, nil, fmt.Errorf("raft log: %w", err)
	}
	// A round whatever the store counts durable already: removals since
	// the last checkpoint need one too.
	if err := r.st.store.SyncNow(); err != nil {
		return 0, 0, nil, err
	}
	return idx, seq, cons, nil
}

// checkpointReplicas checkpoints every replicated stream's replica here,
// snapshots and compacts its group, and (a leader) moves its log's time on
// (replica_clock.go).
func (js *JetStream) checkpointReplicas() {
	if js.raft == nil {
		return
	}
	for _, ja := range js.sortedAccounts() {
		for _, st := range ja.streams() {
			if st.repl != nil {
				st.repl.checkpoint()
				st.repl.compact()
				st.repl.tick(time.Now())
				st.repl.sweepAgain()
				if st.repl.isLeader() {
					st.repl.kickMembers()
				}
			}
		}
	}
}
