package multiraft

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"
)

// A leader that sends a follower a snapshot waits, in raft's
// StateSnapshot, for an acknowledgement that moves the follower's Match:
// the follower's answer once it installed it, or ReportSnapshot. The
// snapshot raft sends is the log's latest, which may be older than what
// the follower acknowledges meanwhile: appends sent before it arrive
// after it and move Match past it, while the leader compacts its log past
// Match. The follower then ignores the old snapshot (its commit is
// further) and answers with its commit, which equals Match and moves
// nothing: raft waits for ever, and the follower takes nothing more (the
// chaos suite's power losses found it: a follower restarted behind its
// leader stayed at one index). The layer above installs snapshots out of
// band and never reports their end, so the leader does, as soon as a
// heartbeat response shows the follower has everything the snapshot
// would give it: raft then probes it and sends the current snapshot.

// snapshotCaughtUp reports to raft that a snapshot sent to peer is done
// when peer's Match has reached it. Called by the worker, under g.mu,
// for each heartbeat response.
func snapshotCaughtUp(rn *raft.RawNode, peer uint64) {
	done := false
	rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == peer && pr.State == tracker.StateSnapshot && pr.Match >= pr.PendingSnapshot {
			done = true
		}
	})
	if done {
		rn.ReportSnapshot(peer, raft.SnapshotFinish)
	}
}
