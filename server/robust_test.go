package server_test

import (
	"bytes"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/server"
)

// badInputs are sessions a broken or hostile client might send.
var badInputs = []string{
	"",
	"\x00\xff\xfe garbage",
	"PUB foo 5\r\nhel",       // truncated payload, then the client goes away
	"PUB foo 2\r\nhello\r\n", // wrong length
	"PUB foo 100000000\r\n",  // oversized
	"SUB " + strings.Repeat("x", 10000),
	"CONNECT {\"verbose\":tru",
	"CONNECT {}\r\nSUB a 1\r\nSUB a.> 2\r\nPUB a 1\r\nx\r\nUNSUB 1\r\nPUB a.b 1\r\ny\r\nBAD\r\n",
	"CONNECT {\"headers\":true}\r\nHPUB a 20 10\r\n",
	"CONNECT {}\r\nSUB a 1\r\nPUB a 1\r\nx\r\n", // then never reads its message
	strings.Repeat("PING\r\n", 1000),
}

// TestBadInputNoLeaks sends every bad input many times and checks that the
// server answers a healthy client throughout and that every connection,
// subscription and goroutine goes away afterwards.
func TestBadInputNoLeaks(t *testing.T) {
	s := RunServer(t, server.Options{MaxPayload: 4096, MaxControlLine: 1024})
	control := DialRaw(t, s)
	control.Send("CONNECT {\"verbose\":false}\r\n")
	before := runtime.NumGoroutine()
	for range 20 {
		for _, in := range badInputs {
			conn, err := net.Dial("tcp", s.Addr().String())
			require.NoError(t, err)
			_, _ = conn.Write([]byte(in))
			_ = conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			_, _ = io.Copy(io.Discard, conn)
			_ = conn.Close()
		}
		control.Send("PING\r\n")
		control.Expect("PONG")
	}
	require.Eventually(t, func() bool { return s.NumClients() == 1 && clientSubs(s) == 0 },
		10*time.Second, 10*time.Millisecond, "clients %d, subscriptions %d", s.NumClients(), clientSubs(s))
	require.Eventually(t, func() bool { return runtime.NumGoroutine() <= before+2 },
		10*time.Second, 20*time.Millisecond, "goroutines: %d before, %d after", before, runtime.NumGoroutine())
}

// FuzzConnection drives one whole server connection with arbitrary bytes
// written in two pieces: the server must never crash, must answer a healthy
// client afterwards, and must not keep the connection.
func FuzzConnection(f *testing.F) {
	for _, in := range badInputs {
		f.Add([]byte(in), uint16(3))
	}
	f.Add([]byte("CONNECT {\"verbose\":true,\"pedantic\":true,\"echo\":false}\r\nSUB a.* q 1\r\nPUB a.b r 1\r\nx\r\nUNSUB 1 3\r\n"), uint16(20))
	f.Add([]byte("CONNECT {\"headers\":true,\"no_responders\":true}\r\nSUB _INBOX.> 2\r\nHPUB a _INBOX.1 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"), uint16(50))
	s := RunServer(f, server.Options{MaxPayload: 1024, MaxControlLine: 256, MaxSubscriptions: 64, MaxPending: 64 << 10})
	control := DialRaw(f, s)
	control.Send("CONNECT {\"verbose\":false}\r\n")
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		conn, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		i := int(split) % (len(data) + 1)
		_, _ = conn.Write(data[:i])
		_, _ = conn.Write(data[i:])
		_, _ = conn.Write([]byte("\r\nPING\r\n"))
		_ = conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		var got bytes.Buffer
		_, _ = io.Copy(&got, conn)
		_ = conn.Close()
		if !bytes.HasPrefix(got.Bytes(), []byte("INFO ")) {
			t.Fatalf("no INFO: %q", got.Bytes())
		}
		c := control.As(t)
		c.Send("PING\r\n")
		c.Expect("PONG")
	})
}
