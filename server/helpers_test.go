package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/server"
)

// RunServer starts a server on 127.0.0.1 with a random port and shuts it
// down when the test ends.
func RunServer(t testing.TB, opts server.Options) *server.Server {
	t.Helper()
	opts.Host = "127.0.0.1"
	if opts.Port == 0 {
		opts.Port = server.RandomPort
	}
	if opts.Logger == nil && os.Getenv("SKIFF_TEST_LOG") != "" {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s, err := server.New(opts)
	require.NoError(t, err)
	require.NoError(t, s.Start())
	startSubs.Store(s, s.NumSubscriptions())
	t.Cleanup(func() {
		startSubs.Delete(s)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return s
}

// startSubs are the subscriptions each server of RunServer has once
// started, before any client: the system account's, and the system
// imports of every account (sys.go).
var startSubs sync.Map // *server.Server -> int

// clientSubs returns the subscriptions of s made since RunServer started
// it: its clients' (on a server alone).
func clientSubs(s *server.Server) int {
	n, _ := startSubs.Load(s)
	return s.NumSubscriptions() - n.(int)
}

// Connect connects a nats.go client and closes it when the test ends.
func Connect(t testing.TB, s *server.Server, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), append([]nats.Option{nats.MaxReconnects(0)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// rawConn speaks the protocol by hand, for byte-exact checks.
type rawConn struct {
	t    testing.TB
	conn net.Conn
	br   *bufio.Reader
	Info map[string]any
}

// DialRaw connects and reads INFO.
func DialRaw(t testing.TB, s *server.Server) *rawConn {
	t.Helper()
	conn, err := net.Dial("tcp", s.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	r := &rawConn{t: t, conn: conn, br: bufio.NewReader(conn)}
	line := r.ReadLine()
	require.True(t, strings.HasPrefix(line, "INFO "), "got %q", line)
	require.NoError(t, json.Unmarshal([]byte(line[5:]), &r.Info))
	return r
}

func (r *rawConn) Send(s string) {
	r.t.Helper()
	_, err := r.conn.Write([]byte(s))
	require.NoError(r.t, err)
}

// ReadLine returns the next line without its CRLF, failing after 5s.
func (r *rawConn) ReadLine() string {
	r.t.Helper()
	_ = r.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := r.br.ReadString('\n')
	require.NoError(r.t, err, "reading a line (got %q)", line)
	return strings.TrimSuffix(line, "\r\n")
}

// Expect reads lines and requires them to be exactly want.
func (r *rawConn) Expect(want ...string) {
	r.t.Helper()
	for _, w := range want {
		require.Equal(r.t, w, r.ReadLine())
	}
}

// ExpectClosed requires the server to close the connection (after any
// lines still buffered, which it returns).
func (r *rawConn) ExpectClosed() []string {
	r.t.Helper()
	var rest []string
	_ = r.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		line, err := r.br.ReadString('\n')
		if err != nil {
			require.ErrorIs(r.t, err, io.EOF, "expected the server to close, got %v", err)
			return rest
		}
		rest = append(rest, strings.TrimSuffix(line, "\r\n"))
	}
}

// ExpectNothing requires no line to arrive within d.
func (r *rawConn) ExpectNothing(d time.Duration) {
	r.t.Helper()
	_ = r.conn.SetReadDeadline(time.Now().Add(d))
	line, err := r.br.ReadString('\n')
	require.Error(r.t, err, "unexpected %q", line)
	var ne net.Error
	require.True(r.t, errors.As(err, &ne) && ne.Timeout(), "expected a timeout, got %v", err)
	r.br = bufio.NewReader(r.conn)
}

// As returns the connection reporting failures to t, for use inside a fuzz
// function or a subtest.
func (r *rawConn) As(t testing.TB) *rawConn {
	c := *r
	c.t = t
	return &c
}

// requireNext requires sub's next message within 5 s, with payload want,
// and returns it.
func requireNext(t testing.TB, sub *nats.Subscription, want string) *nats.Msg {
	t.Helper()
	m, err := sub.NextMsg(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, want, string(m.Data))
	return m
}

// slowConsumers is what /varz says of slow consumers.
type slowConsumers struct {
	Slow  int64 `json:"slow_consumers"`
	Stats struct {
		Clients int64 `json:"clients"`
		Routes  int64 `json:"routes"`
	} `json:"slow_consumer_stats"`
}

// slowVarz reads s's /varz slow consumer counts.
func slowVarz(t *testing.T, s *server.Server) slowConsumers {
	t.Helper()
	var vz slowConsumers
	getJSON(t, "http://"+s.MonitorAddr().String()+"/varz", &vz)
	return vz
}
