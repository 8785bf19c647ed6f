package multiraft

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// group is one raft group hosted by a Node.
type group struct {
	id   uint64
	n    *Node
	log  Log
	room RoomLog // log, if it bounds its queue; else nil
	fsm  StateMachine

	// mu guards the RawNode. It is held by the worker running the group,
	// and by the apply goroutine for ApplyConfChange, never across I/O or
	// a blocking send.
	mu struct {
		sync.Mutex
		rn   *raft.RawNode
		last uint64 // the last index handed to the log (lostlog.go)
		// settled is an index at or below which the log holds what raft
		// holds, all committed: the commit index the group started with,
		// or the last index applied since (diverged.go).
		settled uint64
		// tell is what the worker sends besides raft's messages
		// (clampHeartbeat's rejections).
		tell []*raftpb.Message
		// lost are the followers this leader found lost in lostTerm;
		// deaf: they leave it no quorum, and it no longer steps their
		// responses (lostlog.go lostPeer).
		lost     map[uint64]bool
		lostTerm uint64
		deaf     bool
	}
	// in is what waits for the group's next run. A leaf lock.
	in struct {
		sync.Mutex
		msgs  []*raftpb.Message
		ticks int
		props []proposal
		ops   []func(*raft.RawNode)
	}

	// proposed is when the last proposal was queued (Node.nanotime+1; 0:
	// none yet), and busy whether it
	// came within Options.CommitNoticeDelay of the one before (notice.go).
	proposed atomic.Int64
	busy     atomic.Bool
	sched    atomic.Uint32 // schedIdle...: see scheduler.go
	held     atomic.Uint32 // a HoldReason
	// heldIdle counts the ticks an unsynced replica has gone without
	// knowing a leader (held.go tickHeld).
	heldIdle atomic.Int64
	// leadQuiet counts the ticks a held replica has gone without an
	// append, heartbeat or snapshot from its leader (held.go forgetSilent).
	leadQuiet atomic.Int64
	// heldWait counts the ticks a held replica has gone under a known
	// leader without applying past what it held (held.go nudge).
	heldWait atomic.Int64
	// watch: the replica started held unsynced or lost, and has not yet
	// caught up with a leader (held.go maybeRelease, Options.OnCaughtUp).
	watch atomic.Bool
	lead  atomic.Uint64 // leader as of the last Ready, 0: none known
	term  atomic.Uint64
	// leadSince is when this replica learned of lead's leadership in
	// term (Unix nanoseconds; 0 while no leader is known).
	leadSince atomic.Int64
	// appliedTerm is the term of the last entry the state machine applied
	// (or of the snapshot it restored), appliedIndex its index.
	appliedTerm  atomic.Uint64
	appliedIndex atomic.Uint64
	// heldTerm and heldLast are the term and the log's last index when
	// the replica was held: what it held then (held.go maybeRelease).
	heldTerm, heldLast atomic.Uint64
	roomWait           atomic.Bool // in Node.roomWait
	removed            atomic.Bool
	err                atomic.Pointer[error] // why the group failed

	apply applier
	reads reads // readindex.go
	stop  chan struct{}
	// applyDone is closed when the apply goroutine has returned (at
	// once on a manual node, which has none).
	applyDone chan struct{}
}

// proposal is a Propose or ProposeConfChange waiting for a worker.
type proposal struct {
	data []byte
	cc   raftpb.ConfChangeI
	done func(error)
}

func newGroup(n *Node, c GroupConfig, rn *raft.RawNode) *group {
	g := &group{id: c.ID, n: n, log: c.Log, fsm: c.StateMachine, stop: make(chan struct{}), applyDone: make(chan struct{})}
	if n.opts.Manual {
		close(g.applyDone)
	}
	g.room, _ = c.Log.(RoomLog)
	g.mu.rn = rn
	g.held.Store(uint32(c.Held))
	g.watch.Store(c.Held.byFsync())
	g.apply.wake = make(chan struct{}, 1)
	return g
}

// deliver queues a message for the group's raft.
func (g *group) deliver(ms ...*raftpb.Message) {
	g.in.Lock()
	g.in.msgs = append(g.in.msgs, ms...)
	g.in.Unlock()
	g.n.schedule(g)
}

// op queues f to run on the group's worker with its RawNode.
func (g *group) op(f func(*raft.RawNode)) {
	g.in.Lock()
	g.in.ops = append(g.in.ops, f)
	g.in.Unlock()
	g.n.schedule(g)
}

func (g *group) failure() error {
	if p := g.err.Load(); p != nil {
		return *p
	}
	return nil
}

// fail stops the group for err: its log or state machine failed, so the
// replica no longer knows its own state. It holds, and serves nothing.
func (g *group) fail(err error) {
	err = fmt.Errorf("multiraft: group %d: %w: %w", g.id, ErrGroupFailed, err)
	if g.err.CompareAndSwap(nil, &err) {
		g.held.Store(uint32(HoldDamaged))
		g.n.opts.Logger.Errorf("%v", err)
		if fl, ok := g.fsm.(FailureListener); ok {
			go fl.Failed(err)
		}
	}
}

// close stops the group's apply goroutine; later work is dropped.
func (g *group) close() {
	if !g.removed.Swap(true) {
		close(g.stop)
	}
}

type inbox struct {
	msgs  []*raftpb.Message
	ticks int
	props []proposal
	ops   []func(*raft.RawNode)
}

func (g *group) takeInbox() inbox {
	g.in.Lock()
	defer g.in.Unlock()
	in := inbox{msgs: g.in.msgs, ticks: g.in.ticks, props: g.in.props, ops: g.in.ops}
	g.in.msgs, g.in.ticks, g.in.props, g.in.ops = nil, 0, nil, nil
	return in
}

// process is one run of the group on a worker: step what its inbox holds,
// then take raft's Ready, if there is one and the log has room, and hand
// its messages on: appends to the log, committed entries to the apply
// goroutine, the rest to the outbox.
func (n *Node) process(g *group, ob *outbox) {
	in := g.takeInbox()
	if err := g.gone(); err != nil {
		for _, p := range in.props {
			p.done(err)
		}
		return
	}
	g.mu.Lock()
	var (
		errs  []error
		rd    raft.Ready
		ready bool
	)
	if !g.storageSafe(func() {
		errs = n.stepLocked(g, in)
		if g.failure() == nil {
			rd, ready = g.readyLocked()
		}
	}) {
		g.mu.Unlock()
		for _, p := range in.props {
			p.done(g.failure())
		}
		return
	}
	var lead, term uint64
	changed := false
	if ready && (rd.SoftState != nil || !raft.IsEmptyHardState(rd.HardState)) {
		bs := g.mu.rn.BasicStatus()
		lead, term = bs.Lead, bs.GetTerm()
		changed = g.lead.Swap(lead) != lead
		changed = g.term.Swap(term) != term || changed
		if changed {
			var since int64
			if lead != raft.None {
				since = time.Now().UnixNano()
			}
			g.leadSince.Store(since)
		}
	}
	tell := g.mu.tell
	g.mu.tell = nil
	g.mu.Unlock()

	for i, p := range in.props {
		if errs[i] != nil {
			errs[i] = fmt.Errorf("multiraft: group %d: %w", g.id, errs[i])
		}
		p.done(errs[i])
	}
	for _, m := range tell {
		ob.add(g, m)
	}
	if !ready {
		return
	}
	g.reads.answer(rd.ReadStates)
	if changed {
		g.pushApply(applyItem{leaderChange: true, lead: lead, term: term})
		if f := n.opts.OnLeaderChange; f != nil {
			f(g.id, lead, term)
		}
	}
	for _, m := range rd.Messages {
		switch m.GetTo() {
		case raft.LocalAppendThread:
			n.save(g, m)
		case raft.LocalApplyThread:
			g.pushApply(applyItem{msg: m})
		default:
			ob.add(g, m)
		}
	}
}

// stepLocked steps the inbox into the group's raft: ops, ticks (unless
// held), messages, proposals. It returns the proposals' results. The
// caller holds g.mu.
func (n *Node) stepLocked(g *group, in inbox) []error {
	rn := g.mu.rn
	held := g.held.Load() != uint32(HoldNone)
	// Ops first: a follower told to forget a dead leader must have done so
	// before it weighs a pre-vote that came in with it.
	for _, f := range in.ops {
		f(rn)
	}
	if !held {
		for range in.ticks {
			rn.Tick()
		}
	}
	var lost []uint64
	for _, m := range in.msgs {
		if held && m.GetType() == raftpb.MsgTimeoutNow {
			continue // a held replica never campaigns
		}
		g.clampHeartbeat(m)
		if err := g.divergence(rn, m); err != nil {
			g.fail(err)
			break // nothing more is stepped: the group serves nothing
		}
		if lostLog(rn, m) {
			// Not stepped: raft would resend the same probe at once,
			// and again, for as long as leadership stays here.
			if !slices.Contains(lost, m.GetFrom()) {
				lost = append(lost, m.GetFrom())
			}
			g.lostPeer(rn, m, true)
			continue
		}
		if g.lostPeer(rn, m, false) {
			continue // not heard: CheckQuorum may step this leader down
		}
		// Errors are messages raft does not take (a response from a peer
		// it no longer tracks): dropped, as raft's own Node does.
		_ = rn.Step(m)
		if held {
			g.heardFrom(rn, m)
		}
		if m.GetType() == raftpb.MsgHeartbeatResp {
			snapshotCaughtUp(rn, m.GetFrom())
		}
	}
	if len(lost) > 0 {
		handOver(rn, n.id, lost)
	}
	errs := make([]error, len(in.props))
	if err := g.failure(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	for i, p := range in.props {
		if p.cc != nil {
			errs[i] = rn.ProposeConfChange(p.cc)
		} else {
			errs[i] = rn.Propose(p.data)
		}
	}
	return errs
}

// storageSafe runs f, which steps the group's raft, and reports whether
// it returned. raft panics with the error when its Storage fails a read,
// which the log does once a write of the group failed (raftlog.ErrFailed):
// a save's callback fails the group, but a worker may step it before
// that callback runs. Such a panic fails the group instead of the
// server; any other is a broken invariant, and goes on.
func (g *group) storageSafe(f func()) (ok bool) {
	defer func() {
		if ok {
			return
		}
		r := recover()
		err, isErr := r.(error)
		if !isErr {
			panic(r)
		}
		g.fail(fmt.Errorf("log: %w", err))
	}()
	f()
	return true
}

// readyLocked takes raft's Ready if there is one and the log has room for
// it, and notes the last index it hands to the log. The caller holds g.mu.
func (g *group) readyLocked() (raft.Ready, bool) {
	rn := g.mu.rn
	if !rn.HasReady() || !g.hasRoom() {
		return raft.Ready{}, false
	}
	rd := rn.Ready()
	if !raft.IsEmptySnap(rd.Snapshot) {
		g.mu.last = rd.Snapshot.GetMetadata().GetIndex()
	}
	if k := len(rd.Entries); k > 0 {
		g.mu.last = rd.Entries[k-1].GetIndex()
	}
	return rd, true
}

// gone returns why the group takes no more work, or nil.
func (g *group) gone() error {
	if g.removed.Load() {
		return fmt.Errorf("%w: %d (removed)", ErrUnknownGroup, g.id)
	}
	return g.failure()
}

// hasRoom reports whether the log can take the group's next Ready. If it
// cannot, the group waits in Node.roomWait for a Save to complete.
func (g *group) hasRoom() bool {
	if g.room == nil || g.room.Room() {
		return true
	}
	if !g.roomWait.Swap(true) {
		g.n.roomWait.Lock()
		g.n.roomWait.groups = append(g.n.roomWait.groups, g)
		g.n.roomWait.Unlock()
	}
	// Asked again after registering: a Save that completed in between
	// would have found nobody to wake.
	return g.room.Room()
}

// wakeRoomWaiters schedules the groups waiting for room in the log.
func (n *Node) wakeRoomWaiters() {
	n.roomWait.Lock()
	gs := n.roomWait.groups
	n.roomWait.groups = nil
	n.roomWait.Unlock()
	for _, g := range gs {
		g.roomWait.Store(false)
		n.schedule(g)
	}
}

// save hands a MsgStorageAppend to the group's log. Its responses are
// delivered once the log says the write is as durable as its policy asks:
// the leader's own MsgAppResp and the MsgStorageAppendResp to its raft, a
// follower's MsgAppResp and votes to their servers.
func (n *Node) save(g *group, m *raftpb.Message) {
	g.log.Save(UpdateOf(m), func(err error) { n.saved(g, m, err) })
}

func (n *Node) saved(g *group, m *raftpb.Message, err error) {
	if n.isClosed() || g.removed.Load() {
		return
	}
	if err != nil {
		g.fail(fmt.Errorf("log: %w", err))
		return
	}
	if s := m.GetSnapshot(); !raft.IsEmptySnap(s) {
		// Queued before the responses, so the state machine holds the
		// snapshot before raft applies anything after it.
		g.pushApply(applyItem{snap: s})
	}
	var local []*raftpb.Message
	var ob *outbox
	for _, r := range m.GetResponses() {
		if r.GetTo() == n.id {
			local = append(local, r)
			continue
		}
		if ob == nil {
			ob = n.newOutbox()
		}
		ob.add(g, r)
	}
	if len(local) > 0 {
		g.deliver(local...)
	}
	if ob != nil {
		ob.flush()
	}
	n.wakeRoomWaiters()
}
