package jetstream

import "sync"

// writeGate lets a checkpoint hold a replica's store writes without
// holding its applies (replica_checkpoint.go): while the store's writes
// are held (store.Stream.HoldWrites), appends and lazy removals stay in
// memory, but an op whose removals the store writes at once (a persisted
// delete, a purge, a rollup, a configuration's new limits, an expiry
// round or tick, which may record a skipped sequence) waits here until
// the hold ends.
type writeGate struct {
	mu       sync.Mutex
	released chan struct{} // nil: not held
}

// hold starts holding; release ends it.
func (g *writeGate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released == nil {
		g.released = make(chan struct{})
	}
}

func (g *writeGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.released != nil {
		close(g.released)
		g.released = nil
	}
}

// wait returns once writes are not held.
func (g *writeGate) wait() {
	g.mu.Lock()
	ch := g.released
	g.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// writesAtOnce reports whether applying op may write the store's files at
// once (Delete, Purge, Skip), rather than buffer its appends and record
// its removals at the next sync point.
func writesAtOnce(op *replicaOp) bool {
	switch op.kind {
	case opRemove:
		return op.persist
	case opPurge, opConfig, opTick, opExpire:
		return true
	case opMsgs:
		for i := range op.msgs {
			if op.msgs[i].flags&(msgRollupSubject|msgRollupAll) != 0 {
				return true
			}
		}
	}
	return false
}
