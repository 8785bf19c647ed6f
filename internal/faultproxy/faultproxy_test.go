package faultproxy_test

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/faultproxy"
)

// echoServer echoes every line back until the test ends.
func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func dial(t *testing.T, p *faultproxy.Proxy) (net.Conn, *bufio.Reader) {
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c, bufio.NewReader(c)
}

func echo(t *testing.T, c net.Conn, r *bufio.Reader, line string) error {
	t.Helper()
	if _, err := c.Write([]byte(line + "\n")); err != nil {
		return err
	}
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	got, err := r.ReadString('\n')
	if err == nil {
		require.Equal(t, line+"\n", got)
	}
	return err
}

func TestForwardCutHeal(t *testing.T) {
	p := faultproxy.Start(t, echoServer(t))
	c, r := dial(t, p)
	require.NoError(t, echo(t, c, r, "one"))
	require.Equal(t, 1, p.Conns())

	p.Cut()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := r.ReadString('\n')
	require.ErrorIs(t, err, io.EOF, "a cut connection ends")
	c2, r2 := dial(t, p)
	_ = c2.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err = r2.ReadString('\n')
	require.Error(t, err, "a new connection is closed while cut")

	p.Heal()
	c3, r3 := dial(t, p)
	require.NoError(t, echo(t, c3, r3, "three"))
}

func TestBlackHoleHeal(t *testing.T) {
	p := faultproxy.Start(t, echoServer(t))
	c, r := dial(t, p)
	require.NoError(t, echo(t, c, r, "one"))

	p.BlackHole()
	var ne net.Error
	require.ErrorAs(t, echo(t, c, r, "lost"), &ne, "dropped, and the connection stays open")
	require.True(t, ne.Timeout())
	c2, r2 := dial(t, p)
	require.ErrorAs(t, echo(t, c2, r2, "lost too"), &ne, "a new connection is held too")
	require.True(t, ne.Timeout())

	p.Heal()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := r.ReadString('\n')
	require.ErrorIs(t, err, io.EOF, "a black-holed connection is closed by Heal")
	c3, r3 := dial(t, p)
	require.NoError(t, echo(t, c3, r3, "three"))
}
