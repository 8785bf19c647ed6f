package broker

import (
	"github.com/skiffmq/skiff/server"
)

// applyWebSocket reads the websocket block (alias ws) into the server's
// WebSocket listener.
func applyWebSocket(o *server.Options, v value) error {
	w := &o.WebSocket
	if err := wsKeys.apply(w, v); err != nil {
		return err
	}
	if w.Port == 0 {
		return v.errorf(ErrInvalidValue, "websocket needs a port (or listen: host:port)")
	}
	if w.TLS == nil && !w.NoTLS {
		return v.errorf(ErrInvalidValue, "websocket needs a tls block, or no_tls: true for plain ws://")
	}
	return nil
}

var wsKeys = func() keys[*server.WebSocketOptions] {
	k := newKeys[*server.WebSocketOptions]()
	k.on(func(w *server.WebSocketOptions, v value) error { return hostPort(v, &w.Host, &w.Port) }, "listen")
	k.on(func(w *server.WebSocketOptions, v value) (err error) {
		w.Port, err = v.intIn(server.RandomPort, 65535)
		return
	}, "port")
	k.on(func(w *server.WebSocketOptions, v value) (err error) { w.Host, err = v.str(); return }, "host", "net")
	k.on(func(w *server.WebSocketOptions, v value) (err error) { w.NoTLS, err = v.boolean(); return }, "no_tls")
	k.on(func(w *server.WebSocketOptions, v value) error {
		b, tc, err := readTLS(v)
		if err != nil {
			return err
		}
		if b.first || b.allowPlain || b.timeout != nil {
			return v.errorf(ErrUnsupported, "handshake_first, allow_non_tls and timeout do not apply to a WebSocket's TLS")
		}
		w.TLS = tc
		return nil
	}, "tls")
	k.on(func(w *server.WebSocketOptions, v value) (err error) { w.SameOrigin, err = v.boolean(); return }, "same_origin")
	k.on(func(w *server.WebSocketOptions, v value) (err error) {
		w.AllowedOrigins, err = v.strings()
		return
	}, "allowed_origins", "allowed_origin", "allow_origins", "allow_origin", "origins", "origin")
	k.on(func(w *server.WebSocketOptions, v value) (err error) { w.Compression, err = v.boolean(); return }, "compress", "compression")
	k.on(func(w *server.WebSocketOptions, v value) (err error) { w.HandshakeTimeout, err = v.duration(); return }, "handshake_timeout")
	k.refuse(whyCluster, "advertise")
	k.refuse("WebSocket-specific authentication is not implemented; WebSocket clients authenticate as TCP clients do, and Skiff refuses to start rather than ignore a separate setting",
		"authorization", "authentication", "jwt_cookie", "user_cookie", "pass_cookie", "token_cookie", "no_auth_user")
	k.refuse("extra WebSocket response headers are not implemented", "headers")
	k.refuse("a WebSocket-specific ping interval is not implemented", "ping_interval")
	return k
}()
