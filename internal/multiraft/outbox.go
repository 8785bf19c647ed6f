package multiraft

import (
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// outbox collects a round's outgoing messages per destination server, so
// that one Send (one frame per lane) carries every group's traffic to a
// peer: a worker's outbox spans the groups it runs until its queue is
// empty; a completed Save has one of its own. Not safe for concurrent use.
type outbox struct {
	n     *Node
	dests []outDest // few: the servers this one shares groups with
}

type outDest struct {
	to uint64
	b  Batch
}

func (n *Node) newOutbox() *outbox { return &outbox{n: n} }

// add queues m, a message of group g to another server: a plain heartbeat
// as a Beat, anything else marshaled. A held replica's granted votes are
// dropped here (but a voting one's: held.go), the one place every
// outgoing message passes.
func (o *outbox) add(g *group, m *raftpb.Message) {
	if !HoldReason(g.held.Load()).mayGrant() && isGrantedVote(m) {
		o.n.stats.heldVotesDropped.Add(1)
		return
	}
	d := o.dest(m.GetTo())
	if bt, ok := beatOf(g.id, m); ok {
		d.b.Beats = append(d.b.Beats, bt)
		return
	}
	e, err := envelopeOf(g.id, m)
	if err != nil {
		o.n.opts.Logger.Errorf("%v", err)
		return
	}
	if o.n.holdNotice(g, m, e) {
		return
	}
	d.b.Msgs = append(d.b.Msgs, e)
}

func (o *outbox) dest(to uint64) *outDest {
	for i := range o.dests {
		if o.dests[i].to == to {
			return &o.dests[i]
		}
	}
	o.dests = append(o.dests, outDest{to: to})
	return &o.dests[len(o.dests)-1]
}

// flush sends what was queued, in the order destinations were first
// added, and reports to raft what the transport dropped.
func (o *outbox) flush() {
	for i := range o.dests {
		d := &o.dests[i]
		if d.b.Len() == 0 {
			continue
		}
		b := d.b
		d.b = Batch{}
		for _, e := range o.n.tr.Send(d.to, b) {
			o.n.reportDropped(d.to, e)
		}
	}
}

// reportDropped tells a group's raft that a bulk message to server `to`
// was not sent: an append makes the follower unreachable (the leader
// probes and resends), a snapshot failed (the leader would otherwise wait
// for it forever).
func (n *Node) reportDropped(to uint64, e Envelope) {
	g := n.group(e.Group)
	if g == nil {
		return
	}
	n.stats.bulkDropped.Add(1)
	snap := e.Type == raftpb.MsgSnap
	g.op(func(rn *raft.RawNode) {
		if snap {
			rn.ReportSnapshot(to, raft.SnapshotFailure)
			return
		}
		rn.ReportUnreachable(to)
	})
}
