package jetstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skiffmq/skiff/internal/bufpool"
	"github.com/skiffmq/skiff/internal/jscluster"
	"github.com/skiffmq/skiff/internal/multiraft"
	"github.com/skiffmq/skiff/server"
	"github.com/skiffmq/skiff/store"
)

// A replicated stream (num_replicas above 1; design 3.2 and 3.3) on one of
// its servers: the stream's store, kept by its raft group (replicaFSM),
// and, while this server leads the group, the publish path.
//
// Only the ready leader subscribes to the stream's subjects. It checks a
// publish as a single server does, against its projection (the store as
// applied, plus what it proposed and has not applied yet), gives it the
// next sequence and a time, and adds it to the open batch. One batch is
// proposed at a time: the next goes once raft has taken the previous (or
// at once when none is in flight), so sequences never skip. The PubAck
// goes out when the batch is applied, that is committed on a quorum, from
// the apply goroutine; a batch raft drops is refused (10008) with every
// message behind it, and the projection is rebuilt before publishes are
// taken again. A leader is ready once it applied the first (empty) entry
// of its term: its store then holds everything committed before it.
//
// A message delete or a purge is proposed by the leader and answered once
// applied (proposeWait): a purge's bound is at most the last sequence
// applied + 1, so it never moves the stream's last sequence past messages
// still to come. Durable consumers are ops of the group too, and run on
// the ready leader (replica_consumers.go), and so does interest and
// work-queue retention: the leader decides what its consumers are done
// with and proposes the removals (replica_retention.go). Time moves with
// the log (replica_clock.go): max_age and TTLs expire at the same place
// in the log on every replica, and on a stream with subject delete
// markers the leader plans each expiry round, its markers at sequences
// of the projection, and proposes it between batches.

// maxReplicas bounds num_replicas, as in nats-server.
const maxReplicas = 5

// replicaBatchBytes bounds the open batch's messages: past it, while the
// last batch is not taken yet, a publish waits until it is (at most
// replicaBatchWait, then it is refused with 429 10167): backpressure on
// the publisher's connection (or the route its server forwards it on).
const replicaBatchBytes = 256 << 10

// replicaBatchWait bounds a publish's wait for room in the open batch.
const replicaBatchWait = 2 * time.Second

// replicaPendingTTL is how long a proposed batch waits to be applied
// before it is forgotten: an entry a new leader overwrote never applies,
// and its publishers, with no PubAck, retry.
const replicaPendingTTL = 10 * time.Second

// replica is a replicated stream's raft side on this server.
type replica struct {
	st    *stream
	c     *jscluster.Cluster
	group uint64
	me    uint64        // this server's raft ID
	fsm   replicaFSM    // the group's state machine
	saved atomic.Uint64 // the index of the last checkpoint written (replica_checkpoint.go)
	// snapped is the index of the last snapshot taken here
	// (replica_snapshot.go).
	snapped atomic.Uint64
	// chunks counts the catch-up answers applied here
	// (replica_catchup.go).
	chunks atomic.Uint64
	// logHigh is the last index of the group's log here when the replica
	// opened: its store holds the effects of no later entry then
	// (replica_catchup.go).
	logHigh uint64
	// ticking: an opTick proposed here is not applied yet
	// (replica_clock.go).
	ticking atomic.Bool
	// resweep: removals this leader proposed were not applied while it
	// still led (raft dropped them): its next round sweeps again
	// (replica_retention.go).
	resweep atomic.Bool
	// members is the state of the group's membership changes
	// (replica_members.go); unplaced when the meta state was first seen
	// not to place the stream here while the group still counted this
	// server (Unix nanoseconds, 0: not seen).
	// snapMu serializes checkpoints and snapshots (the checkpoint
	// round's, a membership change's).
	snapMu sync.Mutex
	// marks are the last checkpoints' indexes and store sequences, oldest
	// first, under snapMu: once the log is compacted past one, the store
	// may drop the segments its replay kept (replica_snapshot.go).
	marks    []checkpointMark
	members  replicaMembers
	unplaced atomic.Int64
	// asking: a goroutine asks the members whether the group still
	// counts this server; removed: its leader said it does not.
	asking, removed atomic.Bool
	// stop is closed when the replica closes: a catch-up gives up.
	stop     chan struct{}
	stopOnce sync.Once

	// pub publishes PubAcks; used on the apply goroutine only.
	pub *server.Publisher
	// consumerOps serializes the leader's consumer creates, updates and
	// deletes: each is checked against the consumers as applied.
	consumerOps sync.Mutex

	mu struct {
		sync.Mutex
		leader   bool // this server leads the group, as last told
		term     uint64
		ready    bool // leader, and its term's first entry applied
		resync   bool // a batch was dropped: rebuild once nothing is in flight
		next     uint64
		lastTS   int64
		lastID   string            // Nats-Msg-Id of the last message proposed, "" if none
		subjLast map[string]uint64 // last sequence proposed per subject, not yet applied
		// inMsgs, inBytes and inSubj count the messages proposed and not
		// yet applied, for discard new's admission.
		inMsgs, inBytes int64
		inSubj          map[string]int64
		// inIDs maps the Nats-Msg-Id of each message proposed and not yet
		// applied to its sequence: a publish with one is refused (10008)
		// until it applies, when the stream's duplicate window takes it.
		// The window holds applied messages only, so a duplicate's PubAck
		// always names the sequence that holds its original, even when
		// a batch of an earlier term never applied.
		inIDs map[string]uint64
		open  *replicaBatch
		// sizes sizes a new batch's buffers by the batches before it.
		sizes batchSizes
		// spare are batches applied and answered, whose slices a new
		// batch reuses (recycleLocked).
		spare    []*replicaBatch
		inFlight bool // a proposal raft has not taken or dropped yet
		// barrier: an expiry round with markers is due; the open batch
		// waits until every batch proposed is applied, and goes after
		// the round (replica_clock.go).
		barrier bool
		// takenCh is closed (and replaced) whenever raft takes or drops a
		// proposal: publishes waiting for room in the open batch wake.
		takenCh chan struct{}
		propID  uint64
		pending map[uint64]*replicaBatch // proposed, not yet applied, by propID
		// waiters are the other ops proposed here (deletes, purges,
		// consumer ops), by propID, each told once its op is applied
		// or given up.
		waiters map[uint64]waiter
		// creating holds the consumers this leader's creates built, by
		// name, until their create op applies (replica_consumers.go).
		creating map[string]*consumer
		swept    time.Time
		closed   bool
	}
}

// replicaBatch is messages proposed together, and their publishers'
// replies.
type replicaBatch struct {
	propID uint64
	// msgs are the messages, without their headers and data, which only
	// enc holds: an opMsgs encoding, made as they join (appendMsg), after
	// msgsHeadRoom bytes left for the op's header (sealMsgs). enc is from
	// bufpool and goes back once raft has taken the proposal, whose data
	// raft keeps a copy of (multiraft.Node.ProposeAsync). An expiry
	// round's batch has no enc: its op is encoded when proposed.
	msgs    []replicaMsg
	enc     []byte
	replies []string
	// refusals answer the publishes refused by their Nats-Expected-*
	// headers while the batch was open. The projection they were checked
	// against is committed once the batch is, so they are given then: a
	// refusal never names a sequence the group may still lose, and a
	// leader deposed without knowing it gives none.
	refusals []refusal
	// taken: raft took the proposal (taken ran), so nothing but the
	// apply goroutine holds the batch once it is applied.
	taken   bool
	bytes   int   // the messages' subjects, headers and data
	inBytes int64 // the messages' store records, in the in-flight counts
	at      time.Time
}

// refusal is a publish's refusal held until its batch applies.
type refusal struct {
	reply string
	body  []byte
}

// openReplica puts a stream's raft group on this server: new with peers
// as voters, or from its log (peers nil); held for a reason, if any
// (multiraft.HoldReason).
func (st *stream) openReplica(group uint64, peers []string, held multiraft.HoldReason) error {
	js := st.js
	r := &replica{st: st, c: js.raft, group: group, me: js.raft.ID(), pub: st.ja.acc.NewPublisher(), stop: make(chan struct{})}
	r.mu.subjLast = map[string]uint64{}
	r.mu.inSubj = map[string]int64{}
	r.mu.inIDs = map[string]uint64{}
	r.mu.pending = map[uint64]*replicaBatch{}
	r.mu.waiters = map[uint64]waiter{}
	r.mu.creating = map[string]*consumer{}
	r.mu.takenCh = make(chan struct{})
	r.fsm = replicaFSM{store: st.store, onApplied: r.applied, onLeader: r.leaderChanged, onEmpty: r.emptyApplied,
		catchUp: r.catchUp, cons: newReplicaConsumers(), onConfig: r.configApplied, onMember: r.memberApplied,
		onFailed: st.groupFailed, opened: make(chan struct{})}
	if js.raft.LogDurability().Sync != store.SyncAlways {
		r.fsm.syncLog = js.raft.SyncLog
	}
	if js.raft.HasGroupLog(group) || st.founding.Load() {
		r.fsm.checkpoint = st.loadCheckpoint(group)
		// The consumers as of the checkpoint, or (a stream turned
		// replicated, replica_convert.go) as they were before its first
		// entry: either way, the log applies over them exactly.
		if r.fsm.checkpoint > 0 || st.founding.Load() {
			if err := r.fsm.cons.load(st.dir); err != nil {
				// Without the consumers as of the checkpoint, the log is
				// replayed whole (or its snapshot installed).
				st.js.log.Warn("replicated consumers not read: the group's log is replayed", "stream", st.name, "err", err)
				r.fsm.checkpoint = 0
				_ = r.fsm.cons.install(nil)
			}
		}
		r.saved.Store(r.fsm.checkpoint)
	}
	if err := r.keepPayloads(); err != nil {
		return err
	}
	r.logHigh, _ = js.raft.GroupLastIndex(group)
	st.repl = r
	if err := js.raft.AddHeldGroup(group, peers, &r.fsm, held); err != nil {
		st.repl = nil
		_, _ = js.raft.SetGroupPayloads(group, nil, 0)
		return err
	}
	if r.fsm.start() {
		// The store is behind the log's snapshot: catch up now rather
		// than at the next entry, which an idle stream may not have.
		go func() {
			if err := r.fsm.restorePending(); err != nil && !errors.Is(err, errReplicaStopped) {
				js.log.Warn("replica catch-up failed: tried again at the next entry", "stream", st.name, "err", err)
			}
		}()
	}
	return nil
}

// closeReplica takes the group off this server; destroy drops its log
// too (the stream was deleted here).
func (r *replica) close(destroy bool) error {
	r.mu.Lock()
	r.mu.closed = true
	r.tookLocked()
	r.mu.Unlock()
	r.stopOnce.Do(func() { close(r.stop) })
	if destroy {
		return r.c.RemoveGroup(r.group)
	}
	err := r.c.StopGroup(r.group)
	if _, perr := r.c.SetGroupPayloads(r.group, nil, 0); err == nil {
		err = perr
	}
	return err
}

// keepPayloads gives the group's log a replicaPayloads hook, if the
// replica's store stages and the log acknowledges before it fsyncs
// (replica_payloads.go). Entries after the checkpoint whose payloads a
// crash took are cut from the log, which raft then fills again from the
// leader.
func (r *replica) keepPayloads() error {
	st := r.st
	if !st.store.Options().Staging || r.c.LogDurability().Sync == store.SyncAlways {
		return nil
	}
	p := &replicaPayloads{store: st.store, onCorrupt: st.corruptFound}
	cut, err := r.c.SetGroupPayloads(r.group, p, r.fsm.checkpoint)
	if err != nil {
		return fmt.Errorf("replica payloads: %w", err)
	}
	if cut > 0 {
		st.js.log.Warn("replica's raft log cut where its messages' payloads were lost; the leader sends them again",
			"stream", st.name, "index", cut)
	}
	return nil
}

// leaderChanged hears the group's leader, on the apply goroutine: a
// server that starts to lead waits for its term's first entry (ready); one
// that stops leading stops taking publishes.
func (r *replica) leaderChanged(leader, term uint64) {
	r.mu.Lock()
	was, oldTerm, wasReady := r.mu.leader, r.mu.term, r.mu.ready
	r.mu.leader, r.mu.term = leader == r.me, term
	var failed []string
	if !r.mu.leader || term != oldTerm {
		// A leader of a new term (even this server again) is ready once
		// it applied that term's first entry.
		r.mu.ready = false
		failed = r.failOpenLocked()
	}
	stopped := (was && leader != r.me) || (wasReady && term != oldTerm)
	var waiting []waiter
	if stopped {
		// Whoever waits for an op proposed here stops waiting (it may
		// still commit under the next leader): a consumer's goroutine
		// blocked on one would hold up stopConsumers below.
		waiting = r.takeWaitersLocked()
	}
	r.mu.Unlock()
	r.refuse(nil, failed)
	giveUp(waiting)
	if stopped {
		r.st.setSubscribed(false)
		r.stopConsumers()
	}
	if was && leader == 0 && term == oldTerm {
		// A leader that steps down to no leader in its own term does so
		// because a quorum no longer answers it (raft's CheckQuorum); a
		// vote of a newer term or a transfer moves the term on.
		st := r.st
		st.ja.advise(advQuorumLost+st.name, func() any {
			return streamQuorumLost{typedEvent: newEvent("stream_quorum_lost"), Account: st.ja.name,
				Stream: st.name, Replicas: st.clusterInfo().Replicas}
		})
		r.publishAdvisories()
	}
}

// publishAdvisories publishes the account's queued advisories, on the
// apply goroutine (r.pub's).
func (r *replica) publishAdvisories() {
	r.st.ja.publishAdvisories(r.pub)
	r.pub.Flush()
}

// emptyApplied hears an empty entry applied: a new leader's first of its
// term. The leader of that term is now ready: the projection starts from
// the store.
func (r *replica) emptyApplied(term uint64) {
	r.mu.Lock()
	ready := r.mu.leader && r.mu.term == term && !r.mu.ready && !r.mu.closed
	var stale []waiter
	if ready {
		r.resetLocked()
		r.mu.ready = true
		// Every entry before this term's first is applied: an op
		// proposed in an earlier term and not applied by now never will
		// be.
		stale = r.takeWaitersLocked()
	}
	r.mu.Unlock()
	giveUp(stale)
	if ready {
		r.startConsumers(term)
		r.st.setSubscribed(true)
		go r.sweep() // removals an earlier leader did not see applied
		st := r.st
		st.ja.advise(advLeaderElected+st.name, func() any {
			ci := st.clusterInfo()
			return streamLeaderElected{typedEvent: newEvent("stream_leader_elected"), Account: st.ja.name,
				Stream: st.name, Leader: st.js.raft.Name(), Replicas: ci.Replicas}
		})
		r.publishAdvisories()
		r.kickMembers()
	}
}

// resetLocked starts the projection from the store as applied. r.mu held.
func (r *replica) resetLocked() {
	s := r.st.store.State()
	r.mu.next, r.mu.lastTS = s.LastSeq+1, s.LastTime.UnixNano()
	if s.LastTime.IsZero() {
		r.mu.lastTS = 0
	}
	r.st.ingestMu.Lock()
	r.mu.lastID = r.st.ingestMu.lastMsgID
	r.st.ingestMu.Unlock()
	clear(r.mu.subjLast)
	clear(r.mu.inSubj)
	r.mu.inMsgs, r.mu.inBytes = 0, 0
	// A batch of an earlier term not applied by now never will be: the
	// entries before this term's first are all applied. Its publishers,
	// with no PubAck, retry, and their IDs are no duplicates.
	clear(r.mu.pending)
	clear(r.mu.inIDs)
	r.mu.resync, r.mu.barrier = false, false
}

// takeWaitersLocked takes every waiter out, to be told after r.mu is
// released. r.mu held.
func (r *replica) takeWaitersLocked() []waiter {
	ws := make([]waiter, 0, len(r.mu.waiters))
	for id, w := range r.mu.waiters {
		delete(r.mu.waiters, id)
		ws = append(ws, w)
	}
	return ws
}

// giveUp tells waiters their ops will not apply.
func giveUp(ws []waiter) {
	for _, w := range ws {
		w.done(opResult{err: errNotReady})
	}
}

// ingest takes a publish on the leader, once the stream's own checks
// (sealed, sizes, quotas) passed: the checks that depend on the stream's
// state, against the projection, then the open batch.
func (r *replica) ingest(m *server.Msg, hdr headers, reply string, cfg *StreamConfig) {
	st := r.st
	r.mu.Lock()
	if !r.waitRoomLocked() {
		r.mu.Unlock()
		st.nack(m, reply, apiErr(429, 10167, "too many requests"))
		return
	}
	if !r.mu.ready || r.mu.resync || r.mu.closed {
		r.mu.Unlock()
		st.nack(m, reply, errClusterUnavailable())
		return
	}
	now := time.Now()
	var failed []string
	msgID, hasID, roll, ttl, ok := st.checkPublish(m, reply, hdr, cfg, publishChecks{
		dedup: func(id string) (uint64, bool) {
			st.ingestMu.Lock()
			seq, dup := st.ingestMu.dedup.lookup(id, now)
			st.ingestMu.Unlock()
			if !dup {
				seq, dup = r.mu.inIDs[id]
			}
			return seq, dup
		},
		pending:     func(seq uint64) bool { return seq > st.store.State().LastSeq },
		expected:    func() *APIError { return r.checkExpectedLocked(hdr, m.Subject) },
		refuseLater: func(aerr *APIError) { failed = r.refuseLaterLocked(reply, aerr) },
		unlock:      r.mu.Unlock,
	})
	if !ok {
		r.refuse(m, failed)
		return
	}
	if aerr := r.admitLocked(cfg, m); aerr != nil {
		r.mu.Unlock()
		st.nack(m, reply, aerr)
		return
	}
	seq, ts := r.mu.next, max(now.UnixNano(), r.mu.lastTS)
	r.mu.next, r.mu.lastTS = seq+1, ts
	msg := replicaMsg{seq: seq, ts: ts, ttl: int64(ttl), subj: strings.Clone(m.Subject)}
	switch roll {
	case rollupSubject:
		msg.flags = msgRollupSubject
	case rollupAll:
		msg.flags = msgRollupAll
	}
	if cfg.Retention == InterestPolicy && !st.interested(msg.subj) {
		msg.flags |= msgNoInterest
	}
	r.mu.lastID = ""
	if hasID {
		msg.msgID = strings.Clone(msgID)
		r.mu.lastID = msg.msgID
	}
	b := r.openLocked()
	r.inflightLocked(b, &msg, store.RecordSize(msg.subj, m.Header, m.Data))
	r.encodeLocked(b, msg, m.Header, m.Data)
	b.msgs, b.replies = append(b.msgs, msg), append(b.replies, reply)
	b.bytes += len(msg.subj) + len(m.Header) + len(m.Data)
	if !r.mu.inFlight {
		failed = r.proposeLocked()
	}
	r.mu.Unlock()
	r.refuse(m, failed)
	st.js.stored(cfg.Storage, len(m.Subject)+len(m.Header)+len(m.Data))
}

// waitRoomLocked waits, r.mu released meanwhile, while the open batch is
// full and the last one proposed is not taken yet: a second batch in
// flight could be taken while the first is dropped, leaving a gap, so the
// publisher waits for raft instead (its connection's reads pause). It
// reports false if raft took nothing for replicaBatchWait. r.mu held.
func (r *replica) waitRoomLocked() bool {
	var deadline *time.Timer
	for (r.mu.inFlight || r.mu.barrier) && r.mu.open != nil && r.mu.open.bytes >= replicaBatchBytes && !r.mu.closed {
		if deadline == nil {
			deadline = time.NewTimer(replicaBatchWait)
			defer deadline.Stop()
		}
		ch := r.mu.takenCh
		r.mu.Unlock()
		select {
		case <-ch:
		case <-deadline.C:
			r.mu.Lock()
			return false
		}
		r.mu.Lock()
	}
	return true
}

// tookLocked wakes the publishes waiting for room in the open batch.
// r.mu held.
func (r *replica) tookLocked() {
	close(r.mu.takenCh)
	r.mu.takenCh = make(chan struct{})
}

// openLocked returns the batch publishes join, new if none is open.
// r.mu held.
func (r *replica) openLocked() *replicaBatch {
	if r.mu.open == nil {
		if k := len(r.mu.spare) - 1; k >= 0 {
			r.mu.open, r.mu.spare[k], r.mu.spare = r.mu.spare[k], nil, r.mu.spare[:k]
		} else {
			n := r.mu.sizes.msgs
			r.mu.open = &replicaBatch{msgs: make([]replicaMsg, 0, n), replies: make([]string, 0, n)}
		}
	}
	return r.mu.open
}

// maxSpareBatches bounds the batches kept for reuse, and maxSpareMsgs the
// messages one kept has room for: a few batches are in flight at a time.
const (
	maxSpareBatches = 4
	maxSpareMsgs    = 1 << 16
)

// recycleLocked keeps batch b, applied and answered, for a later batch to
// reuse its slices, emptied so that they hold no subject, reply or
// refusal. r.mu held.
func (r *replica) recycleLocked(b *replicaBatch) {
	if !b.taken || len(r.mu.spare) >= maxSpareBatches || cap(b.msgs) > maxSpareMsgs || cap(b.replies) > maxSpareMsgs {
		return
	}
	clear(b.msgs)
	clear(b.replies)
	clear(b.refusals)
	*b = replicaBatch{msgs: b.msgs[:0], replies: b.replies[:0], refusals: b.refusals[:0]}
	r.mu.spare = append(r.mu.spare, b)
}

// refuseLaterLocked holds a publish's refusal by its Nats-Expected-*
// headers in the open batch, proposed now if none is in flight, and
// returns the replies of the publishes refused if raft would not take it.
// r.mu held.
func (r *replica) refuseLaterLocked(reply string, aerr *APIError) []string {
	if reply == "" || r.st.cfg.Load().NoAck {
		return nil
	}
	b := r.openLocked()
	b.refusals = append(b.refusals, refusal{reply: reply, body: pubAckError(r.st.name, aerr)})
	if r.mu.inFlight {
		return nil
	}
	return r.proposeLocked()
}

// admitLocked refuses, under discard new, a message the stream's limits
// would refuse once everything proposed before it is applied: the store
// as applied plus what is in flight (removals in flight are not counted,
// so the leader only ever refuses more than the store would, never less,
// and no replica refuses what it admitted). r.mu held.
func (r *replica) admitLocked(cfg *StreamConfig, m *server.Msg) *APIError {
	if cfg.Discard != DiscardNew {
		return nil
	}
	s := r.st.store.State()
	size := int64(store.RecordSize(m.Subject, m.Header, m.Data))
	switch {
	case cfg.MaxMsgs > 0 && int64(s.Msgs)+r.mu.inMsgs >= cfg.MaxMsgs:
		return r.st.appendError(store.ErrMaxMsgs)
	case cfg.MaxBytes > 0 && int64(s.Bytes)+r.mu.inBytes+size > cfg.MaxBytes:
		return r.st.appendError(store.ErrMaxBytes)
	case cfg.DiscardNewPer && cfg.MaxMsgsPerSubject > 0 &&
		int64(r.st.store.NumPending(1, m.Subject))+r.mu.inSubj[m.Subject] >= cfg.MaxMsgsPerSubject:
		return r.st.appendError(store.ErrMaxMsgsPerSubject)
	}
	return nil
}

// inflightLocked counts a message of batch b, proposed (or to be), in
// the projection: its subject's last sequence, and the in-flight counts,
// with size its store record's. r.mu held.
func (r *replica) inflightLocked(b *replicaBatch, m *replicaMsg, size int) {
	r.mu.subjLast[m.subj] = m.seq
	r.mu.inMsgs++
	r.mu.inBytes += int64(size)
	b.inBytes += int64(size)
	r.mu.inSubj[m.subj]++
	if m.msgID != "" {
		r.mu.inIDs[m.msgID] = m.seq
	}
}

// encodeLocked appends message m, with its header and data, to the open
// batch b's encoding (replicaBatch.enc). r.mu held.
func (r *replica) encodeLocked(b *replicaBatch, m replicaMsg, hdr, data []byte) {
	m.hdr, m.data = hdr, data
	if b.enc == nil {
		b.enc = bufpool.Get(max(msgsHeadRoom+sizeMsg(&m), r.mu.sizes.enc))[:msgsHeadRoom]
	}
	b.enc = appendMsg(bufpool.Grow(b.enc, sizeMsg(&m), 0), &m)
}

// unflightLocked takes a batch's messages out of the in-flight counts (it
// was applied, or given up). r.mu held.
func (r *replica) unflightLocked(b *replicaBatch) {
	r.mu.inMsgs -= int64(len(b.msgs))
	r.mu.inBytes -= b.inBytes
	for i := range b.msgs {
		m := &b.msgs[i]
		if r.mu.inSubj[m.subj]--; r.mu.inSubj[m.subj] <= 0 {
			delete(r.mu.inSubj, m.subj)
		}
		if m.msgID != "" && r.mu.inIDs[m.msgID] == m.seq {
			delete(r.mu.inIDs, m.msgID)
		}
	}
}

// checkExpectedLocked checks the Nats-Expected-* headers against the
// projection. r.mu held.
func (r *replica) checkExpectedLocked(hdr headers, subj string) *APIError {
	return checkExpected(hdr, subj, expectedState{
		last: func() uint64 { return r.mu.next - 1 },
		subjLast: func(subj string) uint64 {
			if seq, inFlight := r.mu.subjLast[subj]; inFlight {
				return seq
			}
			return r.st.lastBySubject(subj)
		},
		lastID: r.mu.lastID,
	})
}

// proposeLocked proposes the open batch, unless an expiry round waits to
// go first (barrier), and returns the replies of the publishes refused if
// raft would not take it. r.mu held.
func (r *replica) proposeLocked() []string {
	b := r.mu.open
	if b == nil || len(b.msgs)+len(b.refusals) == 0 || r.mu.barrier {
		return nil
	}
	r.mu.open = nil
	return r.submitLocked(b, &replicaOp{kind: opMsgs})
}

// submitLocked proposes op as batch b's (the open batch's messages, or an
// expiry round's markers), the one proposal in flight, and returns the
// replies of the publishes refused if raft would not take it. r.mu held.
func (r *replica) submitLocked(b *replicaBatch, op *replicaOp) []string {
	r.mu.propID++
	b.propID, b.at = r.mu.propID, time.Now()
	op.proposer, op.propID, op.term = r.me, b.propID, r.mu.term
	var data []byte
	switch {
	case op.kind == opMsgs && b.enc != nil:
		data = sealMsgs(b.enc, op, len(b.msgs))
		r.mu.sizes.add(len(b.msgs), len(b.enc))
	case op.kind == opMsgs: // refusals only
		data = appendOp(nil, op)
	default:
		data = appendOp(make([]byte, 0, sizeOp(op)), op)
	}
	r.mu.pending[b.propID] = b
	r.mu.inFlight = true
	if err := r.c.ProposeGroup(r.group, data, func(err error) { r.taken(b, err) }); err != nil {
		r.mu.inFlight = false
		r.tookLocked()
		return r.droppedLocked(b, err)
	}
	return nil
}

// taken hears raft take or drop a proposed batch; the next batch goes.
func (r *replica) taken(b *replicaBatch, err error) {
	r.mu.Lock()
	releaseEnc(b)
	b.taken = err == nil
	r.mu.inFlight = false
	r.tookLocked()
	var failed []string
	switch {
	case err != nil:
		failed = r.droppedLocked(b, err)
	case r.mu.ready && !r.mu.resync:
		failed = r.proposeLocked()
	}
	r.mu.Unlock()
	r.refuse(nil, failed)
}

// droppedLocked gives up a batch raft did not take, and what came after
// it: their sequences are free again, so the projection is rebuilt once
// every batch taken before it is applied. It returns the replies of the
// publishes refused. r.mu held.
func (r *replica) droppedLocked(b *replicaBatch, err error) []string {
	releaseEnc(b)
	r.st.js.log.Debug("replicated stream batch dropped", "stream", r.st.name, "msgs", len(b.msgs), "err", err)
	delete(r.mu.pending, b.propID)
	failed := append(r.failLocked(b), r.failOpenLocked()...)
	r.mu.resync = true
	r.maybeResyncLocked()
	return failed
}

// failOpenLocked gives up the batch not proposed yet. r.mu held.
func (r *replica) failOpenLocked() []string {
	b := r.mu.open
	if b == nil {
		return nil
	}
	r.mu.open = nil
	releaseEnc(b)
	r.tookLocked() // publishes waiting for room go on (and are refused)
	return r.failLocked(b)
}

// batchSizes is a decaying maximum of the batches' message counts and
// encodings' lengths: a new batch starts with room for as much, so that
// its buffers are seldom grown (by copies, and out of bufpool's sizes),
// while a stream whose traffic fell holds less and less.
type batchSizes struct{ msgs, enc int }

// add counts a batch of msgs messages encoded in enc bytes.
func (s *batchSizes) add(msgs, enc int) {
	s.msgs = max(msgs, s.msgs-s.msgs/8)
	s.enc = max(enc, s.enc-s.enc/8)
}

// releaseEnc gives a batch's encoding back to bufpool: raft has taken or
// dropped its proposal, or it will not be proposed. r.mu held.
func releaseEnc(b *replicaBatch) {
	bufpool.Put(b.enc)
	b.enc = nil
}

// failLocked takes a batch that will not be stored out of the in-flight
// counts and message IDs, and returns its publishers' replies. r.mu held.
func (r *replica) failLocked(b *replicaBatch) []string {
	r.unflightLocked(b)
	replies := b.replies
	for _, f := range b.refusals {
		replies = append(replies, f.reply)
	}
	return replies
}

// refuse answers publishers whose messages were not stored (10008): after
// the read of m when a publish caused it, else at once.
func (r *replica) refuse(m *server.Msg, replies []string) {
	st := r.st
	if len(replies) == 0 || st.cfg.Load().NoAck {
		return
	}
	body := pubAckError(st.name, errClusterUnavailable())
	send := func(p *server.Publisher) {
		for _, reply := range replies {
			if reply != "" {
				p.Publish(reply, "", nil, body)
			}
		}
	}
	if m != nil {
		m.AfterRead(send)
		return
	}
	p := st.ja.acc.NewPublisher()
	send(p)
	p.Flush()
}

// maybeResyncLocked rebuilds the projection after a dropped batch, once
// no batch is in flight or waiting to apply. r.mu held.
func (r *replica) maybeResyncLocked() {
	if r.mu.resync && !r.mu.inFlight && len(r.mu.pending) == 0 && r.mu.ready {
		r.resetLocked()
	}
}

// applied hears an op applied on this replica (replicaFSM.onApplied), on
// the apply goroutine: the duplicate window and the consumers learn of
// the messages on every replica; the proposer's PubAcks go out.
func (r *replica) applied(op *replicaOp, _ uint64, err error) {
	st := r.st
	if errors.Is(err, errStaleTerm) {
		// Skipped by every replica: its proposer, if still waiting, hears
		// it was not applied; the publishers of a batch proposed here are
		// refused (10008) and retry.
		r.wake(op, errNotReady)
		r.staleApplied(op)
		return
	}
	if err != nil {
		r.wake(op, err)
		r.mu.Lock()
		closed := r.mu.closed
		r.mu.Unlock()
		if !closed { // a closed store refuses what comes after its close
			st.js.log.Error("replicated stream op not applied: the replica stops", "stream", st.name, "err", err)
		}
		return
	}
	switch {
	case op.kind == opConsumer:
		r.consumerApplied(op)
	case (op.kind == opTick || op.kind == opExpire) && op.purged > 0:
		st.changed() // the consumers (on the leader) drop what expired
	}
	// An expiry round's markers are messages of the projection, as a
	// batch's are.
	if op.kind != opMsgs && op.kind != opExpire {
		r.wake(op, nil)
		r.mu.Lock()
		expired := r.sweepLocked()
		r.mu.Unlock()
		giveUp(expired)
		return
	}
	st.ingestMu.Lock()
	for i := range op.msgs {
		m := &op.msgs[i]
		st.ingestMu.lastMsgID = m.msgID
		if m.msgID != "" {
			st.ingestMu.dedup.add(m.msgID, m.seq, time.Unix(0, m.ts))
		}
	}
	st.ingestMu.Unlock()
	cfg := st.config()
	for i := range op.msgs {
		// The consumers (on the leader) hear of it; a message no consumer
		// wanted under interest retention was removed by the op already.
		st.notify(op.msgs[i].subj)
	}
	r.mu.Lock()
	for i := range op.msgs {
		if r.mu.subjLast[op.msgs[i].subj] == op.msgs[i].seq {
			delete(r.mu.subjLast, op.msgs[i].subj)
		}
	}
	var b *replicaBatch
	if op.proposer == r.me {
		b = r.mu.pending[op.propID]
		delete(r.mu.pending, op.propID)
		if b != nil {
			r.unflightLocked(b)
		}
	}
	expired := r.sweepLocked()
	r.maybeResyncLocked()
	failed := r.expireDueLocked()
	r.mu.Unlock()
	giveUp(expired)
	r.refuse(nil, failed)
	if b == nil {
		return
	}
	if !cfg.NoAck {
		for i, reply := range b.replies {
			if reply != "" {
				r.pub.Publish(reply, "", nil, st.pubAckJSON(b.msgs[i].seq, false))
			}
		}
		for _, f := range b.refusals {
			r.pub.Publish(f.reply, "", nil, f.body)
		}
		r.pub.Flush()
	}
	r.mu.Lock()
	r.recycleLocked(b)
	r.mu.Unlock()
}

// staleApplied hears a batch of messages skipped as stale (decided in
// one term, appended in another): if it was proposed here and is still
// pending, its publishers are refused at once rather than left to time
// out, and its sequences are free again: the projection is rebuilt once
// nothing is in flight, as after a dropped batch.
func (r *replica) staleApplied(op *replicaOp) {
	if op.kind != opMsgs || op.proposer != r.me {
		return
	}
	r.mu.Lock()
	b := r.mu.pending[op.propID]
	var failed []string
	if b != nil {
		delete(r.mu.pending, op.propID)
		failed = r.failLocked(b)
		r.mu.resync = true
		r.maybeResyncLocked()
	}
	r.mu.Unlock()
	r.refuse(nil, failed)
}

// sweepLocked forgets batches and ops proposed long ago and never applied
// (a new leader overwrote them), at most once a second, and returns the
// waiters to tell. r.mu held.
func (r *replica) sweepLocked() []waiter {
	now := time.Now()
	if now.Sub(r.mu.swept) < time.Second {
		return nil
	}
	r.mu.swept = now
	for id, b := range r.mu.pending {
		if now.Sub(b.at) > replicaPendingTTL {
			r.unflightLocked(b)
			delete(r.mu.pending, id)
		}
	}
	var expired []waiter
	for id, w := range r.mu.waiters {
		if now.Sub(w.at) > replicaPendingTTL {
			delete(r.mu.waiters, id)
			expired = append(expired, w)
		}
	}
	return expired
}

// isLeader reports whether this server leads the stream's group and takes
// publishes.
func (r *replica) isLeader() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.ready
}

// health reports why this replica is not current, or nil.
func (r *replica) health() error {
	held, _ := r.c.GroupHeld(r.group)
	switch {
	case r.fsm.restoring():
		return errors.New("catching up from a peer")
	case held != multiraft.HoldNone:
		return fmt.Errorf("held (%v) until caught up with the leader", held)
	case r.leaderName() == "":
		return errors.New("no leader")
	}
	return nil
}

// leaderName returns the group's leader as this server knows it ("" for
// none).
func (r *replica) leaderName() string {
	name, _ := r.c.GroupLeader(r.group)
	return name
}

// setSubscribed subscribes the stream to its subjects (its replica leads)
// or drops the subscriptions (it does not).
func (st *stream) setSubscribed(on bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.mu.closed {
		return
	}
	st.unsubscribeLocked()
	if on {
		if err := st.subscribeLocked(st.config().Subjects); err != nil {
			st.js.log.Error("replicated stream leader not subscribed", "stream", st.name, "err", err)
			st.unsubscribeLocked()
		}
	}
}

// opResult is an op proposed here once applied (with a purge's count), or
// why it was not.
type opResult struct {
	op  *replicaOp
	err error
}

// replicaOpWait bounds the wait for an op proposed here to apply.
const replicaOpWait = 5 * time.Second

// errNotReady: this server does not lead the group, or its leader is not
// ready yet.
var errNotReady = errors.New("jetstream: not the replicated stream's ready leader")

// waiter is told once an op proposed here is applied, or given up.
type waiter struct {
	done func(opResult)
	at   time.Time
}

// proposeWait proposes op (a removal, a purge, a consumer change) as the
// ready leader and waits until it is applied here; it returns the applied
// op, or why not.
func (r *replica) proposeWait(op *replicaOp) (*replicaOp, error) {
	ch := make(chan opResult, 1)
	id := r.proposeOp(op, 0, func(res opResult) { ch <- res })
	select {
	case res := <-ch:
		return res.op, res.err
	case <-time.After(replicaOpWait):
		r.wakeID(id, opResult{err: errNotReady})
		res := <-ch
		return res.op, res.err
	}
}

// proposeOp proposes op as the ready leader of term (0: of the current
// term) and calls done once: when the op is applied here, or given up
// (raft dropped it, it was skipped, or this server does not lead in that
// term), possibly before it returns. It returns the op's propID. The
// caller holds no lock done takes.
func (r *replica) proposeOp(op *replicaOp, term uint64, done func(opResult)) uint64 {
	r.mu.Lock()
	if !r.mu.ready || r.mu.closed || (term != 0 && term != r.mu.term) {
		r.mu.Unlock()
		done(opResult{err: errNotReady})
		return 0
	}
	r.mu.propID++
	op.proposer, op.propID, op.term = r.me, r.mu.propID, r.mu.term
	id := op.propID
	r.mu.waiters[id] = waiter{done: done, at: time.Now()}
	r.mu.Unlock()
	if err := r.c.ProposeGroup(r.group, appendOp(nil, op), func(err error) {
		if err != nil {
			r.wakeID(id, opResult{err: err})
		}
	}); err != nil {
		r.wakeID(id, opResult{err: err})
	}
	return id
}

// wake hands an op applied here (or failed) to its waiter, if this server
// proposed it.
func (r *replica) wake(op *replicaOp, err error) {
	if op.proposer == r.me {
		r.wakeID(op.propID, opResult{op: op, err: err})
	}
}

func (r *replica) wakeID(id uint64, res opResult) {
	r.mu.Lock()
	w, ok := r.mu.waiters[id]
	delete(r.mu.waiters, id)
	r.mu.Unlock()
	if ok {
		w.done(res)
	}
}

// msgDelete deletes a message of a replicated stream through its group:
// the leader checks that its store holds it and proposes its removal.
func (r *replica) msgDelete(seq uint64) *APIError {
	if _, err := r.st.store.Get(seq); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return apiErr(400, 10043, fmt.Sprintf("sequence [%d] not found", seq))
		}
		return apiErr(500, 10057, err.Error())
	}
	if _, err := r.proposeWait(&replicaOp{kind: opRemove, seqs: []uint64{seq}, persist: true}); err != nil {
		return r.opError(err, 10057)
	}
	return nil
}

// purge purges a replicated stream through its group, below a bound no
// higher than the last sequence applied + 1: what the leader proposed and
// has not applied stays (a purge never moves the last sequence past
// messages still to come, which the store would then skip). A purge that
// keeps the newest messages is turned into the bound that keeps them in
// the store as applied: an op that named a count instead would remove
// more when the log is replayed over a store that has gone on since.
func (r *replica) purge(filter string, seq, keep uint64) (uint64, *APIError) {
	below := r.st.store.State().LastSeq + 1
	switch {
	case keep > 0:
		b, err := r.st.store.KeepBound(filter, keep)
		if err != nil {
			return 0, apiErr(500, 10110, err.Error())
		}
		if b == 0 {
			return 0, nil // no more than keep: nothing to purge
		}
		below = b
	case seq > 0:
		below = min(seq, below)
	}
	op, err := r.proposeWait(&replicaOp{kind: opPurge, subject: filter, below: below})
	if err != nil {
		return 0, r.opError(err, 10110)
	}
	return op.purged, nil
}

// opError is the API's error for an op that did not apply.
func (r *replica) opError(err error, code uint16) *APIError {
	if errors.Is(err, errNotReady) {
		return errClusterUnavailable()
	}
	return apiErr(500, code, err.Error())
}

// streamStepdown answers STREAM.LEADER.STEPDOWN on the stream's server:
// a replicated stream's leader hands the group's leadership to another
// replica (placement.preferred if named); a stream of one replica has no
// other to hand it to (success, as nats-server answers), and a single
// server has no cluster (10010).
func (ja *jsAccount) streamStepdown(name string, data []byte) any {
	r := &successResponse{apiResponse: newResponse("stream_leader_stepdown")}
	st := ja.lookup(name)
	if st == nil {
		r.Error = ja.errNoStream(name)
		return r
	}
	r.Success, r.Error = ja.stepdown(st, data)
	return r
}

// streamPeerRemove answers STREAM.PEER.REMOVE outside a cluster (in one,
// the meta leader answers: clusterStreamPeerRemove).
func (ja *jsAccount) streamPeerRemove(string) any {
	r := &successResponse{apiResponse: newResponse("stream_remove_peer")}
	r.Error = apiErr(503, 10010, "JetStream clustering support required")
	return r
}

// consumerStepdown answers CONSUMER.LEADER.STEPDOWN. A consumer of a
// replicated stream runs on the stream's leader, its progress in the
// stream's group (design 3.5), so it moves with the stream: the stream's
// leadership is handed over, which nats-server, with a group per
// consumer, does not do to its stream. Otherwise as STREAM.LEADER.STEPDOWN.
func (ja *jsAccount) consumerStepdown(stream, name string, data []byte) any {
	r := &successResponse{apiResponse: newResponse("consumer_leader_stepdown")}
	st := ja.lookup(stream)
	switch {
	case st == nil:
		r.Error = ja.errNoStream(stream)
	case ja.js.raft != nil && st.notLeading() != nil:
		r.Error = st.notLeading()
	case st.consumer(name) == nil:
		r.Error = errConsumerNotFound()
	default:
		r.Success, r.Error = ja.stepdown(st, data)
	}
	return r
}

// stepdown has st's group hand its leadership to another replica
// (placement.preferred in data, if named), and reports success or why not.
func (ja *jsAccount) stepdown(st *stream, data []byte) (bool, *APIError) {
	switch {
	case ja.js.raft == nil:
		return false, apiErr(503, 10010, "JetStream clustering support required")
	case st.repl == nil:
		return true, nil // one replica: nothing to hand over, as nats-server answers
	}
	var req struct {
		Placement *placement `json:"placement"`
	}
	if len(bytes.TrimSpace(data)) > 0 && json.Unmarshal(data, &req) != nil {
		return false, apiErr(400, 10025, "invalid JSON")
	}
	var preferred string
	if req.Placement != nil {
		preferred = req.Placement.Preferred
	}
	if err := ja.js.raft.StepDown(st.repl.group, preferred); err != nil {
		return false, apiErr(500, 10041, err.Error())
	}
	return true, nil
}
