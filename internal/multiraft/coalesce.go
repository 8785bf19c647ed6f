package multiraft

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"go.etcd.io/raft/v3/raftpb"
)

// A leader's heartbeats for every group fall in the same scheduler round,
// because one ticker ticks every group. A MsgHeartbeat or MsgHeartbeatResp
// with an empty Context carries nothing but its group, term and commit, so
// it travels as a 25-byte Beat instead of a marshaled message: 1,000 groups
// led from one server cost one beats frame per follower per tick. A
// heartbeat with a Context (a ReadIndex round) goes as a message.

// beatOf returns m as a Beat, or false when m is not a plain heartbeat.
func beatOf(group uint64, m *raftpb.Message) (Beat, bool) {
	if len(m.GetContext()) != 0 {
		return Beat{}, false
	}
	switch m.GetType() {
	case raftpb.MsgHeartbeat:
		return Beat{Group: group, Term: m.GetTerm(), Commit: m.GetCommit()}, true
	case raftpb.MsgHeartbeatResp:
		return Beat{Group: group, Term: m.GetTerm(), Resp: true}, true
	}
	return Beat{}, false
}

// message expands a beat sent by server from to server to.
func (b Beat) message(from, to uint64) *raftpb.Message {
	m := &raftpb.Message{From: new(from), To: new(to), Term: new(b.Term)}
	if b.Resp {
		m.Type = raftpb.MsgHeartbeatResp.Enum()
		return m
	}
	m.Type = raftpb.MsgHeartbeat.Enum()
	m.Commit = new(b.Commit)
	return m
}

// envelopeOf marshals m: a MsgApp as parts that leave its large entries
// in place (encodeApp), anything else with proto.Marshal. It runs on the
// worker that owns the group (or on the log's completion, for responses,
// which carry no entries): raft's entries are shared with its log, and
// marshaling must not race with it.
func envelopeOf(group uint64, m *raftpb.Message) (Envelope, error) {
	if parts := encodeApp(m); parts != nil {
		return Envelope{Group: group, Type: raftpb.MsgApp, Bulk: true, Parts: parts}, nil
	}
	data, err := proto.Marshal(m)
	if err != nil {
		return Envelope{}, fmt.Errorf("multiraft: marshal %s of group %d: %w", m.GetType(), group, err)
	}
	t := m.GetType()
	bulk := t == raftpb.MsgSnap || (t == raftpb.MsgApp && len(m.GetEntries()) > 0)
	return Envelope{Group: group, Type: t, Bulk: bulk, Data: data}, nil
}
