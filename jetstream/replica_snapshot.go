package jetstream

import (
	"encoding/json"
	"errors"
	"fmt"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/internal/jscluster"
)

// Snapshots and log compaction of replicated streams (design 3.7). Once a
// second, after its checkpoint (replica_checkpoint.go), a replica records
// a snapshot of its group at the index its store holds durably (a memory
// stream: the index it applied) and compacts the group's log behind it,
// keeping replicaLogKeep entries for followers a little behind: the log
// of a stream is bounded, whatever it took in.
//
// The snapshot's data describes the store (replicaSnapshot) and holds
// the durable consumers' states, taken after the index is read: a
// replica that installs one (from its leader, having fallen behind the
// leader's log; or its own, its store behind it at start: a memory
// stream restarted, a store directory lost) fetches the messages from a
// peer (replica_catchup.go) before it applies anything after it.

// replicaLogKeep is the entries a replica keeps in its group's log behind
// its snapshot. A variable for tests.
var replicaLogKeep uint64 = 512

// replicaSnapshot describes a replica's store at a snapshot: Index is the
// snapshot's (from raft's metadata, not encoded); the rest as the store
// stood when it was taken, at or after Index.
type replicaSnapshot struct {
	Index  uint64 `json:"-"`
	First  uint64 `json:"first"`
	Last   uint64 `json:"last"`
	LastTS int64  `json:"last_ts,omitempty"`
	// Consumers is the durable consumers as applied when it was taken
	// (replica_consumers.go).
	Consumers *consumersSnapshot `json:"consumers,omitempty"`
}

// decodeReplicaSnapshot reads a snapshot's data.
func decodeReplicaSnapshot(snap *raftpb.Snapshot) (*replicaSnapshot, error) {
	var d replicaSnapshot
	if err := json.Unmarshal(snap.GetData(), &d); err != nil {
		return nil, fmt.Errorf("%w: snapshot %d: %v", errBadOp, snap.GetMetadata().GetIndex(), err)
	}
	d.Index = snap.GetMetadata().GetIndex()
	return &d, nil
}

// compact snapshots the replica's group at the last index its store holds
// durably and compacts the log behind it, keeping replicaLogKeep entries,
// if that moved since the last.
func (r *replica) compact() { r.compactKeep(replicaLogKeep) }

// compactKeep is compact keeping keep entries; with keep 0 it compacts
// even if the index did not move.
func (r *replica) compactKeep(keep uint64) {
	r.snapMu.Lock()
	defer r.snapMu.Unlock()
	idx := r.saved.Load()
	if !r.st.checkpoints() {
		idx = r.fsm.applied.Load()
	}
	if idx == 0 || (idx <= r.snapped.Load() && keep > 0) || r.fsm.restoring() || idx < r.members.confIndex.Load() {
		// (A snapshot takes raft's members as they are now: not below a
		// membership change applied since.)
		return
	}
	s := r.st.store.State()
	d := replicaSnapshot{First: s.FirstSeq, Last: s.LastSeq}
	if !s.LastTime.IsZero() {
		d.LastTS = s.LastTime.UnixNano()
	}
	cons, err := r.fsm.cons.snapshot() // at or after idx: the entries after idx apply over it exactly
	if err != nil {
		r.st.js.log.Warn("replicated stream snapshot failed: its log is kept", "stream", r.st.name, "index", idx, "err", err)
		return
	}
	d.Consumers = cons
	data, err := json.Marshal(&d)
	if err == nil {
		err = r.c.SnapshotGroup(r.group, idx, data, keep)
	}
	if errors.Is(err, jscluster.ErrNotApplied) {
		return // the next round
	}
	if err != nil {
		r.st.js.log.Warn("replicated stream snapshot failed: its log is kept", "stream", r.st.name, "index", idx, "err", err)
		return
	}
	r.snapped.Store(idx)
	if !r.st.checkpoints() {
		r.founded() // a memory stream's group is on disk with its snapshot
	}
	if idx > keep {
		r.releaseThrough(idx - keep) // compacted through there (SnapshotGroup)
	}
}
