package multiraft

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"go.etcd.io/raft/v3/raftpb"
)

// within reports whether p lies inside b's memory.
func within(p, b []byte) bool {
	if len(p) == 0 || len(b) == 0 {
		return false
	}
	lo, hi := uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))+uintptr(len(b))
	at := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	return at >= lo && at < hi
}

// TestDecodeAppMatchesUnmarshal decodes random MsgApps and checks the
// result against proto.Unmarshal's, and which entries alias the input.
func TestDecodeAppMatchesUnmarshal(t *testing.T) {
	eachRandomApp(t, 5, func(i int, _ *raftpb.Message, b []byte, r *rand.Rand) {
		aliasMin := minPartBytes + r.IntN(2*minPartBytes)

		got := &raftpb.Message{}
		require.True(t, decodeApp(b, aliasMin, got), "message %d", i)
		want := &raftpb.Message{}
		require.NoError(t, proto.Unmarshal(b, want))
		require.True(t, proto.Equal(want, got), "message %d:\n%v\n%v", i, want, got)
		for j, e := range got.Entries {
			aliased := within(e.Data, b)
			require.Equal(t, e.Data != nil && len(e.Data) >= aliasMin, aliased, "message %d entry %d", i, j)
			if aliased {
				require.Equal(t, len(e.Data), cap(e.Data), "an aliased entry must not reach past its data")
			}
		}

		// The same through the receive path.
		viaEnv := &raftpb.Message{}
		require.NoError(t, unmarshalMsg(&Envelope{Data: b, alias: &frameAlias{min: aliasMin}}, viaEnv))
		require.True(t, proto.Equal(want, viaEnv))
	})
}

// TestDecodeAppFallsBack lists encodings decodeApp leaves to
// proto.Unmarshal, and checks unmarshalMsg gives what proto.Unmarshal does.
func TestDecodeAppFallsBack(t *testing.T) {
	big := make([]byte, 2*minPartBytes)
	ent := func() []*raftpb.Entry {
		return []*raftpb.Entry{{Term: new(uint64(1)), Index: new(uint64(2)), Data: big}}
	}
	marshal := func(m *raftpb.Message) []byte {
		b, err := proto.Marshal(m)
		require.NoError(t, err)
		return b
	}
	app := marshal(&raftpb.Message{Type: raftpb.MsgApp.Enum(), Entries: ent()})
	varint := func(num protowire.Number, v uint64) []byte {
		return protowire.AppendVarint(protowire.AppendTag(nil, num, protowire.VarintType), v)
	}
	entryWith := func(field []byte) []byte {
		e := append(marshal(&raftpb.Message{Entries: ent()})[:0:0], field...)
		return protowire.AppendBytes(protowire.AppendTag(nil, msgEntries, protowire.BytesType), e)
	}
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"snapshot", marshal(&raftpb.Message{Type: raftpb.MsgSnap.Enum(), Snapshot: &raftpb.Snapshot{Data: big}})},
		{"context", marshal(&raftpb.Message{Type: raftpb.MsgApp.Enum(), Entries: ent(), Context: []byte("c")})},
		{"responses", marshal(&raftpb.Message{Type: raftpb.MsgApp.Enum(), Responses: []*raftpb.Message{{}}})},
		{"unknown field", append(bytes.Clone(app), varint(31, 1)...)},
		{"unknown message type", append(varint(msgType, 999), app...)},
		{"negative message type", append(varint(msgType, ^uint64(0)), app...)},
		{"unknown entry type", append(bytes.Clone(app), entryWith(varint(entType, 77))...)},
		{"an entry's unknown field", append(bytes.Clone(app), entryWith(varint(9, 1))...)},
		{"entries as a varint", append(bytes.Clone(app), varint(msgEntries, 1)...)},
		{"term as bytes", append(bytes.Clone(app), protowire.AppendBytes(protowire.AppendTag(nil, msgTerm, protowire.BytesType), []byte("x"))...)},
		{"truncated", app[:len(app)-1]},
		{"bad tag", []byte{0x80}},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.False(t, decodeApp(c.b, minPartBytes, &raftpb.Message{}))
			want, got := &raftpb.Message{}, &raftpb.Message{}
			werr := proto.Unmarshal(c.b, want)
			gerr := unmarshalMsg(&Envelope{Data: c.b, alias: &frameAlias{min: minPartBytes}}, got)
			require.Equal(t, werr == nil, gerr == nil, "proto: %v, unmarshalMsg: %v", werr, gerr)
			if werr == nil {
				require.True(t, proto.Equal(want, got))
			}
		})
	}
}

// TestReadFrameOwnsLargeMsgs checks which frames readFrame reads into a
// buffer of their own: msgs frames of ownFrameBytes or more.
func TestReadFrameOwnsLargeMsgs(t *testing.T) {
	large := msgsPayload(Envelope{Group: 1, Data: make([]byte, ownFrameBytes)})
	for _, c := range []struct {
		name    string
		kind    frameKind
		payload []byte
		own     bool
	}{
		{"large msgs", frameMsgs, large, true},
		{"small msgs", frameMsgs, msgsPayload(Envelope{Group: 1, Data: []byte("m")}), false},
		{"large app", frameApp, large, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			buf := make([]byte, 0, 1<<20)
			kind, payload, next, own, err := readFrame(bytes.NewReader(appendFrame(nil, c.kind, c.payload)), buf)
			require.NoError(t, err)
			require.Equal(t, c.kind, kind)
			require.Equal(t, c.payload, payload)
			require.Equal(t, c.own, own != nil)
			require.Equal(t, c.own, within(payload, own), "aliases its own buffer")
			require.Equal(t, !c.own, within(payload, buf[:cap(buf)]), "aliases the reused buffer")
			require.Same(t, unsafe.SliceData(buf), unsafe.SliceData(next), "the reused buffer is handed back")
		})
	}
}

// FuzzDecodeApp checks decodeApp against proto.Unmarshal on any input: what
// decodeApp decodes, proto.Unmarshal decodes the same.
func FuzzDecodeApp(f *testing.F) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 8 {
		m := randomApp(r)
		for _, e := range m.Entries {
			if len(e.Data) > 16 {
				e.Data = e.Data[:16] // small seeds: the fuzzer works on the structure
			}
		}
		b, err := proto.Marshal(m)
		require.NoError(f, err)
		f.Add(b, uint16(8))
	}
	f.Fuzz(func(t *testing.T, b []byte, aliasMin uint16) {
		got := &raftpb.Message{}
		if !decodeApp(b, max(int(aliasMin), 1), got) {
			return
		}
		want := &raftpb.Message{}
		require.NoError(t, proto.Unmarshal(b, want))
		require.True(t, proto.Equal(want, got), "\n%v\n%v", want, got)
	})
}

// TestAliasAtLeastHalfTheFrame checks the bound on what an aliased entry
// holds: an entry aliases its frame only if it is at least half of it.
func TestAliasAtLeastHalfTheFrame(t *testing.T) {
	app := func(size int) Envelope {
		b, err := proto.Marshal(&raftpb.Message{Type: raftpb.MsgApp.Enum(), To: new(uint64(2)), From: new(uint64(1)),
			Entries: []*raftpb.Entry{{Term: new(uint64(1)), Index: new(uint64(1)), Data: make([]byte, size)}}})
		require.NoError(t, err)
		return Envelope{Group: 1, Data: b}
	}
	for _, c := range []struct {
		name    string
		es      []Envelope
		aliased bool
	}{
		{"one append", []Envelope{app(200 << 10)}, true},
		{"two appends of the same size", []Envelope{app(100 << 10), app(100 << 10)}, false},
		{"a large one beside a small one", []Envelope{app(150 << 10), app(20 << 10)}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			payload := msgsPayload(c.es...)
			got, err := decodeMsgs(payload, nil, aliasFor(payload))
			require.NoError(t, err)
			var ms []*raftpb.Message
			for i := range got {
				m := &raftpb.Message{}
				require.NoError(t, unmarshalMsg(&got[i], m))
				ms = append(ms, m)
			}
			require.Equal(t, c.aliased, within(ms[0].Entries[0].Data, payload))
			for _, m := range ms[1:] {
				require.False(t, within(m.Entries[0].Data, payload), "a later, smaller entry is copied")
			}
			require.Equal(t, c.aliased, got[0].alias.aliased, "the frame records whether it is aliased")
		})
	}
}
