package jetstream

import (
	"context"
	"time"
)

// Linearizable reads of a replicated stream (design 3.9). Being the ready
// leader is not enough to answer STREAM.MSG.GET with the latest state: a
// leader cut off from its peers keeps believing it leads until its
// election timeout, while the others elect another and acknowledge new
// writes. So the leader first asks raft for a read index, which a quorum
// confirms the leadership for, and answers once its store has applied
// that far. A read then sees every write acknowledged before it began.

// replicaReadTimeout bounds a read's wait for its index and its apply: a
// leader that cannot reach a quorum answers 10008 within it.
const replicaReadTimeout = 2 * time.Second

// linearRead returns nil once st may answer a read that sees every write
// acknowledged before the call, or 10008 if this server does not lead
// st's group or cannot confirm it does. A stream of one replica answers
// at once.
func (st *stream) linearRead() *APIError {
	r := st.repl
	if r == nil {
		return nil
	}
	if !r.isLeader() {
		return errClusterUnavailable()
	}
	ctx, cancel := context.WithTimeout(context.Background(), replicaReadTimeout)
	defer cancel()
	idx, err := r.c.ReadIndex(ctx, r.group)
	if err != nil {
		return errClusterUnavailable()
	}
	// The leader applies what it committed a moment later; the wait is
	// short and rare, so it polls rather than adding a signal to every
	// apply.
	for wait := 50 * time.Microsecond; r.fsm.applied.Load() < idx; wait = min(2*wait, 10*time.Millisecond) {
		select {
		case <-ctx.Done():
			return errClusterUnavailable()
		case <-r.stop:
			return errClusterUnavailable()
		case <-time.After(wait):
		}
	}
	if !r.isLeader() {
		return errClusterUnavailable()
	}
	return nil
}
