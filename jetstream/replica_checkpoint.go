package jetstream

import (
	"encoding/json"
	"errors"
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

// replicaCheckpoint is the file's content.
type replicaCheckpoint struct {
	Group uint64 `json:"group"`
	Index uint64 `json:"index"`
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
// on disk, if it moved since the last.
func (r *replica) checkpoint() {
	r.snapMu.Lock()
	defer r.snapMu.Unlock()
	st := r.st
	if !st.checkpoints() {
		return
	}
	idx := r.fsm.applied.Load() // before the fsync: what it covers
	if idx <= r.saved.Load() {
		return
	}
	if err := st.store.Sync(st.store.State().LastSeq); err != nil {
		if !errors.Is(err, store.ErrClosed) {
			st.js.log.Warn("replica checkpoint: store sync failed", "stream", st.name, "err", err)
		}
		return
	}
	// The consumers as applied, at or after idx, before the index that
	// names them.
	if err := r.fsm.cons.save(st.dir); err != nil {
		st.js.log.Warn("replica checkpoint: consumers not written", "stream", st.name, "err", err)
		return
	}
	b, err := json.Marshal(replicaCheckpoint{Group: r.group, Index: idx})
	if err == nil {
		err = writeFileAtomic(filepath.Join(st.dir, checkpointFile), b)
	}
	if err != nil {
		st.js.log.Warn("replica checkpoint not written", "stream", st.name, "err", err)
		return
	}
	r.saved.Store(idx)
	r.founded()
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
				if st.repl.isLeader() {
					st.repl.kickMembers()
				}
			}
		}
	}
}
