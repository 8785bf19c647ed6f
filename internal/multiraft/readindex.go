package multiraft

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"go.etcd.io/raft/v3"
)

// A linearizable read asks the group's leader for its commit index and
// has the leader confirm, by a heartbeat round a quorum answers, that it
// still leads (raft's ReadOnlySafe, §6.4 of the Raft thesis). Once the
// caller's state machine has applied up to that index, what it reads is
// at least as new as every write acknowledged before the read began.
//
// Each read carries a request context unique on this node; the group's
// worker hands the index raft returns for it (Ready.ReadStates) to the
// waiter. A read raft drops (leadership lost before the round completed)
// is never answered: the caller's context bounds it.

// reads are the group's reads waiting for their index.
type reads struct {
	mu      sync.Mutex
	next    uint64
	waiting map[uint64]chan uint64
}

func (rs *reads) add() (uint64, chan uint64) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.next++
	if rs.waiting == nil {
		rs.waiting = make(map[uint64]chan uint64)
	}
	ch := make(chan uint64, 1)
	rs.waiting[rs.next] = ch
	return rs.next, ch
}

func (rs *reads) drop(id uint64) {
	rs.mu.Lock()
	delete(rs.waiting, id)
	rs.mu.Unlock()
}

// answer hands each read state to its waiter. States of reads nobody
// waits for any more (timed out) are ignored.
func (rs *reads) answer(states []raft.ReadState) {
	if len(states) == 0 {
		return
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, s := range states {
		if len(s.RequestCtx) != 8 {
			continue
		}
		id := binary.BigEndian.Uint64(s.RequestCtx)
		if ch, ok := rs.waiting[id]; ok {
			delete(rs.waiting, id)
			ch <- s.Index
		}
	}
}

// ReadIndex returns the index a linearizable read of group must wait for
// the state machine to apply: the leader's commit index, once a quorum
// has confirmed its leadership. It is asked of the leader (a follower's
// request is forwarded by raft). It returns ctx's error if no index comes
// in time: leadership changed, or a quorum is out of reach.
func (n *Node) ReadIndex(ctx context.Context, group uint64) (uint64, error) {
	g, err := n.lookup(group)
	if err != nil {
		return 0, err
	}
	if err := g.gone(); err != nil {
		return 0, err
	}
	id, ch := g.reads.add()
	defer g.reads.drop(id)
	rctx := binary.BigEndian.AppendUint64(nil, id)
	g.op(func(rn *raft.RawNode) { rn.ReadIndex(rctx) })
	select {
	case idx := <-ch:
		return idx, nil
	case <-ctx.Done():
		return 0, fmt.Errorf("multiraft: group %d: read index: %w", group, ctx.Err())
	}
}
