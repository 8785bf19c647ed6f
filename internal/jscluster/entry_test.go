package jscluster

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDecodeEntry(t *testing.T) {
	s1 := `{"name":"s1","id":` + jsonID("s1") + `}`
	tests := []struct {
		name, in string
		want     Op // "" when refused
	}{
		{"add server", `{"v":1,"op":"addServer","server":` + s1 + `}`, OpAddServer},
		{"assign", `{"v":1,"op":"assignStream","stream":{"account":"$G","name":"S","peers":["s1"]}}`, OpAssignStream},
		{"update", `{"v":1,"op":"updateStream","stream":{"account":"A","name":"S"}}`, OpUpdateStream},
		{"remove", `{"v":1,"op":"removeStream","stream":{"account":"A","name":"S"}}`, OpRemoveStream},
		{"unknown fields ignored", `{"v":1,"op":"removeStream","stream":{"account":"A","name":"S"},"later":1}`, OpRemoveStream},
		{"future version", `{"v":2,"op":"removeStream","stream":{"account":"A","name":"S"}}`, ""},
		{"no version", `{"op":"removeStream","stream":{"account":"A","name":"S"}}`, ""},
		{"unknown op", `{"v":1,"op":"dropEverything"}`, ""},
		{"server missing", `{"v":1,"op":"addServer"}`, ""},
		{"wrong raft ID", `{"v":1,"op":"addServer","server":{"name":"s1","id":7}}`, ""},
		{"no account", `{"v":1,"op":"assignStream","stream":{"name":"S"}}`, ""},
		{"no stream", `{"v":1,"op":"assignStream"}`, ""},
		{"not JSON", `{"v":1,`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := decodeEntry([]byte(tt.in))
			if tt.want == "" {
				require.ErrorIs(t, err, ErrBadEntry)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, e.Op)
		})
	}
}

func jsonID(name string) string {
	b, _ := json.Marshal(RaftID(name))
	return string(b)
}

func TestEntryRoundTrip(t *testing.T) {
	e := Entry{Op: OpAssignStream, Prop: &PropID{Server: 1, Run: 2, Seq: 3}, Stream: &StreamAssignment{
		Account: "$G", Name: "ORDERS", Config: json.RawMessage(`{"name":"ORDERS"}`), Peers: []string{"s2"},
		Created: time.Unix(1700000000, 0).UTC()}}
	b, err := encodeEntry(e)
	require.NoError(t, err)
	got, err := decodeEntry(b)
	require.NoError(t, err)
	e.V = entryVersion
	require.Equal(t, e, got)
}

// FuzzDecodeEntry: any bytes either decode to an entry that applies to a
// state and survives a snapshot, or are refused with ErrBadEntry; nothing
// panics.
func FuzzDecodeEntry(f *testing.F) {
	for _, s := range []string{
		`{"v":1,"op":"assignStream","stream":{"account":"$G","name":"S","peers":["s1"]}}`,
		`{"v":1,"op":"addServer","server":{"name":"s1","id":` + jsonID("s1") + `}}`,
		`{"v":1,"op":"removeStream","stream":{"account":"A","name":"S"}}`,
		`{"v":1,"op":"updateStream","stream":{"account":"A","name":"S","config":null}}`,
		`{"v":1,"op":"assignStream","stream":{"account":"A","name":"S","config":[1,2]}}`,
		`{}`, `null`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeEntry(b)
		if err != nil {
			require.ErrorIs(t, err, ErrBadEntry)
			return
		}
		st := newState()
		_ = st.apply(&e, 2)
		snap, err := encodeState(&st)
		require.NoError(t, err)
		back, err := decodeState(snap)
		require.NoError(t, err)
		again, err := encodeState(&back)
		require.NoError(t, err)
		require.JSONEq(t, string(snap), string(again))
	})
}
