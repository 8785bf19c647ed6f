package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// WebSocket clients (nats.ws, nats.go with ws:// URLs, browsers) speak the
// same protocol inside binary WebSocket messages. The listener upgrades the
// HTTP request with github.com/coder/websocket, checks the origin as the
// options say, and hands the connection, wrapped as a net.Conn, to the same
// code every TCP client runs through: limits, auth and routing are the
// same. TLS is the listener's (wss://), never the NATS protocol's upgrade.

// DefaultWebSocketHandshakeTimeout bounds the HTTP upgrade, as nats-server's.
const DefaultWebSocketHandshakeTimeout = 2 * time.Second

// WebSocketOptions configure the WebSocket listener (nats-server's
// websocket block). Port 0 leaves it off.
type WebSocketOptions struct {
	// Host and Port to listen on (Host defaults to Options.Host;
	// RandomPort for an ephemeral port).
	Host string
	Port int
	// TLS serves wss://; NoTLS must say so explicitly for plain ws://, as
	// nats-server requires.
	TLS   *tls.Config
	NoTLS bool
	// SameOrigin accepts a browser's request only from the origin it is
	// addressed to; AllowedOrigins lists other accepted origins
	// (scheme://host[:port]). A request without an Origin header (not a
	// browser) is always accepted.
	SameOrigin     bool
	AllowedOrigins []string
	// Compression offers permessage-deflate to clients that ask for it.
	Compression bool
	// HandshakeTimeout bounds the HTTP upgrade (default 2s).
	HandshakeTimeout time.Duration
}

func (o *WebSocketOptions) validate(top *Options) error {
	if o.Port == 0 {
		return nil
	}
	if o.Host == "" {
		o.Host = top.Host
	}
	if o.HandshakeTimeout == 0 {
		o.HandshakeTimeout = DefaultWebSocketHandshakeTimeout
	}
	switch {
	case o.Port < RandomPort || o.Port > 65535:
		return fmt.Errorf("websocket port %d", o.Port)
	case o.TLS == nil && !o.NoTLS:
		return errors.New("websocket needs tls, or no_tls: true for plain ws://")
	case o.HandshakeTimeout < 0:
		return errors.New("negative websocket handshake timeout")
	}
	for _, origin := range o.AllowedOrigins {
		if _, err := parseOrigin(origin); err != nil {
			return fmt.Errorf("websocket allowed origin %q: %w", origin, err)
		}
	}
	return nil
}

// startWebSocket opens the WebSocket listener.
func (s *Server) startWebSocket() error {
	o := &s.opts.WebSocket
	ln, err := net.Listen("tcp", hostPort(o.Host, o.Port))
	if err != nil {
		return fmt.Errorf("server: websocket listen: %w", err)
	}
	if o.TLS != nil {
		ln = tls.NewListener(ln, o.TLS)
	}
	s.wsLn = ln
	s.wsSrv = &http.Server{Handler: http.HandlerFunc(s.handleWebSocket), ReadHeaderTimeout: o.HandshakeTimeout}
	go func() { _ = s.wsSrv.Serve(ln) }()
	s.log.Info("websocket listening", "addr", ln.Addr().String(), "tls", o.TLS != nil)
	return nil
}

// WebSocketAddr returns the WebSocket listener's address, or nil.
func (s *Server) WebSocketAddr() net.Addr {
	if s.wsLn == nil {
		return nil
	}
	return s.wsLn.Addr()
}

// handleWebSocket upgrades one request and serves it as a client.
func (s *Server) handleWebSocket(w http.ResponseWriter, r *http.Request) {
	o := &s.opts.WebSocket
	if err := checkOrigin(r, o); err != nil {
		s.log.Warn("websocket origin refused", "addr", r.RemoteAddr, "origin", r.Header.Get("Origin"), "err", err)
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	mode := websocket.CompressionDisabled
	if o.Compression {
		mode = websocket.CompressionNoContextTakeover
	}
	// The origin is checked above, with nats-server's rules.
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true, CompressionMode: mode})
	if err != nil {
		s.log.Warn("websocket upgrade", "addr", r.RemoteAddr, "err", err)
		return
	}
	if s.shuttingDown.Load() || s.lameDuck.Load() {
		_ = ws.Close(websocket.StatusGoingAway, "server shutting down")
		return
	}
	s.wg.Add(1)
	s.serve(websocket.NetConn(context.Background(), ws, websocket.MessageBinary), true)
}

// checkOrigin applies same_origin and allowed_origins to a browser's
// request.
func checkOrigin(r *http.Request, o *WebSocketOptions) error {
	origin := r.Header.Get("Origin")
	if origin == "" || (!o.SameOrigin && len(o.AllowedOrigins) == 0) {
		return nil
	}
	got, err := parseOrigin(origin)
	if err != nil {
		return fmt.Errorf("origin %q: %w", origin, err)
	}
	if o.SameOrigin {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		if self, err := parseOrigin(scheme + "://" + r.Host); err == nil && self == got {
			return nil
		}
	}
	for _, a := range o.AllowedOrigins {
		if want, _ := parseOrigin(a); want == got {
			return nil
		}
	}
	return errors.New("origin not allowed")
}

// parseOrigin normalises scheme://host[:port], with the scheme's default
// port.
func parseOrigin(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", err
	}
	scheme := strings.ToLower(u.Scheme)
	if !slices.Contains([]string{"http", "https", "ws", "wss"}, scheme) || u.Host == "" {
		return "", errors.New("want scheme://host[:port]")
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if scheme == "https" || scheme == "wss" {
			port = "443"
		}
	}
	return scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port, nil
}
