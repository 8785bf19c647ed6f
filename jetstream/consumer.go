package jetstream

import (
	"container/heap"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skiffmq/skiff/internal/logthrottle"
	"github.com/skiffmq/skiff/server"
	"github.com/skiffmq/skiff/subject"
)

// A consumer is a view of a stream with server-side progress: where it is
// in the stream, which delivered messages wait for an acknowledgement, and
// who wants messages (pull requests, or a push subscriber).
//
// All of its state is owned by one goroutine, run: publishers' goroutines
// never touch it, they queue acks and pull requests on in and signal. The
// lock mu guards the state against the API worker, which reads it for
// CONSUMER.INFO and replaces the configuration on update. mu guards every
// field below it; they are not grouped as mu struct{...}, the convention
// elsewhere, because they are the consumer: run and its helpers (the
// ...Locked methods) use little else.
type consumer struct {
	st      *stream
	name    string
	created time.Time
	dir     string // the consumer's directory; "" when not persisted

	signalCh chan struct{} // capacity 1: "something to do"
	quit     chan struct{}
	done     chan struct{}

	in struct { // inputs from other goroutines
		sync.Mutex
		acks    []ackMsg
		reqs    []pullMsg
		fc      []string // flow control replies received
		arrived int64    // messages matching the filter stored since
		reset   bool     // the stream was purged or a message deleted
	}

	mu      sync.Mutex
	cfg     ConsumerConfig
	owner   server.Principal // whom deliveries act for (consumerMeta.Owner)
	filters []string         // the filter subjects; none means every message
	filt    atomic.Pointer[[]string]
	log     progressLog

	// Position. sseq is the next stream sequence to consider for a first
	// delivery, dseq the last consumer sequence used; lss lists the stream
	// sequences a last_per_subject consumer starts with.
	sseq, dseq uint64
	lss        []uint64
	lssResume  uint64 // where a last_per_subject consumer goes on after lss
	// Acknowledgements: the floor (every stream sequence at or below
	// asflr is acknowledged; adflr is the consumer sequence there), the
	// messages waiting for an ack with their ack deadlines, delivery counts
	// above one, and the messages due for redelivery in order.
	asflr, adflr uint64
	pending      map[uint64]*pendingMsg
	deadlines    deadlineHeap
	rdc          map[uint64]uint64
	rdq          []uint64
	rdqSet       map[uint64]struct{}
	npc          int64 // messages left to deliver, kept up to date cheaply
	npcValid     bool  // false: recount before use

	lastDelivered time.Time
	pauseEnd      time.Time // a pause whose end is still to be advised
	lastAcked     time.Time
	lastActive    time.Time // the last pull request or push interest
	waiting       []*pullRequest
	sweptAt       time.Time // when waiting requests were last checked for interest
	push          pushState
	replay        replayState
	retire        []uint64             // acknowledged sequences to remove (interest, workqueue)
	ackReplies    []string             // synchronous acks to confirm once the state is written
	writeWarn     logthrottle.Throttle // "consumer state write failed", once per run of them
	// writeFailed: the last Flush failed. The consumer delivers nothing
	// until one succeeds, retried every writeRetry.
	writeFailed bool
	// A read of the stream that failed (an I/O error): retried at
	// readRetry, logged once per run (deliver.go).
	readErr   error
	readRetry time.Time
	readWarn  logthrottle.Throttle
	closed    bool
	deleted   bool // removed for inactivity
}

// pendingMsg is a delivered message waiting for an acknowledgement.
type pendingMsg struct {
	dseq     uint64    // consumer sequence of its first delivery
	ts       int64     // when last delivered, Unix ns
	deadline time.Time // when it is redelivered without an ack
}

// ackMsg is an acknowledgement received on $JS.ACK.
type ackMsg struct {
	dc, sseq, dseq uint64
	body           []byte
	reply          string
	principal      server.Principal // the acknowledger (+NXT asks for more as it)
}

// pullMsg is a pull request received on CONSUMER.MSG.NEXT (or +NXT).
type pullMsg struct {
	reply     string
	body      []byte
	at        time.Time
	principal server.Principal // the requester, whom its deliveries act for
}

// deliverBudget bounds the messages one round of run delivers before it
// flushes and looks at its inputs again.
const deliverBudget = 256

// newConsumer builds a consumer on st; start it with start.
func newConsumer(st *stream, name string, cfg ConsumerConfig, owner server.Principal, created time.Time, log progressLog, dir string) *consumer {
	c := &consumer{
		st: st, name: name, created: created, dir: dir, log: log, owner: owner,
		signalCh: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{}),
		pending: map[uint64]*pendingMsg{}, rdc: map[uint64]uint64{}, rdqSet: map[uint64]struct{}{},
	}
	c.setConfigLocked(cfg)
	c.lastActive = time.Now()
	if p := cfg.PauseUntil; p != nil && c.lastActive.Before(*p) {
		c.pauseEnd = *p // created or recovered paused: advise the end
	}
	return c
}

func (c *consumer) setConfigLocked(cfg ConsumerConfig) {
	c.cfg = cfg
	c.push.permitted = cfg.DeliverSubject != "" && c.owner.CanPublish(cfg.DeliverSubject)
	c.filters = cfg.filters()
	f := c.filters
	c.filt.Store(&f)
}

func (c *consumer) isPull() bool { return c.cfg.DeliverSubject == "" }

// start runs the consumer's goroutine.
func (c *consumer) start() { go c.run() }

// signal wakes the consumer's goroutine.
func (c *consumer) signal() {
	select {
	case c.signalCh <- struct{}{}:
	default:
	}
}

// matchesLocked reports whether a stored subject passes the consumer's filters.
func (c *consumer) matchesLocked(subj string) bool {
	if len(c.filters) == 0 {
		return true
	}
	for _, f := range c.filters {
		if subject.Match(f, subj) {
			return true
		}
	}
	return false
}

// wants reports whether subj passes the consumer's filters, through an
// atomic pointer, never the consumer's lock.
func (c *consumer) wants(subj string) bool {
	f := *c.filt.Load()
	if len(f) == 0 {
		return true
	}
	for _, p := range f {
		if subject.Match(p, subj) {
			return true
		}
	}
	return false
}

// stored tells the consumer that the stream stored a message, and
// reports whether it matches the consumer's filters. Called on publishers'
// goroutines: it reads the filters through an atomic pointer, never the
// consumer's lock.
func (c *consumer) stored(subj string) bool {
	if !c.wants(subj) {
		return false
	}
	c.in.Lock()
	c.in.arrived++
	c.in.Unlock()
	c.signal()
	return true
}

// changed tells the consumer that messages were removed from the stream
// (purge, delete, expiry): it recounts and drops what is gone.
func (c *consumer) changed() {
	c.in.Lock()
	c.in.reset = true
	c.in.Unlock()
	c.signal()
}

// run is the consumer's goroutine: it applies inputs, expires acks and
// requests, delivers, persists, and sleeps until there is more to do.
func (c *consumer) run() {
	defer close(c.done)
	pub := c.st.ja.acc.NewPublisher()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Now()
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return
		}
		c.applyInputsLocked(pub, now)
		c.expireAcksLocked(now)
		more := c.deliverLocked(pub, now)
		wake := c.housekeepLocked(pub, now)
		err := c.log.Flush()
		c.writeFailed = err != nil
		if retry := now.Add(writeRetry); c.writeFailed && wake.After(retry) {
			wake = retry
		}
		retire, replies := c.retire, c.ackReplies
		c.retire, c.ackReplies = nil, nil
		del := c.deleted
		c.mu.Unlock()
		// A synchronous ack is answered only once its state is as safe as
		// the consumer's store makes it. Otherwise it gets no answer at
		// all, as on nats-server: every client (nats.go's AckSync and
		// DoubleAck among them) takes any answer, an error object too,
		// for the confirmation, so the only "no" a client understands is
		// silence. It times out, and the message is redelivered or the
		// ack retried.
		if err != nil {
			c.writeWarn.Log(c.st.js.log, slog.LevelError, "consumer state write failed", "stream", c.st.name, "consumer", c.name, "err", err)
			replies = nil
		} else if len(replies) > 0 && c.log.Confirm(c.quit) != nil {
			// A replicated consumer's leader could not have the acks
			// committed (it lost its leadership, or its quorum).
			replies = nil
		}
		// Messages leave an interest or workqueue stream before their
		// acks are confirmed: a client that saw its ack confirmed sees
		// the message gone.
		if len(retire) > 0 {
			c.st.retire(c, retire)
		}
		for _, r := range replies {
			pub.Publish(r, "", nil, nil)
		}
		c.st.ja.publishAdvisories(pub)
		pub.Flush()
		if del {
			go c.st.ja.deleteInactive(c)
			<-c.quit
			return
		}
		if more {
			continue
		}
		d := time.Until(wake)
		if d <= 0 {
			d = time.Millisecond
		}
		timer.Reset(d)
		select {
		case <-c.signalCh:
		case <-timer.C:
		case <-c.quit:
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// applyInputsLocked takes the queued acks, pull requests and notices. mu held.
func (c *consumer) applyInputsLocked(pub *server.Publisher, now time.Time) {
	c.in.Lock()
	acks, reqs, fcs := c.in.acks, c.in.reqs, c.in.fc
	arrived, reset := c.in.arrived, c.in.reset
	c.in.acks, c.in.reqs, c.in.fc = nil, nil, nil
	c.in.arrived, c.in.reset = 0, false
	c.in.Unlock()
	c.npc += arrived
	if reset {
		c.npcValid = false
	}
	if reset {
		c.dropRemovedLocked()
	}
	for i := range acks {
		c.applyAckLocked(pub, &acks[i], now)
	}
	for _, r := range reqs {
		c.addRequestLocked(pub, r, now)
	}
	for _, fc := range fcs {
		c.flowControlReplyLocked(fc)
	}
}

// dropRemovedLocked forgets pending messages the stream no longer has and moves
// the start past removed ones. mu held.
func (c *consumer) dropRemovedLocked() {
	s := c.st.store.State()
	if s.FirstSeq > c.sseq {
		c.sseq = s.FirstSeq
	}
	for seq := range c.pending {
		if !c.st.store.Has(seq) {
			c.forgetLocked(seq)
		}
	}
	if c.asflr+1 < s.FirstSeq && len(c.pending) == 0 {
		c.asflr = s.FirstSeq - 1
	}
	c.moveFloorLocked()
}

// forgetLocked drops a pending message without an ack: it was removed from the
// stream, terminated, or delivered max_deliver times.
func (c *consumer) forgetLocked(seq uint64) {
	delete(c.pending, seq)
	delete(c.rdc, seq)
	c.unqueueLocked(seq)
	c.log.Acked(seq)
}

// moveFloorLocked advances the ack floor over every sequence that no longer
// waits for an ack. The walk is amortized: the floor only moves forward.
// mu held.
func (c *consumer) moveFloorLocked() {
	if len(c.pending) == 0 {
		if c.sseq > 0 && c.sseq-1 > c.asflr {
			c.asflr = c.sseq - 1
		}
		c.adflr = max(c.adflr, c.dseq)
		if c.cfg.AckPolicy != AckNone {
			c.log.Floor(c.asflr, c.adflr)
		}
		return
	}
	for seq := c.asflr + 1; seq < c.sseq; seq++ {
		if p, ok := c.pending[seq]; ok {
			c.asflr = seq - 1
			if p.dseq > 0 {
				c.adflr = max(c.adflr, p.dseq-1)
			}
			c.log.Floor(c.asflr, c.adflr)
			return
		}
	}
	c.asflr = c.sseq - 1
	c.adflr = max(c.adflr, c.dseq)
	c.log.Floor(c.asflr, c.adflr)
}

// info returns the consumer's configuration and state.
func (c *consumer) info() *ConsumerInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	cfg := c.cfg
	ci := &ConsumerInfo{
		Stream:         c.st.name,
		Name:           c.name,
		Created:        c.created.UTC(),
		Config:         &cfg,
		Delivered:      SequenceInfo{Consumer: c.dseq, Stream: c.sseq - 1},
		AckFloor:       SequenceInfo{Consumer: c.adflr, Stream: c.asflr},
		NumAckPending:  len(c.pending),
		NumRedelivered: len(c.rdc),
		NumWaiting:     len(c.waiting),
		NumPending:     uint64(c.numPendingLocked()),
		Cluster:        c.st.clusterInfo(),
		TimeStamp:      time.Now().UTC(),
	}
	if c.sseq == 0 {
		ci.Delivered.Stream = 0
	}
	if !c.lastDelivered.IsZero() {
		t := c.lastDelivered.UTC()
		ci.Delivered.Last = &t
	}
	if !c.lastAcked.IsZero() {
		t := c.lastAcked.UTC()
		ci.AckFloor.Last = &t
	}
	if !c.isPull() {
		ci.PushBound = c.push.active
	}
	if until, ok := c.pausedUntilLocked(time.Now()); ok {
		ci.Paused, ci.PauseRemaining = true, time.Until(until)
	}
	return ci
}

// numPendingLocked returns how many messages are left to deliver for the first
// time, counting the stream when the cached count is stale. mu held.
func (c *consumer) numPendingLocked() int64 {
	if !c.npcValid {
		from := c.sseq
		if len(c.lss) > 0 {
			from = c.lssResume
		}
		n := int64(len(c.lss)) + int64(c.st.countFrom(from, c.filters))
		c.npc, c.npcValid = n, true
	}
	return c.npc
}

// close stops the consumer; pull requests waiting get 409 Consumer
// Deleted, or Server Shutdown if it is not destroyed. With destroy its
// files are removed.
func (c *consumer) close(destroy bool) error { return c.closeWith(destroy, "Server Shutdown") }

// closeWith stops the consumer; pull requests waiting get 409 Consumer
// Deleted with destroy, else 409 with why.
func (c *consumer) closeWith(destroy bool, why string) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	waiting := c.waiting
	c.waiting = nil
	c.mu.Unlock()
	close(c.quit)
	<-c.done
	if len(waiting) > 0 {
		pub := c.st.ja.acc.NewPublisher()
		for _, r := range waiting {
			if destroy {
				status(pub, r.reply, 409, "Consumer Deleted")
			} else {
				statusPending(pub, r.reply, 409, why, r)
			}
		}
		pub.Flush()
	}
	c.mu.Lock()
	err := c.log.Close()
	c.mu.Unlock()
	if destroy && c.dir != "" {
		err = errors.Join(err, os.RemoveAll(c.dir))
	}
	return err
}

// shutdown answers the waiting pull requests with 409 Server Shutdown, as
// the reference server when it stops: clients then know to ask again
// elsewhere or later rather than wait for their expiry.
func (c *consumer) shutdown(pub *server.Publisher) {
	c.mu.Lock()
	waiting := c.waiting
	c.waiting = nil
	c.mu.Unlock()
	for _, r := range waiting {
		statusPending(pub, r.reply, 409, "Server Shutdown", r)
	}
}

// consumerDir is where a durable consumer keeps its files.
func (st *stream) consumerDir(name string) string {
	return filepath.Join(st.dir, "consumers", name)
}

// deadlineHeap orders pending messages by ack deadline. Entries are not
// removed on ack: a popped entry counts only if the message is still
// pending with that deadline.
type deadlineHeap []deadlineEntry

type deadlineEntry struct {
	at  time.Time
	seq uint64
}

func (h deadlineHeap) Len() int { return len(h) }
func (h deadlineHeap) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].seq < h[j].seq
	}
	return h[i].at.Before(h[j].at)
}
func (h deadlineHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *deadlineHeap) Push(x any)   { *h = append(*h, x.(deadlineEntry)) }
func (h *deadlineHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// trackLocked makes seq wait for an ack until at.
func (c *consumer) trackLocked(seq uint64, p *pendingMsg, at time.Time) {
	p.deadline = at
	heap.Push(&c.deadlines, deadlineEntry{at: at, seq: seq})
	// Stale entries (acked messages) are dropped when the heap grows well
	// past the pending set, so that it stays proportional to it.
	if len(c.deadlines) > 2*len(c.pending)+1024 {
		live := c.deadlines[:0]
		for _, e := range c.deadlines {
			if p, ok := c.pending[e.seq]; ok && p.deadline.Equal(e.at) {
				live = append(live, e)
			}
		}
		c.deadlines = live
		heap.Init(&c.deadlines)
	}
}

// expireAcksLocked queues for redelivery every pending message whose ack
// deadline passed, in stream order as the reference server does. mu held.
func (c *consumer) expireAcksLocked(now time.Time) {
	var expired []uint64
	for len(c.deadlines) > 0 && !c.deadlines[0].at.After(now) {
		e := heap.Pop(&c.deadlines).(deadlineEntry)
		p, ok := c.pending[e.seq]
		if !ok || !p.deadline.Equal(e.at) {
			continue
		}
		expired = append(expired, e.seq)
	}
	slices.Sort(expired)
	for _, seq := range expired {
		c.enqueueLocked(seq)
	}
}

// ackWaitForLocked returns the ack wait of a message's dc-th delivery: the
// backoff schedule if there is one, else ack_wait.
func (c *consumer) ackWaitForLocked(dc uint64) time.Duration {
	if n := uint64(len(c.cfg.BackOff)); n > 0 {
		return c.cfg.BackOff[min(dc, n)-1]
	}
	return c.cfg.AckWait
}

// enqueueLocked puts seq on the redelivery queue once.
func (c *consumer) enqueueLocked(seq uint64) {
	if _, ok := c.rdqSet[seq]; ok {
		return
	}
	c.rdqSet[seq] = struct{}{}
	c.rdq = append(c.rdq, seq)
}

// unqueueLocked takes seq off the redelivery queue; the slice entry is skipped
// when reached.
func (c *consumer) unqueueLocked(seq uint64) { delete(c.rdqSet, seq) }
