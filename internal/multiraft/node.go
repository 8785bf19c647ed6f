package multiraft

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Node drives every raft group of one server: one RawNode per group, run
// by a pool of workers, ticked by one ticker, with one apply goroutine per
// group and one Transport to the other servers. Safe for concurrent use.
type Node struct {
	id   uint64
	opts Options
	tr   Transport
	// holdTicks is Options.HoldTimeout in ticks.
	holdTicks int64

	runq      *runQueue
	applyq    applyQueue  // manual nodes: groups with apply work
	manualOut *outbox     // manual nodes: Process's outbox
	clock     manualClock // manual nodes: Tick's time

	closed atomic.Bool
	stop   chan struct{}
	wg     sync.WaitGroup

	mu struct {
		sync.RWMutex
		groups map[uint64]*group
		list   []*group // copy on write, in the order groups were added
	}
	links struct {
		sync.Mutex
		gen  uint64
		down map[uint64]uint64 // peer -> gen of its LinkDown
	}
	roomWait struct {
		sync.Mutex
		groups []*group
	}
	notices commitNotices
	stats   nodeStats
}

var _ Handler = (*Node)(nil)

type nodeStats struct {
	received         atomic.Uint64
	unknownGroup     atomic.Uint64
	badMessages      atomic.Uint64
	heldVotesDropped atomic.Uint64
	bulkDropped      atomic.Uint64
	lostLogBeats     atomic.Uint64
	noticesHeld      atomic.Uint64
	noticesReplaced  atomic.Uint64
	noticesSent      atomic.Uint64
}

// Stats are a Node's counters since New.
type Stats struct {
	Groups           int    // groups hosted
	Received         uint64 // messages received, heartbeats included
	UnknownGroup     uint64 // received for a group not hosted here, dropped
	BadMessages      uint64 // received and dropped: unreadable, misaddressed or local-only
	HeldVotesDropped uint64 // granted votes of held replicas not sent
	BulkDropped      uint64 // appends and snapshots the transport could not queue
	// LostLogBeats counts heartbeats that committed past a follower's
	// log, answered with a rejection (clampHeartbeat): a follower that
	// lost entries it had acknowledged. 0 unless logs were lost.
	LostLogBeats uint64
	// CommitNoticesHeld counts the appends without entries a leader held
	// (notice.go); CommitNoticesReplaced those of them an append to the
	// same follower and group replaced, CommitNoticesSent those sent once
	// Options.CommitNoticeDelay had passed.
	CommitNoticesHeld, CommitNoticesReplaced, CommitNoticesSent uint64
}

// GroupConfig is what AddGroup starts a group from.
type GroupConfig struct {
	// ID is the group's ID, non-zero.
	ID uint64
	// Log is the group's raft log. Required.
	Log Log
	// StateMachine is the group's replicated state. Required.
	StateMachine StateMachine
	// Peers are the voters of a new group, this server among them: used
	// only when Log is empty, to bootstrap it, and every replica must be
	// given the same set. A group with state starts from its log's. An
	// empty Log without Peers is a replica joining a group that exists
	// (after a conf change adds it, or to replace a wiped one): it knows
	// no voters and waits for the leader to send it the log.
	Peers []uint64
	// Held starts the replica held (HoldNone: not held).
	Held HoldReason
}

// Status is a group's raft status as this server sees it.
type Status struct {
	raft.Status
	// LeaderSince is when this replica learned that Lead leads in the
	// current term (for the leader: when it was elected); zero while no
	// leader is known.
	LeaderSince time.Time
	// Held says why the replica is held, if it is.
	Held HoldReason
	// Err is why the group stopped (wrapping ErrGroupFailed), if it did.
	Err error
}

// New returns a Node that sends through tr. The caller connects tr's
// receiving side to the Node (the Node is a Handler). It starts the
// workers and the ticker, unless opts.Manual.
func New(opts Options, tr Transport) (*Node, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if tr == nil {
		return nil, fmt.Errorf("%w: no transport", ErrInvalidOptions)
	}
	n := &Node{id: opts.ID, opts: opts, tr: tr, runq: newRunQueue(), stop: make(chan struct{}),
		holdTicks: int64((opts.HoldTimeout + opts.Tick - 1) / opts.Tick)}
	n.mu.groups = map[uint64]*group{}
	n.links.down = map[uint64]uint64{}
	if opts.Manual {
		n.manualOut = n.newOutbox()
		return n, nil
	}
	for range opts.Workers {
		n.wg.Add(1)
		go n.worker()
	}
	n.wg.Add(1)
	go n.ticker()
	return n, nil
}

// ID returns this server's raft ID.
func (n *Node) ID() uint64 { return n.id }

func (n *Node) ticker() {
	defer n.wg.Done()
	t := time.NewTicker(n.opts.Tick)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			n.Tick()
		case <-n.stop:
			return
		}
	}
}

// Tick ticks every group that is not held, once, and counts a held one's
// time towards its hold timeout. The node's own ticker calls it every
// Options.Tick; on a manual node, the caller does, and it also advances
// the node's timers by Options.Tick.
func (n *Node) Tick() {
	if n.isClosed() {
		return
	}
	for _, g := range n.groups() {
		if g.held.Load() != uint32(HoldNone) {
			n.tickHeld(g)
			continue
		}
		g.in.Lock()
		g.in.ticks++
		g.in.Unlock()
		n.schedule(g)
	}
	if n.opts.Manual {
		n.clock.advance(n.opts.Tick)
	}
}

// Close stops the node: its ticker, workers and apply goroutines. Saves
// still in flight complete into nothing. The groups' logs and state
// machines are the caller's to close.
func (n *Node) Close() error {
	if n.closed.Swap(true) {
		return nil
	}
	close(n.stop)
	n.runq.close()
	n.mu.Lock()
	gs := n.mu.list
	n.mu.list, n.mu.groups = nil, map[uint64]*group{}
	n.mu.Unlock()
	for _, g := range gs {
		g.close()
	}
	n.wg.Wait()
	return nil
}

func (n *Node) isClosed() bool { return n.closed.Load() }

// groups returns the hosted groups, in the order they were added.
func (n *Node) groups() []*group {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.mu.list
}

// group returns the group with id, or nil.
func (n *Node) group(id uint64) *group {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.mu.groups[id]
}

func (n *Node) lookup(id uint64) (*group, error) {
	if n.isClosed() {
		return nil, ErrClosed
	}
	g := n.group(id)
	if g == nil {
		return nil, fmt.Errorf("%w: %d", ErrUnknownGroup, id)
	}
	return g, nil
}

// Groups returns the IDs of the hosted groups, in the order they were
// added.
func (n *Node) Groups() []uint64 {
	gs := n.groups()
	ids := make([]uint64, len(gs))
	for i, g := range gs {
		ids[i] = g.id
	}
	return ids
}

// Stats returns the node's counters.
func (n *Node) Stats() Stats {
	return Stats{
		Groups:           len(n.groups()),
		Received:         n.stats.received.Load(),
		UnknownGroup:     n.stats.unknownGroup.Load(),
		BadMessages:      n.stats.badMessages.Load(),
		HeldVotesDropped: n.stats.heldVotesDropped.Load(),
		BulkDropped:      n.stats.bulkDropped.Load(),
		LostLogBeats:     n.stats.lostLogBeats.Load(),

		CommitNoticesHeld:     n.stats.noticesHeld.Load(),
		CommitNoticesReplaced: n.stats.noticesReplaced.Load(),
		CommitNoticesSent:     n.stats.noticesSent.Load(),
	}
}

// AddGroup starts hosting a group. A group whose log is empty is
// bootstrapped with c.Peers as its voters (its first entries are their
// conf changes, which must be applied before it can campaign); a state
// machine whose
// Checkpoint is behind the log's snapshot is restored from it first.
func (n *Node) AddGroup(c GroupConfig) (err error) {
	if n.isClosed() {
		return ErrClosed
	}
	if c.ID == 0 || c.Log == nil || c.StateMachine == nil {
		return fmt.Errorf("%w: group %d needs an ID, a Log and a StateMachine", ErrInvalidGroup, c.ID)
	}
	if n.group(c.ID) != nil {
		return fmt.Errorf("%w: %d", ErrGroupExists, c.ID)
	}
	applied, fresh, err := n.prepare(c)
	if err != nil {
		return err
	}
	defer func() {
		// raft panics on a Storage error while it starts; that is the
		// log's failure, not a broken invariant here.
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: group %d: raft refused to start: %v", ErrInvalidGroup, c.ID, r)
		}
	}()
	rn, err := raft.NewRawNode(n.opts.raftConfig(c.Log, applied))
	if err != nil {
		return fmt.Errorf("%w: group %d: %w", ErrInvalidGroup, c.ID, err)
	}
	if fresh {
		peers := slices.Sorted(slices.Values(c.Peers))
		rp := make([]raft.Peer, len(peers))
		for i, id := range peers {
			rp[i] = raft.Peer{ID: id}
		}
		if err := rn.Bootstrap(rp); err != nil {
			return fmt.Errorf("%w: group %d: %w", ErrInvalidGroup, c.ID, err)
		}
	}
	g := newGroup(n, c, rn)
	if g.mu.last, err = c.Log.LastIndex(); err != nil {
		return fmt.Errorf("%w: group %d: log: %w", ErrInvalidGroup, c.ID, err)
	}
	if hs, _, err := c.Log.InitialState(); err == nil {
		g.mu.settled = min(hs.GetCommit(), g.mu.last)
		g.heldTerm.Store(hs.GetTerm())
	}
	g.heldLast.Store(g.mu.last)
	// The term of what the state machine holds as it starts: of the entry
	// raft applies after, or the log's snapshot's (a held replica's
	// release, held.go).
	start := applied
	if start == 0 && !fresh {
		if snap, err := c.Log.Snapshot(); err == nil {
			start = snap.GetMetadata().GetIndex()
		}
	}
	if start > 0 {
		if t, err := c.Log.Term(start); err == nil {
			g.appliedTerm.Store(t)
			g.appliedIndex.Store(start)
		}
	}
	n.mu.Lock()
	if n.mu.groups[c.ID] != nil || n.isClosed() {
		n.mu.Unlock()
		if n.isClosed() {
			return ErrClosed
		}
		return fmt.Errorf("%w: %d", ErrGroupExists, c.ID)
	}
	n.mu.groups[c.ID] = g
	n.mu.list = append(slices.Clip(n.mu.list), g)
	n.mu.Unlock()
	if !n.opts.Manual {
		n.wg.Add(1)
		go g.applyLoop()
	}
	n.schedule(g)
	if fresh && c.Held == HoldNone && slices.Min(c.Peers) == n.id {
		n.campaignFresh(g, freshTries)
	}
	return nil
}

// prepare checks c's log against its state machine, restores the state
// machine from the log's snapshot if it is behind it, and returns raft's
// Applied and whether the log is empty.
func (n *Node) prepare(c GroupConfig) (applied uint64, fresh bool, err error) {
	hs, cs, err := c.Log.InitialState()
	if err != nil {
		return 0, false, fmt.Errorf("%w: group %d: log: %w", ErrInvalidGroup, c.ID, err)
	}
	last, err := c.Log.LastIndex()
	if err != nil {
		return 0, false, fmt.Errorf("%w: group %d: log: %w", ErrInvalidGroup, c.ID, err)
	}
	empty := raft.IsEmptyHardState(hs) && last == 0 && len(cs.GetVoters()) == 0 && len(cs.GetLearners()) == 0
	if empty && len(c.Peers) > 0 {
		if !slices.Contains(c.Peers, n.id) {
			return 0, false, fmt.Errorf("%w: new group %d: peers %v do not include this server (%d)", ErrInvalidGroup, c.ID, c.Peers, n.id)
		}
		return 0, true, nil
	}
	snap, err := c.Log.Snapshot()
	if err != nil {
		return 0, false, fmt.Errorf("%w: group %d: log: %w", ErrInvalidGroup, c.ID, err)
	}
	si := snap.GetMetadata().GetIndex()
	applied = c.StateMachine.Checkpoint()
	if applied < si {
		if err := c.StateMachine.Restore(snap); err != nil {
			return 0, false, fmt.Errorf("%w: group %d: restore snapshot %d: %w", ErrInvalidGroup, c.ID, si, err)
		}
		applied = si
	}
	if applied > hs.GetCommit() && applied > si {
		return 0, false, fmt.Errorf("%w: group %d: state machine at %d is ahead of the log's commit %d",
			ErrInvalidGroup, c.ID, applied, hs.GetCommit())
	}
	if applied > si {
		// raft's members at start are the snapshot's, and it applies no
		// entry at or below applied: a membership change after the
		// snapshot and at or below the checkpoint (the checkpoint was
		// durable, the snapshot after it was not) would be lost, and the
		// replica start with the snapshot's members, or none. It is
		// applied again from the first such change (the state machine
		// takes entries at or below its checkpoint again, idempotently).
		cc, err := firstConfChange(c.Log, si+1, applied)
		if err != nil {
			return 0, false, fmt.Errorf("%w: group %d: log: %w", ErrInvalidGroup, c.ID, err)
		}
		if cc > 0 {
			applied = cc - 1
		}
	}
	if applied == si {
		applied = 0 // raft starts applying after the snapshot anyway
	}
	return applied, false, nil
}

// firstConfChange returns the index of the first membership change in
// l's entries from lo to hi, or 0 if there is none.
func firstConfChange(l Log, lo, hi uint64) (uint64, error) {
	first, err := l.FirstIndex()
	if err != nil {
		return 0, err
	}
	for lo = max(lo, first); lo <= hi; {
		ents, err := l.Entries(lo, hi+1, 4<<20)
		if err != nil {
			return 0, err
		}
		if len(ents) == 0 {
			return 0, nil
		}
		for _, e := range ents {
			if t := e.GetType(); t == raftpb.EntryConfChange || t == raftpb.EntryConfChangeV2 {
				return e.GetIndex(), nil
			}
		}
		lo = ents[len(ents)-1].GetIndex() + 1
	}
	return 0, nil
}

// RemoveGroup stops hosting a group. Its membership is unchanged: that is
// a conf change. Proposals not yet taken by raft fail with
// ErrUnknownGroup.
func (n *Node) RemoveGroup(id uint64) error {
	if n.isClosed() {
		return ErrClosed
	}
	n.mu.Lock()
	g := n.mu.groups[id]
	if g == nil {
		n.mu.Unlock()
		return fmt.Errorf("%w: %d", ErrUnknownGroup, id)
	}
	delete(n.mu.groups, id)
	i := slices.Index(n.mu.list, g)
	n.mu.list = slices.Delete(slices.Clone(n.mu.list), i, i+1)
	n.mu.Unlock()
	g.close()
	n.schedule(g) // fails what is queued
	return nil
}

// RemoveGroupWait is RemoveGroup that returns once the group's state
// machine is no longer called: its apply goroutine has returned, or ctx
// is done (its error then). A state machine's own calls must not make it.
func (n *Node) RemoveGroupWait(ctx context.Context, id uint64) error {
	n.mu.Lock()
	g := n.mu.groups[id]
	n.mu.Unlock()
	if err := n.RemoveGroup(id); err != nil {
		return err
	}
	select {
	case <-g.applyDone:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Propose proposes data to group and returns once raft has taken it
// (appended it to the leader's log) or refused it (wrapping
// raft.ErrProposalDropped: this replica is not the leader, or too much is
// uncommitted). That it is committed shows in the state machine's Apply.
func (n *Node) Propose(ctx context.Context, group uint64, data []byte) error {
	return wait(ctx, func(done func(error)) error { return n.ProposeAsync(group, data, done) })
}

// ProposeAsync is Propose without waiting: done runs on a worker with
// Propose's result. It returns an error, and does not call done, if the
// proposal cannot be queued. done must not block. Once done has run, the
// node keeps nothing of data: raft appended a copy, if it took it, and
// the caller may reuse the buffer.
func (n *Node) ProposeAsync(group uint64, data []byte, done func(error)) error {
	if len(data) > n.opts.MaxEntryBytes {
		return fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, len(data), n.opts.MaxEntryBytes)
	}
	return n.queueProposal(group, proposal{data: data, done: done})
}

// ProposeConfChange proposes a membership change (raftpb.ConfChange or
// ConfChangeV2) to group, and returns as Propose does. Every replica
// applies it to raft when it applies its entry.
func (n *Node) ProposeConfChange(ctx context.Context, group uint64, cc raftpb.ConfChangeI) error {
	return wait(ctx, func(done func(error)) error { return n.ProposeConfChangeAsync(group, cc, done) })
}

// ProposeConfChangeAsync is ProposeConfChange without waiting, as
// ProposeAsync is.
func (n *Node) ProposeConfChangeAsync(group uint64, cc raftpb.ConfChangeI, done func(error)) error {
	if cc == nil {
		return fmt.Errorf("%w: nil conf change", ErrInvalidGroup)
	}
	return n.queueProposal(group, proposal{cc: cc, done: done})
}

func (n *Node) queueProposal(group uint64, p proposal) error {
	g, err := n.lookup(group)
	if err != nil {
		return err
	}
	if err := g.failure(); err != nil {
		return err
	}
	g.in.Lock()
	g.in.props = append(g.in.props, p)
	g.in.Unlock()
	n.proposing(g)
	n.schedule(g)
	return nil
}

func wait(ctx context.Context, start func(done func(error)) error) error {
	ch := make(chan error, 1)
	if err := start(func(err error) { ch <- err }); err != nil {
		return err
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Campaign makes this replica of group campaign (a pre-vote first) on
// its worker. A held replica refuses (ErrHeld).
func (n *Node) Campaign(group uint64) error {
	g, err := n.lookup(group)
	if err != nil {
		return err
	}
	if r := HoldReason(g.held.Load()); r != HoldNone {
		return fmt.Errorf("%w: group %d: %s", ErrHeld, group, r)
	}
	g.op(func(rn *raft.RawNode) {
		if g.held.Load() == uint32(HoldNone) {
			_ = rn.Campaign()
		}
	})
	return nil
}

// TransferLeadership asks the leader of group to hand leadership to
// replica `to` (a follower forwards the request to its leader). A held
// `to` on another server drops the request, and the leader keeps leading
// after an election timeout.
func (n *Node) TransferLeadership(group, to uint64) error {
	g, err := n.lookup(group)
	if err != nil {
		return err
	}
	if to == n.id && g.held.Load() != uint32(HoldNone) {
		return fmt.Errorf("%w: group %d", ErrHeld, group)
	}
	g.op(func(rn *raft.RawNode) { rn.TransferLeader(to) })
	return nil
}

// ResendSnapshot has a group's leader forget a snapshot it sent to peer
// and send its latest again (a learner refuses one taken before it was
// added: raft would otherwise wait for it forever).
func (n *Node) ResendSnapshot(group, peer uint64) error {
	g, err := n.lookup(group)
	if err != nil {
		return err
	}
	g.op(func(rn *raft.RawNode) { rn.ReportSnapshot(peer, raft.SnapshotFailure) })
	return nil
}

// ForgetLeader makes this replica of group, if a follower, forget its
// leader: it can then grant pre-votes at once, instead of after an
// election timeout. A leader that is alive is not disrupted: its other
// followers still refuse, and it wins this one back with its next
// heartbeat (raft's node.go).
func (n *Node) ForgetLeader(group uint64) error {
	g, err := n.lookup(group)
	if err != nil {
		return err
	}
	g.op(func(rn *raft.RawNode) { _ = rn.ForgetLeader() })
	return nil
}

// Status returns group's raft status.
func (n *Node) Status(group uint64) (Status, error) {
	g, err := n.lookup(group)
	if err != nil {
		return Status{}, err
	}
	g.mu.Lock()
	st := g.mu.rn.Status()
	g.mu.Unlock()
	out := Status{Status: st, Held: HoldReason(g.held.Load()), Err: g.failure()}
	if since := g.leadSince.Load(); since != 0 && st.Lead != raft.None {
		out.LeaderSince = time.Unix(0, since)
	}
	return out, nil
}

// Leader returns group's leader (0: none known) and term, as of its last
// scheduler round.
func (n *Node) Leader(group uint64) (leader, term uint64, err error) {
	g, err := n.lookup(group)
	if err != nil {
		return 0, 0, err
	}
	return g.lead.Load(), g.term.Load(), nil
}

// Receive takes a batch from server `from` (Handler). A message for a
// group not hosted here, or not from `from` to this server, or of a kind
// only a server's own threads may send, or a proposal but a held
// replica's nudge (held.go), is dropped and counted.
func (n *Node) Receive(from uint64, b Batch) {
	if n.isClosed() {
		return
	}
	n.stats.received.Add(uint64(b.Len()))
	for i := range b.Msgs {
		e := &b.Msgs[i]
		m := &raftpb.Message{}
		// A proposal never crosses servers: proposals are evaluated by
		// the leader that takes them (DisableProposalForwarding).
		if err := unmarshalMsg(e, m); err != nil || m.GetFrom() != from || m.GetTo() != n.id ||
			raft.IsLocalMsg(m.GetType()) || m.GetType() == raftpb.MsgProp && !isNudge(m) {
			n.stats.badMessages.Add(1)
			continue
		}
		n.deliver(e.Group, m)
	}
	for _, bt := range b.Beats {
		n.deliver(bt.Group, bt.message(from, n.id))
	}
}

func (n *Node) deliver(group uint64, m *raftpb.Message) {
	g := n.group(group)
	if g == nil {
		n.stats.unknownGroup.Add(1)
		return
	}
	g.deliver(m)
}
