package jetstream

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/store"
)

// stagingStore opens a staging store for the hook's tests.
func stagingStore(t *testing.T) *store.Stream {
	t.Helper()
	s, err := store.Open(store.Options{Dir: t.TempDir(), Staging: true, WriteBuffer: 1 << 20,
		Durability: store.Durability{Sync: store.SyncNever}, LogClock: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// msgsEntry is an entry of term holding an opMsgs op decided in opTerm.
func msgsEntry(index, term, opTerm uint64, msgs ...replicaMsg) *raftpb.Entry {
	op := replicaOp{kind: opMsgs, term: opTerm, msgs: msgs}
	return &raftpb.Entry{Index: new(index), Term: new(term), Type: raftpb.EntryNormal.Enum(), Data: appendOp(nil, &op)}
}

// TestReplicaPayloads: an entry of large messages is staged and replaced
// by a head, which joins back into the same op; small messages, and an
// op of an earlier term, stay whole; a message kept whole cuts what was
// staged at its sequence by an entry raft replaced, and the apply
// (AppendAt) never takes such a record for its own.
func TestReplicaPayloads(t *testing.T) {
	s := stagingStore(t)
	p := &replicaPayloads{store: s}
	big := []byte(strings.Repeat("b", 600))
	e := msgsEntry(1, 2, 2, replicaMsg{seq: 1, ts: 10, subj: "a", data: big}, replicaMsg{seq: 2, ts: 11, subj: "a", hdr: []byte("NATS/1.0\r\n\r\n"), data: big})
	head, ok := p.Strip(e)
	require.True(t, ok)
	require.Less(t, len(head), 200)
	require.NoError(t, p.Flush())
	first, last := s.Staged()
	require.Equal(t, []uint64{1, 2}, []uint64{first, last})
	joined, err := p.Join(1, 2, head)
	require.NoError(t, err)
	require.Equal(t, e.Data, joined)

	_, ok = p.Strip(msgsEntry(2, 2, 2, replicaMsg{seq: 3, ts: 12, subj: "a", data: []byte("small")}))
	require.False(t, ok, "small messages")
	_, ok = p.Strip(msgsEntry(2, 2, 3, replicaMsg{seq: 3, ts: 12, subj: "a", data: big}))
	require.False(t, ok, "decided in term 3, appended in term 2")

	// Raft replaces entry 1 by one of small messages: kept whole, it cuts
	// the records staged for the entry it replaces.
	_, ok = p.Strip(msgsEntry(1, 4, 4, replicaMsg{seq: 1, ts: 20, subj: "a", data: []byte("new")}))
	require.False(t, ok)
	first, last = s.Staged()
	require.Greater(t, first, last, "the replaced entry's records are cut")
	require.NoError(t, s.AppendAt(1, 20, "a", nil, []byte("new"), 0))
	m, err := s.Get(1)
	require.NoError(t, err)
	require.Equal(t, []byte("new"), m.Data)

	// A head of an op of another term joins without reading: no replica
	// applies it.
	h2, ok := p.Strip(msgsEntry(5, 5, 5, replicaMsg{seq: 2, ts: 30, subj: "a", data: big}))
	require.True(t, ok)
	require.NoError(t, s.Unstage(2))
	_, err = p.Join(5, 5, h2)
	require.ErrorIs(t, err, store.ErrNotFound, "its record cut")
	stale, err := p.Join(5, 6, h2)
	require.NoError(t, err)
	op, err := decodeOp(stale)
	require.NoError(t, err)
	require.Equal(t, uint64(5), op.term)
}
