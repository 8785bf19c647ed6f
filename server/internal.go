package server

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/skiffmq/skiff/match"
)

// Internal subscriptions and publishers let a component in the same
// process (the JetStream layer) take part in routing like a client,
// without a connection:
//
//	publisher's read loop                    component goroutine
//	  route(subject) --> internal sub --> handler(m) ... m.AfterRead(f)
//	  end of the read: f(p) runs, then writers wake
//	                                          p := s.NewPublisher(); p.Publish(...)
//
// A handler runs on the goroutine of the connection that published, in the
// middle of routing its read: it must be quick and must not block. Work
// that takes time goes to the component's own goroutines; answers that
// must follow a message (a publish acknowledgement) go in AfterRead, which
// runs once the whole read is routed, so that many messages can share one
// fsync before their acknowledgements.

// InternalHandler receives the messages of an internal subscription.
type InternalHandler func(m *Msg)

// Msg is a message delivered to an internal subscription. Its fields are
// views of the publisher's read buffer, valid only during the handler
// call: copy what must outlive it.
type Msg struct {
	Subject string
	Reply   string
	Header  []byte // nil when the message has no headers
	Data    []byte
	pub     *client
	acc     *Account // the account it is delivered in

	internal  bool      // published by the server (see principal.go)
	principal Principal // who the server published it for, when internal
}

// Account returns the account m is delivered in: that of the
// subscription, and of the publisher.
func (m *Msg) Account() *Account { return m.acc }

// AfterRead runs f on the publisher's goroutine once the read that carried
// m has been routed, before receivers are woken, with a Publisher for
// answers in m's account. For a message from an internal Publisher, f runs
// when that Publisher flushes.
func (m *Msg) AfterRead(f func(p *Publisher)) {
	m.pub.afterRead = append(m.pub.afterRead, afterRead{f: f, acc: m.acc})
}

// afterRead is a function to run at the end of a read, and the account of
// the message that asked for it, which its Publisher publishes in.
type afterRead struct {
	f   func(*Publisher)
	acc *Account
}

// InternalSub is a subscription whose messages go to a Go function.
type InternalSub struct {
	s   *Server
	sub *subscription
}

// ErrClosedSub is returned when unsubscribing twice.
var ErrClosedSub = errors.New("server: subscription already removed")

// SubscribeInternal is GlobalAccount().SubscribeInternal.
func (s *Server) SubscribeInternal(pattern, queue string, h InternalHandler) (*InternalSub, error) {
	return s.gacc.SubscribeInternal(pattern, queue, h)
}

// SubscribeInternal subscribes h to pattern in the account (queue "" for
// a plain subscription; a queue group shares messages with clients'
// members).
func (a *Account) SubscribeInternal(pattern, queue string, h InternalHandler) (*InternalSub, error) {
	return a.subscribeInternal(pattern, queue, h, false)
}

func (a *Account) subscribeInternal(pattern, queue string, h InternalHandler, local bool) (*InternalSub, error) {
	if _, err := match.ParsePattern(pattern, queue); err != nil {
		return nil, err
	}
	s := a.srv
	sub := &subscription{client: s.internalClient, acc: a, subject: pattern, queue: queue, sid: []byte("internal")}
	sub.kind, sub.internal, sub.local = subInternal, h, local
	s.index(sub)
	return &InternalSub{s: s, sub: sub}, nil
}

// SubscribeInternalLocal is SubscribeInternal for a subscription of this
// server alone: its interest is not told to the peers of a cluster, and
// it takes only the messages published on this server (by its clients
// and by the server itself), never one a peer forwards. A clustered
// component whose every server answers the same subjects for its own
// clients (the JetStream API) subscribes so, and each request reaches
// one server only.
func (a *Account) SubscribeInternalLocal(pattern, queue string, h InternalHandler) (*InternalSub, error) {
	return a.subscribeInternal(pattern, queue, h, true)
}

// Unsubscribe removes the subscription.
func (is *InternalSub) Unsubscribe() error {
	if is.sub.removed.Swap(true) {
		return ErrClosedSub
	}
	is.s.unindex(is.sub)
	return nil
}

// Publisher publishes messages from inside the process, routed like a
// client's, in one account. It belongs to one goroutine at a time.
type Publisher struct {
	c         *client
	acc       *Account  // where it publishes
	buf       []byte    // headers and data joined, reused
	principal Principal // who it publishes for (see ActFor)
}

// NewPublisher is GlobalAccount().NewPublisher.
func (s *Server) NewPublisher() *Publisher { return s.gacc.NewPublisher() }

// NewPublisher returns a publisher in the account, for one goroutine.
func (a *Account) NewPublisher() *Publisher {
	return &Publisher{c: a.srv.newInternalClient(a), acc: a}
}

// Publish routes one message. Receivers are woken at the next Flush (or
// at once with PublishNow).
func (p *Publisher) Publish(subject, reply string, hdr, data []byte) {
	msg, h := data, -1
	if hdr != nil {
		p.buf = append(append(p.buf[:0], hdr...), data...)
		msg, h = p.buf, len(hdr)
	}
	p.route(subject, unsafe.Slice(unsafe.StringData(subject), len(subject)), []byte(reply), h, msg)
}

// route routes a message as the server's, acting for p.principal.
func (p *Publisher) route(subject string, as, reply []byte, hdr int, msg []byte) {
	c := p.c
	wasServer, was := c.serverPub, c.actFor
	c.serverPub, c.actFor = true, p.principal
	c.srv.route(c, p.acc, subject, as, reply, hdr, msg)
	c.serverPub, c.actFor = wasServer, was
}

// PublishAs routes a message by subject but presents it to receivers as
// published on as: JetStream hands a stored message to a consumer's inbox
// this way, keeping the subject it was stored under.
func (p *Publisher) PublishAs(subject, as, reply string, hdr, data []byte) {
	msg, h := data, -1
	if hdr != nil {
		p.buf = append(append(p.buf[:0], hdr...), data...)
		msg, h = p.buf, len(hdr)
	}
	p.route(subject, unsafe.Slice(unsafe.StringData(as), len(as)), []byte(reply), h, msg)
}

// PublishNow is Publish followed by Flush.
func (p *Publisher) PublishNow(subject, reply string, hdr, data []byte) {
	p.Publish(subject, reply, hdr, data)
	p.Flush()
}

// Flush runs the AfterRead functions of messages this publisher delivered
// to internal subscriptions, then wakes every receiver it queued for.
func (p *Publisher) Flush() { p.c.endOfRead() }

// newInternalClient returns a connectionless client that publishes for a
// Publisher in acc. It receives nothing.
func (s *Server) newInternalClient(acc *Account) *client {
	c := &client{srv: s, acc: acc, echo: true, internal: true}
	c.headers.Store(true)
	c.log = s.log.With("cid", "internal")
	return c
}

// endOfRead runs after a read (or a Publisher's batch) has been routed: the
// AfterRead functions, then the writers of every receiver.
//
// The answers of a route's read (a PubAck to a peer's client) are this
// server's own messages, not the peer's: they go out through a
// connectionless publisher of the route's, so that they are routed as the
// server's, to peers included, where a message from the route itself goes
// one hop only.
func (c *client) endOfRead() {
	pc := c
	if c.route != nil && len(c.afterRead) > 0 {
		if c.answerer == nil {
			c.answerer = c.srv.newInternalClient(c.srv.gacc)
		}
		pc = c.answerer
	}
	for len(c.afterRead) > 0 {
		// A function may publish and so add more: run until none is left.
		fs := c.afterRead
		c.afterRead = nil
		p := &Publisher{c: pc}
		for _, e := range fs {
			p.acc = e.acc
			p.principal = Principal{} // nobody, unless f says whom it acts for
			e.f(p)
		}
	}
	if pc != c {
		pc.endOfRead()
	}
	c.wakeTargets()
}

// deliverInternal hands a message to an internal subscription's handler.
func (c *client) deliverInternal(sub *subscription, subj string, reply []byte, hdr int, msg []byte) bool {
	if sub.local && c.route != nil {
		return false // published on another server, which handles it there
	}
	m := &c.imsg
	m.Subject, m.Reply, m.pub, m.acc = subj, unsafe.String(unsafe.SliceData(reply), len(reply)), c, sub.acc
	m.internal, m.principal = c.internal || c.serverPub, c.actFor
	if hdr >= 0 {
		m.Header, m.Data = msg[:hdr], msg[hdr:]
	} else {
		m.Header, m.Data = nil, msg
	}
	sub.internal(m)
	*m = Msg{}
	return true
}

// internalFields are the subscription fields of internal subscriptions
// and bridges.
type internalFields struct {
	kind     subKind
	internal InternalHandler // subInternal's
	bridge   *bridge         // a bridge's (imports.go)
	// local marks an internal subscription whose interest is not told to
	// peers and which takes only what is published on this server
	// (SubscribeInternalLocal).
	local   bool
	removed atomic.Bool
}

// HasSubscribers is GlobalAccount().HasSubscribers.
func (s *Server) HasSubscribers(subject string) bool { return s.gacc.HasSubscribers(subject) }

// HasSubscribers reports whether a message published on subject in the
// account would reach any subscription, a client's or an internal one. An
// import that carries the subject to another account counts, whether or
// not anything there takes it.
func (a *Account) HasSubscribers(subject string) bool {
	return a.anySubscription(subject, func(sub *subscription) bool {
		return !sub.removed.Load() && (sub.kind != subClient || !sub.client.closed.Load())
	})
}

// HasInterest is GlobalAccount().HasInterest.
func (s *Server) HasInterest(subject string) bool { return s.gacc.HasInterest(subject) }

// HasInterest reports whether a message published on subject in the
// account would reach a client's subscription (internal subscriptions do
// not count), here or, through imports, in another account.
func (a *Account) HasInterest(subject string) bool { return a.hasInterest(subject, 0) }

func (a *Account) hasInterest(subject string, depth int) bool {
	return a.anySubscription(subject, func(sub *subscription) bool {
		switch sub.kind {
		case subClient:
			return !sub.client.closed.Load()
		case subInternal:
			return false
		}
		return depth < maxBridgeDepth && sub.bridgeInterest(subject, depth)
	})
}

// anySubscription reports whether a subscription matching subject, plain
// or in a queue group, passes ok.
func (a *Account) anySubscription(subject string, ok func(*subscription) bool) bool {
	r := interestResults.Get().(*match.Result[*subscription])
	defer interestResults.Put(r)
	if a.subs.Lookup(subject, r) != nil {
		return false
	}
	for _, sub := range r.Plain {
		if ok(sub) {
			return true
		}
	}
	for i := range r.Groups {
		if slices.ContainsFunc(r.Groups[i].Members, ok) {
			return true
		}
	}
	return false
}

var interestResults = sync.Pool{New: func() any { return new(match.Result[*subscription]) }}

// AdvertiseJetStream makes INFO say that JetStream is available. Call it
// before Start.
func (s *Server) AdvertiseJetStream() { s.jetstream = true }
