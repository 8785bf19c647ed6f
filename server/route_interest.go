package server

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"unsafe"

	"github.com/skiffmq/skiff/internal/proto"
)

// Interest: every local subscription (a client's or an internal one) is
// counted by account, subject and queue; peers hear RS+ when a plain
// subject's count leaves 0 and RS- when it returns to 0, and for a queue
// group its count as the weight on every change, each with the account's
// name. A route's own subscriptions (its peer's interest) are never told
// to other peers: one hop.

// interestAdded tells the peers about a new local subscription. index
// calls it, under the subscriber's lock.
func (cl *cluster) interestAdded(sub *subscription) {
	k := interestKey{sub.acc, sub.subject, sub.queue}
	cl.mu.Lock()
	n := cl.mu.interest[k] + 1
	cl.mu.interest[k] = n
	var full []*client
	if n == 1 || sub.queue != "" {
		var buf [256]byte
		full = cl.broadcastLocked(proto.AppendRouteSub(buf[:0], sub.acc.name, sub.subject, sub.queue, n))
	}
	cl.mu.Unlock()
	closeSlowRoutes(full)
}

// interestRemoved tells the peers that a local subscription is gone.
func (cl *cluster) interestRemoved(sub *subscription) {
	k := interestKey{sub.acc, sub.subject, sub.queue}
	cl.mu.Lock()
	n, ok := cl.mu.interest[k]
	if !ok {
		cl.mu.Unlock()
		return
	}
	n--
	var buf [256]byte
	var line []byte
	switch {
	case n <= 0:
		delete(cl.mu.interest, k)
		line = proto.AppendRouteUnsub(buf[:0], sub.acc.name, sub.subject, sub.queue)
	case sub.queue != "":
		cl.mu.interest[k] = n
		line = proto.AppendRouteSub(buf[:0], sub.acc.name, sub.subject, sub.queue, n)
	default:
		cl.mu.interest[k] = n
	}
	var full []*client
	if line != nil {
		full = cl.broadcastLocked(line)
	}
	cl.mu.Unlock()
	closeSlowRoutes(full)
}

// broadcastLocked queues b for every registered route and returns those
// whose queue is full (to be closed once cl.mu is released: closing takes
// it).
func (cl *cluster) broadcastLocked(b []byte) []*client {
	var full []*client
	for _, rc := range cl.mu.routes {
		if rc.out.queue(b) {
			rc.out.wake()
		} else {
			full = append(full, rc)
		}
	}
	return full
}

func closeSlowRoutes(routes []*client) {
	for _, rc := range routes {
		rc.slowConsumer()
	}
}

// appendInterestLocked appends RS+ for all the local interest: what a
// route gets when it is registered.
func (cl *cluster) appendInterestLocked(dst []byte) []byte {
	for k, n := range cl.mu.interest {
		dst = proto.AppendRouteSub(dst, k.acc.name, k.subject, k.queue, n)
	}
	return dst
}

// forwardTarget is one peer a message goes to: once, for its plain
// subscribers and for the queue groups this server chose it for.
type forwardTarget struct {
	rc     *client
	plain  bool
	queues []string
}

// forwards is a publisher's scratch list of the peers the message being
// routed goes to, reused from message to message.
type forwards struct {
	targets []forwardTarget
	reply   []byte // a reply with the presented subject encoded, reused (jsDeliveryReply)
}

// A JetStream delivery is routed by its consumer's deliver subject but
// presented to the subscriber with the subject the message was stored
// under (Publisher.PublishAs). A route message has one subject, the one it
// is routed by, so the presented subject travels in the reply, which for
// a delivery is always the consumer's ack subject, as nats-server encodes
// it: <ack reply>@<subject>. The receiving server takes it out again
// (splitDeliveryReply) before it routes the message.

// jsAckPrefix starts the reply of every JetStream delivery.
const jsAckPrefix = "$JS.ACK."

// jsDeliveryReply returns reply with the presented subject as encoded in
// it, or reply as it is if it is not a delivery's.
func (f *forwards) jsDeliveryReply(reply, as []byte) []byte {
	if !bytes.HasPrefix(reply, []byte(jsAckPrefix)) || len(as) == 0 {
		return reply
	}
	f.reply = append(append(append(f.reply[:0], reply...), '@'), as...)
	return f.reply
}

// splitDeliveryReply undoes jsDeliveryReply: the presented subject (nil
// if none is encoded) and the reply.
func splitDeliveryReply(reply []byte) (as, ack []byte) {
	if !bytes.HasPrefix(reply, []byte(jsAckPrefix)) {
		return nil, reply
	}
	// The first '@': a stored subject may hold '@' (an address); an ack
	// subject holds one only if a stream or consumer name does, which is
	// rarer (nats-server takes the last, and so gets the former wrong).
	i := bytes.IndexByte(reply, '@')
	if i < 0 || i == len(reply)-1 {
		return nil, reply
	}
	return reply[i+1:], reply[:i]
}

func (f *forwards) target(rc *client) *forwardTarget {
	for i := range f.targets {
		if f.targets[i].rc == rc {
			return &f.targets[i]
		}
	}
	if len(f.targets) < cap(f.targets) {
		f.targets = f.targets[:len(f.targets)+1]
		t := &f.targets[len(f.targets)-1]
		t.rc, t.plain, t.queues = rc, false, t.queues[:0]
		return t
	}
	f.targets = append(f.targets, forwardTarget{rc: rc})
	return &f.targets[len(f.targets)-1]
}

// addPlain records that the peer behind rc has plain interest.
func (f *forwards) addPlain(rc *client) { f.target(rc).plain = true }

// addQueue records that the peer behind rc gets the message for queue q.
func (f *forwards) addQueue(rc *client, q string) {
	t := f.target(rc)
	if !slices.Contains(t.queues, q) {
		t.queues = append(t.queues, q)
	}
}

// forwardToGroup chooses a peer for a queue group with no local member
// that took the message: at random, in proportion to the weights the
// peers told (their members in the group), as nats-server weighs remote
// queue subscriptions, so that each member cluster-wide gets about the
// same share.
func (c *client) forwardToGroup(members []*subscription) bool {
	var total uint64
	for _, sub := range members {
		if peerMember(sub) {
			total += uint64(sub.weight.Load())
		}
	}
	if total == 0 {
		return false
	}
	n := rand.Uint64N(total)
	for _, sub := range members {
		if !peerMember(sub) {
			continue
		}
		w := uint64(sub.weight.Load())
		if n < w {
			c.fwd.addQueue(sub.client, sub.queue)
			return true
		}
		n -= w
	}
	// A weight lowered between the two passes: the last peer takes it.
	for i := len(members) - 1; i >= 0; i-- {
		if sub := members[i]; peerMember(sub) {
			c.fwd.addQueue(sub.client, sub.queue)
			return true
		}
	}
	return false
}

// peerMember reports whether a queue group member is a live peer's.
func peerMember(sub *subscription) bool {
	return sub.client.route != nil && !sub.client.closed.Load() && sub.weight.Load() > 0
}

// forward sends the message, published in acc, to every peer recorded in
// c.fwd, once each, and reports whether it queued it for any.
func (c *client) forward(acc *Account, subj string, as, reply []byte, hdr int, msg []byte) bool {
	sent := false
	subjBytes := unsafe.Slice(unsafe.StringData(subj), len(subj))
	if string(as) != subj && (c.internal || c.serverPub) {
		reply = c.fwd.jsDeliveryReply(reply, as)
	}
	kind := proto.ClientMsg
	if c.internal || c.serverPub {
		// The server's message: the peer learns whether the client it
		// acts for may publish it (IMSG), as this server's receivers do.
		kind = proto.ServerMsgDenied
		if c.actFor.permits(subj) {
			kind = proto.ServerMsgPermitted
		}
	}
	for i := range c.fwd.targets {
		t := &c.fwd.targets[i]
		switch t.rc.out.queueRouteMsg(kind, acc.name, subjBytes, reply, t.queues, hdr, msg) {
		case queued:
			c.queued(t.rc)
			sent = true
		case queueFull:
			t.rc.slowConsumer()
		}
		t.rc = nil
	}
	c.fwd.targets = c.fwd.targets[:0]
	return sent
}

// queueRouteMsg appends an RMSG or HMSG (IMSG, IHMSG) for a peer. A route is held to
// the clients' policy (stall.go): past the mark its gate closes, and the
// publishers that forwarded to it wait there at the end of their reads, so
// that a publisher faster than a peer (or than the peer's subscribers,
// whose gates hold the peer's reads of the route) settles at the peer's
// pace; past the bound it returns queueFull and the caller cuts the route
// off as a slow consumer, as it would a client that does not drain.
func (o *outbound) queueRouteMsg(kind proto.RouteMsgKind, account string, subject, reply []byte, queues []string, hdr int, msg []byte) queueResult {
	var buf [512]byte
	line := proto.AppendRouteMsgLine(buf[:0], kind, account, subject, reply, queues, hdr, len(msg))
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.mu.closing {
		return notQueued
	}
	if !o.fitsLocked(len(line) + len(msg) + 2) {
		return queueFull
	}
	o.writeLocked(line)
	o.writeLocked(msg)
	o.writeLocked(crlf)
	o.mu.outMsgs++
	o.mu.outBytes += int64(len(msg))
	o.gateLocked()
	return queued
}

// PeerHasInterest is GlobalAccount().PeerHasInterest.
func (s *Server) PeerHasInterest(peerID, subject string) bool {
	return s.gacc.PeerHasInterest(peerID, subject)
}

// PeerHasInterest reports whether this server would forward a message
// published on subject in the account to the peer with server ID peerID:
// whether that peer's interest has arrived here. Tests wait on it.
func (a *Account) PeerHasInterest(peerID, subject string) bool {
	return a.anySubscription(subject, func(sub *subscription) bool {
		r := sub.client.route
		return r != nil && !r.retired.Load() && !sub.client.closed.Load() && r.remoteID == peerID
	})
}

// PeerQueueWeight returns the weight the peer with server ID peerID told
// for queue group queue on a subscription of the global account matching
// subject (its members there), or 0 if it has none. Tests wait on it.
func (s *Server) PeerQueueWeight(peerID, subject, queue string) int {
	w := 0
	s.gacc.anySubscription(subject, func(sub *subscription) bool {
		r := sub.client.route
		if r != nil && sub.queue == queue && !r.retired.Load() && !sub.client.closed.Load() && r.remoteID == peerID {
			w = int(sub.weight.Load())
			return true
		}
		return false
	})
	return w
}

// NumInterest returns the subscriptions of the global account matching
// subject: local ones, and one for each subject (and queue group) a peer
// told, as nats-server's Account.Interest counts them. Tests wait on it.
func (s *Server) NumInterest(subject string) int {
	n := 0
	s.gacc.anySubscription(subject, func(sub *subscription) bool {
		if r := sub.client.route; r == nil || (!r.retired.Load() && !sub.client.closed.Load()) {
			n++
		}
		return false
	})
	return n
}
