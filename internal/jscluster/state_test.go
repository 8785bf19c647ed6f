package jscluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStateApply: a script of entries and their results, and the state
// they leave, which survives a snapshot byte for byte.
func TestStateApply(t *testing.T) {
	sa := func(acc, name string, peers ...string) *StreamAssignment {
		return &StreamAssignment{Account: acc, Name: name, Peers: peers, Created: time.Unix(int64(len(name)), 0).UTC()}
	}
	steps := []struct {
		e    Entry
		want error
	}{
		{Entry{Op: OpAddServer, Server: &ServerInfo{Name: "s1", ID: RaftID("s1")}}, nil},
		{Entry{Op: OpAssignStream, Stream: sa("$G", "A", "s1")}, nil},
		{Entry{Op: OpAssignStream, Stream: sa("$G", "A", "s2")}, ErrStreamExists},
		{Entry{Op: OpAssignStream, Stream: sa("X", "A", "s2")}, nil},
		{Entry{Op: OpUpdateStream, Stream: sa("$G", "A", "s3")}, nil},
		{Entry{Op: OpUpdateStream, Stream: sa("$G", "B")}, ErrStreamNotFound},
		{Entry{Op: OpRemoveStream, Stream: sa("X", "A")}, nil},
		{Entry{Op: OpRemoveStream, Stream: sa("X", "A")}, ErrStreamNotFound},
		{Entry{Op: OpAssignStream, Stream: sa("X", "A", "s1")}, nil},
	}
	st := newState()
	for i, s := range steps {
		err := st.apply(&s.e, uint64(i+2))
		if s.want == nil {
			require.NoError(t, err, "step %d", i)
		} else {
			require.ErrorIs(t, err, s.want, "step %d", i)
		}
	}
	require.Len(t, st.Streams, 2)
	a := st.Streams[StreamKey{"$G", "A"}]
	require.Equal(t, []string{"s3"}, a.Peers)
	require.Equal(t, uint64(3), a.Group, "an update keeps the group the assignment made")
	require.Equal(t, uint64(10), st.Streams[StreamKey{"X", "A"}].Group, "a stream assigned again gets a new group")

	b, err := encodeState(&st)
	require.NoError(t, err)
	back, err := decodeState(b)
	require.NoError(t, err)
	require.Equal(t, st, back)
	c := back.clone()
	c.Streams[StreamKey{"$G", "A"}].Peers[0] = "changed"
	require.Equal(t, "s3", back.Streams[StreamKey{"$G", "A"}].Peers[0], "clone is deep")

	_, err = decodeState([]byte(`{"v":9}`))
	require.ErrorIs(t, err, ErrBadEntry)
	_, err = decodeState([]byte(`{"v":1,"streams":[null]}`))
	require.ErrorIs(t, err, ErrBadEntry)
}
