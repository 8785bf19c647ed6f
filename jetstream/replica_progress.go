package jetstream

import (
	"sync"
	"time"
)

// replicaProgress is the progressLog of a durable consumer of a
// replicated stream, on the group's leader (design 3.5): what the
// consumer records is buffered, and each Flush proposes the buffer as one
// opConsumer progress op in the stream's group, ordered with the
// messages. One proposal is in flight at a time; records made meanwhile
// wait for the next. Flush does not wait for the commit, so deliveries are
// not held up by a round trip; Confirm does, for what must be committed
// before the client hears of it (a synchronous ack's confirmation).
//
// Records that do not commit (the leader lost its leadership first) are
// lost with the leadership: the next leader starts the consumer from the
// state it applied, and redelivers what it does not know was acknowledged
// once its ack wait passes.
type replicaProgress struct {
	r    *replica
	name string
	term uint64 // the term its consumer runs in; its ops are fenced by it
	// wake signals the consumer's goroutine: a proposal finished, the
	// next may go.
	wake func()
	// proposer proposes an op (r.proposeOp: into the stream's group).
	proposer proposeFunc

	mu struct {
		sync.Mutex
		buf        []progressRec
		floor      progressRec // the last floor recorded, if floorDirty
		floorDirty bool
		inFlight   bool
		recorded   uint64 // records made so far
		applied    uint64 // records applied here so far
		failures   uint64 // proposals that did not apply
		changed    chan struct{}
	}
}

// proposeFunc proposes op as the leader of term and calls done once, when
// it is applied here or given up (replica.proposeOp).
type proposeFunc func(op *replicaOp, term uint64, done func(opResult)) uint64

// ownProgressGroup, if set, gives a consumer's progress a raft group of
// its own instead of its stream's: the alternative design 3.5 measures
// (BenchmarkReplicatedConsume). Always nil outside that benchmark.
var ownProgressGroup func(r *replica, consumer string) proposeFunc

func newReplicaProgress(r *replica, name string, term uint64) *replicaProgress {
	p := &replicaProgress{r: r, name: name, term: term, wake: func() {}, proposer: r.proposeOp}
	if ownProgressGroup != nil {
		p.proposer = ownProgressGroup(r, name)
	}
	p.mu.changed = make(chan struct{})
	return p
}

var _ progressLog = (*replicaProgress)(nil)

func (p *replicaProgress) add(rec progressRec) {
	p.mu.Lock()
	p.mu.buf = append(p.mu.buf, rec)
	p.mu.recorded++
	p.mu.Unlock()
}

// Delivered records a delivery (progressLog).
func (p *replicaProgress) Delivered(sseq, dseq, dc uint64, ts int64) {
	p.add(progressRec{kind: recDelivered, sseq: sseq, dseq: dseq, dc: dc, ts: ts})
}

// Acked records an acknowledgement (progressLog).
func (p *replicaProgress) Acked(sseq uint64) { p.add(progressRec{kind: recAcked, sseq: sseq}) }

// Floor records the ack floor, proposed once per Flush when it moved
// (progressLog).
func (p *replicaProgress) Floor(asflr, adflr uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := &p.mu.floor
	if asflr > f.sseq || adflr > f.dseq {
		*f = progressRec{kind: recFloor, sseq: max(asflr, f.sseq), dseq: max(adflr, f.dseq)}
		if !p.mu.floorDirty {
			p.mu.floorDirty = true
			p.mu.recorded++
		}
	}
}

// Flush proposes what was recorded, unless a proposal is in flight: it
// goes when that one finishes (progressLog). A proposal that does not
// apply is proposed again; only Confirm reports it.
func (p *replicaProgress) Flush() error {
	p.propose()
	return nil
}

// propose proposes the buffer if nothing is in flight.
func (p *replicaProgress) propose() {
	p.mu.Lock()
	op, upTo := p.takeLocked()
	p.mu.Unlock()
	if op != nil {
		p.proposer(op, p.term, func(res opResult) { p.finished(op.recs, upTo, res.err) })
	}
}

// takeLocked takes the buffer as an op to propose, if nothing is in
// flight, with the count of records it completes (nil if there is nothing
// to propose). p.mu held.
func (p *replicaProgress) takeLocked() (*replicaOp, uint64) {
	if p.mu.inFlight {
		return nil, 0
	}
	if p.mu.floorDirty {
		p.mu.buf = append(p.mu.buf, p.mu.floor)
		p.mu.floorDirty = false
	}
	if len(p.mu.buf) == 0 {
		return nil, 0
	}
	recs := p.mu.buf
	p.mu.buf = nil
	p.mu.inFlight = true
	// Every record made so far is in recs.
	return &replicaOp{kind: opConsumer, action: actProgress, consumer: p.name, recs: recs}, p.mu.recorded
}

// finished hears a proposal applied here (err nil) or given up.
func (p *replicaProgress) finished(recs []progressRec, upTo uint64, err error) {
	p.mu.Lock()
	p.mu.inFlight = false
	if err == nil {
		p.mu.applied = upTo
	} else {
		// Not applied: the records go again, before those made since,
		// after a pause (raft drops proposals while no leader is known
		// or leadership moves; a server that no longer leads stops the
		// consumer meanwhile).
		p.mu.failures++
		p.mu.buf = append(recs, p.mu.buf...)
	}
	close(p.mu.changed)
	p.mu.changed = make(chan struct{})
	p.mu.Unlock()
	if err != nil {
		time.AfterFunc(progressRetry, p.wake)
		return
	}
	p.wake()
}

// progressRetry is the pause before progress that did not apply is
// proposed again.
const progressRetry = 50 * time.Millisecond

// Confirm waits until every record made so far is applied here, that is
// committed on a quorum of the group (progressLog); quit gives up.
func (p *replicaProgress) Confirm(quit <-chan struct{}) error {
	p.mu.Lock()
	want, failures := p.mu.recorded, p.mu.failures
	p.mu.Unlock()
	timeout := time.NewTimer(replicaOpWait)
	defer timeout.Stop()
	for {
		p.propose() // the rest goes once the one in flight finished
		p.mu.Lock()
		applied, changed, failed := p.mu.applied, p.mu.changed, p.mu.failures != failures
		p.mu.Unlock()
		switch {
		case applied >= want:
			return nil
		case failed:
			return errNotReady
		}
		select {
		case <-changed:
		case <-quit:
			return errNotReady
		case <-timeout.C:
			return errNotReady
		}
	}
}

// Reset records that the consumer starts over from the floor (asflr,
// adflr) and waits until that is committed (progressLog).
func (p *replicaProgress) Reset(asflr, adflr uint64) error {
	p.mu.Lock()
	p.mu.floorDirty = false
	p.mu.floor = progressRec{kind: recFloor, sseq: asflr, dseq: adflr}
	p.mu.buf = append(p.mu.buf, progressRec{kind: recReset, sseq: asflr, dseq: adflr})
	p.mu.recorded++
	p.mu.Unlock()
	return p.Confirm(p.r.stop)
}

// Close proposes what is left, without waiting (progressLog).
func (p *replicaProgress) Close() error {
	p.propose()
	return nil
}
