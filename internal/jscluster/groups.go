package jscluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/raft/v3"

	"github.com/skiffmq/skiff/internal/multiraft"
	"github.com/skiffmq/skiff/store"
	"github.com/skiffmq/skiff/store/raftlog"
)

// Stream groups (design 3): the raft group of each replicated stream runs
// on the same node as the meta group, with its log in the same WAL, over
// the same raft links, its heartbeats coalesced with every other group's
// to the same peer. A group's ID is the meta log index of the entry that
// assigned its stream (StreamAssignment.Group: unique, never reused, and
// never MetaGroup), its voters the stream's peers. Only the servers a
// stream is placed on add its group; the state machine is the caller's
// (jetstream's replica of the stream).

// AddGroup puts a stream's group on this server's node, with sm as its
// state machine: from the group's log in the WAL if it has one (a
// restart), else new, with peers (server names, this one among them) as
// its voters. Every peer of a new group must be given the same peers.
func (c *Cluster) AddGroup(id uint64, peers []string, sm multiraft.StateMachine) error {
	return c.AddHeldGroup(id, peers, sm, multiraft.HoldNone)
}

// AddHeldGroup is AddGroup with the replica held for reason
// (multiraft.HoldReason) from its first moment: a replica that may have
// lost state it acknowledged or voted with neither votes nor campaigns
// until it has caught up with a leader of the current term. A group whose
// log the WAL may have lost the unsynced tail of is held unsynced without
// a reason given; one given HoldLost (its state is missing) is held lost
// if a power loss may have taken it, else wiped (unsynced.go).
func (c *Cluster) AddHeldGroup(id uint64, peers []string, sm multiraft.StateMachine, held multiraft.HoldReason) error {
	if id == MetaGroup || id == 0 {
		return fmt.Errorf("%w: group %d is not a stream's", ErrInvalidOptions, id)
	}
	held, err := c.unsynced.hold(id, held)
	if err != nil {
		return err
	}
	ids := make([]uint64, len(peers))
	for i, p := range peers {
		ids[i] = RaftID(p)
	}
	return c.node.AddGroup(multiraft.GroupConfig{ID: id, Log: walLog{c.wal.Group(id), c.wal}, StateMachine: sm, Peers: ids, Held: held})
}

// SetGroupPayloads gives a stream's group's log a Payloads hook
// (raftlog.Group.SetPayloads), before the group is added: its entries'
// payloads are kept by the hook, checked from index from on. It returns
// the index the group's log was cut at, its payloads lost (0 if none). A
// nil p takes the hook away, once the group is stopped.
func (c *Cluster) SetGroupPayloads(id uint64, p raftlog.Payloads, from uint64) (uint64, error) {
	if id == MetaGroup || id == 0 {
		return 0, fmt.Errorf("%w: group %d is not a stream's", ErrInvalidOptions, id)
	}
	return c.wal.Group(id).SetPayloads(p, from)
}

// GroupHeld returns why this server's replica of a stream's group is held
// (multiraft.HoldNone if it is not).
func (c *Cluster) GroupHeld(id uint64) (multiraft.HoldReason, error) {
	return c.node.Held(id)
}

// ReleaseGroup lifts the hold of this server's replica of a stream's
// group: the layer above rebuilt the state it was held for.
func (c *Cluster) ReleaseGroup(id uint64) error {
	return c.node.Release(id)
}

// RemoveGroup takes a stream's group off this server's node and drops its
// log from the WAL: the stream left this server.
func (c *Cluster) RemoveGroup(id uint64) error {
	if id == MetaGroup {
		return fmt.Errorf("%w: the meta group is not a stream's", ErrInvalidOptions)
	}
	if err := c.node.RemoveGroup(id); err != nil {
		return err
	}
	if err := c.wal.Remove(id); err != nil {
		return err
	}
	return c.unsynced.unmark(id)
}

// DropGroupLog drops a stream's group's log from the WAL while the group
// is not on this server's node (StopGroup first): the replica diverged
// from its group (multiraft.ErrDiverged), and comes back with no log,
// held wiped, to catch up from the leader.
func (c *Cluster) DropGroupLog(id uint64) error {
	if id == MetaGroup {
		return fmt.Errorf("%w: the meta group is not a stream's", ErrInvalidOptions)
	}
	if _, err := c.node.Held(id); err == nil {
		return fmt.Errorf("%w: group %d is running", ErrInvalidOptions, id)
	}
	return c.wal.Remove(id)
}

// StopGroup takes a stream's group off this server's node and keeps its
// log: the stream closes here, and will be opened again. After Close it
// does nothing.
func (c *Cluster) StopGroup(id uint64) error {
	if id == MetaGroup {
		return fmt.Errorf("%w: the meta group is not a stream's", ErrInvalidOptions)
	}
	if c.closed.Load() {
		return nil // the node and its groups stopped with the Cluster
	}
	return c.node.RemoveGroup(id)
}

// ProposeGroup hands data to a stream's group, if this server leads it;
// done hears whether raft took it (appended it to the leader's log), not
// whether it committed: the state machine applies what commits.
func (c *Cluster) ProposeGroup(id uint64, data []byte, done func(error)) error {
	return c.node.ProposeAsync(id, data, done)
}

// ReadIndex returns the index a linearizable read of a stream's group
// waits for its state machine to have applied: the leader's commit index,
// once a quorum confirmed the leadership (multiraft.Node.ReadIndex). It
// returns ctx's error if that does not come in time.
func (c *Cluster) ReadIndex(ctx context.Context, id uint64) (uint64, error) {
	return c.node.ReadIndex(ctx, id)
}

// GroupLeader returns the name of the server leading a stream's group as
// this one knows it ("" for none) and the group's term.
func (c *Cluster) GroupLeader(id uint64) (name string, term uint64) {
	lead, term, err := c.node.Leader(id)
	if err != nil || lead == raft.None {
		return "", term
	}
	return c.nameOf(lead), term
}

// HasGroupLog reports whether this server's WAL holds anything of a
// stream's group: a replica without it (a wiped raft directory) takes the
// group's log from its leader, whatever its state machine holds.
func (c *Cluster) HasGroupLog(id uint64) bool {
	g := c.wal.Group(id)
	hs, cs, err := g.InitialState()
	if err != nil {
		return false
	}
	last, err := g.LastIndex()
	return err == nil && (!raft.IsEmptyHardState(hs) || last > 0 || len(cs.GetVoters()) > 0)
}

// StepDown has this server, the leader of a group (MetaGroup or a
// stream's), hand the leadership to another voter: preferred if named (it
// must be a voter with a link up), else the voter that holds the most of
// the log. It returns once the transfer is asked for; the new leader is
// elected within an election.
func (c *Cluster) StepDown(group uint64, preferred string) error {
	st, err := c.node.Status(group)
	if err != nil {
		return err
	}
	if st.RaftState != raft.StateLeader {
		return ErrNotLeader
	}
	_, up := c.links()
	var to uint64
	for id := range st.Config.Voters.IDs() {
		switch {
		case id == c.id || !up[id]:
		case preferred != "":
			if c.nameOf(id) == preferred {
				to = id
			}
		case to == 0 || st.Progress[id].Match > st.Progress[to].Match:
			to = id
		}
	}
	if to == 0 {
		if preferred != "" {
			return fmt.Errorf("%w: %q is not a voter of the group with a link up", ErrNoPeer, preferred)
		}
		return fmt.Errorf("%w: no other voter of the group has a link up", ErrNoPeer)
	}
	return c.node.TransferLeadership(group, to)
}

// SnapshotGroup records the state machine of a stream's group at index
// (applied here, and durable as far as a restart needs) as the group's
// snapshot, data describing it (at most raftlog.MaxSnapshotData bytes:
// the state itself is fetched from a peer by the replica that installs
// it), and drops the group's entries up to index-keep, the keep after it
// left for followers a little behind. An index not after the last
// snapshot only compacts.
func (c *Cluster) SnapshotGroup(id, index uint64, data []byte, keep uint64) error {
	if id == MetaGroup {
		return fmt.Errorf("%w: the meta group is not a stream's", ErrInvalidOptions)
	}
	st, err := c.node.Status(id)
	if err != nil {
		return err
	}
	if st.Applied < index {
		// raft has not applied every membership change up to index: its
		// members are not yet those the snapshot must carry.
		return fmt.Errorf("%w: group %d at %d, a snapshot at %d", ErrNotApplied, id, st.Applied, index)
	}
	g := c.wal.Group(id)
	if _, err := g.CreateSnapshot(index, confStateOf(st.Config), data); err != nil && !errors.Is(err, raft.ErrSnapOutOfDate) {
		return err
	}
	// (A snapshot at or after index exists already: the entries up to
	// index-keep may go all the same.)
	if index > keep {
		if err := g.Compact(index - keep); err != nil && !errors.Is(err, raft.ErrCompacted) {
			return err
		}
	}
	return nil
}

// SyncLog fsyncs the WAL and returns once every write queued before it
// (every group's entries and hard states) is durable, whatever the sync
// policy: a replica's state machine made durable after it holds nothing
// its log may lose to a power loss.
func (c *Cluster) SyncLog() error { return c.wal.Sync() }

// LogStats is what the WAL counted since the server started: its
// segments and bytes, fsyncs, recycled segments, carried entries.
func (c *Cluster) LogStats() raftlog.Stats { return c.wal.Stats() }

// LogDurability is the WAL's sync policy.
func (c *Cluster) LogDurability() store.Durability { return c.opts.Durability }

// HoldTimeout is how long replicas held unsynced wait for a leader before
// they are released (Options.HoldTimeout, its default filled in).
func (c *Cluster) HoldTimeout() time.Duration { return c.opts.HoldTimeout }

// GroupFirstIndex returns the first index of a stream's group's log here:
// the entries before it were compacted away.
func (c *Cluster) GroupFirstIndex(id uint64) (uint64, error) {
	return c.wal.Group(id).FirstIndex()
}

// GroupLastIndex returns the last index of a stream's group's log in
// this server's WAL.
func (c *Cluster) GroupLastIndex(id uint64) (uint64, error) {
	return c.wal.Group(id).LastIndex()
}

// GroupPeers returns the names of a group's voters but this server, as
// this replica knows them.
func (c *Cluster) GroupPeers(id uint64) []string {
	st, err := c.node.Status(id)
	if err != nil {
		return nil
	}
	var out []string
	for v := range st.Config.Voters.IDs() {
		if v != c.id {
			out = append(out, c.nameOf(v))
		}
	}
	slices.Sort(out)
	return out
}
