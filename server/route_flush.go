package server

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/skiffmq/skiff/internal/proto"
)

// ErrNoRoute is returned by FlushRoute when this server has no route to
// the named server.
var ErrNoRoute = errors.New("server: no route to that server")

// pings orders a route's PINGs and PONGs: a peer answers PINGs in the
// order it read them, so the n-th PONG answers the n-th PING, whether the
// keepalive (pingTick) or FlushRoute sent it.
type pings struct {
	mu      sync.Mutex
	sent    uint64
	recv    uint64
	closed  bool
	waiters []pingWaiter // by n, ascending
}

type pingWaiter struct {
	n  uint64
	ch chan error
}

// send queues a PING on c (the keepalive's).
func (p *pings) send(c *client) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !c.out.queue(proto.Ping) {
		return false
	}
	p.sent++
	return true
}

// pong counts a PONG and releases the waiters it answers.
func (p *pings) pong() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.recv++
	for len(p.waiters) > 0 && p.waiters[0].n <= p.recv {
		p.waiters[0].ch <- nil
		p.waiters = p.waiters[1:]
	}
}

// close fails the waiters: no PONG will come.
func (p *pings) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, w := range p.waiters {
		w.ch <- ErrNoRoute
	}
	p.waiters = nil
}

// FlushRoute returns once the server called name has read everything this
// server queued for it on their route before the call: it sends a PING and
// waits for the PONG that answers it. A server that hands a peer a request
// by another way (a raft link) flushes first when the peer will publish to
// the request's reply subject itself, so that the peer knows of the
// interest in it (the RS+ is ahead of the PING) before it publishes.
func (s *Server) FlushRoute(ctx context.Context, name string) error {
	cl := s.cluster
	if cl == nil {
		return fmt.Errorf("%w %q: no cluster", ErrNoRoute, name)
	}
	var rc *client
	cl.mu.Lock()
	for _, c := range cl.mu.routes {
		if c.route.remoteName == name {
			rc = c
			break
		}
	}
	cl.mu.Unlock()
	if rc == nil {
		return fmt.Errorf("%w %q", ErrNoRoute, name)
	}
	p := &rc.route.pings
	ch := make(chan error, 1)
	p.mu.Lock()
	if p.closed || !rc.out.queue(proto.Ping) {
		p.mu.Unlock()
		return fmt.Errorf("%w %q: closing", ErrNoRoute, name)
	}
	p.sent++
	p.waiters = append(p.waiters, pingWaiter{n: p.sent, ch: ch})
	p.mu.Unlock()
	rc.out.wake()
	select {
	case err := <-ch:
		if err != nil {
			return fmt.Errorf("%w %q: closed", err, name)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
