package jetstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/skiffmq/skiff/store"
)

// Durable consumers of a replicated stream (design 3.5). They live in the
// stream's raft group: a consumer's creation, updates, deletion and
// progress (deliveries, acks, its ack floor) are ops of the group, ordered
// with the messages they refer to, and every replica applies them to its
// own copy of the consumer's state (replicaConsumers, in memory). The
// consumer itself, the goroutine that delivers, takes pull requests and
// acks and redelivers, runs only on the group's ready leader: it starts
// from the applied state when the leader becomes ready (or when a create
// applies on it) and stops when the server stops leading. What it records
// goes into the group through replicaProgress (replica_progress.go).
//
// Applying is exact rather than idempotent: the applied set records the
// index of the last consumer op it reflects, and an op at or below it
// (the log replayed after a checkpoint, or after a snapshot whose consumers
// were taken later than its index) is skipped.
//
// A file stream's replica writes the applied set at each checkpoint
// (consumersFile), before the checkpoint's index; a snapshot carries it,
// so a replica that catches up from a snapshot, or a memory stream's
// replica restarted, gets it with the snapshot. Ephemeral consumers are
// not replicated: they run on the leader and end when it stops leading,
// as nats-server's ephemerals end with their server.

// consumersFile holds a file stream's applied consumers, in its
// directory, written at checkpoints.
const consumersFile = "raft-consumers.json"

// replicaConsumers is the durable consumers of a replicated stream as
// this replica applied them.
type replicaConsumers struct {
	mu     sync.Mutex
	index  uint64 // the index of the last consumer op reflected
	saved  uint64 // index when consumersFile was last written
	byName map[string]*appliedConsumer
}

// appliedConsumer is one consumer as applied: its meta (configuration,
// creation, owner) and its progress.
type appliedConsumer struct {
	meta  consumerMeta
	state *store.ConsumerState // in memory
}

// consumersSnapshot is the applied consumers as written to consumersFile
// and into snapshots.
type consumersSnapshot struct {
	Index     uint64         `json:"index"`
	Consumers []consumerSnap `json:"consumers,omitempty"`
}

// consumerSnap is one consumer of a consumersSnapshot.
type consumerSnap struct {
	Name  string                 `json:"name"`
	Meta  consumerMeta           `json:"meta"`
	State store.ConsumerSnapshot `json:"state"`
}

func newReplicaConsumers() *replicaConsumers {
	return &replicaConsumers{byName: map[string]*appliedConsumer{}}
}

// apply applies a consumer op at index, on the apply goroutine.
func (rc *replicaConsumers) apply(op *replicaOp, index uint64) error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if index != 0 && index <= rc.index {
		return nil // reflected already
	}
	rc.index = max(rc.index, index)
	ac := rc.byName[op.consumer]
	switch op.action {
	case actCreate:
		var meta consumerMeta
		if err := json.Unmarshal(op.meta, &meta); err != nil {
			return fmt.Errorf("%w: consumer %q: %v", errBadOp, op.consumer, err)
		}
		cs := store.NewMemoryConsumerState()
		if op.floor > 0 {
			if err := cs.AckAllNoWait(0, op.floor); err != nil {
				return err
			}
		}
		rc.byName[op.consumer] = &appliedConsumer{meta: meta, state: cs}
	case actUpdate:
		if ac == nil {
			return nil // deleted meanwhile: nothing to update
		}
		var meta consumerMeta
		if err := json.Unmarshal(op.meta, &meta); err != nil {
			return fmt.Errorf("%w: consumer %q: %v", errBadOp, op.consumer, err)
		}
		ac.meta = meta
	case actDelete:
		delete(rc.byName, op.consumer)
	case actProgress:
		if ac == nil {
			return nil // the records of a consumer deleted since
		}
		for _, r := range op.recs {
			if err := applyRec(ac.state, r); err != nil {
				return fmt.Errorf("consumer %q: %w", op.consumer, err)
			}
		}
	}
	return nil
}

// applyRec applies one progress record to a consumer's state.
func applyRec(cs *store.ConsumerState, r progressRec) error {
	var err error
	switch r.kind {
	case recDelivered:
		err = cs.Delivered(r.dseq, r.sseq, r.dc, r.ts)
	case recAcked:
		err = cs.AckNoWait(0, r.sseq)
	case recFloor:
		err = cs.AckAllNoWait(r.dseq, r.sseq)
	case recReset:
		err = cs.Update(func(s *store.ConsumerSnapshot) {
			*s = store.ConsumerSnapshot{AckFloor: store.SeqPair{Stream: r.sseq, Consumer: r.dseq}}
		})
	}
	if errors.Is(err, store.ErrNotPending) {
		return nil // acknowledged already (a terminated message acked again)
	}
	return err
}

// has reports whether a durable consumer of that name is applied.
func (rc *replicaConsumers) has(name string) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.byName[name] != nil
}

// snapshot returns the applied consumers, their states copied.
func (rc *replicaConsumers) snapshot() (*consumersSnapshot, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	s := &consumersSnapshot{Index: rc.index}
	for _, name := range sortedKeys(rc.byName) {
		ac := rc.byName[name]
		st, err := ac.state.Load()
		if err != nil {
			return nil, err
		}
		s.Consumers = append(s.Consumers, consumerSnap{Name: name, Meta: ac.meta, State: st})
	}
	return s, nil
}

// install replaces the applied consumers with a snapshot's (nil: none).
func (rc *replicaConsumers) install(s *consumersSnapshot) error {
	byName := map[string]*appliedConsumer{}
	var index uint64
	if s != nil {
		index = s.Index
		for _, c := range s.Consumers {
			cs := store.NewMemoryConsumerState()
			snap := c.State
			if err := cs.Update(func(st *store.ConsumerSnapshot) { *st = snap }); err != nil {
				return err
			}
			byName[c.Name] = &appliedConsumer{meta: c.Meta, state: cs}
		}
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.byName, rc.index = byName, index
	return nil
}

// save writes the applied consumers to dir's consumersFile, atomically,
// if a consumer op applied since the last write.
func (rc *replicaConsumers) save(dir string) error {
	s, err := rc.snapshot()
	if err != nil {
		return err
	}
	return rc.saveSnapshot(dir, s)
}

// saveSnapshot writes s, the applied consumers as a snapshot took them, as
// save does.
func (rc *replicaConsumers) saveSnapshot(dir string, s *consumersSnapshot) error {
	rc.mu.Lock()
	saved := rc.saved
	rc.mu.Unlock()
	if s.Index == saved {
		return nil
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, consumersFile), b); err != nil {
		return err
	}
	rc.mu.Lock()
	rc.saved = max(rc.saved, s.Index)
	rc.mu.Unlock()
	return nil
}

// load reads dir's consumersFile (none: no consumer op was checkpointed).
func (rc *replicaConsumers) load(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, consumersFile))
	if errors.Is(err, fs.ErrNotExist) {
		return rc.install(nil)
	}
	if err != nil {
		return err
	}
	var s consumersSnapshot
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s: %w", consumersFile, err)
	}
	if err := rc.install(&s); err != nil {
		return err
	}
	rc.mu.Lock()
	rc.saved = s.Index
	rc.mu.Unlock()
	return nil
}

// The leader's side: the consumers that run.

// startConsumers starts every applied consumer on this server, the ready
// leader, from its applied state (on the apply goroutine, so the state is
// as of the term's first entry).
func (r *replica) startConsumers(term uint64) {
	s, err := r.fsm.cons.snapshot()
	if err != nil {
		r.st.js.log.Error("replicated consumers not started", "stream", r.st.name, "err", err)
		return
	}
	for i := range s.Consumers {
		c := &s.Consumers[i]
		r.st.runConsumer(r.buildConsumer(c.Name, &c.Meta, &c.State, term))
	}
}

// buildConsumer makes a consumer that runs on this leader in term from an
// applied state.
func (r *replica) buildConsumer(name string, meta *consumerMeta, state *store.ConsumerSnapshot, term uint64) *consumer {
	st := r.st
	p := newReplicaProgress(r, name, term)
	c := newConsumer(st, name, meta.Config, st.ja.principalOf(meta.Owner), meta.Created, p, "")
	p.wake = c.signal
	c.restore(state)
	return c
}

// stopConsumers stops every consumer running here (the server stopped
// leading): pull requests waiting are told 409 Leadership Change, and
// the clients ask the new leader. Ephemeral consumers end here.
func (r *replica) stopConsumers() {
	st := r.st
	st.mu.Lock()
	consumers := st.mu.consumers
	st.mu.consumers = map[string]*consumer{}
	st.setConsumersLocked()
	st.mu.Unlock()
	for _, c := range consumers {
		if err := c.closeWith(false, "Leadership Change"); err != nil {
			st.js.log.Warn("consumer stop", "stream", st.name, "consumer", c.name, "err", err)
		}
		st.js.consumers.Add(-1)
		st.ja.consumers.Add(-1)
	}
}

// runConsumer registers a consumer and starts it, replacing one of the
// same name.
func (st *stream) runConsumer(c *consumer) {
	st.mu.Lock()
	if st.mu.closed {
		st.mu.Unlock()
		_ = c.log.Close()
		return
	}
	old := st.mu.consumers[c.name]
	st.mu.consumers[c.name] = c
	st.setConsumersLocked()
	st.mu.Unlock()
	if old != nil {
		_ = old.close(false)
	} else {
		st.js.consumers.Add(1)
		st.ja.consumers.Add(1)
	}
	c.start()
}

// consumerApplied acts on a consumer op applied here, on the apply
// goroutine: the ready leader starts a created consumer (the one its
// create built, if it proposed it in this term), updates or deletes a
// running one.
func (r *replica) consumerApplied(op *replicaOp) {
	st := r.st
	r.mu.Lock()
	leading, term := r.mu.ready, r.mu.term
	var pre *consumer
	if op.proposer == r.me && op.action == actCreate {
		pre = r.mu.creating[op.consumer]
		delete(r.mu.creating, op.consumer)
	}
	r.mu.Unlock()
	if !leading {
		return
	}
	switch op.action {
	case actCreate:
		c := pre
		if c == nil || c.log.(*replicaProgress).term != term {
			var meta consumerMeta
			if json.Unmarshal(op.meta, &meta) != nil {
				return // refused by the apply already
			}
			snap := store.ConsumerSnapshot{AckFloor: store.SeqPair{Stream: op.floor}}
			c = r.buildConsumer(op.consumer, &meta, &snap, term)
		}
		pause, now := c.cfg.PauseUntil, time.Now() // before it runs
		st.runConsumer(c)
		st.ja.adviseConsumer(advConsumerCreated, st.name, op.consumer, "create")
		if pause != nil && now.Before(*pause) {
			c.advisePause(*pause, now) // created paused
		}
		r.publishAdvisories()
	case actUpdate:
		var meta consumerMeta
		if c := st.consumer(op.consumer); c != nil && json.Unmarshal(op.meta, &meta) == nil {
			if err := c.update(meta.Config, st.ja.principalOf(meta.Owner)); err != nil {
				st.js.log.Error("replicated consumer update", "stream", st.name, "consumer", op.consumer, "err", err)
			}
		}
	case actDelete:
		if c := st.consumer(op.consumer); c != nil {
			st.dropConsumer(c)
			r.publishAdvisories()
		}
	}
}

// consumerPlan is a change to a durable consumer of a replicated stream,
// checked by the leader and proposed to the group.
type consumerPlan struct {
	action consumerOpAction
	name   string
	meta   consumerMeta
	c      *consumer // a create's consumer, positioned, not started
}

// commitConsumer proposes a create or update and waits until it is
// applied here; it returns the consumer's info.
func (r *replica) commitConsumer(p *consumerPlan) (*ConsumerInfo, *APIError) {
	meta, err := json.Marshal(&p.meta)
	if err != nil {
		return nil, apiErr(500, 10104, err.Error())
	}
	op := &replicaOp{kind: opConsumer, action: p.action, consumer: p.name, meta: meta}
	var info *ConsumerInfo
	if p.action == actCreate {
		op.floor = p.c.asflr
		info = p.c.info() // before it delivers, as a single server answers
		r.mu.Lock()
		r.mu.creating[p.name] = p.c
		r.mu.Unlock()
		defer func() {
			r.mu.Lock()
			if r.mu.creating[p.name] == p.c {
				delete(r.mu.creating, p.name)
			}
			r.mu.Unlock()
		}()
	}
	if _, err := r.proposeWait(op); err != nil {
		return nil, r.opError(err, 10104)
	}
	if info != nil {
		return info, nil
	}
	if c := r.st.consumer(p.name); c != nil {
		return c.info(), nil
	}
	return nil, errConsumerNotFound()
}

// deleteConsumer deletes a durable consumer of a replicated stream
// through its group.
func (r *replica) deleteConsumer(name string) *APIError {
	r.consumerOps.Lock()
	defer r.consumerOps.Unlock()
	if !r.fsm.cons.has(name) {
		return errConsumerNotFound()
	}
	if _, err := r.proposeWait(&replicaOp{kind: opConsumer, action: actDelete, consumer: name}); err != nil {
		return r.opError(err, 10104)
	}
	return nil
}

// pauseConsumer sets a durable consumer's pause_until (zero: none)
// through the group, as an update.
func (r *replica) pauseConsumer(name string, until time.Time) *APIError {
	r.consumerOps.Lock()
	defer r.consumerOps.Unlock()
	c := r.st.consumer(name)
	if c == nil {
		return errConsumerNotFound()
	}
	_, aerr := r.commitConsumer(&consumerPlan{action: actUpdate, name: name,
		meta: consumerMeta{Config: pausedConfig(c.config(), until), Created: c.created, Owner: r.st.ja.ownerOf(c.principal())}})
	return aerr
}

// notLeading refuses a consumer request on a replica of a replicated
// stream that does not lead it (10008): its consumers run on the leader.
func (st *stream) notLeading() *APIError {
	if st.repl != nil && !st.repl.isLeader() {
		return errClusterUnavailable()
	}
	return nil
}
