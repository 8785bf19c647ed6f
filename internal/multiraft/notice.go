package multiraft

import (
	"cmp"
	"slices"
	"sync"

	"go.etcd.io/raft/v3/raftpb"
)

// Commit notices. Each time a leader's commit index moves, raft sends
// every follower an append at once (bcastAppend after maybeCommit), most
// often with no entries: only the commit index is news, so that the
// follower applies. Under a steady stream of proposals that is one more
// append per proposal and follower, half the appends a leader sends, and
// each costs a frame on the link, a step and a small raft log write on the
// follower, and a response back: wake-ups of four goroutines on two
// servers for news that the next append, a moment later, would carry
// anyway. Nothing waits for it: a proposer hears of its entry when the
// leader applies it.
//
// So a leader holds an append without entries, a commit notice, for
// Options.CommitNoticeDelay before sending it. An append with entries to
// the same follower in the same group, sent meanwhile, carries the commit
// index too and takes its place; a later notice replaces an earlier one.
// Raft allows this: to raft a held notice is a message delayed, and one
// replaced is a message lost, which it survives (heartbeats carry the
// commit index too). A follower that had nothing else coming applies at
// most the delay later.
//
// Only a busy group holds them: one whose last proposal came within the
// delay of the one before. A group proposed to now and then (the meta
// group, a stream's configuration change or purge) has no later append
// coming, and its followers, which act on what it commits, hear of it at
// once, as raft has it.

// commitNotices are the notices a node holds, by group and follower.
type commitNotices struct {
	mu    sync.Mutex
	held  map[noticeKey]Envelope
	armed bool // a send of the held notices is due
}

type noticeKey struct{ group, to uint64 }

// proposing notes a proposal queued for g: g is busy if it came within
// Options.CommitNoticeDelay of the one before.
func (n *Node) proposing(g *group) {
	if n.opts.CommitNoticeDelay <= 0 {
		return
	}
	now := n.nanotime() + 1 // 0: none yet
	prev := g.proposed.Swap(now)
	g.busy.Store(prev != 0 && now-prev < int64(n.opts.CommitNoticeDelay))
}

// holdNotice takes m, a message of group g to be sent as e, and reports
// whether it holds it: an append without entries is held if g is busy,
// and a held one replaced by an append to the same follower and group.
func (n *Node) holdNotice(g *group, m *raftpb.Message, e Envelope) bool {
	if n.opts.CommitNoticeDelay <= 0 || m.GetType() != raftpb.MsgApp {
		return false
	}
	k := noticeKey{g.id, m.GetTo()}
	c := &n.notices
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(m.GetEntries()) > 0 {
		if _, ok := c.held[k]; ok {
			delete(c.held, k)
			n.stats.noticesReplaced.Add(1)
		}
		return false
	}
	if !g.busy.Load() {
		return false
	}
	if _, ok := c.held[k]; ok {
		n.stats.noticesReplaced.Add(1)
	}
	if c.held == nil {
		c.held = map[noticeKey]Envelope{}
	}
	c.held[k] = e
	n.stats.noticesHeld.Add(1)
	if !c.armed {
		c.armed = true
		n.after(n.opts.CommitNoticeDelay, n.sendNotices)
	}
	return true
}

// sendNotices sends the notices held, one batch per follower, in the
// order of group IDs.
func (n *Node) sendNotices() {
	c := &n.notices
	c.mu.Lock()
	held := c.held
	c.held, c.armed = nil, false
	c.mu.Unlock()
	keys := make([]noticeKey, 0, len(held))
	for k := range held {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b noticeKey) int {
		return cmp.Or(cmp.Compare(a.to, b.to), cmp.Compare(a.group, b.group))
	})
	for i := 0; i < len(keys); {
		to := keys[i].to
		var b Batch
		for ; i < len(keys) && keys[i].to == to; i++ {
			b.Msgs = append(b.Msgs, held[keys[i]])
		}
		n.stats.noticesSent.Add(uint64(len(b.Msgs)))
		for _, e := range n.tr.Send(to, b) {
			n.reportDropped(to, e)
		}
	}
}
