package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/skiffmq/skiff/match"
	"github.com/skiffmq/skiff/subject"
)

// A message crosses accounts only through a bridge: a subscription of
// the server's that, when a message reaches it, routes the message again
// in another account (design: docs/accounts.md).
//
//	import             indexed in   on                  routes in
//	stream, B from A   A            the import subject  B, the subject mapped
//	service, B from A  B            the local subject   A, mapped, reply in A's response table
//	response           A            _R_.<server>.>      B, on the requester's reply
//
// Bridges are never told to peers: a message is bridged on the server it
// was published on, and what it becomes there goes to the peers in the
// destination account. A message from a route therefore crosses no stream
// or service bridge; only responses, whose table is on the requester's
// server, come back through a route to cross. A message that came through
// a stream import reaches the importer's own subscriptions and crosses no
// further bridge, as nats-server's shadow subscriptions; service requests
// and responses may cross again, each bridge once on a path and at most
// maxBridgeDepth deep.

// subKind tells what a subscription delivers to.
type subKind uint8

const (
	subClient        subKind = iota // a client's, or a route's (its peer's interest)
	subInternal                     // an InternalHandler
	subStreamImport                 // a bridge of a stream import
	subServiceImport                // a bridge of a service import
	subResponse                     // the bridge of an account's service responses
)

// maxBridgeDepth bounds the bridges one message crosses.
const maxBridgeDepth = 4

// bridge is what a bridge subscription does.
type bridge struct {
	to     *Account           // where it routes (nil for subResponse: each entry says)
	tr     *subject.Transform // nil: the subject stays
	export *Export            // a service's: its response type and threshold
	share  bool               // a service import's Share
	info   []byte             // Nats-Request-Info of a request from the importer, without share
}

// hop is a client's scratch for routing a message again past a bridge:
// the crossing level's lookup results and peers, and the mapped subject
// and message. Depth 0 uses the client's own fields; hops are made on
// first use, so a server without imports allocates none.
type hop struct {
	sub    *subscription // the bridge crossed
	result match.Result[*subscription]
	fwd    forwards
	subj   []byte
	msg    []byte
}

// bridges are the server's bridges of imports and its response tables.
// The bridges are replaced when the imports are resolved again (a JWT
// update, jwt_update.go): a bridge that stays is kept as it is, so that
// a message routed meanwhile crosses an unchanged import exactly once.
type bridges struct {
	// resolve serializes resolving the imports and setting their bridges
	// (resolveJWTImports), so that the last resolved is what is indexed.
	resolve sync.Mutex
	mu      sync.Mutex
	// byKey are the bridges of imports, by bridgeKey.
	byKey map[string]*importBridge
	// tables are the response tables, for the sweeper; a table, once
	// made, is kept.
	tables []*respTable
}

// importBridge is the subscription of one import, and the timer that
// removes it when the activation token that approved it expires.
type importBridge struct {
	sub   *subscription
	timer *time.Timer
}

// setBridges makes the bridges of the imports of ix what is indexed, and
// the exports and imports of its accounts what they report (accounts
// not in ix export and import nothing). An import approved by an
// activation token that expires lasts until then (expireBridge).
func (s *Server) setBridges(ix *importIndex) {
	s.bridges.mu.Lock()
	defer s.bridges.mu.Unlock()
	if s.bridges.byKey == nil {
		s.bridges.byKey = map[string]*importBridge{}
	}
	keep := map[string]bool{}
	add := func(key string, acc *Account, pattern string, kind subKind, b *bridge, until int64, imp, exp, subj string) {
		keep[key] = true
		if _, ok := s.bridges.byKey[key]; ok {
			return
		}
		ib := &importBridge{sub: s.indexBridge(acc, pattern, kind, b)}
		ib.timer = s.expireBridge(ib.sub, until, imp, exp, subj)
		s.bridges.byKey[key] = ib
	}
	inIndex := map[string]bool{}
	for _, name := range ix.order {
		inIndex[name] = true
		acc := s.accounts.lookup(name)
		acc.ports.Store(&accountPorts{exports: ix.exports[name], streams: ix.streams[name], svcs: ix.svcs[name]})
		for _, e := range ix.exports[name] {
			if e.Service {
				s.respTableLocked(acc)
			}
		}
		for _, si := range ix.streams[name] {
			exp := s.accounts.lookup(si.acc)
			key := bridgeKey(subStreamImport, name, si.acc, si.from, si.tr, si.until)
			add(key, exp, si.from, subStreamImport, &bridge{to: acc, tr: si.tr}, si.until, name, si.acc, si.from)
		}
		for _, si := range ix.svcs[name] {
			exp := s.accounts.lookup(si.acc)
			s.respTableLocked(acc)
			s.respTableLocked(exp)
			info, _ := json.Marshal(&requestInfo{Account: acc.name})
			key := bridgeKey(subServiceImport, name, si.acc, si.from, si.tr, si.until) +
				fmt.Sprintf("|%t|%d|%d", si.share, si.export.Response, responseThreshold(si.export))
			add(key, acc, si.from, subServiceImport, &bridge{to: exp, tr: si.tr, export: si.export, share: si.share, info: info},
				si.until, name, si.acc, si.to)
		}
	}
	for _, a := range s.accounts.all() {
		if !inIndex[a.name] && (len(a.ports.Load().exports) > 0 || len(a.ports.Load().streams) > 0 || len(a.ports.Load().svcs) > 0) {
			a.ports.Store(&accountPorts{})
		}
	}
	for key, ib := range s.bridges.byKey {
		if keep[key] {
			continue
		}
		delete(s.bridges.byKey, key)
		if ib.timer != nil {
			ib.timer.Stop()
		}
		if !ib.sub.removed.Swap(true) {
			s.unindex(ib.sub)
		}
	}
}

// bridgeKey names an import's bridge by what it does.
func bridgeKey(kind subKind, imp, exp, from string, tr *subject.Transform, until int64) string {
	to := ""
	if tr != nil {
		to = tr.Source() + ">" + tr.Destination()
	}
	return fmt.Sprintf("%d|%s|%s|%s|%s|%d", kind, imp, exp, from, to, until)
}

// respTableLocked returns a's response table, made (and its bridge
// indexed) on first use. Called with s.bridges.mu held.
func (s *Server) respTableLocked(a *Account) *respTable {
	if t := a.resp.Load(); t != nil {
		return t
	}
	t := newRespTable(a, s.respPrefix)
	// Stored before the bridges that use it are indexed: whoever finds
	// such a bridge finds the table.
	a.resp.Store(t)
	s.bridges.tables = append(s.bridges.tables, t)
	s.indexBridge(a, s.respPrefix+">", subResponse, &bridge{})
	return t
}

// respTable is respTableLocked for a caller without s.bridges.mu.
func (s *Server) respTable(a *Account) *respTable {
	s.bridges.mu.Lock()
	defer s.bridges.mu.Unlock()
	return s.respTableLocked(a)
}

// respTables returns the response tables, for the sweeper.
func (s *Server) respTables() []*respTable {
	s.bridges.mu.Lock()
	defer s.bridges.mu.Unlock()
	return slices.Clone(s.bridges.tables)
}

func (s *Server) indexBridge(acc *Account, pattern string, kind subKind, b *bridge) *subscription {
	sub := &subscription{client: s.internalClient, acc: acc, subject: pattern, sid: []byte(kind.String())}
	sub.kind, sub.bridge = kind, b
	s.index(sub)
	return sub
}

// expireBridge returns a timer that removes the bridge sub of account
// imp's import of subj from account exp at until (unix seconds; 0: never,
// and no timer), when the activation token that approved it expires, as
// nats-server invalidates the import then. setBridges stops it if the
// import goes before, and Shutdown stops them all.
func (s *Server) expireBridge(sub *subscription, until int64, imp, exp, subj string) *time.Timer {
	if until == 0 {
		return nil
	}
	return time.AfterFunc(untilUnix(until, time.Now()), func() {
		if sub.removed.Swap(true) {
			return
		}
		s.unindex(sub)
		s.log.Info("import's activation token expired: import removed", "account", imp, "from", exp, "subject", subj, "kind", sub.kind.String())
	})
}

// stopBridgeTimers stops the activation expiry timers (Shutdown).
func (s *Server) stopBridgeTimers() {
	s.bridges.mu.Lock()
	defer s.bridges.mu.Unlock()
	for _, ib := range s.bridges.byKey {
		if ib.timer != nil {
			ib.timer.Stop()
		}
	}
}

func (k subKind) String() string {
	switch k {
	case subStreamImport:
		return "stream import"
	case subServiceImport:
		return "service import"
	case subResponse:
		return "service responses"
	case subInternal:
		return "internal"
	}
	return "client"
}

// toldToPeers reports whether peers hear of the subscription: not a
// route's (one hop), nor a stream or service bridge (bridged where the
// message is published).
func (sub *subscription) toldToPeers() bool {
	return sub.client.route == nil && sub.kind != subStreamImport && sub.kind != subServiceImport && !sub.local
}

// deliverSpecial delivers to a subscription that is not a client's.
func (c *client) deliverSpecial(sub *subscription, subj string, subjBytes, reply []byte, hdr int, msg []byte) bool {
	if sub.kind == subInternal {
		return c.deliverInternal(sub, subj, reply, hdr, msg)
	}
	if sub.removed.Load() {
		return false // an import whose activation expired while the message was routed
	}
	if c.depth == 0 {
		if c.route != nil && sub.kind != subResponse {
			return false // the publisher's server bridged it
		}
	} else if c.hops[c.depth-1].sub.kind == subStreamImport || !c.mayCross(sub) {
		return false
	}
	h := c.pushHop(sub)
	defer c.popHop(h)
	// A message presented under another subject than it is routed by (a
	// JetStream delivery) keeps that subject across.
	as := subjBytes
	if string(subjBytes) == subj {
		as = nil
	}
	b := sub.bridge
	switch sub.kind {
	case subStreamImport:
		to, ok := h.mapped(b, subj)
		return ok && c.routeAcross(b.to, subj, to, as, reply, hdr, msg)
	case subServiceImport:
		return c.request(h, sub, subj, as, reply, hdr, msg)
	case subResponse:
		return c.respond(sub.acc.resp.Load(), subj, reply, hdr, msg)
	}
	return false
}

// mayCross reports whether a message that already crossed a bridge may
// cross sub too: not past maxBridgeDepth, and not twice the same bridge
// (a loop of imports).
func (c *client) mayCross(sub *subscription) bool {
	if int(c.depth) >= maxBridgeDepth {
		c.srv.stats.bridgeDrops.Add(1)
		return false
	}
	for _, h := range c.hops[:c.depth] {
		if h.sub == sub {
			c.srv.stats.bridgeDrops.Add(1)
			return false
		}
	}
	return true
}

// pushHop enters the crossing level of sub: its scratch replaces the
// client's lookup results and peers until popHop.
func (c *client) pushHop(sub *subscription) *hop {
	if int(c.depth) == len(c.hops) {
		c.hops = append(c.hops, &hop{})
	}
	h := c.hops[c.depth]
	h.sub = sub
	c.result, h.result = h.result, c.result
	c.fwd, h.fwd = h.fwd, c.fwd
	c.depth++
	return h
}

func (c *client) popHop(h *hop) {
	c.depth--
	c.result, h.result = h.result, c.result
	c.fwd, h.fwd = h.fwd, c.fwd
	h.sub = nil
}

// mapped returns subj mapped by the bridge's transform, in the hop's
// buffer, and false if it does not match (the index matched a subject
// the transform refuses, which cannot happen for a valid import).
func (h *hop) mapped(b *bridge, subj string) (string, bool) {
	if b.tr == nil {
		return subj, true
	}
	var ok bool
	if h.subj, ok = b.tr.Append(h.subj[:0], subj); !ok {
		return "", false
	}
	return unsafe.String(unsafe.SliceData(h.subj), len(h.subj)), true
}

// routeAcross routes the message in account to on subj (presented as as,
// if set). A message the server published acts there for a crossed
// principal: whether its principal may publish on src, the subject before
// crossing, in its own account (principal.go).
func (c *client) routeAcross(to *Account, src, subj string, as, reply []byte, hdr int, msg []byte) bool {
	if as == nil {
		as = unsafe.Slice(unsafe.StringData(subj), len(subj))
	}
	if !c.internal && !c.serverPub {
		return c.srv.route(c, to, subj, as, reply, hdr, msg)
	}
	was := c.actFor
	c.actFor = was.crossed(to, src)
	ok := c.srv.route(c, to, subj, as, reply, hdr, msg)
	c.actFor = was
	return ok
}

// request carries a request across a service import into the exporting
// account: mapped, with a reply of the exporter's response table and the
// Nats-Request-Info header.
func (c *client) request(h *hop, sub *subscription, subj string, as, reply []byte, hdr int, msg []byte) bool {
	b := sub.bridge
	to, ok := h.mapped(b, subj)
	if !ok {
		return false
	}
	var e *respEntry
	var reply2 []byte
	if len(reply) > 0 {
		e = b.to.resp.Load().add(sub.acc, reply, c.asker(sub.acc), b.export.Response, b.share, responseThreshold(b.export))
		reply2 = unsafe.Slice(unsafe.StringData(e.key), len(e.key))
	}
	msg, hdr = c.withRequestInfo(h, sub, hdr, msg)
	delivered := c.routeAcross(b.to, subj, to, as, reply2, hdr, msg)
	if !delivered && e != nil {
		b.to.resp.Load().remove(e) // nobody took the request: no response can come
	}
	return delivered
}

// asker returns who a message with a reply, published in acc, asks for:
// whom the answers act for once they come back. A message the server
// published asks for the principal it acts for; one from a route for
// nobody, since its user is on the peer and cannot be judged here.
func (c *client) asker(acc *Account) Principal {
	switch {
	case c.route != nil:
		return Principal{} // a peer's client, or a peer's server for one
	case c.internal || c.serverPub:
		return c.actFor
	}
	return c.principalIn(acc)
}

func responseThreshold(e *Export) time.Duration {
	if e.Threshold > 0 {
		return e.Threshold
	}
	return DefaultResponseThreshold
}

// respond carries a response back to the requester's account, on its
// reply subject. The response acts there for the requester, whose
// principal the entry holds: the responder's account cannot make the
// server do more in the requester's account than the requester could. A
// response that has a reply subject of its own gets one of the
// requester's account's table, so that the requester can answer it.
func (c *client) respond(t *respTable, subj string, reply []byte, hdr int, msg []byte) bool {
	e := t.take(subj)
	if e == nil {
		return false // answered already, expired, or never asked
	}
	var back *respEntry
	var reply2 []byte
	if t2 := e.to.resp.Load(); len(reply) > 0 && t2 != nil {
		back = t2.add(t.acc, reply, c.asker(t.acc), e.rt, e.share, e.threshold)
		reply2 = unsafe.Slice(unsafe.StringData(back.key), len(back.key))
	}
	wasServer, was := c.serverPub, c.actFor
	c.serverPub, c.actFor = true, e.pr
	delivered := c.srv.route(c, e.to, e.reply, unsafe.Slice(unsafe.StringData(e.reply), len(e.reply)), reply2, hdr, msg)
	c.serverPub, c.actFor = wasServer, was
	if !delivered && back != nil {
		e.to.resp.Load().remove(back)
	}
	if e.rt != Singleton {
		if !delivered || (hdr <= 0 && len(msg) == 0) {
			t.remove(e) // nobody listens, or the empty message that ends it
		} else {
			t.delivered(e)
		}
	}
	return delivered
}

// RequestInfoHeader is the header a request carries across a service
// import: the requester's account, and with share its details, as
// nats-server's ClientInfo JSON.
const RequestInfoHeader = "Nats-Request-Info"

// requestInfo is nats-server's ClientInfo as a Nats-Request-Info header
// carries it, in its field order.
type requestInfo struct {
	Start      *time.Time `json:"start,omitempty"`
	Host       string     `json:"host,omitempty"`
	ID         uint64     `json:"id,omitempty"`
	Account    string     `json:"acc,omitempty"`
	Service    string     `json:"svc,omitempty"`
	User       string     `json:"user,omitempty"`
	Name       string     `json:"name,omitempty"`
	Lang       string     `json:"lang,omitempty"`
	Version    string     `json:"ver,omitempty"`
	RTT        int64      `json:"rtt,omitempty"`
	Server     string     `json:"server,omitempty"`
	Cluster    string     `json:"cluster,omitempty"`
	Jwt        string     `json:"jwt,omitempty"`
	IssuerKey  string     `json:"issuer_key,omitempty"`
	Kind       string     `json:"kind,omitempty"`
	ClientType string     `json:"client_type,omitempty"`
	Reply      string     `json:"reply,omitempty"`
}

// withRequestInfo returns the message with its Nats-Request-Info header
// set (replacing one it had), built in the hop's buffer. The first service
// import a request crosses says who sent it; a later one, in a chain of
// imports, keeps that and names the account it passes through (svc), as
// nats-server does.
func (c *client) withRequestInfo(h *hop, sub *subscription, hdr int, msg []byte) ([]byte, int) {
	b := sub.bridge
	var info []byte
	prev := c.previousRequestHop()
	switch {
	case prev != nil:
		var ri requestInfo
		if hdr > 0 {
			_ = json.Unmarshal(headerValue(msg[:hdr], RequestInfoHeader), &ri)
		}
		if ri.Account == "" {
			ri = c.requestInfo(sub.acc, false)
		}
		ri.Service = sub.acc.name
		if !prev.bridge.share && b.share {
			ri.Server, ri.Cluster = c.srv.name, c.srv.clusterName()
		}
		info, _ = json.Marshal(&ri)
	case b.share:
		ri := c.requestInfo(sub.acc, true)
		info, _ = json.Marshal(&ri)
	case c.rtt == 0:
		info = b.info
	default:
		ri := c.requestInfo(sub.acc, false)
		info, _ = json.Marshal(&ri)
	}
	out := h.msg[:0]
	if hdr > 0 {
		out = appendHeaderWithout(out, msg[:hdr], RequestInfoHeader)
	} else {
		out = append(out, "NATS/1.0\r\n"...)
	}
	out = append(out, RequestInfoHeader+": "...)
	out = append(out, info...)
	out = append(out, "\r\n\r\n"...)
	n := len(out)
	if hdr > 0 {
		out = append(out, msg[hdr:]...)
	} else {
		out = append(out, msg...)
	}
	h.msg = out
	return out, n
}

// previousRequestHop returns the service import an earlier hop of the
// message being routed crossed, or nil.
func (c *client) previousRequestHop() *subscription {
	for i := int(c.depth) - 2; i >= 0; i-- {
		if sub := c.hops[i].sub; sub.kind == subServiceImport {
			return sub
		}
	}
	return nil
}

// requestInfo describes the client as a requester in acc; detailed adds
// what share gives a responder.
func (c *client) requestInfo(acc *Account, detailed bool) requestInfo {
	ri := requestInfo{Account: acc.name, RTT: int64(c.rtt)}
	if !detailed || c.internal {
		return ri
	}
	s := c.srv
	start := c.start
	ri.Start, ri.Host, ri.ID = &start, c.ip, c.cid
	ri.Server, ri.Cluster, ri.Kind, ri.ClientType = s.name, s.clusterName(), "Client", "nats"
	if c.ws {
		ri.ClientType = "websocket"
	}
	u := c.usr.Load()
	switch {
	case u != nil:
		ri.User = u.name
		if u.nkey {
			ri.IssuerKey = u.acc.name // as nats-server names a configured nkey user's issuer
		}
	case s.auth.token != "":
		ri.User = "[REDACTED]"
	}
	c.mu.Lock()
	ri.Name, ri.Lang, ri.Version = c.mu.name, c.mu.lang, c.mu.version
	c.mu.Unlock()
	return ri
}

// clusterName returns the cluster's name, "" without one.
func (s *Server) clusterName() string {
	if s.cluster == nil {
		return ""
	}
	return s.opts.Cluster.Name
}

// headerValue returns the value of the header key in a NATS header block,
// or nil.
func headerValue(hdr []byte, key string) []byte {
	for line := range bytes.SplitSeq(hdr, []byte("\r\n")) {
		if k, v, ok := bytes.Cut(line, []byte(":")); ok && string(k) == key {
			return bytes.TrimSpace(v)
		}
	}
	return nil
}

// appendHeaderWithout appends a header block without its final blank
// line and without the lines of key.
func appendHeaderWithout(dst, hdr []byte, key string) []byte {
	hdr = bytes.TrimSuffix(hdr, []byte("\r\n"))
	for len(hdr) > 0 {
		line, rest, _ := bytes.Cut(hdr, []byte("\r\n"))
		if k, _, ok := bytes.Cut(line, []byte(":")); !ok || string(k) != key {
			dst = append(append(dst, line...), "\r\n"...)
		}
		hdr = rest
	}
	return dst
}

// bridgeInterest reports whether a message on subj reaching the bridge
// would reach a client's subscription where the bridge takes it.
func (sub *subscription) bridgeInterest(subj string, depth int) bool {
	b := sub.bridge
	switch sub.kind {
	case subResponse:
		t := sub.acc.resp.Load()
		t.mu.Lock()
		e := t.mu.m[subj]
		t.mu.Unlock()
		return e != nil && e.to.hasInterest(e.reply, depth+1)
	case subStreamImport:
		// What crossed a stream import reaches the importer's own
		// subscriptions only.
		to := subj
		if b.tr != nil {
			to, _ = b.tr.Map(subj)
		}
		return b.to.anySubscription(to, func(s *subscription) bool {
			return s.kind == subClient && !s.client.closed.Load()
		})
	}
	to := subj
	if b.tr != nil {
		to, _ = b.tr.Map(subj)
	}
	return b.to.hasInterest(to, depth+1)
}
