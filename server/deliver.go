package server

import (
	"math/rand/v2"
)

// route delivers one message published in acc: to every matching plain
// subscription of the account, and to one member of every matching queue
// group. It runs on the publisher's read loop and only queues bytes: the
// subscribers' writers send them. subj is the subject as a string view for
// the lookup, subjBytes the same bytes for encoding.
//
// It reports whether it delivered or forwarded the message anywhere. A
// message that crosses a bridge into another account (imports.go) is
// routed again there, as the publisher's own at that depth.
func (s *Server) route(c *client, acc *Account, subj string, subjBytes, reply []byte, hdr int, msg []byte) bool {
	r := &c.result
	if acc.subs.Lookup(subj, r) != nil {
		return false // malformed: it matches nothing, as in the reference server
	}
	delivered := false
	for _, sub := range r.Plain {
		if sub.client.route != nil {
			// A peer with interest: forwarded once below, unless the
			// message came from a peer (one hop) and crossed no bridge
			// here.
			if c.route == nil || c.depth > 0 {
				c.fwd.addPlain(sub.client)
			}
			continue
		}
		if c.deliver(sub, subj, subjBytes, reply, hdr, msg) {
			delivered = true
		}
	}
	for i := range r.Groups {
		if c.route != nil && c.depth == 0 && !c.route.wantsQueue(r.Groups[i].Queue) {
			continue // the peer that sent it chose another server for this group
		}
		if c.deliverToGroup(r.Groups[i].Members, subj, subjBytes, reply, hdr, msg) {
			delivered = true
		}
	}
	if len(c.fwd.targets) > 0 && c.forward(acc, subj, subjBytes, reply, hdr, msg) {
		delivered = true
	}
	if !delivered && len(reply) > 0 && c.noResp && c.depth == 0 {
		c.noResponders(acc, subjBytes, reply)
	}
	return delivered
}

// deliverToGroup gives the message to one member of a queue group, chosen
// at random so that members share the load evenly, trying the next member
// when one cannot take it. Local members come first: a peer's members get
// it only when none here can, and then a peer is chosen by the weights the
// peers told (route_interest.go).
func (c *client) deliverToGroup(members []*subscription, subj string, subjBytes, reply []byte, hdr int, msg []byte) bool {
	n := len(members)
	start := rand.IntN(n)
	remote := false
	for i := range n {
		sub := members[(start+i)%n]
		if sub.client.route != nil {
			remote = true
			continue
		}
		if c.deliver(sub, subj, subjBytes, reply, hdr, msg) {
			return true
		}
	}
	return remote && (c.route == nil || c.depth > 0) && c.forwardToGroup(members)
}

// deliver queues the message for one subscription and reports whether it
// did. c is the publisher.
func (c *client) deliver(sub *subscription, subj string, subjBytes, reply []byte, hdr int, msg []byte) bool {
	if sub.kind != subClient {
		return c.deliverSpecial(sub, subj, subjBytes, reply, hdr, msg)
	}
	t := sub.client
	if (t == c && !c.echo) || t.closed.Load() {
		return false
	}
	if u := t.usr.Load(); u != nil && u.perms != nil && !u.perms.canReceive(subj) {
		return false
	}
	if hdr >= 0 && !t.headers.Load() {
		msg, hdr = msg[hdr:], -1 // a client without headers gets the payload alone
	}
	switch t.out.queueSubMsg(sub, subjBytes, reply, hdr, msg) {
	case queued:
	case queuedLast:
		t.removeSub(sub)
	case notQueued:
		return false
	case queueFull:
		t.slowConsumer()
		return false
	}
	c.queued(t)
	return true
}

// noResponders tells a requester that nobody received its request: a 503
// status message, naming the subject, on its own plain subscription in acc
// that matches the reply subject (the reference server ignores queue
// subscriptions here).
func (c *client) noResponders(acc *Account, subj, reply []byte) {
	r := &c.noRespRes
	if acc.subs.Lookup(string(reply), r) != nil {
		return
	}
	var mine *subscription
	for _, sub := range r.Plain {
		if sub.client == c {
			mine = sub
			break
		}
	}
	if mine == nil {
		return
	}
	hdr := make([]byte, 0, 64)
	hdr = append(hdr, "NATS/1.0 503\r\nNats-Subject: "...)
	hdr = append(hdr, subj...)
	hdr = append(hdr, "\r\n\r\n"...)
	if !c.out.queueMsg(reply, mine.sid, nil, len(hdr), hdr) {
		c.slowConsumer()
		return
	}
	c.queued(c)
}
