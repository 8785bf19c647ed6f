package server

import (
	"cmp"
	"slices"
	"time"
)

// Read-only views of server and client state for the monitoring
// endpoints. They run on monitoring goroutines, so they read what other
// goroutines write only through atomics or under the owner's lock.

// counterTotals sums the counters of the closed clients and of the live
// ones. It reads the closed totals first: a closing client leaves the live
// set before its counters are added to the closed totals (removeClient),
// so no client is counted twice. A client closing during the call may be
// counted in neither; monotonicTotals covers that.
func (s *Server) counterTotals() counters {
	t := counters{
		inMsgs:   s.stats.closedInMsgs.Load(),
		inBytes:  s.stats.closedInBytes.Load(),
		outMsgs:  s.stats.closedOutMsgs.Load(),
		outBytes: s.stats.closedOutBytes.Load(),
	}
	for _, c := range s.clients() {
		t = t.plus(c.counters())
	}
	return t
}

// subsMode says what /connz lists of each connection's subscriptions.
type subsMode uint8

const (
	subsNone   subsMode = iota
	subsList            // subjects only: subscriptions_list
	subsDetail          // subscriptions_list_detail
)

// connInfo describes the client at now. With auth it includes the user
// the client authenticated as.
func (c *client) connInfo(now time.Time, auth bool) *ConnInfo {
	last := time.Unix(0, c.lastIn.Load())
	msgs, bytes := c.out.counts()
	ci := &ConnInfo{
		Cid:          c.cid,
		Kind:         "Client",
		Type:         "nats",
		IP:           c.ip,
		Port:         c.port,
		Start:        c.start.UTC(),
		LastActivity: last.UTC(),
		Uptime:       formatUptime(now.Sub(c.start)),
		Idle:         formatUptime(now.Sub(last)),
		Pending:      c.out.pending(),
		InMsgs:       c.inMsgs.Load(),
		InBytes:      c.inBytes.Load(),
		OutMsgs:      msgs,
		OutBytes:     bytes,
	}
	c.mu.Lock()
	ci.NumSubs = uint32(len(c.mu.subs))
	ci.Name, ci.Lang, ci.Version = c.mu.name, c.mu.lang, c.mu.version
	if auth {
		ci.AuthorizedUser = c.mu.user
	}
	acc := c.accountLocked()
	c.mu.Unlock()
	if auth {
		c.identity(ci, acc)
	}
	return ci
}

// accountLocked returns the account the client publishes in: the one
// CONNECT bound it to, or, before that, the global account (where a
// client of a server without authentication may publish before CONNECT).
func (c *client) accountLocked() *Account {
	if c.mu.acc != nil {
		return c.mu.acc
	}
	return c.srv.gacc
}

// identity fills what /connz says with auth=true of whom the client acts
// as in acc, its account, as nats-server does: the account (absent for
// the global one), the account's name tag, and the user's issuer: for a
// configured nkey its account, for a user JWT the key that signed it
// (the account's own or a signing key); and a user JWT's tags and the JWT
// itself, unless it is a bearer token.
func (c *client) identity(ci *ConnInfo, acc *Account) {
	if acc != c.srv.gacc {
		ci.Account = acc.name
	}
	ci.NameTag = acc.nameTag()
	u := c.usr.Load()
	switch {
	case u == nil:
	case u.jwt != nil:
		ci.IssuerKey, ci.JWT, ci.Tags = u.jwt.signer, u.jwt.raw, u.jwt.tags
	case u.nkey:
		ci.IssuerKey = u.acc.name
	}
}

// selected reports whether the client is in account acc and
// authenticated as user (each "" for any), for /connz's filters.
func (c *client) selected(acc, user string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return (acc == "" || c.accountLocked().name == acc) && (user == "" || c.mu.user == user)
}

// listSubs fills ci's subscription list, sorted: the client's map has no
// order, and a sorted list reads and diffs better.
func (c *client) listSubs(ci *ConnInfo, mode subsMode) {
	c.mu.Lock()
	switch mode {
	case subsList:
		for _, sub := range c.mu.subs {
			ci.Subs = append(ci.Subs, sub.subject)
		}
	case subsDetail:
		for _, sub := range c.mu.subs {
			ci.SubsDetail = append(ci.SubsDetail, sub.detail())
		}
	}
	c.mu.Unlock()
	slices.Sort(ci.Subs)
	slices.SortFunc(ci.SubsDetail, compareSubDetail)
}

// detail describes the subscription. Deliveries are counted only for a
// subscription with a maximum (UNSUB sid max), from that UNSUB on:
// counting every delivery would add a write to a shared word on the
// delivery path.
func (sub *subscription) detail() SubDetail {
	d := SubDetail{
		Subject: sub.subject,
		Queue:   sub.queue,
		Sid:     string(sub.sid),
		Cid:     sub.client.cid,
	}
	d.Msgs = sub.client.out.delivered(sub)
	d.Max = sub.max.Load()
	return d
}

// compareSubDetail orders subscriptions by connection, then by sid
// numerically for the decimal sids clients use (shorter first), then by
// subject.
func compareSubDetail(a, b SubDetail) int {
	return cmp.Or(
		cmp.Compare(a.Cid, b.Cid),
		cmp.Compare(len(a.Sid), len(b.Sid)),
		cmp.Compare(a.Sid, b.Sid),
		cmp.Compare(a.Subject, b.Subject),
	)
}
