package jscluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/skiffmq/skiff/internal/multiraft"
)

// Rebuilding a diverged meta replica. Under a policy that does not fsync
// every write, a quorum of the meta group can lose its last entries in a
// power loss, be released from its hold (multiraft.HoldUnsynced) and go on
// without them, while a replica that was down meanwhile had applied them.
// When it comes back, multiraft finds its log disagreeing with the
// leader's below what it applied (multiraft.ErrDiverged) and fails the
// group rather than let raft take the leader's entries for its own. The
// replica is then rebuilt as a stream's is (the jetstream package's
// replica_rebuild.go): the group comes off the node, its log and snapshot
// files are dropped, the state is emptied, and the group is put back with
// no log, held wiped, so that it neither votes nor campaigns until it has
// caught up. The leader's log starts past index 1 (the founding snapshot
// is there), so the replica always gets the leader's snapshot, whose
// Restore reconciles every stream (Options.OnStreams) with the state the
// group kept: a stream only the lost entries made goes, one they deleted
// comes back.
//
// The log is dropped and synced before the snapshot files go: a crash in
// between leaves files that the next snapshot prunes, never a log that
// names a missing file.

// rebuildWait bounds the wait for the failed group's apply goroutine.
const rebuildWait = 30 * time.Second

// Failed hears that the meta group failed here (multiraft.FailureListener).
// A replica that diverged from its group is rebuilt; any other failure
// (its log's disk) holds the meta group damaged, as /healthz reports,
// until the server restarts.
func (f *metaFSM) Failed(err error) {
	if !errors.Is(err, multiraft.ErrDiverged) || f.c.closed.Load() {
		return
	}
	f.c.log.Error("meta replica diverged from its group: a quorum lost entries this replica applied; "+
		"it is rebuilt from the meta leader", "err", err)
	if err := f.c.rebuildMeta(); err != nil && !f.c.closed.Load() {
		f.c.log.Error("meta replica not rebuilt: it stays held until the server restarts", "err", err)
		return
	}
	f.c.rebuilds.Add(1)
	f.c.log.Info("meta replica rebuilt: it catches up from the leader, held until it has")
}

// rebuildMeta drops the meta group's replica here and starts it again
// with no log, held wiped.
func (c *Cluster) rebuildMeta() error {
	ctx, cancel := context.WithTimeout(context.Background(), rebuildWait)
	defer cancel()
	if err := c.node.RemoveGroupWait(ctx, MetaGroup); err != nil {
		return fmt.Errorf("stopping the meta group: %w", err)
	}
	if err := c.wal.Remove(MetaGroup); err != nil {
		return fmt.Errorf("dropping the meta log: %w", err)
	}
	if err := c.wal.Sync(); err != nil {
		return fmt.Errorf("syncing the meta log's drop: %w", err)
	}
	c.metaLog.files.prune(^uint64(0), true)
	// The log's handle on the group it dropped is done with: a new one
	// starts empty. Only the meta group's apply goroutine and a join
	// (which this server, a member, does not make) read the handle.
	c.metaLog.walLog = walLog{c.wal.Group(MetaGroup), c.wal}
	c.meta.reset(c.metaLog)
	return c.addMeta(multiraft.HoldWiped)
}

// reset empties the state, for a group that starts again with no log,
// log. The group is off the node: nothing applies meanwhile.
func (f *metaFSM) reset(log fileSnapLog) {
	f.mu.Lock()
	f.mu.st, f.mu.applied = newState(), 0
	f.mu.Unlock()
	f.log, f.lastSnap = log, 0
	f.c.wake()
}

// MetaRebuilds returns how many times this server's meta replica was
// rebuilt since Start, having diverged from its group.
func (c *Cluster) MetaRebuilds() uint64 { return c.rebuilds.Load() }
