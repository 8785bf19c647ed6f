package jscluster

import (
	"sync"

	"github.com/skiffmq/skiff/internal/multiraft"
	"github.com/skiffmq/skiff/store"
	"github.com/skiffmq/skiff/store/raftlog"
)

// Replicas that may have lost an unsynced tail (design 2.5, "unsynced").
// Under the interval and never policies the WAL acknowledges writes once
// the operating system has them, before they are fsynced: a replica
// counts towards a commit with entries only its page cache holds. A
// process crash keeps them; a machine that stopped with the process
// (power loss, kernel panic) may not. The WAL tells which: at Start it
// reports that the last run did not close it (Unclean) and that the
// machine restarted since (Rebooted). Then every group whose log was in
// it, the meta group and every stream's, starts held unsynced
// (multiraft.HoldUnsynced): it neither votes nor campaigns until it has
// caught up with a leader of the current term, so it never helps elect a
// replica that lacks what it acknowledged. Under `always`, nothing
// acknowledged was left unsynced, and nothing is held.
//
// A group whose every replica is held (the whole cluster lost power) has
// no one to catch up from: Options.HoldTimeout without a leader releases
// them (multiraft), the documented case where acknowledged messages may
// be lost.

// unsynced is which groups of the WAL start held unsynced.
type unsynced struct {
	mu sync.Mutex
	// groups are the groups the WAL held at Start, not yet added to the
	// node: each is held once, when first added in this run. Nil when
	// the WAL lost nothing.
	groups map[uint64]bool
}

// lostTail reports whether a WAL may have lost writes it acknowledged: it
// was not closed, the machine restarted since, and its policy
// acknowledges writes before they are fsynced.
func lostTail(rep raftlog.Report, d store.Durability) bool {
	return rep.Unclean && rep.Rebooted && d.Sync != store.SyncAlways
}

// init records the groups of a WAL opened after a lost tail.
func (u *unsynced) init(wal *raftlog.Log) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.groups = map[uint64]bool{}
	for _, g := range wal.Groups() {
		u.groups[g] = true
	}
}

// hold returns how a group added now starts held: reason if the caller
// gives one (a wiped or damaged replica), else HoldUnsynced the first
// time in this run a group is added that the WAL held at Start after a
// lost tail, else not held.
func (u *unsynced) hold(group uint64, reason multiraft.HoldReason) multiraft.HoldReason {
	u.mu.Lock()
	defer u.mu.Unlock()
	lost := u.groups[group]
	delete(u.groups, group)
	if reason == multiraft.HoldNone && lost {
		return multiraft.HoldUnsynced
	}
	return reason
}

// Unsynced reports whether this server's WAL may have lost an unsynced
// tail before Start (an unclean stop across a restart of the machine,
// under a policy other than always): its groups started held unsynced.
func (c *Cluster) Unsynced() bool { return c.lostTail }
