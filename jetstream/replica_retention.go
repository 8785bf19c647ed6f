package jetstream

import "sync/atomic"

// Interest and work-queue retention of a replicated stream (retention.go
// for a single server). Only the leader runs consumers, so only it knows
// when they are done with a message: it decides and proposes the removals
// (opRemove), and every replica applies them. A message no consumer
// wanted when the leader took it, under interest retention, is flagged in
// its op (msgNoInterest) and removed as it is appended, on every replica.
//
// Removals the leader proposed and did not see applied (it lost its
// leadership first) are found again: a new leader, once ready, sweeps the
// stream for messages its consumers, as applied, are done with; and a
// leader that raft dropped removals of sweeps again within a second.

// retireChunk bounds the sequences of one removal op.
const retireChunk = 1024

// retire removes, through the group, the messages c acknowledged that no
// other consumer needs (c's goroutine, without its lock), and waits until
// they are applied: a client that saw its ack confirmed sees the message
// gone. Removals that do not apply are left to the next leader's sweep.
func (r *replica) retire(c *consumer, seqs []uint64) {
	st := r.st
	others := st.otherConsumers(c)
	policy := st.retention()
	var gone []uint64
	for _, seq := range seqs {
		if policy == InterestPolicy && len(others) > 0 {
			m, err := st.store.Get(seq)
			if err != nil || anyNeeds(others, seq, m.Subject) {
				continue
			}
		}
		gone = append(gone, seq)
	}
	r.remove(gone)
}

// remove proposes the removal of seqs, in chunks, and waits for each.
func (r *replica) remove(seqs []uint64) {
	for len(seqs) > 0 {
		n := min(len(seqs), retireChunk)
		var err error
		if h := removeHook.Load(); h != nil {
			err = (*h)(seqs[:n])
		}
		if err == nil {
			_, err = r.proposeWait(&replicaOp{kind: opRemove, seqs: seqs[:n]})
		}
		if err != nil {
			r.st.js.log.Debug("replicated stream removals not applied: swept again by this leader's next round, or by the next leader",
				"stream", r.st.name, "msgs", len(seqs), "err", err)
			r.resweep.Store(true)
			return
		}
		seqs = seqs[n:]
	}
}

// removeHook, set by tests, fails a removal before it is proposed, as
// raft dropping it would.
var removeHook atomic.Pointer[func(seqs []uint64) error]

// sweepAgain sweeps, on a goroutine of its own, if removals proposed by
// this leader were not applied (raft may drop a proposal and keep its
// leader: a transfer under way, too much uncommitted), once a second
// (checkpointReplicas). A new leader sweeps anyway when it is ready.
func (r *replica) sweepAgain() {
	if r.isLeader() && r.resweep.CompareAndSwap(true, false) {
		go r.sweep()
	}
}

// sweep removes, through the group, every message the consumers running
// here are done with: under interest retention one no consumer needs,
// under work-queue retention one whose consumer acknowledged it (one no
// consumer takes waits for one). On its own goroutine: the ready leader
// sweeps when it starts, and after a consumer of an interest stream goes.
func (r *replica) sweep() {
	st := r.st
	policy := st.retention()
	if policy == LimitsPolicy || !r.isLeader() {
		return
	}
	consumers := *st.clist.Load()
	var gone []uint64
	st.eachMsg("retention sweep", func(seq uint64, subj string) {
		if retired(consumers, seq, subj, policy) {
			gone = append(gone, seq)
		}
	})
	r.remove(gone)
}

// retired reports whether the consumers are done with a message under
// policy (interest or work queue).
func retired(cs []*consumer, seq uint64, subj string, policy RetentionPolicy) bool {
	if policy == WorkQueuePolicy {
		taken := false
		for _, c := range cs {
			taken = taken || c.wants(subj)
		}
		if !taken {
			return false
		}
	}
	return !anyNeeds(cs, seq, subj)
}
