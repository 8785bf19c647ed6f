package multiraft

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"go.etcd.io/raft/v3/raftpb"
)

// joined is the parts of an encoding in one slice.
func joined(parts [][]byte) []byte { return bytes.Join(parts, nil) }

// randomApp returns a MsgApp with a random choice of fields set, and
// entries of every size class: none, empty, small, large.
func randomApp(r *rand.Rand) *raftpb.Message {
	opt := func() *uint64 {
		switch r.IntN(3) {
		case 0:
			return nil
		case 1:
			return new(uint64(0))
		}
		return new(r.Uint64() >> r.IntN(64))
	}
	m := &raftpb.Message{Type: raftpb.MsgApp.Enum(), To: opt(), From: opt(), Term: opt(), LogTerm: opt(),
		Index: opt(), Commit: opt(), RejectHint: opt(), Vote: opt()}
	if r.IntN(3) == 0 {
		m.Reject = new(r.IntN(2) == 0)
	}
	for range 1 + r.IntN(4) {
		e := &raftpb.Entry{Term: opt(), Index: opt()}
		if r.IntN(3) > 0 {
			e.Type = raftpb.EntryType(r.IntN(3)).Enum()
		}
		switch r.IntN(5) {
		case 0: // no data
		case 1:
			e.Data = []byte{}
		case 2:
			e.Data = make([]byte, 1+r.IntN(minPartBytes-1))
		default:
			e.Data = make([]byte, minPartBytes+r.IntN(3*minPartBytes))
		}
		for i := range e.Data {
			e.Data[i] = byte(r.Uint32())
		}
		m.Entries = append(m.Entries, e)
	}
	return m
}

// eachRandomApp calls f with 2,000 random MsgApps from seed (randomApp),
// each with its proto.Marshal encoding and a generator for more choices.
func eachRandomApp(t *testing.T, seed uint64, f func(i int, m *raftpb.Message, b []byte, r *rand.Rand)) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, seed+1))
	for i := range 2000 {
		m := randomApp(r)
		b, err := proto.Marshal(m)
		require.NoError(t, err)
		f(i, m, b, r)
	}
}

// TestEncodeAppMatchesMarshal checks encodeApp's parts, joined, against
// proto.Marshal for random MsgApps, and that a large entry's data is a
// part that aliases the entry rather than a copy.
func TestEncodeAppMatchesMarshal(t *testing.T) {
	eachRandomApp(t, 1, func(i int, m *raftpb.Message, want []byte, _ *rand.Rand) {
		parts := encodeApp(m)
		require.NotNil(t, parts, "message %d", i)
		require.Equal(t, want, joined(parts), "message %d: %v", i, m)

		got := &raftpb.Message{}
		require.NoError(t, proto.Unmarshal(joined(parts), got))
		require.True(t, proto.Equal(m, got), "message %d", i)

		e := Envelope{Parts: parts}
		require.Equal(t, len(want), e.Len())
		require.Equal(t, want, e.Bytes())

		for _, ent := range m.Entries {
			if len(ent.Data) < minPartBytes {
				continue
			}
			aliased := false
			for _, p := range parts {
				aliased = aliased || (len(p) == len(ent.Data) && within(p, ent.Data))
			}
			require.True(t, aliased, "message %d: a %d-byte entry was copied", i, len(ent.Data))
		}
	})
}

// TestEncodeAppFallsBack lists the messages encodeApp leaves to
// proto.Marshal, and checks envelopeOf marshals them whole.
func TestEncodeAppFallsBack(t *testing.T) {
	ent := func() []*raftpb.Entry {
		return []*raftpb.Entry{{Term: new(uint64(1)), Index: new(uint64(2)), Data: make([]byte, 2*minPartBytes)}}
	}
	unknown := &raftpb.Message{Type: raftpb.MsgApp.Enum(), Entries: ent()}
	unknown.ProtoReflect().SetUnknown([]byte{0xf8, 0x01, 0x01}) // field 31, varint 1
	unknownEntry := &raftpb.Message{Type: raftpb.MsgApp.Enum(), Entries: ent()}
	unknownEntry.Entries[0].ProtoReflect().SetUnknown([]byte{0xf8, 0x01, 0x01})
	for _, c := range []struct {
		name string
		m    *raftpb.Message
	}{
		{"not a MsgApp", &raftpb.Message{Type: raftpb.MsgSnap.Enum(), Entries: ent()}},
		{"no entries", &raftpb.Message{Type: raftpb.MsgApp.Enum(), Term: new(uint64(3))}},
		{"snapshot", &raftpb.Message{Type: raftpb.MsgApp.Enum(), Entries: ent(), Snapshot: &raftpb.Snapshot{}}},
		{"context", &raftpb.Message{Type: raftpb.MsgApp.Enum(), Entries: ent(), Context: []byte("ctx")}},
		{"responses", &raftpb.Message{Type: raftpb.MsgApp.Enum(), Entries: ent(), Responses: []*raftpb.Message{{}}}},
		{"unknown fields", unknown},
		{"an entry's unknown fields", unknownEntry},
		{"a nil entry", &raftpb.Message{Type: raftpb.MsgApp.Enum(), Entries: []*raftpb.Entry{nil}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Nil(t, encodeApp(c.m))
			e, err := envelopeOf(9, c.m)
			if err != nil {
				return // proto.Marshal refuses it too (a nil entry)
			}
			require.Nil(t, e.Parts)
			want, err := proto.Marshal(c.m)
			require.NoError(t, err)
			require.Equal(t, want, e.Data)
		})
	}
}

// BenchmarkEncodeApp compares a leader's encoding of a MsgApp carrying one
// 500 KiB batch for a follower's link: proto.Marshal and the copy into the
// frame, against encodeApp's parts (the link writes them in place).
func BenchmarkEncodeApp(b *testing.B) {
	m := &raftpb.Message{Type: raftpb.MsgApp.Enum(), To: new(uint64(2)), From: new(uint64(1)),
		Term: new(uint64(5)), LogTerm: new(uint64(5)), Index: new(uint64(100)), Commit: new(uint64(99)),
		Entries: []*raftpb.Entry{{Term: new(uint64(5)), Index: new(uint64(101)), Type: raftpb.EntryNormal.Enum(),
			Data: make([]byte, 500<<10)}}}
	b.Run("marshal", func(b *testing.B) {
		b.SetBytes(500 << 10)
		var f frameBuf
		for b.Loop() {
			data, err := proto.Marshal(m)
			if err != nil {
				b.Fatal(err)
			}
			f.reset(1 << 30)
			f.begin(frameMsgs)
			f.msg(&Envelope{Group: 1, Data: data})
			f.finish()
		}
	})
	b.Run("parts", func(b *testing.B) {
		b.SetBytes(500 << 10)
		f := frameBuf{vectored: true}
		for b.Loop() {
			f.reset(1 << 30)
			f.begin(frameMsgs)
			f.msg(&Envelope{Group: 1, Parts: encodeApp(m)})
			f.finish()
			_ = f.buffers()
		}
	})
}
