package jetstream

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"time"

	"github.com/skiffmq/skiff/server"
	"github.com/skiffmq/skiff/store"
	"github.com/skiffmq/skiff/subject"
)

// Consumer actions of CONSUMER.CREATE (ADR-37).
const (
	actionCreateOrUpdate = ""
	actionCreate         = "create"
	actionUpdate         = "update"
)

// addConsumer creates a consumer, or updates the one of the same name, as
// the action allows, and returns its info, taken before a new consumer
// starts delivering (as the reference server answers: nothing delivered
// yet). The requester pr becomes the consumer's owner: a push consumer
// delivers for it, so pr must be allowed to publish on the deliver
// subject.
//
// A durable consumer of a replicated stream is checked here, on the
// stream's leader, then created or updated through the stream's group
// (replica_consumers.go).
func (st *stream) addConsumer(cfg ConsumerConfig, action string, pr server.Principal) (*ConsumerInfo, *APIError) {
	r := st.repl
	if r == nil {
		info, _, aerr := st.addConsumerLocal(cfg, action, pr)
		return info, aerr
	}
	r.consumerOps.Lock()
	defer r.consumerOps.Unlock()
	info, plan, aerr := st.addConsumerLocal(cfg, action, pr)
	if plan == nil {
		return info, aerr
	}
	return r.commitConsumer(plan)
}

// addConsumerLocal checks a create or update and makes it, or, for a
// durable consumer of a replicated stream, returns the plan to propose.
func (st *stream) addConsumerLocal(cfg ConsumerConfig, action string, pr server.Principal) (*ConsumerInfo, *consumerPlan, *APIError) {
	scfg := st.config()
	ncfg, aerr := normalizeConsumer(cfg, &scfg, st.ja.lim().maxAckPend)
	if aerr != nil {
		return nil, nil, aerr
	}
	if ncfg.DeliverSubject != "" && !pr.CanPublish(ncfg.DeliverSubject) {
		return nil, nil, errDeliverNotPermitted()
	}
	name := ncfg.Durable
	if name == "" {
		name = ncfg.Name
	}

	st.mu.Lock()
	defer st.mu.Unlock()
	if st.mu.closed {
		return nil, nil, errStreamNotFound()
	}
	if existing := st.mu.consumers[name]; name != "" && existing != nil {
		old := existing.config()
		if ncfg.Name == "" {
			ncfg.Name = name
		}
		// Only CONSUMER.PAUSE changes a pause, as in the reference
		// server: a create or update keeps it.
		ncfg.PauseUntil = old.PauseUntil
		if action == actionCreate && !reflect.DeepEqual(old, ncfg) {
			return nil, nil, errConsumerExists()
		}
		if scfg.Retention == WorkQueuePolicy && !st.partitionUniqueLocked(name, ncfg.filters()) {
			return nil, nil, apiErr(400, 10100, "filtered consumer not unique on workqueue stream")
		}
		if err := checkUpdate(&old, &ncfg); err != nil {
			return nil, nil, errConsumerCreate(err)
		}
		if st.repl != nil && ncfg.Durable != "" {
			return nil, &consumerPlan{action: actUpdate, name: name,
				meta: consumerMeta{Config: ncfg, Created: existing.created, Owner: st.ja.ownerOf(pr)}}, nil
		}
		if err := existing.update(ncfg, pr); err != nil {
			return nil, nil, errConsumerCreate(err)
		}
		return existing.info(), nil, nil
	}
	if action == actionUpdate {
		return nil, nil, errConsumerNotExist()
	}
	if err := st.mu.failed[name]; name != "" && err != nil {
		return nil, nil, errConsumerFailed(err)
	}
	// The stream's max_consumers, lowered to the account's, else the
	// server's default, as nats-server's.
	limit := scfg.MaxConsumers
	if al := st.ja.lim().maxConsumers; limit <= 0 || (al != noLimit && al < limit) {
		limit = al
	}
	if limit <= 0 {
		limit = st.js.opts.MaxConsumersPerStream
	}
	if len(st.mu.consumers) >= limit {
		return nil, nil, errMaxConsumers()
	}
	if st.js.consumers.Load() >= int64(st.js.opts.MaxConsumers) {
		return nil, nil, errMaxConsumers()
	}
	if scfg.Retention == WorkQueuePolicy {
		switch {
		case ncfg.AckPolicy != AckExplicit:
			return nil, nil, errConsumerWQExplicitAck()
		case ncfg.DeliverPolicy != DeliverAll:
			return nil, nil, apiErr(400, 10101, "consumer must be deliver all on workqueue stream")
		case len(st.mu.consumers) > 0 && len(ncfg.filters()) == 0:
			return nil, nil, apiErr(400, 10099, "multiple non-filtered consumers not allowed on workqueue stream")
		case !st.partitionUniqueLocked(name, ncfg.filters()):
			return nil, nil, apiErr(400, 10100, "filtered consumer not unique on workqueue stream")
		}
	}
	if name == "" {
		for name == "" || st.mu.consumers[name] != nil {
			name = newConsumerName()
		}
	}
	if ncfg.Name == "" {
		ncfg.Name = name
	}

	if r := st.repl; r != nil && ncfg.Durable != "" {
		// Replicated: positioned here, started once its create applies.
		created := time.Now()
		r.mu.Lock()
		term := r.mu.term
		r.mu.Unlock()
		p := newReplicaProgress(r, name, term)
		c := newConsumer(st, name, ncfg, pr, created, p, "")
		p.wake = c.signal
		c.setStart()
		return nil, &consumerPlan{action: actCreate, name: name, c: c,
			meta: consumerMeta{Config: ncfg, Created: created, Owner: st.ja.ownerOf(pr)}}, nil
	}
	c, err := st.openConsumer(name, ncfg, pr, time.Now(), true)
	if err != nil {
		return nil, nil, apiErr(500, 10104, "error creating store for consumer: "+err.Error())
	}
	st.mu.consumers[name] = c
	st.setConsumersLocked()
	st.js.consumers.Add(1)
	st.ja.consumers.Add(1)
	info := c.info()
	c.start()
	st.ja.adviseConsumer(advConsumerCreated, st.name, name, "create")
	if p := ncfg.PauseUntil; p != nil && time.Now().Before(*p) {
		c.advisePause(*p, time.Now()) // created paused
	}
	return info, nil, nil
}

// persisted reports whether a consumer keeps its progress on disk: a
// durable one, on a file stream, without mem_storage.
func (st *stream) persisted(cfg *ConsumerConfig) bool {
	return cfg.Durable != "" && !cfg.MemoryStorage && st.config().Storage == FileStorage
}

// openConsumer builds a consumer: a new one (create) positioned by its
// deliver policy, or one recovered from its directory. A create that
// fails (a full disk) removes the directory it made, so that no consumer
// without state turns up at the next start.
func (st *stream) openConsumer(name string, cfg ConsumerConfig, owner server.Principal, created time.Time, create bool) (c *consumer, err error) {
	var (
		log   progressLog = memProgress{}
		dir   string
		state *store.ConsumerSnapshot
	)
	if st.persisted(&cfg) {
		dir = st.consumerDir(name)
		if create {
			defer func() {
				if err == nil {
					return
				}
				if rerr := os.RemoveAll(dir); rerr != nil {
					st.js.log.Warn("remove the directory of a failed consumer create", "stream", st.name,
						"consumer", name, "dir", dir, "err", rerr)
				}
			}()
			if err := os.RemoveAll(dir); err != nil {
				return nil, err
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			if err := writeMeta(filepath.Join(dir, metaFile), consumerMeta{Config: cfg, Created: created, Owner: st.ja.ownerOf(owner)}); err != nil {
				return nil, err
			}
		}
		if !create {
			// The state directory and its log are written with the
			// consumer and never removed: gone, the consumer's progress
			// (all of it, or what came after the snapshot) went too.
			for _, p := range []string{filepath.Join(dir, "state"), filepath.Join(dir, "state", "consumer.log")} {
				if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
					st.js.log.Error("consumer state missing; progress it recorded is lost and messages may be delivered again",
						"stream", st.name, "consumer", name, "missing", p)
					break
				}
			}
		}
		scfg := st.config()
		fl, s, err := openProgress(filepath.Join(dir, "state"), st.js.opts.FS, &scfg, st.js.log.With("stream", st.name, "consumer", name))
		if err != nil {
			return nil, err
		}
		log = fl
		if !create {
			state = s
		}
	}
	c = newConsumer(st, name, cfg, owner, created, log, dir)
	if state != nil {
		c.restore(state)
	} else {
		c.setStart()
		if err := c.log.Flush(); err != nil {
			_ = c.log.Close()
			return nil, err
		}
	}
	return c, nil
}

// loadConsumers recovers the stream's durable consumers.
func (st *stream) loadConsumers() error {
	dir := filepath.Join(st.dir, "consumers")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		meta, err := readMeta[consumerMeta](filepath.Join(dir, e.Name(), metaFile))
		if errors.Is(err, os.ErrNotExist) {
			// Created and not yet described: the create never answered.
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
			continue
		}
		if err != nil {
			st.failConsumer(e.Name(), err)
			continue
		}
		owner := st.ja.principalOf(meta.Owner)
		c, err := st.openConsumer(e.Name(), meta.Config, owner, meta.Created, false)
		if err != nil {
			st.failConsumer(e.Name(), err)
			continue
		}
		if d := meta.Config.DeliverSubject; d != "" && !c.push.permitted {
			st.js.log.Error("consumer does not deliver: its owner may not publish on its deliver subject",
				"account", st.ja.name, "stream", st.name, "consumer", e.Name(), "owner", meta.Owner.User,
				"owner_account", meta.Owner.Account, "deliver_subject", d)
		}
		st.mu.consumers[e.Name()] = c
		st.js.consumers.Add(1)
		st.ja.consumers.Add(1)
	}
	st.setConsumersLocked()
	for _, c := range st.mu.consumers {
		c.start()
	}
	return nil
}

// deleteConsumer removes a consumer and its files.
func (st *stream) deleteConsumer(name string) bool {
	if r := st.repl; r != nil && r.fsm.cons.has(name) {
		return r.deleteConsumer(name) == nil // through the group
	}
	st.mu.Lock()
	c := st.mu.consumers[name]
	st.mu.Unlock()
	if c == nil {
		return false
	}
	return st.dropConsumer(c)
}

// dropConsumer removes a running consumer and its files, and reports
// whether it was still the stream's.
func (st *stream) dropConsumer(c *consumer) bool {
	name := c.name
	st.mu.Lock()
	if st.mu.consumers[name] != c {
		st.mu.Unlock()
		return false
	}
	delete(st.mu.consumers, name)
	st.setConsumersLocked()
	st.mu.Unlock()
	st.js.consumers.Add(-1)
	st.ja.consumers.Add(-1)
	if err := c.close(true); err != nil {
		st.js.log.Warn("consumer delete", "account", st.ja.name, "stream", st.name, "consumer", name, "err", err)
	}
	st.ja.adviseConsumer(advConsumerDeleted, st.name, name, "delete")
	if st.retention() == InterestPolicy {
		st.sweepInterest()
	}
	return true
}

// deleteInactive removes a consumer that went without interest for its
// inactive threshold, unless it was replaced meanwhile.
func (ja *jsAccount) deleteInactive(c *consumer) {
	st := c.st
	if st.consumer(c.name) != c {
		return
	}
	ja.js.log.Info("consumer removed after inactivity", "account", ja.name, "stream", st.name, "consumer", c.name)
	st.deleteConsumer(c.name)
	p := ja.acc.NewPublisher()
	ja.publishAdvisories(p)
	p.Flush()
}

// partitionUniqueLocked reports whether filters overlap no other consumer's on a
// workqueue stream. st.mu held.
func (st *stream) partitionUniqueLocked(name string, filters []string) bool {
	for n, o := range st.mu.consumers {
		if n == name {
			continue
		}
		ocfg := o.config()
		ofs := ocfg.filters()
		if len(ofs) == 0 || len(filters) == 0 {
			return false
		}
		for _, f := range filters {
			if slices.ContainsFunc(ofs, func(g string) bool { return subject.Intersects(f, g) }) {
				return false
			}
		}
	}
	return true
}

func (c *consumer) config() ConsumerConfig {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg
}

// principal returns the consumer's owner.
func (c *consumer) principal() server.Principal {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owner
}

// update applies a new configuration (already checked by checkUpdate),
// set by owner.
func (c *consumer) update(cfg ConsumerConfig, owner server.Principal) error {
	if c.dir != "" {
		if err := writeMeta(filepath.Join(c.dir, metaFile), consumerMeta{Config: cfg, Created: c.created, Owner: c.st.ja.ownerOf(owner)}); err != nil {
			return err
		}
	}
	c.mu.Lock()
	old := c.cfg.PauseUntil
	c.owner = owner
	c.setConfigLocked(cfg)
	c.pauseChangedLocked(old, time.Now())
	c.npcValid = false
	if c.cfg.DeliverSubject != "" {
		c.push.active, c.push.checkAt = false, time.Time{}
	}
	c.mu.Unlock()
	c.signal()
	return nil
}

// setStart positions a new consumer by its deliver policy.
func (c *consumer) setStart() {
	s := c.st.store.State()
	first := max(s.FirstSeq, 1)
	switch c.cfg.DeliverPolicy {
	case DeliverAll:
		c.sseq = first
	case DeliverLast:
		c.sseq = max(c.st.lastMatching(c.filters), first)
		if c.sseq > s.LastSeq {
			c.sseq = s.LastSeq + 1
		}
	case DeliverNew:
		c.sseq = s.LastSeq + 1
	case DeliverByStartSequence:
		c.sseq = max(c.cfg.OptStartSeq, first)
	case DeliverByStartTime:
		c.sseq = c.st.seqAtTime(*c.cfg.OptStartTime)
	case DeliverLastPerSubject:
		c.lss = c.st.lastPerSubject(c.filters)
		c.lssResume = s.LastSeq + 1
		c.sseq = c.lssResume
		if len(c.lss) > 0 {
			c.sseq = c.lss[0]
		}
	}
	c.asflr = c.sseq - 1
	c.log.Floor(c.asflr, 0)
}

// snapshot returns the consumer's progress as restore takes it back: its
// position, ack floor, pending messages and redelivery counts.
func (c *consumer) snapshot() store.ConsumerSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := store.ConsumerSnapshot{
		Delivered:   store.SeqPair{Consumer: c.dseq, Stream: max(c.sseq, 1) - 1},
		AckFloor:    store.SeqPair{Consumer: c.adflr, Stream: c.asflr},
		Pending:     make(map[uint64]store.PendingEntry, len(c.pending)),
		Redelivered: map[uint64]uint64{},
	}
	for seq, p := range c.pending {
		s.Pending[seq] = store.PendingEntry{ConsumerSeq: p.dseq, Timestamp: p.ts}
		if dc := c.rdc[seq]; dc > 1 {
			s.Redelivered[seq] = dc - 1
		}
	}
	return s
}

// meta returns the consumer's configuration, creation and owner, as its
// directory's meta file holds them.
func (c *consumer) meta() consumerMeta {
	c.mu.Lock()
	defer c.mu.Unlock()
	return consumerMeta{Config: c.cfg, Created: c.created, Owner: c.st.ja.ownerOf(c.owner)}
}

// restore positions a recovered consumer where it was.
func (c *consumer) restore(s *store.ConsumerSnapshot) {
	c.dseq = max(s.Delivered.Consumer, s.AckFloor.Consumer)
	c.sseq = max(s.Delivered.Stream, s.AckFloor.Stream) + 1
	c.asflr, c.adflr = s.AckFloor.Stream, s.AckFloor.Consumer
	// A machine crash under sync interval or never can cost the stream
	// its last messages while the consumer's state kept having seen them:
	// their sequences will be given again to new messages, which the
	// consumer must not skip. It goes back to the stream's end.
	last := c.st.store.State().LastSeq
	if c.sseq > last+1 {
		c.st.js.log.Warn("consumer was past the stream's end; moved back", "stream", c.st.name,
			"consumer", c.name, "was", c.sseq-1, "last", last)
		c.sseq, c.asflr = last+1, min(c.asflr, last)
	}
	now := time.Now()
	for seq, p := range s.Pending {
		if seq <= c.asflr || seq > last {
			continue
		}
		pm := &pendingMsg{dseq: p.ConsumerSeq, ts: p.Timestamp}
		c.pending[seq] = pm
		dc := s.Redelivered[seq] + 1 // the snapshot counts redeliveries
		if dc > 1 {
			c.rdc[seq] = dc
		}
		c.trackLocked(seq, pm, time.Unix(0, p.Timestamp).Add(c.ackWaitForLocked(dc)))
	}
	c.expireAcksLocked(now)
	c.dropRemovedLocked()
}
