// Package faultproxy is a TCP proxy for tests that injects network faults
// between two endpoints (a route between two servers, a client and its
// server): it forwards, cuts (closes both sides), black-holes (stops
// forwarding but keeps the sockets open, as a network that drops every
// packet), and heals.
//
//	p := faultproxy.Start(t, "127.0.0.1:6222")  // listens on 127.0.0.1:0
//	// dial p.Addr() instead of the target
//	p.Cut()       // every connection closed; new ones closed at once
//	p.Heal()      // new connections forwarded again
//	p.BlackHole() // bytes dropped both ways; nobody is told
//	p.Heal()      // the black-holed connections are closed, new ones forwarded
//
// A Proxy is safe for concurrent use.
package faultproxy

import (
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Mode is what the proxy does with connections.
type Mode int

const (
	// Forward copies bytes both ways.
	Forward Mode = iota
	// Cut closes connections, both sides, as soon as they are accepted.
	Cut
	// BlackHole accepts connections and drops what they send, without
	// dialing the target; connections open before are held the same way.
	BlackHole
)

// Proxy forwards connections made to Addr to its target.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     struct {
		sync.Mutex
		mode   Mode
		pairs  map[*pair]struct{}
		closed bool
	}
}

// pair is one proxied connection: the accepted one and, unless it was
// accepted in a black hole, the one dialed to the target.
type pair struct {
	down, up net.Conn // up is nil for a connection accepted in a black hole
	held     atomic.Bool
	once     sync.Once
}

func (pr *pair) close() {
	pr.once.Do(func() {
		_ = pr.down.Close()
		if pr.up != nil {
			_ = pr.up.Close()
		}
	})
}

// New starts a proxy on 127.0.0.1 with a random port, forwarding to
// target (host:port).
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target}
	p.mu.pairs = map[*pair]struct{}{}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Start is New for a test: it fails the test on error and closes the
// proxy when the test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatalf("faultproxy: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// Addr returns the proxy's host:port, to dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every connection, both sides (each end sees the connection
// end), and every one accepted until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.mu.mode = Cut
	pairs := p.takeLocked()
	p.mu.Unlock()
	for _, pr := range pairs {
		pr.close()
	}
}

// BlackHole stops forwarding: what either side of an open connection
// sends is dropped, and neither side is told. Connections accepted until
// Heal are held the same way (accepted, never forwarded).
func (p *Proxy) BlackHole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.mode = BlackHole
	for pr := range p.mu.pairs {
		pr.held.Store(true)
	}
}

// Heal forwards again. Black-holed connections are closed, both sides:
// their streams lost bytes and cannot resume.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.mu.mode = Forward
	var held []*pair
	for pr := range p.mu.pairs {
		if pr.held.Load() {
			held = append(held, pr)
			delete(p.mu.pairs, pr)
		}
	}
	p.mu.Unlock()
	for _, pr := range held {
		pr.close()
	}
}

// Mode returns what the proxy does now.
func (p *Proxy) Mode() Mode {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mu.mode
}

// Conns returns the number of open connections through the proxy.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.mu.pairs)
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return
	}
	p.mu.closed = true
	pairs := p.takeLocked()
	p.mu.Unlock()
	_ = p.ln.Close()
	for _, pr := range pairs {
		pr.close()
	}
	p.wg.Wait()
}

// takeLocked empties the set of connections and returns them. Lock held.
func (p *Proxy) takeLocked() []*pair {
	pairs := make([]*pair, 0, len(p.mu.pairs))
	for pr := range p.mu.pairs {
		pairs = append(pairs, pr)
	}
	clear(p.mu.pairs)
	return pairs
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.wg.Add(1)
		go p.serve(conn)
	}
}

func (p *Proxy) serve(down net.Conn) {
	defer p.wg.Done()
	pr := &pair{down: down}
	p.mu.Lock()
	mode, closed := p.mu.mode, p.mu.closed
	p.mu.Unlock()
	switch {
	case closed || mode == Cut:
		_ = down.Close()
		return
	case mode == Forward:
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = down.Close()
			return
		}
		pr.up = up
	default:
		pr.held.Store(true)
	}
	p.mu.Lock()
	if p.mu.closed || p.mu.mode != mode {
		// The mode changed while dialing: start over as it says now.
		p.mu.Unlock()
		pr.close()
		return
	}
	p.mu.pairs[pr] = struct{}{}
	p.mu.Unlock()
	if pr.up != nil {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.pipe(pr, pr.down, pr.up)
		}()
	}
	p.pipe(pr, pr.up, pr.down)
}

// pipe copies src to dst (nil: drops it) until src ends. In a black hole
// the bytes are dropped and the end of src is not passed on.
func (p *Proxy) pipe(pr *pair, dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && dst != nil && !pr.held.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				p.drop(pr)
				return
			}
		}
		if err != nil {
			if !pr.held.Load() {
				p.drop(pr)
			}
			return
		}
	}
}

// drop closes a connection and forgets it.
func (p *Proxy) drop(pr *pair) {
	p.mu.Lock()
	delete(p.mu.pairs, pr)
	p.mu.Unlock()
	pr.close()
}
