package jetstream

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/skiffmq/skiff/server"
)

// The acknowledgement kinds, by the body of a message to an ack subject.
const (
	ackAck      = iota // "+ACK", empty, or anything unknown
	ackNak             // "-NAK", optionally {"delay": ns} or a duration
	ackProgress        // "+WPI": still working, restart the ack wait
	ackNext            // "+NXT": ack, then a pull request for more
	ackTerm            // "+TERM": do not redeliver
)

func parseAckBody(b []byte) (kind int, arg []byte) {
	b = bytes.TrimSpace(b)
	for _, k := range []struct {
		prefix string
		kind   int
	}{{"+ACK", ackAck}, {"-NAK", ackNak}, {"+WPI", ackProgress}, {"+NXT", ackNext}, {"+TERM", ackTerm}} {
		if bytes.HasPrefix(b, []byte(k.prefix)) {
			return k.kind, bytes.TrimSpace(b[len(k.prefix):])
		}
	}
	return ackAck, nil
}

// parseAckSubject reads an ack subject: the classic
// $JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<dseq>.<ts>.<pending> or the
// newer form with a domain and account hash before the stream and a
// random token at the end.
func parseAckSubject(subj string) (stream, consumer string, dc, sseq, dseq uint64, ok bool) {
	toks := strings.Split(subj, ".")
	switch len(toks) {
	case 9:
	case 12:
		toks = append(toks[:2], toks[4:11]...)
	default:
		return "", "", 0, 0, 0, false
	}
	var err1, err2, err3 error
	dc, err1 = strconv.ParseUint(toks[4], 10, 64)
	sseq, err2 = strconv.ParseUint(toks[5], 10, 64)
	dseq, err3 = strconv.ParseUint(toks[6], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return "", "", 0, 0, 0, false
	}
	return toks[2], toks[3], dc, sseq, dseq, true
}

// handleAck receives $JS.ACK.> of the account on the acknowledger's
// goroutine and queues the ack on its consumer.
func (ja *jsAccount) handleAck(m *server.Msg) {
	if ja.js.refuseInternal(m) || ja.refuseForeign(m, nil) {
		return
	}
	stream, name, dc, sseq, dseq, ok := parseAckSubject(m.Subject)
	if !ok {
		return
	}
	a := ackMsg{dc: dc, sseq: sseq, dseq: dseq, principal: m.Principal()}
	if len(m.Data) > 0 {
		a.body = bytes.Clone(m.Data)
	}
	if m.Reply != "" {
		a.reply = strings.Clone(m.Reply)
	}
	ja.toConsumer(stream, name, func(c *consumer) { c.in.acks = append(c.in.acks, a) })
}

// handleFlowControl receives a subscriber's answer to a flow control
// request, $JS.FC.<stream>.<consumer>.<n>, in the account.
func (ja *jsAccount) handleFlowControl(m *server.Msg) {
	if ja.js.refuseInternal(m) || ja.refuseForeign(m, nil) {
		return
	}
	toks := strings.Split(m.Subject, ".")
	if len(toks) != 5 {
		return
	}
	ja.toConsumer(toks[2], toks[3], func(c *consumer) { c.in.fc = append(c.in.fc, strings.Clone(m.Subject)) })
}

// toConsumer hands an input to the consumer name of the account's stream:
// queue appends it to c.in, under c.in's lock, and the consumer is woken.
// It reports false, calling nothing, when there is no such consumer.
func (ja *jsAccount) toConsumer(stream, name string, queue func(c *consumer)) bool {
	st := ja.lookup(stream)
	if st == nil {
		return false
	}
	c := st.consumer(name)
	if c == nil {
		return false
	}
	c.in.Lock()
	queue(c)
	c.in.Unlock()
	c.signal()
	return true
}

// applyAckLocked applies one acknowledgement. A synchronous ack (one with a
// reply subject) is answered once the state is written. mu held.
func (c *consumer) applyAckLocked(pub *server.Publisher, a *ackMsg, now time.Time) {
	kind, arg := parseAckBody(a.body)
	if c.aheadLocked(a.sseq) && kind != ackNext {
		// Delivered by an earlier leader of a replicated stream whose
		// record of it did not commit: this leader will deliver it again,
		// so it cannot confirm an ack of it. The client's synchronous ack
		// times out; the redelivery is acknowledged.
		a.reply = ""
	}
	switch kind {
	case ackAck:
		c.sampleAckLocked(a, now)
		c.ackLocked(a.sseq, now)
	case ackTerm:
		c.adviseTermLocked(a, string(arg)) // pending or not, as the reference server
		c.ackLocked(a.sseq, now)
	case ackNak:
		if _, pending := c.pending[a.sseq]; pending {
			c.st.ja.advise(advMsgNaked+c.st.name+"."+c.name, func() any { return c.deliveryEvent("nak", a) })
		}
		c.nakLocked(a.sseq, arg, now)
	case ackProgress:
		if p, ok := c.pending[a.sseq]; ok {
			c.unqueueLocked(a.sseq)
			c.trackLocked(a.sseq, p, now.Add(c.ackWaitForLocked(max(c.rdc[a.sseq], 1))))
		}
	case ackNext:
		c.sampleAckLocked(a, now)
		c.ackLocked(a.sseq, now)
		if a.reply != "" {
			c.addRequestLocked(pub, pullMsg{reply: a.reply, body: arg, at: now, principal: a.principal}, now)
		}
		return
	}
	if a.reply != "" {
		c.ackReplies = append(c.ackReplies, a.reply)
	}
}

// aheadLocked reports whether seq is a message a replicated consumer has
// not delivered as far as its state goes (not pending, at or past where
// it goes on). mu held.
func (c *consumer) aheadLocked(seq uint64) bool {
	if _, replicated := c.log.(*replicaProgress); !replicated {
		return false
	}
	_, pending := c.pending[seq]
	return !pending && seq >= c.sseq
}

// adviseTermLocked queues the advisory of a message terminated by +TERM, with
// the reason that followed it. mu held.
func (c *consumer) adviseTermLocked(a *ackMsg, reason string) {
	c.st.ja.advise(advMsgTerminated+c.st.name+"."+c.name, func() any {
		return msgTerminated{delivery: c.deliveryEvent("terminated", a), Reason: reason}
	})
}

// deliveryEvent is the advisory of kind about the delivery a acknowledges.
func (c *consumer) deliveryEvent(kind string, a *ackMsg) delivery {
	return delivery{typedEvent: newEvent(kind), Stream: c.st.name, Consumer: c.name,
		ConsumerSeq: a.dseq, StreamSeq: a.sseq, Deliveries: a.dc}
}

// ackLocked acknowledges a stream sequence: alone (explicit) or with everything
// below it (all). mu held.
func (c *consumer) ackLocked(seq uint64, now time.Time) {
	switch c.cfg.AckPolicy {
	case AckNone:
		return
	case AckExplicit:
		if _, ok := c.pending[seq]; !ok {
			return
		}
		c.ackedLocked(seq)
	case AckAll:
		if seq <= c.asflr {
			return
		}
		if span := seq - c.asflr; span < uint64(len(c.pending)) {
			for s := c.asflr + 1; s <= seq; s++ {
				if _, ok := c.pending[s]; ok {
					c.ackedLocked(s)
				}
			}
		} else {
			for s := range c.pending {
				if s <= seq {
					c.ackedLocked(s)
				}
			}
		}
	}
	c.lastAcked = now
	c.moveFloorLocked()
}

// ackedLocked removes an acknowledged message from the pending set. mu held.
func (c *consumer) ackedLocked(seq uint64) {
	c.forgetLocked(seq)
	if c.st.retention() != LimitsPolicy {
		c.retire = append(c.retire, seq)
	}
}

// nakLocked queues a message for redelivery, at once or after a delay. mu held.
func (c *consumer) nakLocked(seq uint64, arg []byte, now time.Time) {
	p, ok := c.pending[seq]
	if !ok {
		return
	}
	var delay time.Duration
	if len(arg) > 0 {
		if arg[0] == '{' {
			var opts struct {
				Delay time.Duration `json:"delay"`
			}
			if json.Unmarshal(arg, &opts) == nil {
				delay = opts.Delay
			}
		} else if d, err := time.ParseDuration(string(arg)); err == nil {
			delay = d
		}
	}
	if delay > 0 {
		c.unqueueLocked(seq)
		c.trackLocked(seq, p, now.Add(delay))
		return
	}
	c.enqueueLocked(seq)
}
