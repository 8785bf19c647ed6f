package server

import (
	"context"
	"math/rand/v2"
	"time"
)

// Lame duck mode lets a server leave without dropping its clients all at
// once, as nats-server's (SIGUSR2): it stops accepting, tells every client
// that understands asynchronous INFO that it is leaving ({"ldm":true}, on
// which nats.go calls its LameDuckModeHandler and clients of a cluster move
// to another server), waits LameDuckGracePeriod, then closes the clients
// one by one over the rest of LameDuckDuration, and shuts down.
//
//	accept stops --INFO ldm--> grace period --> close, close, ... --> Shutdown
//	                           |<----------- LameDuckDuration ------------>|

// LameDuck puts the server in lame duck mode and returns when it has shut
// down: after LameDuckDuration, earlier if ctx ends (then what is left is
// shut down at once, as Shutdown(ctx) does) or Shutdown is called. It does
// nothing on a server not started, or already leaving.
func (s *Server) LameDuck(ctx context.Context) error {
	s.mu.Lock()
	if !s.mu.started || s.mu.closed || s.mu.lameDuck {
		s.mu.Unlock()
		return nil
	}
	s.mu.lameDuck = true
	s.mu.Unlock()
	s.lameDuck.Store(true)

	_ = s.ln.Close() // the accept loop ends; no new client
	clients := s.clients()
	rand.Shuffle(len(clients), func(i, j int) { clients[i], clients[j] = clients[j], clients[i] })
	s.log.Info("entering lame duck mode: accepting no new clients", "clients", len(clients),
		"grace_period", s.opts.LameDuckGracePeriod, "duration", s.opts.LameDuckDuration)
	s.clusterLameDuck()
	s.sysLameDuck()
	info := s.info
	info.LameDuckMode = true
	info.ConnectURLs = s.connectURLs() // the others only, now
	msg := appendInfoJSON(nil, &info)
	for _, c := range clients {
		if c.asyncInfo.Load() && c.out.queue(msg) {
			c.out.wake()
		}
	}

	t := time.NewTimer(s.opts.LameDuckGracePeriod)
	defer t.Stop()
	wait := func() bool {
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
		case <-s.closing:
		}
		return false
	}
	if wait() && len(clients) > 0 {
		// Spread the closes over what is left of the duration, at most a
		// second apart, in batches if there are more clients than
		// nanoseconds to spread them over.
		span := max(s.opts.LameDuckDuration-s.opts.LameDuckGracePeriod, time.Second)
		step := span / time.Duration(len(clients))
		batch := 1
		if step < 1 {
			step, batch = 1, int(time.Duration(len(clients))/span)
		}
		step = min(step, time.Second)
		s.log.Info("lame duck mode: closing clients", "clients", len(clients), "every", step)
		for i, c := range clients {
			c.close(reasonServerShutdown, true)
			if i == len(clients)-1 || i%batch != 0 {
				continue
			}
			t.Reset(step/2 + rand.N(step/2+1))
			if !wait() {
				break
			}
		}
	}
	return s.Shutdown(ctx)
}

// InLameDuckMode reports whether the server is leaving in lame duck mode.
func (s *Server) InLameDuckMode() bool { return s.lameDuck.Load() }
