package jetstream

import (
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/skiffmq/skiff/server"
	"github.com/skiffmq/skiff/store"
)

// Where a candidate message comes from.
const (
	fromStream = iota // the next new message
	fromRedelivery
	fromLastPerSubject
)

// candidate is the message the consumer would deliver next. Finding one
// changes nothing but dropping what can never be delivered; commitLocked
// records the delivery.
type candidate struct {
	m   *store.Msg
	dc  uint64 // the delivery count this delivery makes
	src int
}

// nextLocked finds the next message to deliver: a redelivery first, then the
// last-per-subject start list, then the stream. ok is false when there is
// none; stalled says that is because of max_ack_pending, not the end of
// the stream. mu held.
func (c *consumer) nextLocked() (cand candidate, ok, stalled bool) {
	for len(c.rdq) > 0 {
		seq := c.rdq[0]
		if _, queued := c.rdqSet[seq]; !queued {
			c.rdq = c.rdq[1:]
			continue
		}
		if _, pending := c.pending[seq]; !pending {
			c.popRedeliveryLocked(seq)
			continue
		}
		dc := max(c.rdc[seq], 1) + 1
		if c.cfg.MaxDeliver > 0 && dc > uint64(c.cfg.MaxDeliver) {
			// Delivered as often as allowed: it leaves the pending set
			// unacknowledged, and the floor moves past it.
			c.popRedeliveryLocked(seq)
			c.forgetLocked(seq)
			c.moveFloorLocked()
			c.st.ja.advise(advMaxDeliveries+c.st.name+"."+c.name, func() any {
				return maxDeliveries{typedEvent: newEvent("max_deliver"), Stream: c.st.name, Consumer: c.name,
					StreamSeq: seq, Deliveries: dc - 1}
			})
			continue
		}
		m, err := c.st.store.Get(seq)
		if readFailed(err) {
			c.readErr = err
			return cand, false, true
		}
		if err != nil { // removed from the stream meanwhile, or lost to damage
			c.popRedeliveryLocked(seq)
			c.forgetLocked(seq)
			c.moveFloorLocked()
			continue
		}
		return candidate{m: m, dc: dc, src: fromRedelivery}, true, false
	}
	if c.cfg.AckPolicy != AckNone && c.cfg.MaxAckPending > 0 && len(c.pending) >= c.cfg.MaxAckPending {
		return cand, false, true
	}
	for len(c.lss) > 0 {
		m, err := c.st.store.Get(c.lss[0])
		if readFailed(err) {
			c.readErr = err
			return cand, false, true
		}
		if err != nil {
			c.popLastPerSubjectLocked()
			c.npc--
			continue
		}
		return candidate{m: m, dc: 1, src: fromLastPerSubject}, true, false
	}
	m, err := c.st.nextFrom(c.sseq, c.filters)
	if readFailed(err) {
		c.readErr = err
		return cand, false, true
	}
	if err != nil {
		return cand, false, false
	}
	return candidate{m: m, dc: 1, src: fromStream}, true, false
}

// readRetryDelay is how long a consumer waits before it reads the stream
// again after a read failed (an I/O error): nothing else may wake it, and
// waiting forever would stall it for good.
const readRetryDelay = 500 * time.Millisecond

// writeRetry is how often a consumer whose state could not be written
// tries again (consumer.run).
const writeRetry = 250 * time.Millisecond

// readFailed reports whether a read of the stream failed in a way that
// may pass (an I/O error), rather than finding the message gone, lost to
// damage (the store removed it), or the stream closed.
func readFailed(err error) bool {
	return err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrCorrupt) &&
		!errors.Is(err, store.ErrClosed)
}

// readFailureLocked logs a failed read (at most once per throttle interval) and
// has the consumer try again after readRetryDelay. mu held.
func (c *consumer) readFailureLocked(now time.Time) {
	c.readWarn.Log(c.st.js.log, slog.LevelError, "consumer cannot read the stream; will retry",
		"stream", c.st.name, "consumer", c.name, "stream_seq", c.sseq, "err", c.readErr)
	c.readErr, c.readRetry = nil, now.Add(readRetryDelay)
}

// popLastPerSubjectLocked moves past the first of the start list: the consumer's
// position is the next entry, or where it goes on after the list.
func (c *consumer) popLastPerSubjectLocked() {
	c.lss = c.lss[1:]
	if len(c.lss) > 0 {
		c.sseq = c.lss[0]
	} else {
		c.sseq = c.lssResume
	}
}

func (c *consumer) popRedeliveryLocked(seq uint64) {
	c.rdq = c.rdq[1:]
	delete(c.rdqSet, seq)
}

// commitLocked records the delivery of cand. mu held.
func (c *consumer) commitLocked(cand *candidate, now time.Time) {
	seq := cand.m.Seq
	c.dseq++
	switch cand.src {
	case fromRedelivery:
		c.popRedeliveryLocked(seq)
	case fromLastPerSubject:
		c.popLastPerSubjectLocked()
		c.npc--
	case fromStream:
		c.sseq = seq + 1
		c.npc--
	}
	if c.npc < 0 {
		c.npc = 0
	}
	if cand.dc > 1 {
		c.rdc[seq] = cand.dc
	}
	c.log.Delivered(seq, c.dseq, cand.dc, now.UnixNano())
	if c.cfg.AckPolicy == AckNone {
		if seq > c.asflr {
			c.asflr = seq
		}
		c.adflr = c.dseq
		if c.st.retention() != LimitsPolicy {
			c.retire = append(c.retire, seq)
		}
	} else {
		p := c.pending[seq]
		if p == nil {
			p = &pendingMsg{dseq: c.dseq}
			c.pending[seq] = p
		}
		p.ts = now.UnixNano()
		c.trackLocked(seq, p, now.Add(c.ackWaitForLocked(cand.dc)))
	}
	c.lastDelivered = now
}

// deliverLocked hands out messages while someone wants them, up to
// deliverBudget; it reports whether it stopped at the budget. mu held.
func (c *consumer) deliverLocked(pub *server.Publisher, now time.Time) bool {
	if !c.isPull() {
		c.refreshInterestLocked(now)
	}
	if _, paused := c.pausedUntilLocked(now); paused {
		return false
	}
	if c.writeFailed {
		// Nothing is delivered that cannot be recorded (consumer.run
		// retries the write).
		return false
	}
	var reply []byte
	for range deliverBudget {
		if c.isPull() {
			if len(c.waiting) == 0 {
				return false
			}
		} else if !c.push.canSend(&c.cfg) {
			return false
		}
		cand, ok, stalled := c.nextLocked()
		if !ok {
			if c.readErr != nil {
				c.readFailureLocked(now)
				return false
			}
			if !stalled {
				c.npc, c.npcValid = 0, true
				c.endOfStreamLocked(pub)
			}
			return false
		}
		if c.cfg.ReplayPolicy == ReplayOriginal && c.replay.lastTS != 0 {
			due := c.replay.at.Add(time.Duration(cand.m.Timestamp - c.replay.lastTS))
			if due.After(now) {
				c.replay.wake = due
				return false
			}
		}
		pendingAfter := c.numPendingLocked()
		if cand.dc == 1 && pendingAfter > 0 {
			pendingAfter--
		}
		reply = c.ackReply(reply[:0], cand.dc, cand.m.Seq, c.dseq+1, cand.m.Timestamp, uint64(pendingAfter))
		hdr, data := cand.m.Header, cand.m.Data
		if c.cfg.HeadersOnly {
			hb := headerBuilder{b: make([]byte, 0, len(hdr)+32)}
			if len(hdr) > 0 {
				hb.b = append(hb.b, hdr[:len(hdr)-2]...) // without the final blank line
			} else {
				hb.status(0, "")
			}
			hdr, data = hb.addUint("Nats-Msg-Size", uint64(len(data))).bytes(), nil
		}
		size := len(cand.m.Subject) + len(reply) + len(hdr) + len(data)
		to := c.cfg.DeliverSubject
		var r *pullRequest
		if c.isPull() {
			if r = c.pickRequestLocked(pub, size, now); r == nil {
				return false
			}
			to = r.reply
		}
		c.commitLocked(&cand, now)
		if len(hdr) == 0 {
			hdr = nil
		}
		if r != nil {
			pub.ActFor(r.principal)
		} else {
			pub.ActFor(c.owner)
		}
		pub.PublishAs(to, cand.m.Subject, string(reply), hdr, data)
		pub.ActFor(server.Principal{})
		cand.m.Release() // copied into the subscribers' queues
		if r != nil {
			c.servedLocked(pub, r, size, now)
		} else {
			c.pushedLocked(pub, size, now)
		}
		if c.cfg.ReplayPolicy == ReplayOriginal {
			c.replay.lastTS, c.replay.at = cand.m.Timestamp, now
		}
	}
	return true
}

// ackReply appends the ack subject of a delivery:
// $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<ns>.<pending>.
func (c *consumer) ackReply(b []byte, dc, sseq, dseq uint64, ts int64, pending uint64) []byte {
	b = append(b, "$JS.ACK."...)
	b = append(b, c.st.name...)
	b = append(b, '.')
	b = append(b, c.name...)
	b = append(b, '.')
	b = strconv.AppendUint(b, dc, 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, sseq, 10)
	b = append(b, '.')
	b = strconv.AppendUint(b, dseq, 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, ts, 10)
	b = append(b, '.')
	return strconv.AppendUint(b, pending, 10)
}

// replayState paces a replay_policy "original" consumer.
type replayState struct {
	lastTS int64     // stored time of the last delivered message
	at     time.Time // when it was delivered
	wake   time.Time // when the next one is due, if waiting
}

// housekeepLocked expires pull requests, sends idle heartbeats, removes an
// inactive consumer, and returns when run must look again. mu held.
func (c *consumer) housekeepLocked(pub *server.Publisher, now time.Time) time.Time {
	wake := now.Add(time.Minute)
	soonest := func(t time.Time) {
		if !t.IsZero() && t.Before(wake) {
			wake = t
		}
	}
	if len(c.deadlines) > 0 {
		soonest(c.deadlines[0].at)
	}
	soonest(c.housekeepPauseLocked(now))
	if !c.replay.wake.IsZero() {
		soonest(c.replay.wake)
		c.replay.wake = time.Time{}
	}
	if !c.readRetry.IsZero() {
		if now.Before(c.readRetry) {
			soonest(c.readRetry)
		} else {
			c.readRetry = time.Time{}
		}
	}
	if c.isPull() {
		soonest(c.housekeepPullLocked(pub, now))
		if len(c.waiting) > 0 {
			c.lastActive = now
		}
	} else {
		soonest(c.housekeepPushLocked(pub, now))
		if c.push.active {
			c.lastActive = now
		}
	}
	if t := c.inactiveThresholdLocked(); t > 0 {
		if now.Sub(c.lastActive) >= t {
			c.deleted = true
		} else {
			soonest(c.lastActive.Add(t))
		}
	}
	return wake
}

// inactiveThresholdLocked is how long the consumer may go without interest
// before it is removed; 0 is forever.
func (c *consumer) inactiveThresholdLocked() time.Duration {
	return c.cfg.InactiveThreshold // set for every ephemeral consumer
}

// idleHeartbeatLocked is the 100 status message of an idle consumer, naming the
// last consumer and stream sequences, and the pending flow control
// request when it is stalled on one.
func (c *consumer) idleHeartbeatLocked() []byte {
	hb := headerBuilder{}
	hb.status(100, "Idle Heartbeat")
	hb.addUint("Nats-Last-Consumer", c.dseq)
	hb.addUint("Nats-Last-Stream", c.sseq-min(c.sseq, 1))
	if c.push.fcID != "" {
		hb.add("Nats-Consumer-Stalled", c.push.fcID)
	}
	return hb.bytes()
}
