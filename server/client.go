package server

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skiffmq/skiff/internal/proto"
	"github.com/skiffmq/skiff/match"
)

// client is one connection. Its read loop (readLoop) parses and handles
// what the client sends, in its own goroutine; its writer (writeLoop)
// sends what is queued for it. Fields marked "read loop" are touched only
// by the read loop; the rest are safe for any goroutine as noted.
type client struct {
	srv   *Server
	cid   uint64
	conn  net.Conn
	ip    string
	port  int
	start time.Time
	log   *slog.Logger
	nonce []byte // sent in INFO for an nkey to sign; nil without nkey users
	ws    bool   // a WebSocket client: TLS is the listener's, not the protocol's

	// read loop
	parser    *proto.Parser
	acc       *Account // where it publishes and subscribes: $G until CONNECT binds it
	maxSubs   int      // its subscriptions' bound: the server's, or its account's if lower
	maxPay    int      // its payload bound, likewise
	connected bool     // CONNECT received
	verbose   bool
	pedantic  bool
	echo      bool
	noResp    bool
	protocol  int                         // the CONNECT protocol level
	ponged    bool                        // the first PONG after CONNECT was sent
	result    match.Result[*subscription] // lookup scratch, reused
	noRespRes match.Result[*subscription]
	flushes   []*client // clients queued to this read, to wake at its end
	afterRead []afterRead
	imsg      Msg       // the Msg handed to internal subscriptions, reused
	internal  bool      // a connectionless publisher (see internal.go)
	serverPub bool      // routing a Publisher's message (see principal.go)
	actFor    Principal // whom that Publisher acts for
	// answerer publishes a route's AfterRead answers (internal.go).
	answerer  *client
	readMsgs  int64           // messages in the read being handled, for inMsgs
	readBytes int64           // their payload bytes, for inBytes
	pubOK     map[string]bool // permission answers for recent publish subjects
	fwd       forwards        // peers the message being routed goes to (route_interest.go)
	rtt       time.Duration   // estimated at CONNECT, as nats-server's first estimate
	depth     uint8           // bridges the message being routed has crossed (imports.go)
	hops      []*hop          // their scratch, by depth

	// route is set for a route to another server of the cluster (route.go).
	route *route

	// headers and usr are set by the read loop at CONNECT and read by
	// publishers delivering to this client's subscriptions.
	headers atomic.Bool
	usr     atomic.Pointer[user] // nil: no permission limits
	// limitsStale is set when its account's limits changed: the read
	// loop takes them again (reapplyLimits).
	limitsStale atomic.Bool
	// asyncInfo is set at CONNECT for a client that understands
	// asynchronous INFO (protocol 1), which lame duck mode tells.
	asyncInfo atomic.Bool

	mu struct {
		sync.Mutex
		subs    map[string]*subscription // by sid
		name    string
		lang    string
		version string
		user    string
		reason  string   // why it closed
		acc     *Account // bound at CONNECT (nil before), for close and monitoring
	}

	out       outbound
	closed    atomic.Bool
	authDone  atomic.Bool   // CONNECT accepted; the auth timer has nothing to do
	writeDone chan struct{} // closed when the writer exits
	readDone  chan struct{} // closed when the read loop exits
	// prefix holds bytes read before the read loop started (an accepted
	// route's first line, raftlink.go): the read loop parses them first.
	prefix []byte

	inMsgs   atomic.Int64
	inBytes  atomic.Int64
	lastIn   atomic.Int64 // unix nanoseconds of the last read
	pingsOut atomic.Int32
	timers   struct {
		sync.Mutex
		ping   *time.Timer
		auth   *time.Timer
		expire *time.Timer // a JWT user's end (jwt_user.go)
	}
}

// subscription is one SUB of one client: the value the matching engine
// stores and returns.
type subscription struct {
	internalFields
	client  *client
	acc     *Account // whose index holds it
	subject string   // as subscribed
	queue   string
	sid     []byte
	max     atomic.Int64 // deliveries before auto-unsubscribe; 0 = none
	// weight is a route's queue subscription's weight: the members the
	// peer has in the group (RS+), for choosing among peers.
	weight atomic.Int32
	// delivered counts every message queued for this subscription. It is
	// guarded by the subscriber's outbound lock, which every delivery
	// holds anyway, so counting costs no extra shared write.
	delivered int64
}

// Why a connection closed, in logs and /connz.
const (
	reasonClientClosed   = "Client Closed"
	reasonServerShutdown = "Server Shutdown"
	reasonSlowConsumer   = "Slow Consumer (Pending Bytes)"
	reasonSlowWrite      = "Slow Consumer (Write Deadline)"
	reasonWriteError     = "Write Error"
	reasonReadError      = "Read Error"
	reasonProtocol       = "Protocol Violation"
	reasonAuth           = "Authentication Failure"
	reasonAuthTimeout    = "Authentication Timeout"
	reasonAuthExpired    = "Authentication Expired"
	reasonStale          = "Stale Connection"
	reasonMaxPayload     = "Maximum Payload Exceeded"
	reasonMaxConns       = "Maximum Connections Exceeded"
	reasonMaxAccConns    = "Maximum Account Connections Exceeded"
	reasonTLS            = "TLS Handshake Error"
)

// Read buffer sizes: a read buffer starts small, doubles when a read fills
// it, and halves after a run of small reads, so it follows the traffic.
const (
	minReadBuf   = 512
	startReadBuf = 4 << 10
	maxReadBuf   = 64 << 10
	shrinkAfter  = 8 // reads under a quarter of the buffer before it halves

	// directReadMin is the smallest remainder of a split payload read
	// straight into the message's buffer rather than through buf.
	directReadMin = 16 << 10
)

func (s *Server) newClient(conn net.Conn, cid uint64) *client {
	c := &client{
		srv:   s,
		cid:   cid,
		conn:  conn,
		start: time.Now(),
		acc:   s.gacc,
		echo:  true,
		// Until CONNECT says otherwise, a client is verbose and pedantic,
		// as in the reference server (a telnet session sees +OK).
		verbose:   true,
		pedantic:  true,
		writeDone: make(chan struct{}),
		readDone:  make(chan struct{}),
	}
	if addr, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		c.ip, c.port = addr.IP.String(), addr.Port
	}
	c.log = s.log.With("cid", cid, "addr", conn.RemoteAddr().String())
	if s.auth.nonceRequired() {
		c.nonce = newNonce()
	}
	c.mu.subs = map[string]*subscription{}
	c.out.init(s.opts.MaxPending)
	c.maxSubs, c.maxPay = s.opts.MaxSubscriptions, s.opts.MaxPayload
	c.parser = proto.NewParser(c, proto.Limits{MaxControlLine: s.opts.MaxControlLine, MaxPayload: s.opts.MaxPayload})
	c.lastIn.Store(time.Now().UnixNano())
	return c
}

// readLoop reads and handles the client's bytes until the connection ends.
func (c *client) readLoop() {
	defer close(c.readDone)
	if p := c.prefix; p != nil {
		c.prefix = nil
		perr := c.parser.Parse(p)
		c.endOfRead()
		if perr != nil {
			c.protocolError(perr)
			return
		}
	}
	buf := make([]byte, startReadBuf)
	small := 0
	for {
		var n int
		var err, perr error
		if space := c.parser.PayloadSpace(); len(space) >= directReadMin {
			// The rest of a large message goes straight into its buffer,
			// in reads as large as the socket allows.
			if n, err = c.conn.Read(space); n > 0 {
				perr = c.parser.PayloadRead(n)
			}
		} else if n, err = c.conn.Read(buf); n > 0 {
			if c.limitsStale.Load() {
				// Checked once the read returns: what it read is judged
				// by the limits of now.
				c.reapplyLimits()
			}
			perr = c.parser.Parse(buf[:n])
			switch {
			case n == len(buf) && len(buf) < maxReadBuf:
				buf, small = make([]byte, 2*len(buf)), 0
			case n < len(buf)/4 && len(buf) > minReadBuf:
				if small++; small >= shrinkAfter {
					buf, small = make([]byte, len(buf)/2), 0
				}
			default:
				small = 0
			}
		}
		if n > 0 {
			c.lastIn.Store(time.Now().UnixNano())
			if c.readMsgs > 0 {
				// Counted once per read rather than per message, and
				// before any PONG of this read goes out, so that a client
				// that flushed sees its messages counted.
				c.inMsgs.Add(c.readMsgs)
				c.inBytes.Add(c.readBytes)
				c.readMsgs, c.readBytes = 0, 0
			}
			c.endOfRead()
			if perr != nil {
				c.protocolError(perr)
				return
			}
		}
		if err != nil {
			if c.srv.shuttingDown.Load() {
				return // Shutdown closes every client once all reads stopped
			}
			reason := reasonReadError
			if errors.Is(err, net.ErrClosed) || isEOF(err) {
				reason = reasonClientClosed
			}
			c.close(reason, true)
			return
		}
	}
}

func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// wakeTargets wakes the writer of every client this read queued data for
// (itself included), once each.
func (c *client) wakeTargets() {
	for _, t := range c.flushes {
		t.out.wake()
	}
	// Then wait for those that are falling behind (stall.go).
	left := stallPerRead
	for i, t := range c.flushes {
		if t != c && left > 0 {
			left -= c.stallFor(t, left)
		}
		c.flushes[i] = nil
	}
	c.flushes = c.flushes[:0]
}

// queued records that the read in progress queued data for t.
func (c *client) queued(t *client) {
	n := len(c.flushes)
	if n > 0 && c.flushes[n-1] == t {
		return
	}
	if n <= 32 {
		for _, f := range c.flushes {
			if f == t {
				return
			}
		}
	}
	// Past 32 targets a repeat costs one extra wake, which is harmless.
	c.flushes = append(c.flushes, t)
}

// send queues protocol bytes for this client from its own read loop.
func (c *client) send(b []byte) {
	if !c.out.queue(b) {
		c.slowConsumer()
		return
	}
	c.queued(c)
}

// sendErr queues -ERR with a protocol error's text.
func (c *client) sendErr(e *proto.Error) {
	var buf [128]byte
	c.send(proto.AppendErr(buf[:0], e.Text))
}

// protocolError handles an error that stops parsing: the -ERR text goes
// out, then the connection closes.
func (c *client) protocolError(err error) {
	var pe *proto.Error
	if !errors.As(err, &pe) {
		c.log.Error("protocol error", "err", err)
		c.close(reasonProtocol, true)
		return
	}
	if !c.connected && c.srv.auth.required() && pe.Text == proto.ErrUnknownOp.Text {
		// Before CONNECT, anything else is an authorization failure, as
		// in the reference server.
		pe = proto.ErrAuthorization
	}
	c.log.Warn("protocol error", "err", pe.Error())
	if pe.Text != "" {
		c.sendErr(pe)
	}
	c.out.wake()
	reason := reasonProtocol
	switch pe.Text {
	case proto.ErrMaxPayload.Text:
		reason = reasonMaxPayload
	case proto.ErrAuthorization.Text:
		reason = reasonAuth
	case proto.ErrMaxAccountConnections.Text:
		reason = reasonMaxAccConns
	}
	c.close(reason, true)
}

// slowConsumer cuts the client off: its queue passed MaxPending.
func (c *client) slowConsumer() {
	if c.closed.Load() {
		return
	}
	c.countSlowConsumer()
	c.log.Warn("slow consumer", "pending_bytes", c.out.pending(), "max_pending", c.srv.opts.MaxPending)
	c.close(reasonSlowConsumer, false)
}

func (c *client) writeFailed(err error) {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		if !c.closed.Load() {
			c.countSlowConsumer()
			c.log.Warn("slow consumer", "err", "write deadline exceeded", "write_deadline", c.srv.opts.WriteDeadline)
		}
		c.close(reasonSlowWrite, false)
		return
	}
	c.close(reasonWriteError, false)
}

// close ends the connection once: subscriptions leave the index at once,
// so nothing more is queued; with flush the writer still sends what is
// queued (bounded by WriteDeadline), otherwise it is dropped. Safe from
// any goroutine, and never blocks on the network.
func (c *client) close(reason string, flush bool) {
	if !c.closed.CompareAndSwap(false, true) {
		return
	}
	c.timers.Lock()
	if c.timers.ping != nil {
		c.timers.ping.Stop()
	}
	if c.timers.auth != nil {
		c.timers.auth.Stop()
	}
	if c.timers.expire != nil {
		c.timers.expire.Stop()
	}
	c.timers.Unlock()

	c.mu.Lock()
	c.mu.reason = reason
	subs := c.mu.subs
	c.mu.subs = map[string]*subscription{}
	acc := c.mu.acc
	c.mu.Unlock()
	for _, sub := range subs {
		c.srv.unindex(sub)
	}

	c.out.startClosing(flush)
	if flush {
		// Stop the reader; the writer closes the socket when done.
		_ = c.conn.SetReadDeadline(time.Now())
	} else {
		_ = c.conn.Close()
	}
	if acc != nil {
		acc.removeClient(c, reason) // after startClosing: its counters are final
	}
	c.srv.removeClient(c)
	msgs, bytes := c.out.counts()
	c.log.Info("client closed", "reason", reason,
		"in_msgs", c.inMsgs.Load(), "out_msgs", msgs, "in_bytes", c.inBytes.Load(), "out_bytes", bytes)
}

// startTimers arms the auth timeout (if auth is required) and the ping
// timer.
func (c *client) startTimers() {
	o := &c.srv.opts
	c.timers.Lock()
	defer c.timers.Unlock()
	if c.srv.auth.required() {
		c.timers.auth = time.AfterFunc(o.AuthTimeout, c.authTimeout)
	}
	c.timers.ping = time.AfterFunc(o.PingInterval, c.pingTick)
}

// authTimeout fires when CONNECT did not arrive in time. It runs on a
// timer goroutine, so it only queues the error and closes.
func (c *client) authTimeout() {
	if c.closed.Load() || c.authDone.Load() {
		return
	}
	var buf [64]byte
	c.out.queue(proto.AppendErr(buf[:0], proto.ErrAuthTimeout.Text))
	c.log.Warn("authentication timeout", "timeout", c.srv.opts.AuthTimeout)
	c.close(reasonAuthTimeout, true)
}

// queuePing queues a PING; a route's is counted, for FlushRoute.
func (c *client) queuePing() bool {
	if c.route != nil {
		return c.route.pings.send(c)
	}
	return c.out.queue(proto.Ping)
}

// pingTick pings the client if it has been quiet, and closes it as stale
// when MaxPingsOut pings went unanswered.
func (c *client) pingTick() {
	if c.closed.Load() {
		return
	}
	interval, maxOut, always := c.pingPolicy()
	if int(c.pingsOut.Load()) >= maxOut {
		var buf [64]byte
		c.out.queue(proto.AppendErr(buf[:0], proto.ErrStaleConnection.Text))
		c.log.Warn("stale connection", "pings_out", c.pingsOut.Load())
		c.close(reasonStale, true)
		return
	}
	if always || time.Since(time.Unix(0, c.lastIn.Load())) >= interval || c.pingsOut.Load() > 0 {
		c.pingsOut.Add(1)
		if !c.queuePing() {
			c.slowConsumer()
			return
		}
		c.out.wake()
	}
	c.timers.Lock()
	if c.timers.ping != nil && !c.closed.Load() {
		c.timers.ping.Reset(interval)
	}
	c.timers.Unlock()
}
