package jetstream

import (
	"errors"

	"github.com/skiffmq/skiff/store"
)

// Interest and workqueue retention remove a message once the consumers
// that want it are done with it: on a workqueue stream the one consumer
// whose filter matches acknowledged it; on an interest stream every
// consumer whose filter matches acknowledged it (or, with ack none, was
// sent it).

// retire removes messages that c acknowledged, if no other consumer still
// needs them. Called on c's goroutine without c's lock; it takes the
// other consumers' locks one at a time.
func (st *stream) retire(c *consumer, seqs []uint64) {
	if st.repl != nil {
		st.repl.retire(c, seqs)
		return
	}
	// A removed message is one no other consumer needs: they are past it
	// or do not want it, so they need not be told.
	switch st.retention() {
	case WorkQueuePolicy:
		// Filters of a workqueue stream's consumers never overlap.
		for _, seq := range seqs {
			_ = st.store.Remove(seq)
		}
	case InterestPolicy:
		others := st.otherConsumers(c)
		for _, seq := range seqs {
			if len(others) > 0 {
				m, err := st.store.Get(seq)
				if err != nil {
					continue
				}
				if anyNeeds(others, seq, m.Subject) {
					continue
				}
			}
			_ = st.store.Remove(seq)
		}
	}
}

// sweepInterest removes every message no consumer needs, after a consumer
// of an interest stream went away.
func (st *stream) sweepInterest() {
	if st.repl != nil {
		go st.repl.sweep() // through the group, off the apply goroutine
		return
	}
	consumers := *st.clist.Load()
	st.eachMsg("interest sweep", func(seq uint64, subj string) {
		if !anyNeeds(consumers, seq, subj) {
			_ = st.store.Remove(seq)
		}
	})
}

// eachMsg calls f with every message of the stream, in order; a read
// that fails is logged as what's.
func (st *stream) eachMsg(what string, f func(seq uint64, subj string)) {
	for seq := st.store.State().FirstSeq; ; {
		m, err := st.store.Next(seq, "")
		if err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				st.js.log.Warn(what, "stream", st.name, "err", err)
			}
			return
		}
		f(m.Seq, m.Subject)
		seq = m.Seq + 1
	}
}

func (st *stream) otherConsumers(c *consumer) []*consumer {
	all := *st.clist.Load()
	out := make([]*consumer, 0, len(all))
	for _, o := range all {
		if o != c {
			out = append(out, o)
		}
	}
	return out
}

func anyNeeds(cs []*consumer, seq uint64, subj string) bool {
	for _, o := range cs {
		if o.needs(seq, subj) {
			return true
		}
	}
	return false
}

// needs reports whether the consumer has yet to finish with a message: it
// passes the filters and is not delivered yet, or waits for an ack.
func (c *consumer) needs(seq uint64, subj string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.matchesLocked(subj) {
		return false
	}
	if _, ok := c.pending[seq]; ok {
		return true
	}
	return seq >= c.sseq
}
