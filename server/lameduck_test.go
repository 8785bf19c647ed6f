package server_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/server"
)

func TestLameDuck(t *testing.T) {
	s := RunServer(t, server.Options{LameDuckDuration: 1500 * time.Millisecond, LameDuckGracePeriod: 500 * time.Millisecond})
	const n = 4
	var told sync.WaitGroup
	told.Add(n)
	closed := make(chan time.Time, n)
	for range n {
		var once sync.Once
		Connect(t, s,
			nats.LameDuckModeHandler(func(*nats.Conn) { once.Do(told.Done) }),
			nats.DisconnectErrHandler(func(*nats.Conn, error) { closed <- time.Now() }))
	}
	// A client from before CONNECT-capable async INFO is not told, but
	// closed like the rest.
	old := DialRaw(t, s)
	old.Send("CONNECT {\"verbose\":false,\"protocol\":0}\r\nPING\r\n")
	require.Equal(t, "PONG", old.ReadLine())

	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- s.LameDuck(context.Background()) }()
	waitTold := make(chan struct{})
	go func() { told.Wait(); close(waitTold) }()
	select {
	case <-waitTold:
	case <-time.After(5 * time.Second):
		t.Fatal("clients were not told of lame duck mode")
	}
	require.True(t, s.InLameDuckMode())
	// No new client: the listener is gone.
	require.Eventually(t, func() bool {
		c, err := net.DialTimeout("tcp", s.Addr().String(), time.Second)
		if err == nil {
			_ = c.Close()
		}
		return err != nil
	}, 5*time.Second, 20*time.Millisecond)

	var first, last time.Time
	for i := range n {
		select {
		case at := <-closed:
			if i == 0 {
				first = at
			}
			last = at
		case <-time.After(10 * time.Second):
			t.Fatalf("client %d not closed", i)
		}
	}
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("LameDuck did not return")
	}
	require.GreaterOrEqual(t, first.Sub(start), 400*time.Millisecond, "no client closed during the grace period")
	require.Greater(t, last.Sub(first), time.Duration(0), "closes are spread out")
	require.Equal(t, 0, s.NumClients())
}

// TestLameDuckCutShort: Shutdown during lame duck mode ends it at once.
func TestLameDuckCutShort(t *testing.T) {
	s := RunServer(t, server.Options{LameDuckDuration: time.Hour, LameDuckGracePeriod: 30 * time.Minute})
	Connect(t, s)
	done := make(chan error, 1)
	go func() { done <- s.LameDuck(context.Background()) }()
	require.Eventually(t, s.InLameDuckMode, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, s.Shutdown(context.Background()))
	select {
	case err := <-done:
		t.Logf("LameDuck cut short by Shutdown: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("LameDuck did not end with Shutdown")
	}
	require.Equal(t, 0, s.NumClients())
}

func TestLameDuckOptionsValidated(t *testing.T) {
	_, err := server.New(server.Options{LameDuckDuration: time.Second, LameDuckGracePeriod: 2 * time.Second})
	require.ErrorIs(t, err, server.ErrInvalidOptions)
}
