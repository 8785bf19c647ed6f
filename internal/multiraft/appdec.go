package multiraft

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"go.etcd.io/raft/v3/raftpb"
)

// A follower's MsgApp arrives with a batch of publishes per entry, hundreds
// of KiB. proto.Unmarshal copies every entry's data out of the frame into
// memory of its own (0.6 µs of CPU per 1 KiB message on each follower,
// half of it the first use of that memory). A large msgs frame is read
// into a buffer of its own (readFrame), and unmarshalMsg lets the large
// entries of the messages in it alias that buffer instead.
//
// An aliased entry keeps the whole frame alive for as long as raft, the
// raft log's cache or the apply holds it. So that this cannot multiply
// the memory they hold, only an entry of at least half its frame aliases
// it (frameAlias.min): it holds at most twice its own size, where a copy
// would hold one. A batch of publishes is one entry, and a leader sends a
// follower one append per batch, so a batch usually has a frame to
// itself. A frame that no entry aliased (several entries, each less than
// half of it, all copied) goes back to bufpool for the next frame, so
// that it does not cost its memory on top of their copies.

// ownFrameBytes is the size from which a msgs frame is read into a buffer
// of its own, which its entries may alias; a smaller one is read into the
// link's reused buffer and copied out of it.
const ownFrameBytes = 64 << 10

// frameAlias is what the messages of a frame read into a buffer of its
// own share (Envelope.alias): the least data an entry must carry to alias
// the frame, and whether one did.
type frameAlias struct {
	min     int
	aliased bool
}

// aliasFor returns the frameAlias of a msgs frame's payload.
func aliasFor(payload []byte) *frameAlias {
	return &frameAlias{min: max(minPartBytes, len(payload)/2)}
}

// unmarshalMsg unmarshals e into m: with the entries of at least
// e.alias.min bytes aliasing e.Data if e allows it (decodeApp), with
// proto.Unmarshal otherwise, or for anything decodeApp does not decode.
func unmarshalMsg(e *Envelope, m *raftpb.Message) error {
	if a := e.alias; a != nil && decodeApp(e.Data, a.min, m) {
		for _, ent := range m.Entries {
			a.aliased = a.aliased || len(ent.Data) >= a.min
		}
		return nil
	}
	m.Reset()
	return proto.Unmarshal(e.Bytes(), m)
}

// decodeApp decodes b into m as proto.Unmarshal would, with every entry's
// data of at least aliasMin bytes aliasing b, and reports whether it could:
// false for anything but a message whose fields are all scalars of
// raft.proto or entries (a snapshot, a context, responses, an unknown
// field or enum value, a malformed encoding), which proto.Unmarshal then
// decodes or refuses.
func decodeApp(b []byte, aliasMin int, m *raftpb.Message) bool {
	return fields(b, msgEntries, func(v []byte) bool {
		e := &raftpb.Entry{}
		m.Entries = append(m.Entries, e)
		return decodeEntry(v, aliasMin, e)
	}, func(num protowire.Number, v uint64) bool {
		switch num {
		case msgType:
			t, ok := enumOf[raftpb.MessageType](v, raftpb.MessageType_name)
			m.Type = &t
			return ok
		case msgTo:
			m.To = new(v)
		case msgFrom:
			m.From = new(v)
		case msgTerm:
			m.Term = new(v)
		case msgLogTerm:
			m.LogTerm = new(v)
		case msgIndex:
			m.Index = new(v)
		case msgCommit:
			m.Commit = new(v)
		case msgReject:
			m.Reject = new(protowire.DecodeBool(v))
		case msgRejectHint:
			m.RejectHint = new(v)
		case msgVote:
			m.Vote = new(v)
		default:
			return false
		}
		return true
	})
}

// decodeEntry decodes an entry's encoding into e (decodeApp).
func decodeEntry(b []byte, aliasMin int, e *raftpb.Entry) bool {
	return fields(b, entData, func(v []byte) bool {
		if len(v) >= aliasMin {
			e.Data = v[:len(v):len(v)]
		} else {
			e.Data = append([]byte{}, v...)
		}
		return true
	}, func(num protowire.Number, v uint64) bool {
		switch num {
		case entType:
			t, ok := enumOf[raftpb.EntryType](v, raftpb.EntryType_name)
			e.Type = &t
			return ok
		case entTerm:
			e.Term = new(v)
		case entIndex:
			e.Index = new(v)
		default:
			return false
		}
		return true
	})
}

// fields walks the wire encoding b: the fields numbered bytesNum, of the
// bytes type, through onBytes, and every other, of the varint type,
// through onVarint. It returns false at a malformed encoding, any other
// wire type, or a callback's false.
func fields(b []byte, bytesNum protowire.Number, onBytes func(v []byte) bool, onVarint func(num protowire.Number, v uint64) bool) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		switch {
		case num == bytesNum && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 || !onBytes(v) {
				return false
			}
			b = b[n:]
		case num != bytesNum && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 || !onVarint(num, v) {
				return false
			}
			b = b[n:]
		default:
			return false
		}
	}
	return true
}

// enumOf returns v as a value of a closed enum whose names are names, or
// false if it is not one (proto.Unmarshal keeps such a value as an unknown
// field).
func enumOf[E ~int32](v uint64, names map[int32]string) (E, bool) {
	if v > math.MaxInt32 {
		return 0, false
	}
	if _, ok := names[int32(v)]; !ok {
		return 0, false
	}
	return E(v), true
}
