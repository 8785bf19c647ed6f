package jetstream

import (
	"strconv"
	"time"

	"github.com/skiffmq/skiff/server"
)

// Flow control of push consumers: after flowControlBytes delivered the
// consumer asks the subscriber to answer a 100 FlowControl Request, and it
// stops once flowControlStall bytes are unanswered, so that a slow
// subscriber stalls its consumer instead of being cut off as a slow
// consumer.
const (
	flowControlBytes = 1 << 20
	flowControlStall = 4 << 20
	// interestPoll bounds how long an inactive push consumer waits before
	// it looks for a subscriber on its deliver subject again.
	interestPoll = 250 * time.Millisecond
)

// pushState is a push consumer's delivery state.
type pushState struct {
	permitted bool      // the owner may publish on the deliver subject
	active    bool      // the deliver subject has a subscriber
	checkAt   time.Time // when to look for one again, if inactive
	backoff   time.Duration
	lastSend  time.Time // the last message or heartbeat sent
	fcID      string    // the flow control request waiting for an answer
	fcN       uint64    // requests sent, to name them
	fcBytes   int       // bytes sent and not covered by an answer
	fcSentAt  int       // fcBytes when fcID was sent
}

// canSend reports whether the consumer may push a message now.
func (p *pushState) canSend(cfg *ConsumerConfig) bool {
	if !p.active {
		return false
	}
	return !cfg.FlowControl || p.fcBytes < flowControlStall
}

// refreshInterestLocked looks whether the deliver subject has a subscriber: at
// every round while active, and with a growing interval while not. mu
// held.
func (c *consumer) refreshInterestLocked(now time.Time) {
	p := &c.push
	if !p.active && now.Before(p.checkAt) {
		return
	}
	if !p.permitted {
		// The owner may not publish on the deliver subject: the server
		// does not either (see server/principal.go).
		p.active, p.checkAt = false, now.Add(interestPoll)
		return
	}
	if c.st.ja.acc.HasInterest(c.cfg.DeliverSubject) {
		if !p.active {
			// The first heartbeat is due one interval after a
			// subscriber appears, as in the reference server.
			p.lastSend = now
		}
		p.active, p.backoff = true, 0
		c.lastActive = now
		return
	}
	p.active = false
	p.backoff = min(max(2*p.backoff, 10*time.Millisecond), interestPoll)
	p.checkAt = now.Add(p.backoff)
}

// pushedLocked accounts a message sent to the deliver subject, asking for flow
// control when due. mu held.
func (c *consumer) pushedLocked(pub *server.Publisher, size int, now time.Time) {
	p := &c.push
	p.lastSend = now
	if !c.cfg.FlowControl {
		return
	}
	p.fcBytes += size
	if p.fcID == "" && p.fcBytes >= flowControlBytes {
		p.fcN++
		p.fcID = "$JS.FC." + c.st.name + "." + c.name + "." + strconv.FormatUint(p.fcN, 10)
		p.fcSentAt = p.fcBytes
		hb := headerBuilder{}
		pub.ActFor(c.owner)
		pub.Publish(c.cfg.DeliverSubject, p.fcID, hb.status(100, "FlowControl Request").bytes(), nil)
		pub.ActFor(server.Principal{})
	}
}

// flowControlReplyLocked applies a subscriber's answer to a flow control
// request. mu held.
func (c *consumer) flowControlReplyLocked(subj string) {
	p := &c.push
	if subj != p.fcID {
		return // an answer to an older request, or a stray one
	}
	p.fcBytes = max(p.fcBytes-p.fcSentAt, 0)
	p.fcID, p.fcSentAt = "", 0
}

// housekeepPushLocked sends idle heartbeats and returns when the next one is
// due, or when to look for interest again. mu held.
func (c *consumer) housekeepPushLocked(pub *server.Publisher, now time.Time) time.Time {
	p := &c.push
	var wake time.Time
	if !p.active {
		wake = p.checkAt
	}
	if hb := c.cfg.Heartbeat; hb > 0 && p.active {
		if now.Sub(p.lastSend) >= hb {
			pub.ActFor(c.owner)
			pub.Publish(c.cfg.DeliverSubject, "", c.idleHeartbeatLocked(), nil)
			pub.ActFor(server.Principal{})
			p.lastSend = now
		}
		if t := p.lastSend.Add(hb); wake.IsZero() || t.Before(wake) {
			wake = t
		}
	}
	return wake
}
