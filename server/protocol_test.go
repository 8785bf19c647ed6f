package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/server"
)

func TestInfo(t *testing.T) {
	s := RunServer(t, server.Options{ServerName: "skiff-test", MaxPayload: 4096})
	r := DialRaw(t, s)
	require.Equal(t, s.ID(), r.Info["server_id"])
	require.Equal(t, "skiff-test", r.Info["server_name"])
	require.Equal(t, server.Version, r.Info["version"])
	require.True(t, strings.HasPrefix(server.Version, "2.11."))
	require.Equal(t, float64(1), r.Info["proto"])
	require.Equal(t, true, r.Info["headers"])
	require.Equal(t, float64(4096), r.Info["max_payload"])
	require.Positive(t, r.Info["client_id"])
	require.Equal(t, "127.0.0.1", r.Info["client_ip"])
	require.Nil(t, r.Info["auth_required"])
}

func TestProtocolBasics(t *testing.T) {
	s := RunServer(t, server.Options{})
	r := DialRaw(t, s)
	r.Send("CONNECT {\"verbose\":true}\r\n")
	r.Expect("+OK")
	r.Send("SUB foo 1\r\nsub\tbar.*  q1 2\r\n")
	r.Expect("+OK", "+OK")
	r.Send("PUB foo 5\r\nhello\r\n")
	r.Expect("+OK", "MSG foo 1 5", "hello")
	r.Send("pub bar.x reply 0\r\n\r\n")
	r.Expect("+OK", "MSG bar.x 2 reply 0", "")
	r.Send("PING\r\n")
	r.Expect("PONG")
	r.Send("UNSUB 1\r\nPUB foo 1\r\nx\r\nPING\r\n")
	r.Expect("+OK", "+OK", "PONG")
}

func TestProtocolSplitAtEveryByte(t *testing.T) {
	s := RunServer(t, server.Options{})
	r := DialRaw(t, s)
	in := "CONNECT {\"headers\":true,\"verbose\":false}\r\nSUB a.> 9\r\nPUB a.b r 5\r\nhello\r\nHPUB a.c 12 14\r\nNATS/1.0\r\n\r\nhi\r\nPING\r\n"
	for i := range len(in) {
		r.Send(in[i : i+1])
		time.Sleep(100 * time.Microsecond)
	}
	r.Expect("MSG a.b 9 r 5", "hello", "HMSG a.c 9 12 14", "NATS/1.0", "", "hi", "PONG")
}

func TestProtocolErrors(t *testing.T) {
	tests := []struct {
		name  string
		opts  server.Options
		send  string
		want  []string
		close bool
	}{
		{name: "unknown op", send: "FOO bar\r\n", want: []string{"-ERR 'Unknown Protocol Operation'"}, close: true},
		{name: "garbage bytes", send: "\x00\x01\x02", want: []string{"-ERR 'Unknown Protocol Operation'"}, close: true},
		{name: "wrong length", send: "PUB foo 2\r\nhello\r\n", want: []string{"-ERR 'Unknown Protocol Operation'"}, close: true},
		{name: "max payload", opts: server.Options{MaxPayload: 8}, send: "PUB foo 9\r\n", want: []string{"-ERR 'Maximum Payload Violation'"}, close: true},
		{name: "max control line", opts: server.Options{MaxControlLine: 64}, send: "SUB " + strings.Repeat("a", 100) + " 1\r\n", want: []string{"-ERR 'maximum control line exceeded'"}, close: true},
		{name: "invalid subject", send: "SUB foo..bar 1\r\nPING\r\n", want: []string{"-ERR 'Invalid Subject'", "PONG"}},
		{name: "invalid subject >", send: "SUB foo.>.bar 1\r\nPING\r\n", want: []string{"-ERR 'Invalid Subject'", "PONG"}},
		{name: "bad connect", send: "CONNECT {bad\r\n", want: []string{"-ERR 'Unknown Protocol Operation'"}, close: true},
		{name: "bad protocol", send: "CONNECT {\"protocol\":2}\r\n", want: []string{"-ERR 'invalid client protocol'"}, close: true},
		{name: "no responders without headers", send: "CONNECT {\"no_responders\":true}\r\n", want: []string{"-ERR 'no responders requires headers support'"}, close: true},
		{name: "headers not negotiated", send: "CONNECT {\"verbose\":false}\r\nHPUB foo 12 12\r\nNATS/1.0\r\n\r\n\r\n", want: []string{"-ERR 'message headers not supported'"}, close: true},
		{name: "pedantic publish", send: "CONNECT {\"verbose\":false,\"pedantic\":true}\r\nSUB foo.* 1\r\nPUB foo.* 0\r\n\r\nPING\r\n", want: []string{"-ERR 'Invalid Publish Subject'", "MSG foo.* 1 0", "", "PONG"}},
		{name: "max subscriptions", opts: server.Options{MaxSubscriptions: 1}, send: "CONNECT {\"verbose\":false}\r\nSUB a 1\r\nSUB b 2\r\nPING\r\n", want: []string{"-ERR 'maximum subscriptions exceeded'", "PONG"}},
		{name: "verbose until CONNECT", send: "SUB a 1\r\nPING\r\n", want: []string{"+OK", "PONG"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := RunServer(t, tc.opts)
			r := DialRaw(t, s)
			r.Send(tc.send)
			r.Expect(tc.want...)
			if tc.close {
				require.Empty(t, r.ExpectClosed())
			} else {
				r.Send("PING\r\n")
				r.Expect("PONG")
			}
		})
	}
}
