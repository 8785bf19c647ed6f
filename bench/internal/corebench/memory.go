package corebench

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// memoryPerConn opens n idle connections (CONNECT, PING, PONG, then
// nothing) and returns the server's RSS growth per connection.
func memoryPerConn(ctx context.Context, p *Proc, n int) (float64, error) {
	settle()
	before, err := rssBytes(p.PID())
	if err != nil {
		return 0, err
	}
	addr := strings.TrimPrefix(p.URL, "nats://")
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	buf := make([]byte, 4096)
	for range n {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return 0, err
		}
		conns = append(conns, c)
		if _, err := c.Write([]byte("CONNECT {\"verbose\":false}\r\nPING\r\n")); err != nil {
			return 0, err
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		got := ""
		for !strings.Contains(got, "PONG") {
			k, err := c.Read(buf)
			if err != nil {
				return 0, fmt.Errorf("connection %d: %w", len(conns), err)
			}
			got += string(buf[:k])
		}
	}
	settle()
	after, err := rssBytes(p.PID())
	if err != nil {
		return 0, err
	}
	return float64(after-before) / float64(n), nil
}

// memoryPerSub makes n distinct subscriptions on one connection and
// returns the server's RSS growth per subscription.
func memoryPerSub(_ context.Context, p *Proc, n int) (float64, error) {
	nc, err := nats.Connect(p.URL, nats.MaxReconnects(0))
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	if err := nc.Flush(); err != nil {
		return 0, err
	}
	settle()
	before, err := rssBytes(p.PID())
	if err != nil {
		return 0, err
	}
	for i := range n {
		if _, err := nc.Subscribe("mem."+strconv.Itoa(i)+".x", func(*nats.Msg) {}); err != nil {
			return 0, err
		}
		if i%10000 == 0 {
			if err := nc.Flush(); err != nil {
				return 0, err
			}
		}
	}
	if err := nc.FlushTimeout(30 * time.Second); err != nil {
		return 0, err
	}
	settle()
	after, err := rssBytes(p.PID())
	if err != nil {
		return 0, err
	}
	return float64(after-before) / float64(n), nil
}

// settle gives the server time to finish work and its runtime time to
// return freed memory, so that RSS readings are comparable.
func settle() { time.Sleep(time.Second) }
