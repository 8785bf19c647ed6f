package server

// When the server publishes because a client asked it to (a JetStream
// consumer delivering to the subject its creator chose, a pull request's
// replies, an API answer), the message must not do more than that client
// could do by publishing it itself. Otherwise the server is a confused
// deputy: a user denied $JS.API.STREAM.DELETE.> could have a consumer
// deliver there and the server delete a stream for them.
//
// Two rules close that:
//
//   - Msg.Internal tells a message the server published (an internal
//     Publisher, or an answer published in AfterRead) from one a client
//     published. Components that act on requests (the JetStream API, acks,
//     flow control) ignore internal messages.
//   - A Publisher acts for a Principal (ActFor), and Msg.Permitted says
//     whether that principal may publish on the message's subject.
//     Components that store or act on what they receive (a stream
//     capturing a subject) drop what is not permitted.

// A third rule keeps the deputy inside an account: a Principal belongs to
// the account of its user, a Publisher to one account, and a Publisher
// told to act for a principal of another account acts for nobody.
//
// Across accounts (exports and imports, imports.go), two more:
//
//   - A message the server published that crosses a bridge is checked
//     against its principal before it is mapped, in the account it was
//     published in, and continues in the other account for a crossed
//     principal: Permitted says whether that check passed, and the crossed
//     principal may publish nothing else (it has no user in that account
//     to judge by). A client's message that crosses stays the client's:
//     its publish was checked in its own account, and the export
//     authorises the rest.
//   - A service response acts for the requester: it is delivered in the
//     requester's account as a message the server published for the
//     requester (Internal, with the requester's principal, recorded when
//     the request crossed). Otherwise the exporting account's responder
//     could have the server store or act in the requester's account on a
//     subject the requester set as its reply but may not publish to: a
//     stream there stores the response only if the requester could have
//     published it, and the JetStream API, which ignores internal
//     messages, ignores it.

// Principal is who the server acts for when it publishes: a client, with
// its user's publish permissions in its user's account, or the server
// itself (ServerPrincipal), which may publish anywhere (advisories). The
// zero Principal is nobody: a message published for nobody is delivered
// to subscribers but is never Permitted, so what the server publishes
// without saying for whom fails closed.
type Principal struct {
	kind principalKind
	acc  *Account // where the user acts; nil for nobody and the server itself
	usr  *user    // nil: no permission limits
	name string   // the configured user's name or nkey
	ok   bool     // crossed: whether the message was permitted before it crossed
}

type principalKind uint8

const (
	nobody       principalKind = iota
	serverItself               // the server, for itself
	clientUser                 // a client (usr nil: no limits)
	goneUser                   // a user no longer configured (in this account)
	crossed                    // a server-published message that crossed into another account, or from a peer
)

// ServerPrincipal is the server acting for itself, in the account of the
// Publisher that acts for it.
var ServerPrincipal = Principal{kind: serverItself}

// User returns the name (or nkey) of the user the principal stands for,
// "" for the server, an anonymous client or a token's.
func (p Principal) User() string { return p.name }

// Account returns the account the principal acts in: nil for nobody and
// for the server itself.
func (p Principal) Account() *Account { return p.acc }

// CanPublish reports whether the principal may publish on the literal
// subject subj.
func (p Principal) CanPublish(subj string) bool {
	switch p.kind {
	case serverItself:
		return true
	case clientUser:
		return p.usr == nil || p.usr.perms == nil || p.usr.perms.canPublish(subj)
	}
	return false
}

// PrincipalOf is GlobalAccount().PrincipalOf.
func (s *Server) PrincipalOf(user string) Principal { return s.gacc.PrincipalOf(user) }

// PrincipalOf returns the principal of a user of this account recorded
// earlier by name (Principal.User), under the server's current
// configuration: a user that is no longer configured in this account,
// while clients must authenticate, may publish nothing.
func (a *Account) PrincipalOf(user string) Principal {
	au := a.srv.auth
	switch {
	case !au.required():
		return Principal{kind: clientUser, acc: a}
	case user == "" && au.token != "" && a == a.srv.gacc:
		return Principal{kind: clientUser, acc: a} // a token has no permissions
	}
	if u := au.users[user]; u != nil && u.acc == a {
		return Principal{kind: clientUser, acc: a, usr: u, name: user}
	}
	if u := au.nkeys[user]; u != nil && u.acc == a {
		return Principal{kind: clientUser, acc: a, usr: u, name: user}
	}
	return Principal{kind: goneUser, acc: a, name: user}
}

// principalIn returns the principal of the client publishing in acc: its
// user's, or, for a connection without a user (an anonymous client, a
// token's, a route), one without limits.
func (c *client) principalIn(acc *Account) Principal {
	u := c.usr.Load()
	if u == nil {
		return Principal{kind: clientUser, acc: acc}
	}
	return Principal{kind: clientUser, acc: u.acc, usr: u, name: u.name}
}

// Internal reports whether the server published m (an internal Publisher
// or an answer published in AfterRead), not a client.
func (m *Msg) Internal() bool { return m.internal }

// Principal returns who m was published by or for: the publishing client,
// or the principal the server's Publisher acted for. Call it only while
// handling m.
func (m *Msg) Principal() Principal {
	if m.internal {
		return m.principal
	}
	return m.pub.principalIn(m.acc)
}

// Permitted reports whether m's principal may publish on m's subject. A
// client's message was checked when it was published; a message the
// server published for a client is checked against that client's
// permissions here; one that crossed from another account was checked
// there, on the subject it had before it crossed.
func (m *Msg) Permitted() bool {
	if !m.internal {
		return true
	}
	return m.principal.permits(m.Subject)
}

// permits reports whether a message the server publishes for p on subj
// is permitted: for a principal that crossed (from another account or
// another server), the verdict it crossed with.
func (p Principal) permits(subj string) bool {
	if p.kind == crossed {
		return p.ok
	}
	return p.CanPublish(subj)
}

// routed returns the principal of a server's message a peer sent (IMSG):
// its client is on the peer, where it was judged, permitted or not.
func routed(acc *Account, permitted bool) Principal {
	return Principal{kind: crossed, acc: acc, ok: permitted}
}

// crossed returns the principal a server-published message acts for once
// it crosses into account to, having been published on src: whether p
// may publish on src (for a principal that crossed already, whether it
// could where it started).
func (p Principal) crossed(to *Account, src string) Principal {
	ok := p.ok
	if p.kind != crossed {
		ok = p.CanPublish(src)
	}
	return Principal{kind: crossed, acc: to, name: p.name, ok: ok}
}

// ActFor makes the publisher's next messages act for pr (until the next
// ActFor): receivers see them as Internal, with pr's permissions. A new
// Publisher, and the one AfterRead functions get, acts for nobody. A
// principal of another account than the publisher's is refused: the
// publisher then acts for nobody, so that what it publishes fails closed.
// So is, in effect, a crossed principal: that a message was permitted
// where it came from permits nothing else.
func (p *Publisher) ActFor(pr Principal) {
	if pr.acc != nil && pr.acc != p.acc {
		p.c.log.Error("publisher told to act for a principal of another account; acting for nobody",
			"publisher_account", p.acc.name, "principal_account", pr.acc.name, "user", pr.name)
		pr = Principal{}
	}
	pr.ok = false
	p.principal = pr
}
