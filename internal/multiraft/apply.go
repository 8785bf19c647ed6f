package multiraft

import (
	"fmt"
	"sync"

	"google.golang.org/protobuf/proto"

	"go.etcd.io/raft/v3/raftpb"
)

// applier is a group's queue of work for its state machine, run in order
// by the group's apply goroutine (by Process on a manual node). raft bounds
// the committed bytes in it (Options.MaxCommittedSizePerReady).
type applier struct {
	mu     sync.Mutex
	items  []applyItem
	queued bool // manual nodes: in Node.applyq
	wake   chan struct{}
}

// applyItem is one piece of apply work: a MsgStorageApply, a snapshot to
// restore, or a leader change to report.
type applyItem struct {
	msg          *raftpb.Message
	snap         *raftpb.Snapshot
	leaderChange bool
	lead, term   uint64
}

func (g *group) pushApply(it applyItem) {
	a := &g.apply
	a.mu.Lock()
	a.items = append(a.items, it)
	enqueue := g.n.opts.Manual && !a.queued
	if enqueue {
		a.queued = true
	}
	a.mu.Unlock()
	if enqueue {
		g.n.applyq.push(g)
		return
	}
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// applyLoop is the group's apply goroutine.
func (g *group) applyLoop() {
	defer g.n.wg.Done()
	defer close(g.applyDone)
	for {
		select {
		case <-g.apply.wake:
			g.drainApply()
		case <-g.stop:
			return
		}
	}
}

// drainApply runs every queued item.
func (g *group) drainApply() {
	for {
		a := &g.apply
		a.mu.Lock()
		items := a.items
		a.items = nil
		if len(items) == 0 {
			a.queued = false
		}
		a.mu.Unlock()
		if len(items) == 0 {
			return
		}
		for _, it := range items {
			if g.gone() != nil {
				return
			}
			g.applyItem(it)
		}
	}
}

func (g *group) applyItem(it applyItem) {
	switch {
	case it.leaderChange:
		g.fsm.LeaderChanged(it.lead, it.term)
		g.maybeRelease()
	case it.snap != nil:
		if err := g.fsm.Restore(it.snap); err != nil {
			g.fail(fmt.Errorf("restore snapshot %d: %w", it.snap.GetMetadata().GetIndex(), err))
			return
		}
		g.appliedTerm.Store(it.snap.GetMetadata().GetTerm())
		g.appliedIndex.Store(it.snap.GetMetadata().GetIndex())
		g.maybeRelease()
	default:
		g.applyEntries(it.msg)
	}
}

// applyEntries applies a MsgStorageApply: the entries to the state
// machine, each conf change to raft right after the state machine saw it,
// then the responses back to raft.
func (g *group) applyEntries(m *raftpb.Message) {
	ents := m.GetEntries()
	start := 0
	for i, e := range ents {
		t := e.GetType()
		if t != raftpb.EntryConfChange && t != raftpb.EntryConfChangeV2 {
			continue
		}
		if err := g.fsm.Apply(ents[start : i+1]); err != nil {
			g.fail(fmt.Errorf("apply: %w", err))
			return
		}
		start = i + 1
		cc, err := confChangeOf(e)
		if err != nil {
			g.fail(err)
			return
		}
		// A group removed meanwhile (its log dropped) fails here rather
		// than take the server down: raft reads the log as it applies.
		g.mu.Lock()
		ok := g.storageSafe(func() { g.mu.rn.ApplyConfChange(cc) })
		g.mu.Unlock()
		if !ok {
			return
		}
	}
	if start < len(ents) {
		if err := g.fsm.Apply(ents[start:]); err != nil {
			g.fail(fmt.Errorf("apply: %w", err))
			return
		}
	}
	if len(ents) > 0 {
		g.appliedTerm.Store(ents[len(ents)-1].GetTerm())
		g.appliedIndex.Store(ents[len(ents)-1].GetIndex())
	}
	g.maybeRelease()
	g.deliver(m.GetResponses()...)
}

func confChangeOf(e *raftpb.Entry) (raftpb.ConfChangeI, error) {
	if e.GetType() == raftpb.EntryConfChange {
		cc := &raftpb.ConfChange{}
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			return nil, fmt.Errorf("conf change at %d: %w", e.GetIndex(), err)
		}
		return cc, nil
	}
	cc := &raftpb.ConfChangeV2{}
	if err := proto.Unmarshal(e.GetData(), cc); err != nil {
		return nil, fmt.Errorf("conf change at %d: %w", e.GetIndex(), err)
	}
	return cc, nil
}
