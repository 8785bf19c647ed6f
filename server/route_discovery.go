package server

import (
	"slices"
)

// Client discovery: a clustered server's INFO lists the client URLs of
// the cluster's servers (connect_urls, host:port as nats-server's), so a
// client that knows one server learns the others and reconnects to one of
// them when its own goes. When the list changes (a route registered or
// gone, a peer in lame duck mode), clients that understand asynchronous
// INFO (protocol 1) are sent the new one, as nats-server does.

// updateConnectURLsLocked recomputes the connect URLs and reports whether
// they changed. cl.mu held.
func (cl *cluster) updateConnectURLsLocked() bool {
	var urls []string
	if !cl.opts.NoAdvertise {
		if !cl.mu.lameDuck {
			urls = append(urls, cl.clientURL)
		}
		for _, rc := range cl.mu.routes {
			if !rc.route.ldm {
				urls = append(urls, rc.route.clientURLs...)
			}
		}
		slices.Sort(urls)
		urls = slices.Compact(urls)
	}
	if slices.Equal(urls, cl.mu.connectURLs) {
		return false
	}
	cl.mu.connectURLs = urls
	return true
}

// connectURLs returns what INFO's connect_urls says: nil outside a cluster.
func (s *Server) connectURLs() []string {
	if s.cluster == nil {
		return nil
	}
	s.cluster.mu.Lock()
	defer s.cluster.mu.Unlock()
	return s.cluster.mu.connectURLs
}

// sendClientsInfo sends the current INFO to every client that takes
// asynchronous INFO.
func (s *Server) sendClientsInfo() {
	for _, c := range s.clients() {
		if !c.asyncInfo.Load() {
			continue
		}
		if c.out.queue(s.appendInfo(nil, c)) {
			c.out.wake()
		}
	}
}

// clusterLameDuck tells the peers that this server is leaving, so that
// they stop advertising it to their clients; its routes stay until
// Shutdown, and peers drop its interest when they close.
func (s *Server) clusterLameDuck() {
	cl := s.cluster
	if cl == nil {
		return
	}
	cl.mu.Lock()
	cl.mu.lameDuck = true
	cl.updateConnectURLsLocked()
	full := cl.broadcastLocked(cl.appendInfoLocked(nil, false))
	cl.mu.Unlock()
	closeSlowRoutes(full)
}
