package multiraft

import "sync"

// A group's scheduling state. At most one worker runs a group at a time,
// and a group is in the run queue at most once:
//
//	idle --schedule--> queued --worker--> running --done--> idle
//	                                         |  ^
//	                             schedule    v  | worker requeues it
//	                                       again
//
// schedule moves idle to queued (and pushes the group) or running to
// again; a worker that finishes a group in again pushes it back instead
// of idling it, so work that arrived while it ran is not lost, and other
// groups get their turn first.
const (
	schedIdle uint32 = iota
	schedQueued
	schedRunning
	schedAgain
)

// flushEvery bounds how many groups a worker runs before it flushes its
// outbox, so that a busy queue does not hold messages back.
const flushEvery = 64

// schedule makes sure g runs after what was queued for it so far.
func (n *Node) schedule(g *group) {
	for {
		switch s := g.sched.Load(); s {
		case schedIdle:
			// CAS: only the caller that moves idle to queued pushes g, so
			// the queue holds it once.
			if g.sched.CompareAndSwap(schedIdle, schedQueued) {
				n.runq.push(g)
				return
			}
		case schedRunning:
			// CAS: the worker's running->idle CAS then fails, and it
			// requeues g.
			if g.sched.CompareAndSwap(schedRunning, schedAgain) {
				return
			}
		default: // queued or again: a run is still to come
			return
		}
	}
}

// run runs g once on the calling worker. A g scheduled again while it
// ran goes back in the queue without waking another worker: the caller
// pops the queue next, and a woken worker would mostly find g taken, or
// take it and leave the caller idle (one thread woken across processors
// per round, for nothing, while a leader's next batch is proposed from
// its last one's callback).
func (n *Node) run(g *group, ob *outbox) {
	g.sched.Store(schedRunning)
	n.process(g, ob)
	// CAS: fails only if schedule moved g to again meanwhile.
	if !g.sched.CompareAndSwap(schedRunning, schedIdle) {
		g.sched.Store(schedQueued)
		n.runq.requeue(g)
	}
}

// worker is one scheduler goroutine.
func (n *Node) worker() {
	defer n.wg.Done()
	ob := n.newOutbox()
	ran := 0
	for {
		g := n.runq.pop(false)
		if g == nil || ran == flushEvery {
			ob.flush()
			ran = 0
		}
		if g == nil {
			if g = n.runq.pop(true); g == nil {
				return
			}
		}
		n.run(g, ob)
		ran++
	}
}

// Process runs a manual node until it has nothing left to do without
// new input: every scheduled group, every queued apply, and the messages
// they produce handed to the transport. It reports whether it did
// anything. Saves complete when the Log completes them, and messages
// arrive when the Transport delivers them: neither is waited for.
//
// Process is for manual nodes (Options.Manual); it does nothing on others.
func (n *Node) Process() bool {
	if !n.opts.Manual || n.isClosed() {
		return false
	}
	did := false
	for {
		if g := n.runq.pop(false); g != nil {
			n.run(g, n.manualOut)
			did = true
			continue
		}
		n.manualOut.flush()
		if g := n.applyq.pop(); g != nil {
			g.drainApply()
			did = true
			continue
		}
		if n.runq.len() == 0 {
			return did
		}
	}
}

// runQueue is the FIFO of groups waiting for a worker.
type runQueue struct {
	mu     sync.Mutex
	cond   sync.Cond
	q      []*group
	head   int
	closed bool
}

func newRunQueue() *runQueue {
	rq := &runQueue{}
	rq.cond.L = &rq.mu
	return rq
}

func (rq *runQueue) push(g *group) {
	rq.mu.Lock()
	rq.q = append(rq.q, g)
	rq.mu.Unlock()
	rq.cond.Signal()
}

// requeue is push for a worker that pops next: nobody is woken.
func (rq *runQueue) requeue(g *group) {
	rq.mu.Lock()
	rq.q = append(rq.q, g)
	rq.mu.Unlock()
}

// pop returns the next group, or nil if there is none and block is false,
// or once the queue is closed.
func (rq *runQueue) pop(block bool) *group {
	rq.mu.Lock()
	defer rq.mu.Unlock()
	for rq.head == len(rq.q) {
		if !block || rq.closed {
			return nil
		}
		rq.cond.Wait()
	}
	if rq.closed {
		return nil
	}
	g := rq.q[rq.head]
	rq.q[rq.head] = nil
	rq.head++
	if rq.head == len(rq.q) {
		rq.q, rq.head = rq.q[:0], 0
	} else if rq.head > 1024 && rq.head*2 > len(rq.q) {
		rq.q, rq.head = append(rq.q[:0], rq.q[rq.head:]...), 0
	}
	return g
}

func (rq *runQueue) len() int {
	rq.mu.Lock()
	defer rq.mu.Unlock()
	return len(rq.q) - rq.head
}

func (rq *runQueue) close() {
	rq.mu.Lock()
	rq.closed = true
	rq.mu.Unlock()
	rq.cond.Broadcast()
}

// applyQueue is a manual node's FIFO of groups with apply work.
type applyQueue struct {
	mu sync.Mutex
	q  []*group
}

func (aq *applyQueue) push(g *group) {
	aq.mu.Lock()
	aq.q = append(aq.q, g)
	aq.mu.Unlock()
}

func (aq *applyQueue) pop() *group {
	aq.mu.Lock()
	defer aq.mu.Unlock()
	if len(aq.q) == 0 {
		return nil
	}
	g := aq.q[0]
	aq.q[0] = nil
	aq.q = aq.q[1:]
	return g
}
