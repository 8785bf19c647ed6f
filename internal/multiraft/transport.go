package multiraft

import "go.etcd.io/raft/v3/raftpb"

// Transport carries raft traffic to the other servers, addressed by their
// raft IDs. TCP is the production Transport; multiraftest.Network is an
// in-memory one for deterministic tests.
type Transport interface {
	// Send queues b for server to and returns at once; it never blocks
	// and keeps b's slices (they are not reused). It returns the bulk
	// envelopes it could not queue, because there is no link to `to` or
	// its bulk lane is full: the node reports them to raft (MsgApp:
	// unreachable, the leader probes and resends; MsgSnap: the snapshot
	// failed). Control traffic it cannot queue is dropped silently, as a
	// network would: raft retries. Called by workers and by Log
	// completions, concurrently.
	Send(to uint64, b Batch) (dropped []Envelope)
}

// Handler is the receiving side of a Transport: a Node. A transport calls
// it from its own goroutines (a TCP link's reader), for one peer in order.
type Handler interface {
	// Receive takes what server `from` sent. It does not keep b's slices
	// after it returns, so a transport may reuse its buffers.
	Receive(from uint64, b Batch)
	// LinkUp reports that a link to peer is established.
	LinkUp(peer uint64)
	// LinkDown reports that the link to peer is gone (closed, or stale:
	// unanswered pings). It starts fast failover (Options.FailoverGrace).
	LinkDown(peer uint64)
}

// AppHandler is a Handler that also takes the messages of the layer
// above the node (the JetStream API forwarded between servers), which a
// TCP transport carries on the same links (TCP.SendApp): in order per
// peer, on the link's reader goroutine. It must not keep payload after it
// returns, and should not block: the link reads nothing meanwhile.
type AppHandler interface {
	Handler
	ReceiveApp(from uint64, payload []byte)
}

// Batch is what one server sends another in one go: raft messages, each
// marshaled and tagged with its group, and coalesced heartbeats.
type Batch struct {
	Msgs  []Envelope
	Beats []Beat
}

// Len returns the number of messages in b, heartbeats included.
func (b *Batch) Len() int { return len(b.Msgs) + len(b.Beats) }

// Envelope is one raft message of one group, proto-marshaled. Type and
// Bulk are the sender's, for its transport's lanes and drop reports; an
// envelope as received has Group and Data only.
type Envelope struct {
	Group uint64
	Type  raftpb.MessageType
	// Bulk marks the bulk lane: appends that carry entries, and
	// snapshots. Everything else (votes, responses, empty appends) is
	// control traffic, written first.
	Bulk bool
	// Data is the marshaled message, unless Parts holds it.
	Data []byte
	// Parts, when not nil, is the marshaled message in pieces, in order,
	// and Data is nil: a MsgApp's large entries stay in raft's log and
	// are not copied (appenc.go). The pieces are never changed.
	Parts [][]byte
	// alias, if not nil, lets the large entries alias Data when it is
	// unmarshaled, and records whether one did: Data is in a frame read
	// into a buffer of its own (appdec.go).
	alias *frameAlias
}

// Len returns the length of the marshaled message.
func (e *Envelope) Len() int {
	if e.Parts == nil {
		return len(e.Data)
	}
	n := 0
	for _, p := range e.Parts {
		n += len(p)
	}
	return n
}

// Bytes returns the marshaled message in one piece: Data, or Parts
// joined into a new slice.
func (e *Envelope) Bytes() []byte {
	if e.Parts == nil {
		return e.Data
	}
	b := make([]byte, 0, e.Len())
	for _, p := range e.Parts {
		b = append(b, p...)
	}
	return b
}

// Beat is a coalesced MsgHeartbeat (Resp false) or MsgHeartbeatResp (Resp
// true) of one group: From and To are the servers at the ends of the link,
// and the rest of the message is empty.
type Beat struct {
	Group  uint64
	Term   uint64
	Commit uint64 // heartbeats only
	Resp   bool
}
