package jetstream

import (
	"fmt"
	"time"

	"github.com/skiffmq/skiff/store"
)

// The leader's side of the log clock (store/logclock.go, design 3.4). A
// replica's store runs on its log's time: it moves with the messages
// appended and with opTick ops, never with a replica's own clock, so
// every replica expires the same messages (max_age, TTLs) at the same
// place in the log. When nothing is published, the leader moves time on:
// once a second (checkpointReplicas), if its store has something due by
// its own clock, it proposes a tick at that time, one at a time.
//
// On a stream with subject delete markers a tick would not do: a marker
// takes a sequence, and only the leader's projection gives sequences
// out. The leader plans the round on its store instead (store.PlanExpiry:
// what expires, which subjects get a marker, at which sequences), and
// proposes the plan as an opExpire, which every replica applies as
// planned (store.ApplyExpiry, replicaFSM.expire). A plan is made on the
// store as applied, so it is a barrier (design 3.3): once a round is due,
// the open batch is held until every batch proposed is applied; then the
// round is planned, its markers take the projection's next sequences, it
// is proposed like a batch (the one proposal in flight, refused and
// resynced like one), and the held batch follows it. A round costs the
// publishers of that moment one commit's wait, at most once a second.

// tick proposes an opTick, or plans an expiry round on a stream with
// markers, if the ready leader's store has something due by now.
func (r *replica) tick(now time.Time) {
	if !r.isLeader() || r.st.store.NextExpiry() > now.UnixNano() {
		return
	}
	if r.st.config().SubjectDeleteMarkerTTL > 0 {
		r.mu.Lock()
		r.mu.barrier = true
		failed := r.expireDueLocked()
		r.mu.Unlock()
		r.refuse(nil, failed)
		return
	}
	if !r.ticking.CompareAndSwap(false, true) {
		return
	}
	r.proposeOp(&replicaOp{kind: opTick, now: now.UnixNano()}, 0, func(opResult) { r.ticking.Store(false) })
}

// expireDueLocked plans and proposes the expiry round a tick found due
// (barrier), once nothing proposed is in flight or waiting to apply, and
// lets the held batch go after it; it returns the replies of the
// publishes refused if raft would not take them. r.mu held.
func (r *replica) expireDueLocked() []string {
	if !r.mu.barrier || r.mu.inFlight || len(r.mu.pending) > 0 {
		return nil
	}
	r.mu.barrier = false
	if !r.mu.ready || r.mu.resync || r.mu.closed {
		r.tookLocked() // publishes waiting for room go on (and are refused)
		return nil
	}
	now := max(time.Now().UnixNano(), r.mu.lastTS)
	s := r.st.store
	plan, err := s.PlanExpiry(now)
	if err == nil && len(plan.Markers) > 0 && plan.Markers[0].Seq != r.mu.next {
		// Nothing in flight: the projection is the store.
		err = fmt.Errorf("markers from sequence %d, the projection's next is %d", plan.Markers[0].Seq, r.mu.next)
	}
	if err != nil {
		r.st.js.log.Warn("replicated stream expiry round not planned", "stream", r.st.name, "err", err)
		return r.proposeLocked()
	}
	if len(plan.Removed)+len(plan.Markers) == 0 && s.NextExpiry() > now {
		return r.proposeLocked() // a round before this one did it
	}
	// An empty plan still goes when something is due: the replicas drop
	// the expiries of messages removed otherwise.
	var noInterest func(string) bool
	if r.st.config().Retention == InterestPolicy {
		noInterest = func(subj string) bool { return !r.st.interested(subj) }
	}
	op := expireOp(plan, noInterest)
	b := &replicaBatch{msgs: op.msgs}
	for i := range b.msgs {
		m := &b.msgs[i]
		r.inflightLocked(b, m, store.RecordSize(m.subj, m.hdr, m.data))
		r.mu.next, r.mu.lastTS, r.mu.lastID = m.seq+1, max(r.mu.lastTS, m.ts), ""
	}
	return r.submitLocked(b, op)
}

// expireOp is the opExpire of a planned round: its markers as messages
// (with their header, which the op does not carry, for the projection's
// counts), each with the message it replaces. noInterest, if set, says
// which subjects no consumer wants under interest retention: their
// markers are removed once appended, as a publish without interest is.
func expireOp(plan store.ExpiryPlan, noInterest func(subj string) bool) *replicaOp {
	op := &replicaOp{kind: opExpire, now: plan.Now, seqs: plan.Removed}
	for _, m := range plan.Markers {
		msg := replicaMsg{seq: m.Seq, ts: m.Timestamp, ttl: int64(m.TTL), subj: m.Subject, hdr: store.MarkerHeader(m.TTL)}
		if noInterest != nil && noInterest(m.Subject) {
			msg.flags = msgNoInterest
		}
		op.msgs, op.replaced = append(op.msgs, msg), append(op.replaced, m.Replaced)
	}
	return op
}
