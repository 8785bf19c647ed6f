package server

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skiffmq/skiff/internal/proto"
)

// ErrServerClosed is returned by Start on a server that was shut down.
var ErrServerClosed = errors.New("server: closed")

// Server is a NATS-protocol broker. Create one with New, run it with
// Start, stop it with Shutdown. Its methods are safe for concurrent use.
type Server struct {
	opts  Options
	id    string
	name  string
	info  info
	auth  *authenticator
	log   *slog.Logger
	start time.Time

	// accounts are the subject namespaces, each with its own index;
	// gacc is "$G", the account of everything configured outside one.
	accounts registry
	gacc     *Account
	// trust is operator mode's (jwt.go); nil outside it.
	trust *trust

	internalClient *client                // owns internal subscriptions and bridges
	respPrefix     string                 // "_R_.<random>.": this server's reply subjects of service imports
	bridges        bridges                // the bridges of imports, and the response tables (imports.go)
	accountHooks   []AccountUpdateFunc    // told of accounts registered or updated at run time (jwt_update.go)
	jetstream      bool                   // advertised in INFO
	extraMonitor   map[string]MonitorFunc // endpoints added by HandleMonitor
	health         []HealthFunc           // checks added by HandleHealth, under mu
	extraMetrics   []prometheus.Collector // collectors added by RegisterMetrics
	cluster        *cluster               // nil unless Options.Cluster is set
	sys            *sysState              // the system account's machinery; nil without one (sys.go)
	mon            *monitor               // the monitoring data, for HTTP and $SYS; made by Start

	ln      net.Listener
	httpLn  net.Listener
	httpSrv *http.Server
	wsLn    net.Listener
	wsSrv   *http.Server

	nextCID      atomic.Uint64
	shuttingDown atomic.Bool
	lameDuck     atomic.Bool
	closing      chan struct{}  // closed when Shutdown starts
	wg           sync.WaitGroup // every client goroutine and the accept loop

	mu struct {
		sync.Mutex
		clients  map[uint64]*client
		started  bool
		closed   bool
		lameDuck bool
		// onShutdown run during Shutdown (OnShutdown).
		onShutdown []func()
	}
	stats stats
}

// stats are the server-wide counters not kept per client. Each sits on its
// own cache line: they are written from many goroutines.
type stats struct {
	totalConns    paddedInt
	slowConsumers paddedInt // every kind of connection
	slowRoutes    paddedInt // ... of which routes
	stalls        paddedInt // publisher reads held at a subscriber's gate (stall.go)
	// Totals of clients that have closed; live clients keep their own.
	closedInMsgs, closedInBytes, closedOutMsgs, closedOutBytes paddedInt
	bridgeDrops                                                paddedInt // messages a loop or depth of imports stopped
}

type paddedInt struct {
	atomic.Int64
	_ [56]byte
}

// New validates opts and returns a server ready to Start.
func New(opts Options) (*Server, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts.Tags = normalizeTags(opts.Tags)
	s := &Server{
		opts:  opts,
		id:    newServerID(),
		log:   opts.Logger,
		start: time.Now(),
	}
	s.newAccounts()
	s.auth = newAuthenticator(&s.opts, s)
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.opts.operatorMode() {
		if err := s.startOperatorMode(); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidOptions, err)
		}
	}
	s.name = opts.ServerName
	if s.name == "" {
		s.name = s.id
	}
	s.mu.clients = map[uint64]*client{}
	s.closing = make(chan struct{})
	s.internalClient = s.newInternalClient(s.gacc)
	if opts.Cluster.enabled() {
		s.cluster = newCluster(s)
	}
	// Bridges are indexed once the cluster exists: the response bridges'
	// interest is told to peers.
	ix, err := s.opts.validateImports()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidOptions, err) // validated already
	}
	if s.trust != nil {
		ix = s.jwtImportIndex("")
	}
	s.respPrefix = newRespPrefix()
	s.setBridges(ix)
	s.newSys()
	return s, nil
}

// Start listens on the client (and monitoring) ports and serves in the
// background. It returns once the listeners are open.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return ErrServerClosed
	}
	if s.mu.started {
		return errors.New("server: already started")
	}
	ln, err := net.Listen("tcp", hostPort(s.opts.Host, s.opts.Port))
	if err != nil {
		return fmt.Errorf("server: listen: %w", err)
	}
	s.ln = ln
	s.info = s.buildInfo(ln.Addr().(*net.TCPAddr).Port)
	if s.mon, err = newMonitor(s); err != nil {
		_ = ln.Close()
		return err
	}
	if s.opts.HTTPPort != 0 {
		if err := s.startMonitoring(); err != nil {
			_ = ln.Close()
			return err
		}
	}
	if s.opts.WebSocket.Port != 0 {
		if err := s.startWebSocket(); err != nil {
			_ = ln.Close()
			if s.httpSrv != nil {
				_ = s.httpSrv.Close()
			}
			return err
		}
	}
	if s.cluster != nil {
		if err := s.startCluster(); err != nil {
			_ = ln.Close()
			if s.httpSrv != nil {
				_ = s.httpSrv.Close()
			}
			if s.wsSrv != nil {
				_ = s.wsSrv.Close()
			}
			return err
		}
	}
	s.mu.started = true
	s.wg.Add(1)
	go s.acceptLoop()
	s.wg.Add(1)
	go s.sweepResponses()
	if s.sys != nil {
		s.sys.start()
	}
	s.log.Info("listening", "addr", ln.Addr().String(), "server_id", s.id, "version", Version, "skiff_version", SkiffVersion)
	return nil
}

func hostPort(host string, port int) string {
	if port == RandomPort {
		port = 0
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// Addr returns the client listener's address, or nil before Start.
func (s *Server) Addr() net.Addr {
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// ClientURL returns nats://host:port for the client listener.
func (s *Server) ClientURL() string { return "nats://" + s.Addr().String() }

// MonitorAddr returns the monitoring listener's address, or nil.
func (s *Server) MonitorAddr() net.Addr {
	if s.httpLn == nil {
		return nil
	}
	return s.httpLn.Addr()
}

// ID returns the server ID reported in INFO.
func (s *Server) ID() string { return s.id }

// Name returns the server name reported in INFO: server_name, or the ID.
func (s *Server) Name() string { return s.name }

// Tags returns the server's tags (Options.Tags, lowercased).
func (s *Server) Tags() []string { return s.opts.Tags }

// normalizeTags lowercases and trims tags and drops empty and repeated
// ones, as nats-server reads server_tags.
func normalizeTags(tags []string) []string {
	var out []string
	for _, t := range tags {
		if t = strings.ToLower(strings.TrimSpace(t)); t != "" && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// Clustered reports whether the server was configured to join a cluster
// (Options.Cluster): messages may then reach it from other servers.
func (s *Server) Clustered() bool { return s.cluster != nil }

func (s *Server) acceptLoop() {
	defer s.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		conn, err := s.ln.Accept()
		if err != nil {
			if s.shuttingDown.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			s.log.Error("accept", "err", err)
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		s.wg.Add(1)
		go s.serve(conn, false)
	}
}

// serve runs one connection (ws: a WebSocket's): INFO, optional TLS, then
// the read loop on this goroutine and the writer on another.
func (s *Server) serve(conn net.Conn, ws bool) {
	defer s.wg.Done()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	c := s.newClient(conn, s.nextCID.Add(1))
	c.ws = ws
	if !s.addClient(c) {
		var buf [512]byte
		b := s.appendInfo(buf[:0], c)
		b = proto.AppendErr(b, proto.ErrMaxConnections.Text)
		_ = conn.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = conn.Write(b)
		lingerClose(conn)
		s.log.Warn("maximum connections exceeded", "addr", conn.RemoteAddr().String(), "max_connections", s.opts.MaxConnections)
		return
	}
	s.stats.totalConns.Add(1)
	c.log.Debug("client accepted")
	if !c.startTLS() {
		close(c.readDone)
		close(c.writeDone)
		return
	}
	s.wg.Add(1)
	go c.writeLoop()
	c.out.wake()
	c.startTimers()
	c.readLoop()
}

// startTLS queues INFO and runs the TLS handshake, if any, in the order
// the options ask for: INFO first and then the upgrade the client starts
// on seeing it, or, with TLSHandshakeFirst, the handshake first and INFO
// over TLS. It reports false if the connection was closed.
func (c *client) startTLS() bool {
	s := c.srv
	if s.opts.TLS == nil || c.ws {
		c.out.queue(s.appendInfo(nil, c))
		return true
	}
	if !s.opts.TLSHandshakeFirst {
		c.out.queue(s.appendInfo(nil, c))
		return c.upgradeTLS()
	}
	raw := c.conn
	br := bufio.NewReaderSize(raw, 1)
	if d := s.opts.TLSHandshakeFirstFallback; d > 0 {
		// A client that sends nothing before the fallback delay waits for
		// INFO: it gets the usual INFO-then-upgrade path.
		_ = raw.SetReadDeadline(time.Now().Add(d))
		_, err := br.Peek(1)
		_ = raw.SetReadDeadline(time.Time{})
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				c.close(reasonTLS, false)
				return false
			}
			c.out.queue(s.appendInfo(nil, c))
			return c.upgradeTLS()
		}
	}
	_ = raw.SetDeadline(time.Now().Add(s.opts.TLSTimeout))
	tc := tls.Server(&peekedConn{Conn: raw, r: br}, s.opts.TLS)
	if err := tc.Handshake(); err != nil {
		c.log.Warn("TLS handshake first", "err", err)
		c.close(reasonTLS, false)
		return false
	}
	_ = raw.SetDeadline(time.Time{})
	c.conn = tc
	c.out.queue(s.appendInfo(nil, c))
	return true
}

// upgradeTLS sends INFO in the clear and performs the TLS handshake the
// client starts on seeing it. If TLS is optional, a client whose first
// byte is not a TLS handshake stays in the clear.
func (c *client) upgradeTLS() bool {
	s := c.srv
	raw := c.conn
	_ = raw.SetDeadline(time.Now().Add(s.opts.TLSTimeout))
	infoBytes := c.out.take()
	if _, err := raw.Write(infoBytes); err != nil {
		c.close(reasonTLS, false)
		return false
	}
	br := bufio.NewReaderSize(raw, 1)
	first, err := br.Peek(1)
	if err != nil {
		c.close(reasonTLS, false)
		return false
	}
	if first[0] != 0x16 { // not a TLS handshake record
		if s.opts.TLSRequired {
			_, _ = raw.Write(proto.AppendErr(nil, proto.ErrTLSRequired.Text))
			c.log.Warn("client did not start TLS")
			c.close(reasonTLS, false)
			return false
		}
		_ = raw.SetDeadline(time.Time{})
		c.conn = &peekedConn{Conn: raw, r: br}
		return true
	}
	tc := tls.Server(&peekedConn{Conn: raw, r: br}, s.opts.TLS)
	if err := tc.Handshake(); err != nil {
		c.log.Warn("TLS handshake", "err", err)
		c.close(reasonTLS, false)
		return false
	}
	_ = raw.SetDeadline(time.Time{})
	c.conn = tc
	return true
}

// peekedConn replays the byte peeked to detect TLS.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (p *peekedConn) Read(b []byte) (int, error) {
	if p.r.Buffered() > 0 {
		return p.r.Read(b)
	}
	return p.Conn.Read(b)
}

func (s *Server) addClient(c *client) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed || len(s.mu.clients) >= s.opts.MaxConnections {
		return false
	}
	s.mu.clients[c.cid] = c
	return true
}

func (s *Server) removeClient(c *client) {
	if c.route != nil {
		s.removeRoute(c)
		return
	}
	s.mu.Lock()
	delete(s.mu.clients, c.cid)
	s.mu.Unlock()
	msgs, bytes := c.out.counts()
	s.stats.closedInMsgs.Add(c.inMsgs.Load())
	s.stats.closedInBytes.Add(c.inBytes.Load())
	s.stats.closedOutMsgs.Add(msgs)
	s.stats.closedOutBytes.Add(bytes)
	c.mu.Lock()
	acc, reason := c.mu.acc, c.mu.reason
	c.mu.Unlock()
	if acc != nil {
		s.sysDisconnected(c, acc, reason)
	}
}

// clients returns a snapshot of the live clients.
func (s *Server) clients() []*client {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*client, 0, len(s.mu.clients))
	for _, c := range s.mu.clients {
		out = append(out, c)
	}
	return out
}

// NumClients returns the number of live client connections.
func (s *Server) NumClients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.clients)
}

// NumSubscriptions returns the number of subscriptions in the indexes of
// every account.
func (s *Server) NumSubscriptions() int {
	n := 0
	for _, a := range s.accounts.all() {
		n += a.subs.Count()
	}
	return n
}

// index adds sub to its account's index (and tells the peers).
func (s *Server) index(sub *subscription) {
	if err := sub.acc.subs.Subscribe(sub.subject, sub.queue, sub); err != nil {
		panic("server: indexing a validated subscription: " + err.Error()) // validated in Sub
	}
	sub.acc.subInserts.Add(1)
	if s.cluster != nil && sub.toldToPeers() {
		s.cluster.interestAdded(sub)
	}
}

func (s *Server) unindex(sub *subscription) {
	if sub.acc.subs.Unsubscribe(sub.subject, sub.queue, sub) == nil {
		sub.acc.subRemoves.Add(1)
		if s.cluster != nil && sub.toldToPeers() {
			s.cluster.interestRemoved(sub)
		}
	}
}

// Shutdown stops the server gracefully: it stops accepting, stops reading
// from every client, lets every message already read be delivered, flushes
// every client's queue, and closes. It returns when every connection is
// closed, or when ctx (or ShutdownTimeout, if ctx has no deadline) expires,
// OnShutdown registers f to run during Shutdown, once every client's
// reads have stopped and before any client is closed: what f publishes
// still reaches the clients.
func (s *Server) OnShutdown(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.onShutdown = append(s.mu.onShutdown, f)
}

// after closing what is left by force.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	started := s.mu.started
	s.mu.Unlock()
	close(s.closing)
	s.stopAccountTimers()
	if !started {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.opts.ShutdownTimeout)
		defer cancel()
	}
	s.shuttingDown.Store(true)
	_ = s.ln.Close()
	routes := s.stopRoutes()
	if s.httpSrv != nil {
		_ = s.httpSrv.Close()
	}
	if s.wsSrv != nil {
		_ = s.wsSrv.Close() // upgraded connections are clients, closed below
	}
	s.log.Info("shutting down", "clients", s.NumClients())

	// Stop every reader first, so that all messages already read are
	// routed (to local clients and to peers) before any connection starts
	// closing.
	clients := s.clients()
	for _, c := range clients {
		_ = c.conn.SetReadDeadline(time.Now())
	}
	for _, c := range append(clients, routes...) {
		select {
		case <-c.readDone:
		case <-ctx.Done():
		}
	}
	// Components say goodbye (JetStream's waiting pull requests hear
	// 409 Server Shutdown, peers the SHUTDOWN event) while the clients
	// and routes can still be written to.
	if s.sys != nil {
		s.sys.shutdown(time.Second)
	}
	s.mu.Lock()
	hooks := s.mu.onShutdown
	s.mu.Unlock()
	for _, f := range hooks {
		f()
	}
	for _, c := range append(routes, clients...) {
		c.close(reasonServerShutdown, true)
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		s.log.Info("shut down")
		return nil
	case <-ctx.Done():
		for _, c := range append(routes, clients...) {
			_ = c.conn.Close()
		}
		<-done
		s.log.Warn("shut down by force: some clients did not take their data in time")
		return ctx.Err()
	}
}
