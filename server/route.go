package server

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skiffmq/skiff/internal/proto"
)

// A cluster is servers joined by routes, one TCP connection between each
// pair (a full mesh), so that a message crosses at most one route:
//
//	 client --PUB--> [A] --RMSG--> [B] --MSG--> subscriber on B
//	                  |  \
//	                  |   `-RMSG-> [C] --MSG--> subscriber on C
//	                  |
//	            RS+/RS- flow the other way: B and C tell A what their
//	            clients subscribe to, and A forwards only what matches
//
// A server learns the cluster from any one seed (Options.Cluster.Routes):
// every route's INFO lists the peers its sender has, and a server dials
// those it has no route to yet. When two servers dial each other at once,
// both keep the route dialed by the server with the lower ID and close the
// other. Configured routes are redialed forever with backoff; routes
// learned from peers get ConnectRetries attempts.
//
// A route is a client (the same read loop, writer, outbound queue and
// limits) whose parser speaks the route protocol (proto.NewRouteParser)
// and whose peer's interest sits in the server's subscription index as
// subscriptions of that client: a lookup finds local subscribers and
// interested peers at once.

// Route connection backoff: from the first to the largest wait between
// two attempts at one URL.
const (
	routeBackoffMin = 50 * time.Millisecond
	routeBackoffMax = 2 * time.Second
	routeDialTime   = 2 * time.Second
	// routeDrainTime bounds how long a duplicate route that lost is kept
	// to receive what its peer had already sent on it.
	routeDrainTime = 2 * time.Second
	// routeGossipFallback is how long the higher-ID server of a pair that
	// learned of each other waits for the other to dial before it dials.
	routeGossipFallback = time.Second
)

// Why a route closed, beside the clients' reasons.
const (
	reasonDuplicateRoute = "Duplicate Route"
	reasonSelfRoute      = "Route To Self"
	reasonRouteRefused   = "Route Refused"
)

// cluster is a server's routes. It exists when Options.Cluster is set, from
// New on, so that interest indexed before Start is known.
type cluster struct {
	s         *Server
	opts      *ClusterOptions
	ln        net.Listener
	routeHost string // the host:port peers dial, told in INFO
	clientURL string // this server's client host:port, for connect_urls

	mu struct {
		sync.Mutex
		closed bool
		// routes are the registered routes, by the peer's server ID.
		routes map[string]*client
		// conns are all route connections, registered or not.
		conns map[*client]struct{}
		// interest counts local subscriptions by subject and queue: what
		// peers have been told (RS+ when a count leaves 0, RS- when it
		// returns to 0, and a queue's count as its weight).
		interest map[interestKey]int
		// dialing are the host:ports a solicit goroutine works on.
		dialing map[string]bool
		// urlIDs remember which server a host:port led to, and selfURLs
		// those that led to this server.
		urlIDs   map[string]string
		selfURLs map[string]bool
		// connectURLs are the client URLs clients are told (INFO
		// connect_urls); nil with NoAdvertise.
		connectURLs []string
		lameDuck    bool
		// raw are the accepted connections not run as routes: in their
		// first line's read, or raft links being served (raftlink.go).
		// stopRoutes closes them.
		raw map[net.Conn]struct{}
	}
	// raft is the raft layer, if one registered (HandleRaftLinks).
	raft atomic.Pointer[RaftLinks]
}

type interestKey struct {
	acc            *Account
	subject, queue string
}

func newCluster(s *Server) *cluster {
	cl := &cluster{s: s, opts: &s.opts.Cluster}
	cl.mu.routes = map[string]*client{}
	cl.mu.conns = map[*client]struct{}{}
	cl.mu.interest = map[interestKey]int{}
	cl.mu.dialing = map[string]bool{}
	cl.mu.urlIDs = map[string]string{}
	cl.mu.selfURLs = map[string]bool{}
	cl.mu.raw = map[net.Conn]struct{}{}
	return cl
}

// startCluster opens the route listener and starts dialing the configured
// routes. Start calls it with s.mu held, once the client listener is open.
func (s *Server) startCluster() error {
	cl := s.cluster
	ln, err := net.Listen("tcp", hostPort(cl.opts.Host, cl.opts.Port))
	if err != nil {
		return fmt.Errorf("server: cluster listen: %w", err)
	}
	cl.ln = ln
	cl.routeHost = advertisedHostPort(cl.opts.Host, ln.Addr().(*net.TCPAddr).Port)
	if cl.opts.Advertise != "" {
		u, _ := ParseRouteURL(cl.opts.Advertise) // validated in New
		cl.routeHost = u.Host
	}
	cl.clientURL = advertisedHostPort(s.opts.Host, s.info.Port)
	cl.mu.Lock()
	cl.updateConnectURLsLocked()
	cl.mu.Unlock()
	s.wg.Add(1)
	go cl.acceptLoop()
	for _, r := range cl.opts.Routes {
		u, _ := ParseRouteURL(r) // validated in New
		cl.startSolicit(u, true, "", 0)
	}
	s.log.Info("cluster listening", "addr", ln.Addr().String(), "cluster", cl.opts.Name, "routes", len(cl.opts.Routes),
		"ping_interval", cl.opts.PingInterval, "ping_max", cl.opts.MaxPingsOut)
	return nil
}

// advertisedHostPort is host:port as peers and clients should dial it: an
// unspecified host (0.0.0.0, ::) is replaced by this machine's first
// non-loopback address.
func advertisedHostPort(host string, port int) string {
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
					host = n.IP.String()
					break
				}
			}
		}
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// RouteURL returns nats-route://host:port of the route listener, or "" when
// the server is not in a cluster or not started.
func (s *Server) RouteURL() string {
	if s.cluster == nil || s.cluster.ln == nil {
		return ""
	}
	return "nats-route://" + s.cluster.ln.Addr().String()
}

// NumRoutes returns the number of registered routes.
func (s *Server) NumRoutes() int {
	if s.cluster == nil {
		return 0
	}
	s.cluster.mu.Lock()
	defer s.cluster.mu.Unlock()
	return len(s.cluster.mu.routes)
}

// PeerIDs returns the server IDs of the peers this server has routes to.
func (s *Server) PeerIDs() []string {
	if s.cluster == nil {
		return nil
	}
	s.cluster.mu.Lock()
	defer s.cluster.mu.Unlock()
	ids := make([]string, 0, len(s.cluster.mu.routes))
	for id := range s.cluster.mu.routes {
		ids = append(ids, id)
	}
	return ids
}

func (cl *cluster) acceptLoop() {
	s := cl.s
	defer s.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		conn, err := cl.ln.Accept()
		if err != nil {
			if s.shuttingDown.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Error("route accept", "err", err)
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			cl.accept(conn)
		}()
	}
}

// runRoute runs one route connection until it closes: its writer on
// another goroutine, its read loop on this one. dialed is the URL this
// server dialed (nil for an accepted route, to which accept has sent the
// INFO already, and whose first bytes it read: first).
func (cl *cluster) runRoute(conn net.Conn, dialed *url.URL, configured bool, first []byte) {
	s := cl.s
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c := s.newClient(conn, s.nextCID.Add(1))
	r := &route{c: c, cl: cl, solicited: dialed != nil, configured: configured, start: time.Now()}
	if dialed != nil {
		r.dialed, r.dialURL = dialed.Host, dialed
	}
	c.route = r
	c.prefix = first
	c.connected, c.verbose, c.pedantic = true, false, false
	c.headers.Store(true)
	c.log = s.log.With("rid", c.cid, "route", conn.RemoteAddr().String())
	c.parser = proto.NewRouteParser(r, proto.Limits{MaxControlLine: s.opts.MaxControlLine, MaxPayload: s.opts.MaxPayload})

	cl.mu.Lock()
	if cl.mu.closed {
		cl.mu.Unlock()
		_ = conn.Close()
		return
	}
	cl.mu.conns[c] = struct{}{}
	cl.mu.Unlock()

	if dialed != nil {
		c.out.queue(r.appendConnect(nil, dialed))
		c.out.queue(cl.appendInfo(nil, false))
	}
	s.wg.Add(1)
	go c.writeLoop()
	c.out.wake()
	c.timers.Lock()
	c.timers.auth = time.AfterFunc(cl.opts.AuthTimeout, c.authTimeout)
	c.timers.ping = time.AfterFunc(cl.opts.PingInterval, c.pingTick)
	c.timers.Unlock()
	c.log.Debug("route connection", "solicited", dialed != nil)
	c.readLoop()
}

// removeRoute forgets a closed route: close calls it instead of
// removeClient.
func (s *Server) removeRoute(c *client) {
	cl := s.cluster
	r := c.route
	r.pings.close()
	cl.mu.Lock()
	delete(cl.mu.conns, c)
	gone := r.remoteID != "" && cl.mu.routes[r.remoteID] == c
	if gone {
		delete(cl.mu.routes, r.remoteID)
	}
	// A server shutting down keeps telling its clients about the others:
	// they are where the clients go next.
	changed := gone && !cl.mu.closed && cl.updateConnectURLsLocked()
	cl.mu.Unlock()
	if gone {
		c.log.Info("route closed", "remote_id", r.remoteID, "remote_name", r.remoteName,
			"in_msgs", c.inMsgs.Load(), "reason", c.closeReason())
	}
	if changed {
		s.sendClientsInfo()
	}
	if gone {
		cl.routesChanged()
	}
}

// closeReason returns why the connection closed.
func (c *client) closeReason() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.reason
}

// stopRoutes stops the cluster: no more routes accepted or dialed, and
// the reads of every route stopped (what peers send from now on is not
// delivered: this server is going). It returns the route connections, for
// Shutdown to close once the clients' reads have stopped too, so that a
// message a client published before Shutdown is still forwarded.
func (s *Server) stopRoutes() []*client {
	cl := s.cluster
	if cl == nil {
		return nil
	}
	cl.mu.Lock()
	cl.mu.closed = true
	conns := make([]*client, 0, len(cl.mu.conns))
	for c := range cl.mu.conns {
		conns = append(conns, c)
	}
	for conn := range cl.mu.raw {
		_ = conn.Close() // a raft link's reads and writes fail: it stops
	}
	cl.mu.Unlock()
	if cl.ln != nil {
		_ = cl.ln.Close()
	}
	for _, c := range conns {
		_ = c.conn.SetReadDeadline(time.Now())
	}
	return conns
}

// startSolicit starts dialing u, after delay, unless a goroutine already
// does, or u is known to be this server. peerID, if known (from gossip),
// is the server u leads to.
func (cl *cluster) startSolicit(u *url.URL, configured bool, peerID string, delay time.Duration) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.mu.closed || cl.mu.dialing[u.Host] || cl.mu.selfURLs[u.Host] {
		return
	}
	cl.mu.dialing[u.Host] = true
	if peerID != "" && cl.mu.urlIDs[u.Host] == "" {
		cl.mu.urlIDs[u.Host] = peerID
	}
	cl.s.wg.Add(1)
	go cl.solicit(u, configured, delay)
}

// solicit keeps a route to u: it dials, runs the route until it closes,
// and dials again after a backoff, while the server u leads to has no
// other route to this one. A route learned from a peer (not configured)
// gives up after ConnectRetries failed dials in a row.
func (cl *cluster) solicit(u *url.URL, configured bool, delay time.Duration) {
	s := cl.s
	defer s.wg.Done()
	defer func() {
		cl.mu.Lock()
		delete(cl.mu.dialing, u.Host)
		cl.mu.Unlock()
	}()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-s.closing:
			return
		}
	}
	backoff, failures := routeBackoffMin, 0
	for {
		other, self := cl.routeFor(u.Host)
		switch {
		case self:
			return
		case other != nil && other.closed.Load():
			// Closing: removeRoute is about to forget it.
			select {
			case <-time.After(routeBackoffMin):
			case <-s.closing:
				return
			}
			continue
		case other != nil:
			// Connected already (the other side dialed, or a duplicate
			// lost): wait for that route to end.
			select {
			case <-other.readDone:
			case <-s.closing:
				return
			}
			continue
		}
		conn, err := net.DialTimeout("tcp", u.Host, routeDialTime)
		if err == nil {
			failures, backoff = 0, routeBackoffMin
			cl.runRoute(conn, u, configured, nil)
		} else {
			failures++
			s.log.Debug("route dial", "url", u.Host, "err", err, "attempt", failures)
			if !configured && failures >= cl.opts.ConnectRetries {
				s.log.Info("giving up a route learned from a peer", "url", u.Host, "attempts", failures)
				return
			}
		}
		// Jittered, so that two servers redialing each other do not
		// collide in step.
		wait := backoff/2 + rand.N(backoff/2+1)
		backoff = min(2*backoff, routeBackoffMax)
		select {
		case <-time.After(wait):
		case <-s.closing:
			return
		}
	}
}

// routeFor returns the registered route to the server hostPort led to
// last time, and whether hostPort is this server.
func (cl *cluster) routeFor(hostPort string) (*client, bool) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.mu.selfURLs[hostPort] {
		return nil, true
	}
	if id := cl.mu.urlIDs[hostPort]; id != "" {
		return cl.mu.routes[id], false
	}
	return nil, false
}

// RouteSlowConsumers returns how many routes were cut off as slow
// consumers (/varz slow_consumer_stats.routes); SlowConsumers counts them
// too, as nats-server's slow_consumers does.
func (s *Server) RouteSlowConsumers() int64 { return s.stats.slowRoutes.Load() }

// countSlowConsumer counts a slow consumer of c's kind.
func (c *client) countSlowConsumer() {
	c.srv.stats.slowConsumers.Add(1)
	if c.route != nil {
		c.srv.stats.slowRoutes.Add(1)
	}
}

// pingPolicy returns how often the connection is pinged, how many
// unanswered pings make it stale, and whether it is pinged even when it
// was heard from lately. A client that sends is alive; a route is pinged
// always, as nats-server's: traffic from the peer does not show that
// this side's bytes reach it (a half-open or black-holed connection).
func (c *client) pingPolicy() (interval time.Duration, maxOut int, always bool) {
	if c.route != nil {
		o := c.route.cl.opts
		return o.PingInterval, o.MaxPingsOut, true
	}
	return c.srv.opts.PingInterval, c.srv.opts.MaxPingsOut, false
}
