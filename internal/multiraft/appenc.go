package multiraft

import (
	"google.golang.org/protobuf/encoding/protowire"

	"go.etcd.io/raft/v3/raftpb"
)

// A leader sends each follower a MsgApp whose entries are mostly one
// batch of publishes, hundreds of KiB. proto.Marshal copies every entry's
// data into a new buffer per follower, and the link copied that again
// into its frame: two copies and a large allocation per follower for
// bytes that already sit, immutable, in raft's log. encodeApp writes the
// same wire bytes as proto.Marshal, but as parts: the message's fields
// and each entry's header in one small buffer, and every entry's data of
// at least minPartBytes as its own part, aliasing the entry. The link
// writes the parts to the connection where they are (writev).
//
// raft never changes an entry's data once it is in its log (the storage
// contract hands it freshly allocated slices, and proposals are not
// reused by their proposers), so the parts stay valid after the worker
// that made them moves on.

// minPartBytes is the size from which an entry's data is a part of its
// own rather than copied beside the headers: below it, the copy costs
// less than another piece for writev.
const minPartBytes = 4 << 10

// Field numbers of raft.proto, as proto.Marshal writes them: in number
// order, each optional field only when set.
const (
	msgType       = 1
	msgTo         = 2
	msgFrom       = 3
	msgTerm       = 4
	msgLogTerm    = 5
	msgIndex      = 6
	msgEntries    = 7
	msgCommit     = 8
	msgReject     = 10
	msgRejectHint = 11
	msgVote       = 13

	entType  = 1
	entTerm  = 2
	entIndex = 3
	entData  = 4
)

// encodeApp returns m's wire encoding as parts, in order, or nil if m is
// not a message it encodes: anything but a MsgApp with entries, or one
// with a field it does not write (a snapshot, a context, responses,
// unknown fields), which proto.Marshal encodes instead.
func encodeApp(m *raftpb.Message) [][]byte {
	if m.GetType() != raftpb.MsgApp || len(m.Entries) == 0 || m.Snapshot != nil || m.Context != nil ||
		len(m.Responses) > 0 || len(m.ProtoReflect().GetUnknown()) > 0 {
		return nil
	}
	head := 96 // the message's fields: 10 tags and varints at most
	for _, e := range m.Entries {
		if e == nil || len(e.ProtoReflect().GetUnknown()) > 0 {
			return nil
		}
		head += 48 // an entry's tag, length and fields
		if len(e.Data) < minPartBytes {
			head += len(e.Data)
		}
	}
	// The headers go into one buffer sized up front. A part cut from it
	// is capped at its length, so later appends never write into it (nor
	// would a reallocation change it).
	buf := make([]byte, 0, head)
	var parts [][]byte
	cut := 0 // buf[cut:] is not in parts yet
	buf = appendOptVarint(buf, msgType, enumPtr(m.Type))
	buf = appendOptVarint(buf, msgTo, m.To)
	buf = appendOptVarint(buf, msgFrom, m.From)
	buf = appendOptVarint(buf, msgTerm, m.Term)
	buf = appendOptVarint(buf, msgLogTerm, m.LogTerm)
	buf = appendOptVarint(buf, msgIndex, m.Index)
	for _, e := range m.Entries {
		buf = protowire.AppendTag(buf, msgEntries, protowire.BytesType)
		buf = protowire.AppendVarint(buf, uint64(entrySize(e)))
		buf = appendOptVarint(buf, entType, enumPtr(e.Type))
		buf = appendOptVarint(buf, entTerm, e.Term)
		buf = appendOptVarint(buf, entIndex, e.Index)
		if e.Data == nil {
			continue
		}
		buf = protowire.AppendTag(buf, entData, protowire.BytesType)
		buf = protowire.AppendVarint(buf, uint64(len(e.Data)))
		if len(e.Data) < minPartBytes {
			buf = append(buf, e.Data...)
			continue
		}
		parts = append(parts, buf[cut:len(buf):len(buf)], e.Data)
		cut = len(buf)
	}
	buf = appendOptVarint(buf, msgCommit, m.Commit)
	buf = appendOptBool(buf, msgReject, m.Reject)
	buf = appendOptVarint(buf, msgRejectHint, m.RejectHint)
	buf = appendOptVarint(buf, msgVote, m.Vote)
	if cut < len(buf) {
		parts = append(parts, buf[cut:len(buf):len(buf)])
	}
	return parts
}

// entrySize is the length of e's encoding, as proto.Size gives it.
func entrySize(e *raftpb.Entry) int {
	n := optVarintSize(entType, enumPtr(e.Type)) + optVarintSize(entTerm, e.Term) + optVarintSize(entIndex, e.Index)
	if e.Data != nil {
		n += protowire.SizeTag(entData) + protowire.SizeBytes(len(e.Data))
	}
	return n
}

// enumPtr widens an optional enum field to an optional varint.
func enumPtr[E ~int32](p *E) *uint64 {
	if p == nil {
		return nil
	}
	v := uint64(int64(*p)) // proto encodes a negative enum as a 10-byte varint
	return &v
}

func appendOptVarint(b []byte, num protowire.Number, v *uint64) []byte {
	if v == nil {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, *v)
}

func appendOptBool(b []byte, num protowire.Number, v *bool) []byte {
	if v == nil {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, protowire.EncodeBool(*v))
}

func optVarintSize(num protowire.Number, v *uint64) int {
	if v == nil {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeVarint(*v)
}
