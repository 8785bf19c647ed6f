package jscluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/skiffmq/skiff/internal/multiraft"
	"github.com/skiffmq/skiff/server"
)

// Raft links: one TCP connection per pair of servers, made over the
// cluster listener (server/raftlink.go) and then carrying the multiraft
// transport's frames. The rules:
//
//   - the server whose name sorts lower dials; the other refuses a link
//     dialed the other way, so there is one link per pair;
//   - links are dialed when the routes change (a route to a new server,
//     or back) and redialed with a backoff while the route stays;
//   - the dialer's meta group ID comes in its CONNECT (RaftHello.Meta);
//     after the server's +OK the acceptor sends its own on one line,
//     before any frame:
//
//	{"meta":"s1-1712345678901234567"}\n
//
//     and either side refuses a link whose two IDs are set and differ,
//     so that two meta groups formed apart are never merged.

// Link dial backoff.
const (
	dialBackoffMin = 100 * time.Millisecond
	dialBackoffMax = 2 * time.Second
	// preambleTimeout bounds the read of the acceptor's meta line.
	preambleTimeout = 5 * time.Second
	// preambleMax bounds its length.
	preambleMax = 4 << 10
)

// links is the Cluster as the server's raft layer.
type links struct{ c *Cluster }

var _ server.RaftLinks = links{}

func (l links) Admit(h server.RaftHello) error          { return l.c.admit(h) }
func (l links) Serve(h server.RaftHello, conn net.Conn) { l.c.serve(h, conn) }
func (l links) RoutesChanged()                          { l.c.wake() }

// admit decides whether to take a link dialed by h's server.
func (c *Cluster) admit(h server.RaftHello) error {
	switch {
	case c.closed.Load():
		return ErrClosed
	case h.Name == "" || h.Name == h.ServerID:
		return ErrNoServerName
	case h.Name == c.name:
		return fmt.Errorf("jscluster: a server called %q dialed a server of the same name", h.Name)
	case !lower(h.Name, c.name):
		return fmt.Errorf("jscluster: the lower name dials: %q dials %q, not the other way", c.name, h.Name)
	case c.cutOff(h.Name):
		return errCutOff
	}
	if err := c.checkPeer(h.Name, h.Meta); err != nil {
		return err
	}
	return nil
}

// checkPeer checks a peer's name and meta group ID against this server's.
func (c *Cluster) checkPeer(name, meta string) error {
	id := RaftID(name)
	var clash string
	var mine string
	c.meta.view(func(s *State, _ uint64) {
		if si, ok := s.serverByID(id); ok && si.Name != name {
			clash = si.Name
		}
		mine = s.ID
	})
	if clash != "" {
		return fmt.Errorf("jscluster: server names %q and %q have the same raft ID %016x; rename one", name, clash, id)
	}
	if mine != "" && meta != "" && meta != mine {
		c.linksRefused.Add(1)
		c.log.Error("raft link refused: the peer belongs to another meta group", "peer", name,
			"peer_meta", meta, "meta", mine)
		return fmt.Errorf("%w: meta group %q is not %q", ErrMetaMismatch, meta, mine)
	}
	return nil
}

// serve runs an admitted link until it closes.
func (c *Cluster) serve(h server.RaftHello, conn net.Conn) {
	b, err := json.Marshal(preamble{Meta: c.MetaID()})
	if err != nil {
		return
	}
	_ = conn.SetWriteDeadline(time.Now().Add(preambleTimeout))
	if _, err := conn.Write(append(b, '\n')); err != nil {
		return
	}
	_ = conn.SetWriteDeadline(time.Time{})
	lc := c.link(h.Name, h.Meta, conn)
	if lc == nil {
		return
	}
	select {
	case <-lc.done:
	case <-c.stop:
	}
}

// preamble is the acceptor's line after the handshake.
type preamble struct {
	Meta string `json:"meta"`
}

// link hands conn to the transport as the link to the server called
// name, and returns it wrapped, or nil if the transport is closed.
func (c *Cluster) link(name, meta string, conn net.Conn) *linkConn {
	id := RaftID(name)
	c.mu.Lock()
	p := c.mu.peers[id]
	if p == nil {
		p = &peer{name: name}
		c.mu.peers[id] = p
	}
	p.meta = meta
	lc := &linkConn{Conn: conn, done: make(chan struct{})}
	p.conn = lc
	c.mu.Unlock()
	if err := c.tr.Add(id, lc); err != nil {
		return nil
	}
	return lc
}

// cutOff reports whether a test cut this server off from the server
// called name (SetPartition).
func (c *Cluster) cutOff(name string) bool {
	f := c.partition.Load()
	return f != nil && (*f)(name)
}

// SetPartition makes the links to the servers for which cut says true go
// down and stay down, neither dialed nor admitted, as a network partition
// of the raft links would (the routes stay up), until it is set again
// (nil: healed). It is for fault injection by tests.
func (c *Cluster) SetPartition(cut func(peer string) bool) {
	if cut == nil {
		c.partition.Store(nil)
	} else {
		c.partition.Store(&cut)
	}
	var drop []*linkConn
	c.mu.Lock()
	for _, p := range c.mu.peers {
		if p.conn != nil && cut != nil && cut(p.name) {
			drop = append(drop, p.conn)
		}
	}
	c.mu.Unlock()
	for _, lc := range drop {
		_ = lc.Close()
	}
	c.wake()
}

// dialPeers dials a link to every server with a route, a name above this
// one's and no link, unless a dial is under way or backing off.
func (c *Cluster) dialPeers() {
	now := time.Now()
	routes := c.srv.Routes()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range routes {
		if r.Name == "" || !lower(c.name, r.Name) || c.mu.dialing[r.Name] || c.cutOff(r.Name) {
			continue
		}
		if p := c.mu.peers[RaftID(r.Name)]; p != nil && (p.up || now.Before(p.nextDial)) {
			continue
		}
		c.mu.dialing[r.Name] = true
		c.wg.Add(1)
		go c.dial(r)
	}
}

// dial dials a link to r and hands it to the transport.
func (c *Cluster) dial(r server.RoutePeer) {
	defer c.wg.Done()
	err := c.dialLink(r)
	c.mu.Lock()
	delete(c.mu.dialing, r.Name)
	if err != nil {
		id := RaftID(r.Name)
		p := c.mu.peers[id]
		if p == nil {
			p = &peer{name: r.Name}
			c.mu.peers[id] = p
		}
		p.backoff = min(max(2*p.backoff, dialBackoffMin), dialBackoffMax)
		p.nextDial = time.Now().Add(p.backoff)
	}
	c.mu.Unlock()
	if err != nil && !c.closed.Load() {
		c.log.Debug("raft link dial failed", "peer", r.Name, "err", err)
	}
}

func (c *Cluster) dialLink(r server.RoutePeer) error {
	conn, name, err := c.srv.DialRaftLink(r, c.MetaID())
	if err != nil {
		if errors.Is(err, server.ErrRaftLinkRefused) {
			c.log.Warn("raft link refused", "peer", r.Name, "err", err)
		}
		return err
	}
	fail := func(err error) error {
		_ = conn.Close()
		return err
	}
	if name != r.Name {
		return fail(fmt.Errorf("jscluster: dialed %q, reached %q", r.Name, name))
	}
	_ = conn.SetReadDeadline(time.Now().Add(preambleTimeout))
	line, err := readLine(conn, preambleMax)
	if err != nil {
		return fail(fmt.Errorf("jscluster: reading the meta line of %s: %w", name, err))
	}
	_ = conn.SetReadDeadline(time.Time{})
	var pre preamble
	if err := json.Unmarshal(line, &pre); err != nil {
		return fail(fmt.Errorf("jscluster: the meta line of %s: %w", name, err))
	}
	if err := c.checkPeer(name, pre.Meta); err != nil {
		return fail(err)
	}
	if c.link(name, pre.Meta, conn) == nil {
		return ErrClosed
	}
	return nil
}

// errCutOff refuses a link across a test's partition.
var errCutOff = errors.New("jscluster: partitioned (test)")

// readLine reads one line a byte at a time, so that nothing after it (the
// peer's first frames) is consumed.
func readLine(r io.Reader, limit int) ([]byte, error) {
	var line []byte
	var b [1]byte
	for len(line) <= limit {
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return nil, err
		}
		if b[0] == '\n' {
			return line, nil
		}
		line = append(line, b[0])
	}
	return nil, fmt.Errorf("jscluster: line longer than %d bytes", limit)
}

// linkConn is a link's connection: it tells when the transport closed it.
type linkConn struct {
	net.Conn
	once sync.Once
	done chan struct{}
}

// WriteBuffers writes v to the connection: with one writev where it is
// TCP, so that the link writes a MsgApp's entries from where raft keeps
// them (multiraft.BuffersWriter).
func (l *linkConn) WriteBuffers(v *net.Buffers) (int64, error) { return v.WriteTo(l.Conn) }

func (l *linkConn) Close() error {
	err := l.Conn.Close()
	l.once.Do(func() { close(l.done) })
	return err
}

// linkHandler is the transport's handler: the node, with the links' ups
// and downs noted for the membership rules.
type linkHandler struct{ c *Cluster }

var _ multiraft.AppHandler = linkHandler{}

func (h linkHandler) Receive(from uint64, b multiraft.Batch) { h.c.node.Receive(from, b) }

func (h linkHandler) ReceiveApp(from uint64, payload []byte) { h.c.receiveApp(from, payload) }

func (h linkHandler) LinkUp(peer uint64) {
	h.c.setLink(peer, true)
	h.c.node.LinkUp(peer)
}

func (h linkHandler) LinkDown(peer uint64) {
	h.c.setLink(peer, false)
	h.c.node.LinkDown(peer)
}

func (c *Cluster) setLink(id uint64, up bool) {
	c.mu.Lock()
	if p := c.mu.peers[id]; p != nil {
		p.up = up
		if up {
			p.backoff, p.nextDial = 0, time.Time{}
		}
	}
	c.mu.Unlock()
	c.wake()
}
