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

// Principal is who the server acts for when it publishes: a client, with
// its user's publish permissions, or the server itself (ServerPrincipal),
// which may publish anywhere (advisories). The zero Principal is nobody: a
// message published for nobody is delivered to subscribers but is never
// Permitted, so what the server publishes without saying for whom fails
// closed.
type Principal struct {
	kind principalKind
	acct *account // nil: no permission limits
	user string   // the configured user's name or nkey
}

type principalKind uint8

const (
	nobody       principalKind = iota
	serverItself               // the server, for itself
	clientUser                 // a client (acct nil: no limits)
	goneUser                   // a user no longer configured
)

// ServerPrincipal is the server acting for itself.
var ServerPrincipal = Principal{kind: serverItself}

// User returns the name (or nkey) of the user the principal stands for,
// "" for the server, an anonymous client or a token's.
func (p Principal) User() string { return p.user }

// CanPublish reports whether the principal may publish on the literal
// subject subj.
func (p Principal) CanPublish(subj string) bool {
	switch p.kind {
	case serverItself:
		return true
	case clientUser:
		return p.acct == nil || p.acct.perms == nil || p.acct.perms.canPublish(subj)
	}
	return false
}

// PrincipalOf returns the principal of a user recorded earlier by name
// (Principal.User), under the server's current configuration: a user that
// is no longer configured, while clients must authenticate, may publish
// nothing.
func (s *Server) PrincipalOf(user string) Principal {
	a := s.auth
	switch {
	case !a.required():
		return Principal{kind: clientUser}
	case user == "" && a.token != "":
		return Principal{kind: clientUser} // a token has no permissions
	}
	if acct := a.users[user]; acct != nil {
		return Principal{kind: clientUser, acct: acct, user: user}
	}
	if acct := a.nkeys[user]; acct != nil {
		return Principal{kind: clientUser, acct: acct, user: user}
	}
	return Principal{kind: goneUser, user: user}
}

// principal returns the principal of a connected client.
func (c *client) principal() Principal {
	a := c.acct.Load()
	if a == nil {
		return Principal{kind: clientUser}
	}
	return Principal{kind: clientUser, acct: a, user: a.name}
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
	return m.pub.principal()
}

// Permitted reports whether m's principal may publish on m's subject. A
// client's message was checked when it was published; a message the
// server published for a client is checked against that client's
// permissions here.
func (m *Msg) Permitted() bool {
	return !m.internal || m.principal.CanPublish(m.Subject)
}

// ActFor makes the publisher's next messages act for pr (until the next
// ActFor): receivers see them as Internal, with pr's permissions. A new
// Publisher, and the one AfterRead functions get, acts for nobody.
func (p *Publisher) ActFor(pr Principal) { p.principal = pr }
