package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/skiffmq/skiff/internal/logthrottle"
	"github.com/skiffmq/skiff/internal/proto"
	"github.com/skiffmq/skiff/match"
)

// route is what a route connection has beyond a client's. It is the route
// parser's handler: its methods run on the connection's read loop.
type route struct {
	c          *client
	cl         *cluster
	solicited  bool     // this server dialed
	configured bool     // ... a configured URL
	dialed     string   // the host:port dialed, if solicited
	dialURL    *url.URL // ... and the URL, with its credentials
	start      time.Time

	// read loop
	connectOK  bool     // an accepted route's CONNECT was accepted
	registered bool     // the peer's INFO was accepted
	queues     [][]byte // the queue groups of the message being routed
	lastAcc    *Account // the account of the last RMSG: a run of messages is often one account's

	// unknownAccount counts the RS+, RS- and RMSG the peer sent for an
	// account this server does not have, which are dropped (the two
	// servers' accounts differ); unknownLog logs them, throttled.
	unknownAccount atomic.Int64
	unknownLog     logthrottle.Throttle

	// retiring and retired are set on a duplicate route that lost
	// (retire); retired under c.mu.
	retiring, retired atomic.Bool

	// Set at registration and by the peer's INFO updates, under cl.mu.
	remoteID, remoteName string
	remoteHost           string   // the peer's route host:port
	tags                 []string // the peer's server_tags
	clientURLs           []string
	ldm                  bool

	pings pings // PINGs sent, PONGs read: FlushRoute
}

var _ proto.RouteHandler = (*route)(nil)

// routeInfo is the INFO servers exchange on a route.
type routeInfo struct {
	ServerID     string `json:"server_id"`
	ServerName   string `json:"server_name"`
	Version      string `json:"version"`
	Cluster      string `json:"cluster"`
	Host         string `json:"host"` // the route listener, as peers dial it
	Port         int    `json:"port"`
	AuthRequired bool   `json:"auth_required,omitempty"`
	Headers      bool   `json:"headers"`
	MaxPayload   int    `json:"max_payload"`
	// ConnectURLs are the sender's client host:ports, for clients'
	// connect_urls (none with no_advertise).
	ConnectURLs []string `json:"connect_urls,omitempty"`
	// Peers are the servers the sender has routes to: the gossip that
	// completes the mesh.
	Peers        []routePeer `json:"peers,omitempty"`
	LameDuckMode bool        `json:"ldm,omitempty"`
	// Tags are the sender's server_tags (Skiff's: nats-server's routes
	// carry none), for JetStream's placement.
	Tags []string `json:"tags,omitempty"`
}

type routePeer struct {
	ID  string `json:"id"`
	URL string `json:"url"` // host:port of its route listener
}

// routeConnect is the CONNECT a dialing server sends.
type routeConnect struct {
	User     string `json:"user,omitempty"`
	Pass     string `json:"pass,omitempty"`
	ServerID string `json:"server_id"`
	Name     string `json:"name"`
	Cluster  string `json:"cluster"`
	Headers  bool   `json:"headers"`
	// Raft marks a raft link's CONNECT (raftlink.go), and Meta is its
	// RaftHello.Meta.
	Raft bool   `json:"raft,omitempty"`
	Meta string `json:"meta,omitempty"`
}

// Route protocol errors. errRouteDone stops the read of a route already
// closed, sending nothing.
var (
	errRouteDone     = &proto.Error{Close: true, Detail: "route closed"}
	errRouteBadInfo  = &proto.Error{Text: "Invalid Route INFO", Close: true}
	errRouteConnect  = &proto.Error{Text: "Unexpected Route CONNECT", Close: true}
	errRouteSubject  = &proto.Error{Text: "Invalid Subject", Close: true}
	errRouteNotReady = proto.ErrAuthorization
	errRouteAuth     = errors.New("Authorization Violation") //nolint:staticcheck // the protocol's text
)

// appendInfo appends this server's route INFO; with peers, the routes it
// has (sent once a route is registered, not to an unauthenticated peer).
func (cl *cluster) appendInfo(dst []byte, peers bool) []byte {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.appendInfoLocked(dst, peers)
}

func (cl *cluster) appendInfoLocked(dst []byte, peers bool) []byte {
	s := cl.s
	host, portText, _ := net.SplitHostPort(cl.routeHost)
	port, _ := strconv.Atoi(portText)
	in := routeInfo{
		ServerID: s.id, ServerName: s.name, Version: Version, Cluster: cl.opts.Name,
		Host: host, Port: port, AuthRequired: cl.opts.Username != "",
		Headers: true, MaxPayload: s.opts.MaxPayload, LameDuckMode: cl.mu.lameDuck, Tags: s.opts.Tags,
	}
	if !cl.opts.NoAdvertise && !cl.mu.lameDuck {
		in.ConnectURLs = []string{cl.clientURL}
	}
	if peers {
		for id, rc := range cl.mu.routes {
			in.Peers = append(in.Peers, routePeer{ID: id, URL: rc.route.remoteHost})
		}
	}
	b, err := json.Marshal(&in)
	if err != nil {
		panic("server: route INFO does not marshal: " + err.Error()) // a fixed struct
	}
	dst = append(dst, "INFO "...)
	dst = append(dst, b...)
	return append(dst, "\r\n"...)
}

// appendConnect appends the CONNECT a dialing server sends: the URL's
// credentials, or the cluster's own.
func (r *route) appendConnect(dst []byte, u *url.URL) []byte {
	cl := r.cl
	co := routeConnect{ServerID: cl.s.id, Name: cl.s.name, Cluster: cl.opts.Name, Headers: true,
		User: cl.opts.Username, Pass: cl.opts.Password}
	if u.User != nil {
		co.User = u.User.Username()
		co.Pass, _ = u.User.Password()
	}
	b, err := json.Marshal(&co)
	if err != nil {
		panic("server: route CONNECT does not marshal: " + err.Error())
	}
	dst = append(dst, "CONNECT "...)
	dst = append(dst, b...)
	return append(dst, "\r\n"...)
}

// Connect implements proto.RouteHandler: an accepted route's credentials
// and cluster name.
func (r *route) Connect(arg []byte) error {
	if r.solicited || r.connectOK {
		return errRouteConnect
	}
	var co routeConnect
	if err := json.Unmarshal(arg, &co); err != nil || co.Raft {
		return errBadConnect
	}
	switch err := r.cl.checkConnect(&co); {
	case errors.Is(err, errRouteAuth):
		r.c.log.Warn("route authorization violation", "user", co.User, "remote_id", co.ServerID)
		return proto.ErrAuthorization
	case err != nil:
		r.c.log.Warn("route from another cluster refused", "cluster", co.Cluster, "want", r.cl.opts.Name)
		return &proto.Error{Text: err.Error(), Close: true}
	}
	r.connectOK = true
	return nil
}

// Info implements proto.RouteHandler: the first INFO registers the route,
// later ones update what the peer advertises.
func (r *route) Info(arg []byte) error {
	var in routeInfo
	if err := json.Unmarshal(arg, &in); err != nil || in.ServerID == "" {
		return errRouteBadInfo
	}
	if !r.registered {
		return r.register(&in)
	}
	cl := r.cl
	cl.mu.Lock()
	r.clientURLs, r.ldm, r.tags = in.ConnectURLs, in.LameDuckMode, in.Tags
	changed := cl.updateConnectURLsLocked()
	cl.mu.Unlock()
	if changed {
		cl.s.sendClientsInfo()
	}
	cl.learnPeers(in.Peers)
	return nil
}

// register makes the route the one to its peer, unless it is a route to
// this server itself or a duplicate that loses to the one already there.
// Registered, it gets all the local interest, and every route hears the
// new list of peers.
func (r *route) register(in *routeInfo) error {
	c, cl, s := r.c, r.cl, r.cl.s
	if !r.solicited && !r.connectOK {
		return proto.ErrAuthorization
	}
	if in.ServerID == s.id {
		cl.mu.Lock()
		if r.dialed != "" {
			cl.mu.selfURLs[r.dialed] = true
		}
		cl.mu.Unlock()
		c.log.Debug("route to this server dropped")
		c.close(reasonSelfRoute, false)
		return errRouteDone
	}
	if r.solicited && in.Cluster != cl.opts.Name {
		c.log.Warn("route to another cluster refused", "cluster", in.Cluster, "want", cl.opts.Name)
		c.close(reasonRouteRefused, false)
		return errRouteDone
	}
	cl.mu.Lock()
	if cl.mu.closed {
		cl.mu.Unlock()
		return errRouteDone
	}
	r.remoteID, r.remoteName = in.ServerID, in.ServerName
	r.remoteHost = net.JoinHostPort(in.Host, strconv.Itoa(in.Port))
	r.clientURLs, r.ldm = in.ConnectURLs, in.LameDuckMode
	r.registered = true
	c.authDone.Store(true)
	if r.dialed != "" {
		// The URL leads to that server, whichever route is kept.
		cl.mu.urlIDs[r.dialed] = in.ServerID
	}
	var loser *client
	if old := cl.mu.routes[in.ServerID]; old != nil && old != c {
		if !r.preferredOver(old.route) {
			cl.mu.Unlock()
			r.retire()
			return nil
		}
		loser = old
	}
	cl.mu.routes[in.ServerID] = c
	// Under cl.mu, so that no interest change falls between the dump and
	// the route joining the set that hears changes.
	dumped := c.out.queue(cl.appendInterestLocked(nil))
	info := cl.appendInfoLocked(nil, true)
	for _, rc := range cl.mu.routes {
		if rc.out.queue(info) {
			rc.out.wake()
		}
	}
	changed := cl.updateConnectURLsLocked()
	cl.mu.Unlock()

	c.authDone.Store(true)
	c.log.Info("route registered", "remote_id", in.ServerID, "remote_name", in.ServerName,
		"solicited", r.solicited, "remote", r.remoteHost)
	if loser != nil {
		loser.route.retire()
	}
	if !dumped {
		c.slowConsumer()
		return errRouteDone
	}
	if changed {
		s.sendClientsInfo()
	}
	cl.routesChanged()
	cl.learnPeers(in.Peers)
	return nil
}

// preferredOver reports whether r should replace old, another registered
// route to the same peer. Both servers decide alike, whatever the order
// they registered the two in: the route dialed by the server with the
// lower ID wins, and between two dialed by the same server, the one from
// the lower port of the dialer.
func (r *route) preferredOver(old *route) bool {
	self := r.cl.s.id
	dialer := func(x *route) string {
		if x.solicited {
			return self
		}
		return x.remoteID
	}
	if dr, do := dialer(r), dialer(old); dr != do {
		return dr == min(self, r.remoteID)
	}
	return r.dialerPort() < old.dialerPort()
}

// dialerPort is the port the dialing side of the route's connection uses.
func (r *route) dialerPort() int {
	a := r.c.conn.RemoteAddr()
	if r.solicited {
		a = r.c.conn.LocalAddr()
	}
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.Port
	}
	return 0
}

// retire winds down a duplicate route that lost, without losing what is
// on the wire: nothing more is forwarded on it (its peer's interest
// leaves the index; the route that won has it too), what is queued is
// written, then its write side closes. The peer, which retired it as well,
// does the same, so each side reads the other's last messages up to the
// end of the stream and then closes.
func (r *route) retire() {
	c := r.c
	if !r.retiring.CompareAndSwap(false, true) {
		return
	}
	c.log.Debug("duplicate route retired", "remote_id", r.remoteID)
	c.mu.Lock()
	r.retired.Store(true)
	subs := c.mu.subs
	c.mu.subs = map[string]*subscription{}
	c.mu.Unlock()
	for _, sub := range subs {
		c.srv.unindex(sub)
	}
	s := c.srv
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		deadline := time.Now().Add(routeDrainTime)
		for c.out.pending() > 0 && !c.closed.Load() && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if cw, ok := c.conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		select {
		case <-c.readDone:
		case <-time.After(time.Until(deadline)):
		case <-s.closing:
		}
		c.close(reasonDuplicateRoute, false)
	}()
}

// learnPeers dials the peers a route's INFO lists that this server has no
// route to.
func (cl *cluster) learnPeers(peers []routePeer) {
	for _, p := range peers {
		if p.ID == cl.s.id || p.URL == "" {
			continue
		}
		cl.mu.Lock()
		known := cl.mu.routes[p.ID] != nil
		cl.mu.Unlock()
		if known {
			continue
		}
		u, err := ParseRouteURL(p.URL)
		if err != nil {
			cl.s.log.Warn("peer gossiped a bad route URL", "url", p.URL, "err", err)
			continue
		}
		// Of two servers that learn of each other, the one with the lower
		// ID dials, so that they do not dial each other at once; the other
		// dials only if no route came after a while.
		var delay time.Duration
		if cl.s.id > p.ID {
			delay = routeGossipFallback
		}
		cl.startSolicit(u, false, p.ID, delay)
	}
}

// RouteSub implements proto.RouteHandler: the peer's interest becomes a
// subscription of the route in the index (one per subject and queue; for
// a queue group already known, only its weight changes). MaxSubscriptions
// bounds a client, not a route, as in nats-server: a peer's interest is
// its clients' together.
func (r *route) RouteSub(account, subj, queue []byte, weight int) error {
	c := r.c
	if !r.registered {
		return errRouteNotReady
	}
	acc := c.srv.routeAccount(account)
	if acc == nil {
		r.unknown("RS+", account)
		return nil
	}
	pattern, q := string(subj), string(queue)
	if _, err := match.ParsePattern(pattern, q); err != nil {
		return &proto.Error{Text: errRouteSubject.Text, Close: true, Detail: fmt.Sprintf("RS+ %q: %v", pattern, err)}
	}
	key := routeSubKey(acc.name, pattern, q)
	c.mu.Lock()
	defer c.mu.Unlock()
	// Checked under c.mu, which retire and close take to empty the map:
	// a retired or closed route forwards nothing.
	if c.closed.Load() || r.retired.Load() {
		return nil
	}
	weight = min(max(weight, 1), 1<<31-1)
	if sub, ok := c.mu.subs[key]; ok {
		sub.weight.Store(int32(weight))
		return nil
	}
	sub := &subscription{client: c, acc: acc, subject: pattern, queue: q, sid: []byte(key)}
	sub.weight.Store(int32(weight))
	c.mu.subs[key] = sub
	c.srv.index(sub)
	return nil
}

// RouteUnsub implements proto.RouteHandler.
func (r *route) RouteUnsub(account, subj, queue []byte) error {
	c := r.c
	if !r.registered {
		return errRouteNotReady
	}
	if c.srv.routeAccount(account) == nil {
		r.unknown("RS-", account)
		return nil
	}
	key := routeSubKey(string(account), string(subj), string(queue))
	c.mu.Lock()
	if sub := c.mu.subs[key]; sub != nil {
		delete(c.mu.subs, key)
		c.srv.unindex(sub)
	}
	c.mu.Unlock()
	return nil
}

// RouteMsg implements proto.RouteHandler: a message from the peer goes to
// local subscribers only (one hop), and to one member of each queue group
// the peer chose this server for.
func (r *route) RouteMsg(m *proto.RouteMsg) error {
	c := r.c
	if !r.registered {
		return errRouteNotReady
	}
	c.readMsgs++
	c.readBytes += int64(len(m.Msg))
	acc := r.lastAcc
	if acc == nil || string(m.Account) != acc.name {
		if acc = c.srv.routeAccount(m.Account); acc == nil {
			r.unknown("RMSG", m.Account)
			return nil
		}
		r.lastAcc = acc
	}
	hdr := m.Hdr
	if hdr == 0 {
		hdr = -1
	}
	r.queues = m.Queues
	subj := unsafe.String(unsafe.SliceData(m.Subject), len(m.Subject))
	// A JetStream delivery (a server's message) presents the subject its
	// message was stored under, encoded in its reply by the peer
	// (jsDeliveryReply). A client's reply is never read so.
	as, reply := []byte(nil), m.Reply
	if m.Internal {
		as, reply = splitDeliveryReply(m.Reply)
	}
	if as == nil {
		as = m.Subject
	}
	if m.Internal {
		// The peer's server published it, for a client of its own: the
		// same to receivers here as to the peer's (principal.go).
		c.serverPub, c.actFor = true, routed(acc, m.Permitted)
		c.srv.route(c, acc, subj, as, reply, hdr, m.Msg)
		c.serverPub, c.actFor = false, Principal{}
	} else {
		c.srv.route(c, acc, subj, as, reply, hdr, m.Msg)
	}
	r.queues = nil
	return nil
}

// routeSubKey is the key of a peer's interest in the route's
// subscriptions: account names and subjects hold no spaces.
func routeSubKey(account, subject, queue string) string {
	return account + " " + subject + " " + queue
}

// unknown counts and logs (throttled) an operation for an account this
// server does not have: it is dropped. Peers whose configurations list
// different accounts send them.
func (r *route) unknown(op string, account []byte) {
	r.unknownAccount.Add(1)
	r.unknownLog.Log(r.c.log, slog.LevelWarn, "route operation for an unknown account dropped",
		"op", op, "account", string(account), "remote_id", r.remoteID)
}

// wantsQueue reports whether the message being routed from the peer is
// for queue group q here.
func (r *route) wantsQueue(q string) bool {
	for _, name := range r.queues {
		if string(name) == q {
			return true
		}
	}
	return false
}

// Ping implements proto.RouteHandler.
func (r *route) Ping() error {
	r.c.send(proto.Pong)
	return nil
}

// Pong implements proto.RouteHandler.
func (r *route) Pong() error {
	r.c.pingsOut.Store(0)
	r.pings.pong()
	return nil
}

// Err implements proto.RouteHandler: the peer is closing the route.
func (r *route) Err(text []byte) error {
	r.c.log.Warn("route error from peer", "err", string(text))
	return &proto.Error{Close: true, Detail: "peer sent -ERR " + string(text)}
}
