package server_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/server"
)

// TestWebSocket: a nats.go client on ws:// and one on TCP share subjects,
// auth applies to both, compression is negotiated when asked.
func TestWebSocket(t *testing.T) {
	s := RunServer(t, server.Options{
		Users:     []server.User{{Name: "u", Password: "p"}},
		WebSocket: server.WebSocketOptions{Port: server.RandomPort, NoTLS: true, Compression: true},
	})
	wsURL := "ws://" + s.WebSocketAddr().String()
	_, err := nats.Connect(wsURL, nats.MaxReconnects(0))
	require.ErrorIs(t, err, nats.ErrAuthorization)

	tcp := Connect(t, s, nats.UserInfo("u", "p"))
	for _, opts := range [][]nats.Option{{}, {nats.Compression(true)}} {
		ws, err := nats.Connect(wsURL, append(opts, nats.UserInfo("u", "p"), nats.MaxReconnects(0))...)
		require.NoError(t, err)
		sub, err := ws.SubscribeSync("ws.>")
		require.NoError(t, err)
		require.NoError(t, ws.Flush())
		big := make([]byte, 200_000)
		for i := range big {
			big[i] = byte(i)
		}
		require.NoError(t, tcp.Publish("ws.big", big))
		m, err := sub.NextMsg(5 * time.Second)
		require.NoError(t, err)
		require.Equal(t, big, m.Data)
		// And back: a request from the WebSocket answered over TCP.
		resp, err := tcp.Subscribe("svc", func(m *nats.Msg) { _ = m.Respond(append([]byte("re: "), m.Data...)) })
		require.NoError(t, err)
		require.NoError(t, tcp.Flush())
		r, err := ws.Request("svc", []byte("hi"), 5*time.Second)
		require.NoError(t, err)
		require.Equal(t, "re: hi", string(r.Data))
		require.NoError(t, resp.Unsubscribe())
		ws.Close()
	}
}

// TestWebSocketOrigins: same_origin and allowed_origins refuse browsers
// from elsewhere; a client without an Origin header is not a browser.
func TestWebSocketOrigins(t *testing.T) {
	s := RunServer(t, server.Options{WebSocket: server.WebSocketOptions{Port: server.RandomPort, NoTLS: true,
		SameOrigin: true, AllowedOrigins: []string{"https://app.example.com"}}})
	addr := s.WebSocketAddr().String()
	dial := func(origin string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		h := http.Header{}
		if origin != "" {
			h.Set("Origin", origin)
		}
		c, _, err := websocket.Dial(ctx, "ws://"+addr, &websocket.DialOptions{HTTPHeader: h})
		if err == nil {
			_ = c.Close(websocket.StatusNormalClosure, "")
		}
		return err
	}
	require.NoError(t, dial(""))
	require.NoError(t, dial("http://"+addr), "same origin")
	require.NoError(t, dial("https://app.example.com"), "allowed")
	require.NoError(t, dial("https://APP.example.com:443"), "allowed, with the default port")
	require.Error(t, dial("https://evil.example.com"))
	require.Error(t, dial("http://app.example.com"), "another scheme is another origin")
}

func TestWebSocketTLS(t *testing.T) {
	cfg, pool := selfSigned(t)
	s := RunServer(t, server.Options{WebSocket: server.WebSocketOptions{Port: server.RandomPort, TLS: cfg}})
	nc, err := nats.Connect("wss://"+s.WebSocketAddr().String(), nats.MaxReconnects(0),
		nats.Secure(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	require.NoError(t, err)
	defer nc.Close()
	sub, err := nc.SubscribeSync("x")
	require.NoError(t, err)
	require.NoError(t, nc.Publish("x", []byte("secure")))
	requireNext(t, sub, "secure")

	_, err = server.New(server.Options{WebSocket: server.WebSocketOptions{Port: 1234}})
	require.ErrorIs(t, err, server.ErrInvalidOptions, "plain ws:// must be asked for")
}

// TestWebSocketHandshakeTimeout: a client that starts the HTTP upgrade
// and stalls is closed after handshake_timeout, not held open.
func TestWebSocketHandshakeTimeout(t *testing.T) {
	s := RunServer(t, server.Options{WebSocket: server.WebSocketOptions{Port: server.RandomPort, NoTLS: true,
		HandshakeTimeout: 200 * time.Millisecond}})
	conn, err := net.Dial("tcp", s.WebSocketAddr().String())
	require.NoError(t, err)
	defer func() { _ = conn.Close() }()
	_, err = conn.Write([]byte("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")) // and no end of headers
	require.NoError(t, err)
	start := time.Now()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = io.ReadAll(conn)
	require.NoError(t, err, "the server closed the connection (EOF), not the test's deadline")
	// Far below the 2 s default, with room for a loaded machine.
	require.Less(t, time.Since(start), 1500*time.Millisecond, "closed by the 200 ms handshake timeout")
}
