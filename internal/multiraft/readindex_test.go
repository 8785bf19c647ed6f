package multiraft_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// readIndex asks server for a read index of group while the harness
// runs, and returns it, or the error ReadIndex returned within wait.
func (h *harness) readIndex(server, group uint64, wait time.Duration) (uint64, error) {
	h.t.Helper()
	type result struct {
		idx uint64
		err error
	}
	ch := make(chan result, 1)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	go func() {
		idx, err := h.servers[server].node.ReadIndex(ctx, group)
		ch <- result{idx, err}
	}()
	for {
		select {
		case r := <-ch:
			return r.idx, r.err
		default:
		}
		h.stabilize()
		time.Sleep(time.Millisecond) // the reader's op may not be queued yet
	}
}

// TestReadIndex: a leader's read index covers every entry committed
// before the read; a follower's request is answered through the leader;
// a leader cut off from its quorum answers no read (it cannot know it
// still leads), so a read served with its state is never stale.
func TestReadIndex(t *testing.T) {
	h := threeLedBy1(t)
	for i := range 5 {
		h.propose(1, 7, fmt.Sprintf("m%d", i))
	}
	h.stabilize()
	st, err := h.servers[1].node.Status(7)
	require.NoError(t, err)
	committed := st.GetCommit()

	idx, err := h.readIndex(1, 7, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, committed, idx, "the leader's commit index")
	idx, err = h.readIndex(2, 7, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, committed, idx, "a follower's read, through the leader")

	// Server 1 is cut off; 2 and 3 elect one of them and commit more.
	h.ft.Partition([]uint64{1}, []uint64{2, 3})
	var lead uint64
	for range 100 {
		h.tick()
		h.stabilize()
		if st, err := h.servers[2].node.Status(7); err == nil && st.Lead != 1 && st.Lead != 0 {
			lead = st.Lead
			break
		}
	}
	require.NotZero(t, lead, "2 and 3 elect a leader")
	h.propose(lead, 7, "after")
	h.stabilize()
	_, err = h.readIndex(1, 7, 200*time.Millisecond)
	require.ErrorIs(t, err, context.DeadlineExceeded, "a deposed leader answers no read")
	st, err = h.servers[lead].node.Status(7)
	require.NoError(t, err)
	idx, err = h.readIndex(lead, 7, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, st.GetCommit(), idx)
	require.Greater(t, idx, committed)

	h.ft.Heal()
	for range 3 {
		h.tick()
		h.stabilize()
	}
	idx, err = h.readIndex(1, 7, 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, st.GetCommit(), idx, "the old leader, now a follower, reads through the new one")
}
