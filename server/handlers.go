package server

import (
	"encoding/json"
	"time"
	"unsafe"

	"github.com/skiffmq/skiff/internal/proto"
	"github.com/skiffmq/skiff/match"
	"github.com/skiffmq/skiff/subject"
)

// The client is the parser's Handler: these methods run on its read loop.
var _ proto.Handler = (*client)(nil)

// errHeadersNotSupported refuses HPUB from a client that did not ask for
// headers in CONNECT, as the reference server does.
var errHeadersNotSupported = &proto.Error{Text: "message headers not supported", Close: true}

// errBadConnect refuses a CONNECT whose JSON does not parse.
var errBadConnect = &proto.Error{Text: proto.ErrUnknownOp.Text, Close: true, Detail: "CONNECT is not valid JSON"}

// Connect implements proto.Handler.
func (c *client) Connect(arg []byte) error {
	// CONNECT overrides only the keys it has: a client that does not say
	// otherwise stays verbose and pedantic, as in the reference server.
	co := connectOpts{Verbose: true, Pedantic: true}
	if err := json.Unmarshal(arg, &co); err != nil {
		return errBadConnect
	}
	var u *user
	if c.srv.trust != nil {
		var err error
		if u, err = c.checkJWT(&co); err != nil {
			c.log.Warn("authorization violation", "err", err)
			c.srv.sysAuthError(c, &co)
			return proto.ErrAuthorization
		}
	} else {
		var ok bool
		if u, ok = c.srv.auth.check(&co, c.nonce); !ok {
			c.log.Warn("authorization violation", "user", co.User, "nkey", co.Nkey)
			c.srv.sysAuthError(c, &co)
			return proto.ErrAuthorization
		}
	}
	acc := c.srv.gacc
	if u != nil {
		acc = u.acc
	}
	if c.connected && acc != c.acc {
		// Moving a connection and its subscriptions to another namespace
		// is not worth its risks: a second CONNECT stays in the account.
		c.log.Warn("authorization violation: a second CONNECT for another account", "user", co.User, "account", acc.name)
		return proto.ErrAuthorization
	}
	if co.Protocol < 0 || co.Protocol > 1 {
		return proto.ErrInvalidProtocol
	}
	if co.NoResponders && !co.Headers {
		return proto.ErrNoRespNeedHeaders
	}
	if !c.connected {
		if err := c.bind(acc); err != nil {
			return err
		}
	}
	first := !c.connected
	if first {
		c.rtt = max(time.Since(c.start), time.Nanosecond)
	}
	c.maxPay, c.maxSubs = c.srv.limitsFor(acc, u)
	c.parser.SetMaxPayload(c.maxPay)
	c.startJWTExpiry(u)
	c.connected = true
	c.authDone.Store(true)
	c.verbose, c.pedantic = co.Verbose, co.Pedantic
	c.echo = co.Echo == nil || *co.Echo
	c.noResp = co.NoResponders
	c.protocol = co.Protocol
	c.asyncInfo.Store(co.Protocol >= 1)
	c.headers.Store(co.Headers)
	if c.usr.Swap(u) != u {
		c.pubOK = nil // its answers were the previous user's
	}
	c.mu.Lock()
	c.mu.name, c.mu.lang, c.mu.version = co.Name, co.Lang, co.Version
	c.mu.user = ""
	if u != nil {
		c.mu.user = u.name
	}
	c.mu.Unlock()
	c.log.Info("client connected", "name", co.Name, "lang", co.Lang, "version", co.Version, "user", co.User, "account", acc.name)
	if first {
		c.srv.sysConnected(c, acc)
	}
	c.ok()
	return nil
}

// bind makes acc the client's account, unless the account's
// max_connections is reached or its JWT expired.
func (c *client) bind(acc *Account) error {
	c.mu.Lock()
	// Under c.mu, which close takes to find the account to leave: either
	// close sees the binding or the binding sees closed.
	if !c.closed.Load() {
		if !acc.addClient(c) {
			c.mu.Unlock()
			c.log.Warn("maximum account connections exceeded", "account", acc.name, "max_connections", acc.lim().maxConns)
			return proto.ErrMaxAccountConnections
		}
		if acc.jwtExpired() {
			// expireJWT set expired before gathering the account's
			// clients: this one was not gathered, so it must not stay.
			acc.removeClient(c, reasonAuth)
			c.mu.Unlock()
			c.log.Warn("authorization violation: the account JWT expired", "account", acc.name)
			return proto.ErrAuthorization
		}
		c.mu.acc = acc
	}
	c.mu.Unlock()
	c.acc = acc
	return nil
}

// mustConnect refuses operations before CONNECT when auth is required.
func (c *client) mustConnect() error {
	if !c.connected && c.srv.auth.required() {
		return proto.ErrAuthorization
	}
	return nil
}

// ok sends +OK in verbose mode.
func (c *client) ok() {
	if c.verbose {
		c.send(proto.OK)
	}
}

// Pub implements proto.Handler.
func (c *client) Pub(subj, reply []byte, hdr int, msg []byte) error {
	if err := c.mustConnect(); err != nil {
		return err
	}
	if hdr >= 0 && !c.headers.Load() {
		return errHeadersNotSupported
	}
	if hdr == 0 {
		hdr = -1 // an empty header block is no headers, as in the reference server
	}
	c.readMsgs++
	c.readBytes += int64(len(msg))
	s := unsafe.String(unsafe.SliceData(subj), len(subj)) // read-only view for this call
	if c.pedantic && subject.ValidateLiteral(s) != nil {
		// The reference server warns and still delivers.
		c.sendErr(proto.ErrInvalidPubSubject)
	}
	if u := c.usr.Load(); u != nil && u.perms != nil && !c.canPublish(u, s) {
		c.sendErr(proto.PermissionsPublish(subj))
		c.log.Warn("publish permission violation", "subject", s)
		return nil
	}
	c.ok() // before the deliveries, as the reference server does
	c.srv.route(c, c.acc, s, subj, reply, hdr, msg)
	return nil
}

// canPublish answers from a small per-client cache of recent subjects,
// since permission lists are scanned pattern by pattern.
func (c *client) canPublish(a *user, s string) bool {
	if ok, hit := c.pubOK[s]; hit {
		return ok
	}
	ok := a.perms.canPublish(s)
	if len(c.pubOK) >= 128 || c.pubOK == nil {
		c.pubOK = make(map[string]bool, 128)
	}
	c.pubOK[string([]byte(s))] = ok
	return ok
}

// Sub implements proto.Handler.
func (c *client) Sub(subj, queue, sid []byte) error {
	if err := c.mustConnect(); err != nil {
		return err
	}
	pattern, q := string(subj), string(queue)
	if _, err := match.ParsePattern(pattern, q); err != nil {
		c.sendErr(proto.ErrInvalidSubject)
		return nil
	}
	if u := c.usr.Load(); u != nil && u.perms != nil && !u.perms.canSubscribe(pattern) {
		c.sendErr(proto.PermissionsSubscribe(subj, queue))
		c.log.Warn("subscribe permission violation", "subject", pattern)
		return nil
	}
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		return nil
	}
	// The bound is checked before a repeated sid is ignored, as in the
	// reference server.
	if len(c.mu.subs) >= c.maxSubs {
		c.mu.Unlock()
		c.sendErr(proto.ErrMaxSubscriptions)
		c.log.Warn("maximum subscriptions exceeded", "max_subscriptions", c.maxSubs, "account", c.acc.name)
		return nil
	}
	if _, dup := c.mu.subs[string(sid)]; dup {
		c.mu.Unlock()
		c.ok()
		return nil
	}
	sub := &subscription{client: c, acc: c.acc, subject: pattern, queue: q, sid: append([]byte(nil), sid...)}
	c.mu.subs[string(sub.sid)] = sub
	// Indexed under c.mu, so that close, which takes the map under c.mu,
	// either sees this subscription or makes us see closed above.
	c.srv.index(sub)
	c.mu.Unlock()
	c.ok()
	return nil
}

// Unsub implements proto.Handler.
func (c *client) Unsub(sid []byte, max int64) error {
	if err := c.mustConnect(); err != nil {
		return err
	}
	c.mu.Lock()
	sub := c.mu.subs[string(sid)]
	// A maximum counts every delivery so far; setMax arms it under the
	// lock deliveries count under, so none is missed.
	if sub != nil && (max <= 0 || !c.out.setMax(sub, max)) {
		delete(c.mu.subs, string(sid))
		c.srv.unindex(sub)
	}
	c.mu.Unlock()
	c.ok()
	return nil
}

// Ping implements proto.Handler.
func (c *client) Ping() error {
	if err := c.mustConnect(); err != nil {
		return err
	}
	c.send(proto.Pong)
	if c.connected && !c.ponged {
		c.ponged = true
		if c.protocol >= 1 {
			// A client that understands asynchronous INFO learns that its
			// CONNECT was processed, as from the reference server.
			c.send(c.srv.appendConnectInfo(nil, c))
		}
	}
	return nil
}

// Pong implements proto.Handler.
func (c *client) Pong() error {
	if err := c.mustConnect(); err != nil {
		return err
	}
	c.pingsOut.Store(0)
	return nil
}

// removeSub drops a subscription that reached its delivery maximum. Any
// goroutine may call it.
func (c *client) removeSub(sub *subscription) {
	c.mu.Lock()
	if c.mu.subs[string(sub.sid)] == sub {
		delete(c.mu.subs, string(sub.sid))
		c.srv.unindex(sub)
	}
	c.mu.Unlock()
}
