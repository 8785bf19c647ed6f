package server

import (
	"math/rand/v2"

	"github.com/skiffmq/skiff/internal/proto"
)

// route delivers one published message: to every matching plain
// subscription, and to one member of every matching queue group. It runs
// on the publisher's read loop and only queues bytes: the subscribers'
// writers send them. subj is the subject as a string view for the lookup,
// subjBytes the same bytes for encoding.
func (s *Server) route(c *client, subj string, subjBytes, reply []byte, hdr int, msg []byte) {
	r := &c.result
	if s.subs.Lookup(subj, r) != nil {
		return // malformed: it matches nothing, as in the reference server
	}
	delivered := false
	for _, sub := range r.Plain {
		if c.deliver(sub, subj, subjBytes, reply, hdr, msg) {
			delivered = true
		}
	}
	for i := range r.Groups {
		if c.deliverToGroup(r.Groups[i].Members, subj, subjBytes, reply, hdr, msg) {
			delivered = true
		}
	}
	if !delivered && len(reply) > 0 && c.noResp {
		c.noResponders(reply)
	}
}

// deliverToGroup gives the message to one member of a queue group, chosen
// at random so that members share the load evenly, trying the next member
// when one cannot take it.
func (c *client) deliverToGroup(members []*subscription, subj string, subjBytes, reply []byte, hdr int, msg []byte) bool {
	n := len(members)
	start := rand.IntN(n)
	for i := range n {
		if c.deliver(members[(start+i)%n], subj, subjBytes, reply, hdr, msg) {
			return true
		}
	}
	return false
}

// deliver queues the message for one subscription and reports whether it
// did. c is the publisher.
func (c *client) deliver(sub *subscription, subj string, subjBytes, reply []byte, hdr int, msg []byte) bool {
	t := sub.client
	if (t == c && !c.echo) || t.closed.Load() {
		return false
	}
	if a := t.acct.Load(); a != nil && a.perms != nil && !a.perms.canReceive(subj) {
		return false
	}
	last := false
	if max := sub.max.Load(); max > 0 {
		n := sub.delivered.Add(1)
		if n > max {
			return false
		}
		last = n == max
	}
	if hdr >= 0 && !t.headers.Load() {
		msg, hdr = msg[hdr:], -1 // a client without headers gets the payload alone
	}
	if !t.out.queueMsg(subjBytes, sub.sid, reply, hdr, msg) {
		t.slowConsumer()
		return false
	}
	c.queued(t)
	if last {
		t.removeSub(sub)
	}
	return true
}

// noResponders tells a requester that nobody received its request: a 503
// status message on its own subscription that matches the reply subject.
func (c *client) noResponders(reply []byte) {
	r := &c.noRespRes
	if c.srv.subs.Lookup(string(reply), r) != nil {
		return
	}
	var mine *subscription
	for _, sub := range r.Plain {
		if sub.client == c {
			mine = sub
			break
		}
	}
	for i := 0; mine == nil && i < len(r.Groups); i++ {
		for _, sub := range r.Groups[i].Members {
			if sub.client == c {
				mine = sub
				break
			}
		}
	}
	if mine == nil {
		return
	}
	if !c.out.queueMsg(reply, mine.sid, nil, len(proto.NoRespondersHeader), []byte(proto.NoRespondersHeader)) {
		c.slowConsumer()
		return
	}
	c.queued(c)
}
