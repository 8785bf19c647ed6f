package jetstream

import "time"

// The leader's side of the log clock (store/logclock.go, design 3.4). A
// replica's store runs on its log's time: it moves with the messages
// appended and with opTick ops, never with a replica's own clock, so
// every replica expires the same messages (max_age, TTLs) at the same
// place in the log. When nothing is published, the leader moves time on:
// once a second (checkpointReplicas), if its store has something due by
// its own clock, it proposes a tick at that time, one at a time.

// tick proposes an opTick if the ready leader's store has something due
// by now.
func (r *replica) tick(now time.Time) {
	if !r.isLeader() || r.st.store.NextExpiry() > now.UnixNano() || !r.ticking.CompareAndSwap(false, true) {
		return
	}
	r.proposeOp(&replicaOp{kind: opTick, now: now.UnixNano()}, 0, func(opResult) { r.ticking.Store(false) })
}
