package server

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/skiffmq/skiff/internal/proto"
)

// Raft links.
//
// The raft layer of a clustered JetStream talks to each peer server over a
// connection of its own rather than over the route, so that a heartbeat
// never queues behind megabytes of routed messages and a route cut off as
// a slow consumer does not take consensus down with it. A link uses the
// cluster listener, its credentials and its cluster name, so it needs no
// port or configuration of its own, and a fault proxy in front of a route
// cuts the link too.
//
// The handshake: the listener sends its route INFO as it does to any
// connection; the dialer reads it, then sends as its first line
//
//	CONNECT {"raft":true,"server_id":...,"name":...,"cluster":...,"user":...,"pass":...,"meta":...}
//
// The listener checks the credentials and the cluster name as for a route,
// asks the registered RaftLinks whether to admit the link, and answers
// "+OK" before handing the connection over, or "-ERR '<reason>'" and
// closes it. From then on the bytes are the raft layer's.

// RaftHello is what a peer that dials a raft link says of itself.
type RaftHello struct {
	ServerID string // the peer's server ID (changes at every start)
	Name     string // the peer's server name (stable: raft identifies servers by it)
	Cluster  string
	// Meta is the raft layer's own identification of the group of servers
	// it belongs to, checked by RaftLinks.Admit, so that two groups formed
	// apart are never merged.
	Meta string
}

// RaftLinks is the raft layer as the server sees it: it admits and serves
// the links peers dial, and hears when routes come and go (a link is kept
// to every server with a route). Register it with HandleRaftLinks. Its
// methods are called from server goroutines, concurrently.
type RaftLinks interface {
	// Admit decides whether to take a link from hello's server; an error
	// refuses it, and its text is what the peer is told.
	Admit(hello RaftHello) error
	// Serve owns conn from now on, until it returns or the conn closes
	// (Shutdown closes it). It runs on its own goroutine.
	Serve(hello RaftHello, conn net.Conn)
	// RoutesChanged reports that a route was registered or removed; Routes
	// tells the new set. It must not block.
	RoutesChanged()
}

// RoutePeer is a server this one has a registered route to.
type RoutePeer struct {
	ID   string   // server ID
	Name string   // server name
	Tags []string // server_tags
	// Addr is the host:port of the peer's cluster listener, as this server
	// dialed it (Dialed), as a configured route URL that led to it says,
	// or as the peer advertises it.
	Addr   string
	Dialed bool // this server dialed the route
	user   *url.Userinfo
}

// Errors of raft links.
var (
	// ErrRaftLinkRefused is the peer's refusal of a raft link, with its
	// reason.
	ErrRaftLinkRefused = errors.New("server: raft link refused")
	// ErrRaftLinkHandshake is a handshake that went wrong: the peer is not
	// a Skiff cluster listener, or sent something unexpected.
	ErrRaftLinkHandshake = errors.New("server: raft link handshake")
	// errNoRaft refuses a link on a server with no raft layer.
	errNoRaft = errors.New("raft links not accepted")
)

// raftLinkLineMax bounds a handshake line; a CONNECT or an INFO is far
// shorter.
const raftLinkLineMax = 16 << 10

// HandleRaftLinks registers the raft layer of a server with a cluster
// (without one it does nothing). Until it is called, raft links are
// refused; it is called once.
func (s *Server) HandleRaftLinks(l RaftLinks) {
	if s.cluster == nil {
		return
	}
	s.cluster.raft.Store(&l)
}

// Routes returns the servers this one has registered routes to, by name.
func (s *Server) Routes() []RoutePeer {
	cl := s.cluster
	if cl == nil {
		return nil
	}
	cl.mu.Lock()
	// A configured route URL that led to a peer is how this server reaches
	// it, even when the route kept is the one the peer dialed: through a
	// proxy or a NAT the address the peer advertises may not be.
	configured := map[string]*url.URL{}
	for _, r := range cl.opts.Routes {
		if u, err := ParseRouteURL(r); err == nil && cl.mu.urlIDs[u.Host] != "" {
			configured[cl.mu.urlIDs[u.Host]] = u
		}
	}
	peers := make([]RoutePeer, 0, len(cl.mu.routes))
	for _, c := range cl.mu.routes {
		r := c.route
		p := RoutePeer{ID: r.remoteID, Name: r.remoteName, Addr: r.remoteHost, Dialed: r.solicited, Tags: r.tags}
		switch u := configured[r.remoteID]; {
		case r.solicited:
			p.Addr = r.dialed
			if r.dialURL != nil {
				p.user = r.dialURL.User
			}
		case u != nil:
			p.Addr, p.user = u.Host, u.User
		}
		peers = append(peers, p)
	}
	cl.mu.Unlock()
	slices.SortFunc(peers, func(a, b RoutePeer) int { return strings.Compare(a.Name, b.Name) })
	return peers
}

// ClusterName returns the name of the server's cluster: "" without a
// cluster, or in a cluster without a name.
func (s *Server) ClusterName() string {
	if s.cluster == nil {
		return ""
	}
	return s.cluster.opts.Name
}

// ConfiguredRoutesUp reports whether every configured route URL
// (ClusterOptions.Routes) leads to a registered route, or to this server
// itself: the raft layer bootstraps a new group only once it sees every
// server it was told of. Without a cluster it reports false.
func (s *Server) ConfiguredRoutesUp() bool {
	cl := s.cluster
	if cl == nil {
		return false
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	hosts := make(map[string]bool, len(cl.mu.routes))
	for _, c := range cl.mu.routes {
		hosts[c.route.remoteHost] = true
	}
	for _, r := range cl.opts.Routes {
		u, err := ParseRouteURL(r)
		if err != nil {
			return false // validated in New: unreachable
		}
		if cl.mu.selfURLs[u.Host] || hosts[u.Host] {
			continue
		}
		if id := cl.mu.urlIDs[u.Host]; id == "" || cl.mu.routes[id] == nil {
			return false
		}
	}
	return true
}

// routesChanged tells the raft layer, if any, that the routes changed.
func (cl *cluster) routesChanged() {
	if l := cl.raft.Load(); l != nil {
		(*l).RoutesChanged()
	}
}

// DialRaftLink dials a raft link to p with the cluster's credentials (or
// those of the route URL that reached p), and returns the connection once
// p admitted it, with p's own name for it as its INFO gives it. meta is the
// caller's RaftHello.Meta.
func (s *Server) DialRaftLink(p RoutePeer, meta string) (net.Conn, string, error) {
	cl := s.cluster
	if cl == nil {
		return nil, "", fmt.Errorf("%w: no cluster", ErrRaftLinkHandshake)
	}
	conn, err := net.DialTimeout("tcp", p.Addr, routeDialTime)
	if err != nil {
		return nil, "", err
	}
	name, err := cl.raftHandshake(conn, p, meta)
	if err != nil {
		_ = conn.Close()
		return nil, "", err
	}
	return conn, name, nil
}

// raftHandshake is the dialing side of the handshake on conn.
func (cl *cluster) raftHandshake(conn net.Conn, p RoutePeer, meta string) (string, error) {
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	_ = conn.SetDeadline(time.Now().Add(cl.opts.AuthTimeout))
	line, err := readLine(conn, raftLinkLineMax)
	if err != nil {
		return "", fmt.Errorf("%w: reading INFO: %w", ErrRaftLinkHandshake, err)
	}
	arg, ok := bytes.CutPrefix(line, []byte("INFO "))
	var in routeInfo
	if !ok || json.Unmarshal(arg, &in) != nil || in.ServerID == "" {
		return "", fmt.Errorf("%w: not a route INFO: %.40q", ErrRaftLinkHandshake, line)
	}
	co := routeConnect{Raft: true, Meta: meta, ServerID: cl.s.id, Name: cl.s.name, Cluster: cl.opts.Name,
		User: cl.opts.Username, Pass: cl.opts.Password}
	if p.user != nil {
		co.User = p.user.Username()
		co.Pass, _ = p.user.Password()
	}
	b, err := json.Marshal(&co)
	if err != nil {
		return "", err
	}
	if _, err := conn.Write(append(append([]byte("CONNECT "), b...), "\r\n"...)); err != nil {
		return "", fmt.Errorf("%w: %w", ErrRaftLinkHandshake, err)
	}
	line, err = readLine(conn, raftLinkLineMax)
	switch {
	case err != nil:
		return "", fmt.Errorf("%w: reading the answer: %w", ErrRaftLinkHandshake, err)
	case string(line) == "+OK":
	case bytes.HasPrefix(line, []byte("-ERR ")):
		why := strings.Trim(string(line[len("-ERR "):]), "' ")
		return "", fmt.Errorf("%w by %s: %s", ErrRaftLinkRefused, in.ServerName, why)
	default:
		return "", fmt.Errorf("%w: unexpected answer %.40q", ErrRaftLinkHandshake, line)
	}
	_ = conn.SetDeadline(time.Time{})
	return in.ServerName, nil
}

// accept starts a connection the cluster listener accepted: it sends the
// route INFO, reads the first line, and runs a route, or hands a raft link
// to the raft layer.
func (cl *cluster) accept(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if !cl.track(conn) {
		_ = conn.Close()
		return
	}
	route := false
	defer func() {
		if !route {
			cl.untrack(conn)
			_ = conn.Close()
		}
	}()
	_ = conn.SetDeadline(time.Now().Add(cl.opts.AuthTimeout))
	if _, err := conn.Write(cl.appendInfo(nil, false)); err != nil {
		return
	}
	first, err := readLine(conn, max(raftLinkLineMax, cl.s.opts.MaxControlLine))
	if err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// As a route's auth timer does.
			cl.s.log.Warn("route authentication timeout", "remote", conn.RemoteAddr().String(), "timeout", cl.opts.AuthTimeout)
			_ = conn.SetWriteDeadline(time.Now().Add(cl.opts.AuthTimeout))
			_, _ = conn.Write(proto.AppendErr(nil, proto.ErrAuthTimeout.Text))
		}
		return
	}
	_ = conn.SetDeadline(time.Time{})
	if co, ok := raftConnect(first); ok {
		cl.serveRaftLink(conn, co)
		return
	}
	route = true
	cl.untrack(conn)
	cl.runRoute(conn, nil, false, append(first, "\r\n"...))
}

// track adds conn to the connections stopRoutes closes, unless the cluster
// stopped already.
func (cl *cluster) track(conn net.Conn) bool {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.mu.closed {
		return false
	}
	cl.mu.raw[conn] = struct{}{}
	return true
}

func (cl *cluster) untrack(conn net.Conn) {
	cl.mu.Lock()
	delete(cl.mu.raw, conn)
	cl.mu.Unlock()
}

// raftConnect reports whether line is a raft link's CONNECT, and decodes
// it.
func raftConnect(line []byte) (routeConnect, bool) {
	var co routeConnect
	arg, ok := bytes.CutPrefix(line, []byte("CONNECT "))
	if !ok || !bytes.Contains(arg, []byte(`"raft"`)) {
		return co, false
	}
	if json.Unmarshal(arg, &co) != nil || !co.Raft {
		return co, false
	}
	return co, true
}

// serveRaftLink checks a raft link's CONNECT and hands the link over. The
// caller closes conn after it returns.
func (cl *cluster) serveRaftLink(conn net.Conn, co routeConnect) {
	hello := RaftHello{ServerID: co.ServerID, Name: co.Name, Cluster: co.Cluster, Meta: co.Meta}
	err := cl.checkConnect(&co)
	l := cl.raft.Load()
	if err == nil && l == nil {
		err = errNoRaft
	}
	if err == nil {
		err = (*l).Admit(hello)
	}
	log := cl.s.log.With("remote", conn.RemoteAddr().String(), "remote_name", co.Name)
	if err != nil {
		log.Warn("raft link refused", "err", err)
		_ = conn.SetWriteDeadline(time.Now().Add(cl.opts.AuthTimeout))
		_, _ = fmt.Fprintf(conn, "-ERR '%s'\r\n", err)
		return
	}
	_ = conn.SetWriteDeadline(time.Now().Add(cl.opts.AuthTimeout))
	if _, err := conn.Write([]byte("+OK\r\n")); err != nil {
		return
	}
	_ = conn.SetWriteDeadline(time.Time{})
	log.Debug("raft link accepted")
	(*l).Serve(hello, conn)
}

// checkConnect checks the credentials and cluster name of a route's or a
// raft link's CONNECT.
func (cl *cluster) checkConnect(co *routeConnect) error {
	o := cl.opts
	if o.Username != "" {
		userOK := subtle.ConstantTimeCompare([]byte(co.User), []byte(o.Username)) == 1
		passOK := subtle.ConstantTimeCompare([]byte(co.Pass), []byte(o.Password)) == 1
		if !userOK || !passOK {
			return errRouteAuth
		}
	}
	if co.Cluster != o.Name {
		return fmt.Errorf("Cluster Name Mismatch: %q is not %q", co.Cluster, o.Name) //nolint:staticcheck // nats-server's text
	}
	return nil
}

// readLine reads one CRLF-terminated line from conn a byte at a time, so
// that nothing after it is consumed, and returns it without the CRLF.
func readLine(conn net.Conn, limit int) ([]byte, error) {
	line := make([]byte, 0, 256)
	var b [1]byte
	for len(line) <= limit {
		if _, err := conn.Read(b[:]); err != nil {
			return nil, err
		}
		if b[0] == '\n' {
			return bytes.TrimSuffix(line, []byte("\r")), nil
		}
		line = append(line, b[0])
	}
	return nil, fmt.Errorf("%w: line longer than %d bytes", ErrRaftLinkHandshake, limit)
}
