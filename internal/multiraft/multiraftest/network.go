package multiraftest

import (
	"cmp"
	"math/rand"
	"slices"
	"sync"

	"github.com/skiffmq/skiff/internal/multiraft"
)

// Faults are what a FakeTransport does to the messages it carries. The
// zero value delivers everything once, in order, at the next Step.
type Faults struct {
	// Drop is the probability that a message (or a heartbeat) is lost,
	// silently, as on a real network.
	Drop float64
	// Dup is the probability that a message is delivered twice.
	Dup float64
	// Delay is the most ticks (FakeTransport.Tick) a message waits before
	// it can be delivered; each waits a uniform 0..Delay.
	Delay int
	// Reorder makes Step deliver a random deliverable message instead of
	// the oldest.
	Reorder bool
	// BulkBytes bounds the bulk bytes in flight on one link (a sender's
	// bulk lane): Send returns bulk envelopes beyond it as dropped. Zero:
	// no bound.
	BulkBytes int
}

// FakeTransport is an in-memory network between test servers, one
// Endpoint (a multiraft.Transport) per server. Nothing moves until the
// test calls Step, which delivers one message; Tick advances the time
// that delays count in. Its randomness comes from one seeded RNG, so a
// test that drives it from one goroutine sees the same faults for the
// same seed.
type FakeTransport struct {
	mu struct {
		sync.Mutex
		rng      *rand.Rand
		faults   Faults
		now      int
		seq      uint64
		eps      map[uint64]*Endpoint
		flight   []packet
		cut      map[[2]uint64]bool // links cut by Partition, lower ID first
		down     map[uint64]bool    // crashed servers
		bulk     map[[2]uint64]int  // bulk bytes in flight, from -> to
		observer func(from, to uint64, e multiraft.Envelope)
		stats    NetStats
	}
}

// NetStats are a FakeTransport's counters.
type NetStats struct {
	Sends      int // Send calls that carried something
	Msgs       int // envelopes sent
	Beats      int // heartbeats sent
	Dropped    int // lost to Drop, a cut link or a crashed server
	Duplicated int
	Delivered  int
}

type packet struct {
	from, to uint64
	at       int
	seq      uint64
	env      *multiraft.Envelope
	beat     *multiraft.Beat
}

// NewFakeTransport returns a network whose faults draw from a RNG seeded
// with seed.
func NewFakeTransport(seed int64) *FakeTransport {
	ft := &FakeTransport{}
	ft.mu.rng = rand.New(rand.NewSource(seed))
	ft.mu.eps = map[uint64]*Endpoint{}
	ft.mu.cut = map[[2]uint64]bool{}
	ft.mu.down = map[uint64]bool{}
	ft.mu.bulk = map[[2]uint64]int{}
	return ft
}

// Endpoint is one server's side of a FakeTransport.
type Endpoint struct {
	ft *FakeTransport
	id uint64
	h  multiraft.Handler
}

var _ multiraft.Transport = (*Endpoint)(nil)

// Endpoint returns server id's endpoint, the same one across calls.
func (ft *FakeTransport) Endpoint(id uint64) *Endpoint {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ep := ft.mu.eps[id]
	if ep == nil {
		ep = &Endpoint{ft: ft, id: id}
		ft.mu.eps[id] = ep
	}
	return ep
}

// SetHandler connects the endpoint to its server, and reports every link
// to a live server up, both ways.
func (ep *Endpoint) SetHandler(h multiraft.Handler) {
	ft := ep.ft
	ft.mu.Lock()
	ep.h = h
	delete(ft.mu.down, ep.id)
	ups := ft.linksOfLocked(ep.id)
	ft.mu.Unlock()
	ft.notify(ups, true)
}

// SetFaults replaces the faults applied to messages sent from now on.
func (ft *FakeTransport) SetFaults(f Faults) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ft.mu.faults = f
}

// SetObserver registers f to see every envelope sent (not heartbeats), at
// Send, before any fault: a test checks what servers say there. f runs
// without the network's lock and must not call Send.
func (ft *FakeTransport) SetObserver(f func(from, to uint64, e multiraft.Envelope)) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ft.mu.observer = f
}

// Stats returns the network's counters.
func (ft *FakeTransport) Stats() NetStats {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return ft.mu.stats
}

// Pending returns the number of messages in flight.
func (ft *FakeTransport) Pending() int {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return len(ft.mu.flight)
}

// Send queues b's messages, each on its own, with the faults
// (multiraft.Transport).
func (ep *Endpoint) Send(to uint64, b multiraft.Batch) []multiraft.Envelope {
	ft := ep.ft
	ft.mu.Lock()
	obs := ft.mu.observer
	var dropped []multiraft.Envelope
	if b.Len() > 0 {
		ft.mu.stats.Sends++
	}
	ft.mu.stats.Msgs += len(b.Msgs)
	ft.mu.stats.Beats += len(b.Beats)
	if !ft.connectedLocked(ep.id, to) {
		ft.mu.stats.Dropped += b.Len()
		for _, e := range b.Msgs {
			if e.Bulk {
				dropped = append(dropped, e)
			}
		}
		ft.mu.Unlock()
		ft.observe(obs, ep.id, to, b.Msgs)
		return dropped
	}
	f := ft.mu.faults
	for i := range b.Msgs {
		e := &b.Msgs[i]
		if e.Bulk && f.BulkBytes > 0 && ft.mu.bulk[[2]uint64{ep.id, to}]+e.Len() > f.BulkBytes {
			dropped = append(dropped, *e)
			continue
		}
		ft.queueLocked(packet{from: ep.id, to: to, env: e})
	}
	for i := range b.Beats {
		ft.queueLocked(packet{from: ep.id, to: to, beat: &b.Beats[i]})
	}
	ft.mu.Unlock()
	ft.observe(obs, ep.id, to, b.Msgs)
	return dropped
}

func (ft *FakeTransport) observe(obs func(uint64, uint64, multiraft.Envelope), from, to uint64, es []multiraft.Envelope) {
	if obs == nil {
		return
	}
	for _, e := range es {
		obs(from, to, e)
	}
}

// queueLocked puts p in flight, or loses it, or duplicates it.
func (ft *FakeTransport) queueLocked(p packet) {
	f := ft.mu.faults
	rng := ft.mu.rng
	if f.Drop > 0 && rng.Float64() < f.Drop {
		ft.mu.stats.Dropped++
		return
	}
	copies := 1
	if f.Dup > 0 && rng.Float64() < f.Dup {
		copies = 2
		ft.mu.stats.Duplicated++
	}
	for range copies {
		p.at = ft.mu.now
		if f.Delay > 0 {
			p.at += rng.Intn(f.Delay + 1)
		}
		ft.mu.seq++
		p.seq = ft.mu.seq
		if p.env != nil && p.env.Bulk {
			ft.mu.bulk[[2]uint64{p.from, p.to}] += p.env.Len()
		}
		ft.mu.flight = append(ft.mu.flight, p)
	}
}

// Tick advances the network's time by one: messages delayed until then
// become deliverable.
func (ft *FakeTransport) Tick() {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ft.mu.now++
}

// Step delivers one deliverable message (the oldest, or a random one
// under Reorder) and reports whether there was one.
func (ft *FakeTransport) Step() bool {
	ft.mu.Lock()
	var due []int
	for i, p := range ft.mu.flight {
		if p.at <= ft.mu.now {
			due = append(due, i)
			if !ft.mu.faults.Reorder {
				break
			}
		}
	}
	if len(due) == 0 {
		ft.mu.Unlock()
		return false
	}
	i := due[0]
	if ft.mu.faults.Reorder {
		i = due[ft.mu.rng.Intn(len(due))]
	}
	p := ft.mu.flight[i]
	ft.mu.flight = slices.Delete(ft.mu.flight, i, i+1)
	ft.unbulkLocked(p)
	h := ft.mu.eps[p.to].h
	if h != nil {
		ft.mu.stats.Delivered++
	}
	ft.mu.Unlock()
	if h == nil {
		return true
	}
	if p.env != nil {
		h.Receive(p.from, multiraft.Batch{Msgs: []multiraft.Envelope{*p.env}})
	} else {
		h.Receive(p.from, multiraft.Batch{Beats: []multiraft.Beat{*p.beat}})
	}
	return true
}

// DeliverAll steps until nothing is deliverable and returns how many
// messages it delivered.
func (ft *FakeTransport) DeliverAll() int {
	n := 0
	for ft.Step() {
		n++
	}
	return n
}

func (ft *FakeTransport) unbulkLocked(p packet) {
	if p.env != nil && p.env.Bulk {
		ft.mu.bulk[[2]uint64{p.from, p.to}] -= p.env.Len()
	}
}

func linkOf(a, b uint64) [2]uint64 {
	if a > b {
		a, b = b, a
	}
	return [2]uint64{a, b}
}

// connectedLocked reports whether a message from a can reach b.
func (ft *FakeTransport) connectedLocked(a, b uint64) bool {
	ep := ft.mu.eps[b]
	return ep != nil && ep.h != nil && !ft.mu.down[a] && !ft.mu.down[b] && !ft.mu.cut[linkOf(a, b)]
}

// linksOfLocked returns the live links of server id, as (id, peer) pairs
// in peer order.
func (ft *FakeTransport) linksOfLocked(id uint64) [][2]uint64 {
	var out [][2]uint64
	for _, peer := range ft.idsLocked() {
		if peer != id && ft.connectedLocked(id, peer) && ft.connectedLocked(peer, id) {
			out = append(out, [2]uint64{id, peer})
		}
	}
	return out
}

func (ft *FakeTransport) idsLocked() []uint64 {
	ids := make([]uint64, 0, len(ft.mu.eps))
	for id := range ft.mu.eps {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// dropLinkLocked loses the messages in flight between a and b, both ways.
func (ft *FakeTransport) dropLinkLocked(a, b uint64) {
	keep := ft.mu.flight[:0]
	for _, p := range ft.mu.flight {
		if (p.from == a && p.to == b) || (p.from == b && p.to == a) {
			ft.unbulkLocked(p)
			ft.mu.stats.Dropped++
			continue
		}
		keep = append(keep, p)
	}
	clear(ft.mu.flight[len(keep):])
	ft.mu.flight = keep
}

// notify tells both ends of each link that it went up or down, in order.
func (ft *FakeTransport) notify(links [][2]uint64, up bool) {
	for _, l := range links {
		for _, end := range [][2]uint64{{l[0], l[1]}, {l[1], l[0]}} {
			ft.mu.Lock()
			h := ft.mu.eps[end[0]].h
			down := ft.mu.down[end[0]]
			ft.mu.Unlock()
			if h == nil || down {
				continue
			}
			if up {
				h.LinkUp(end[1])
			} else {
				h.LinkDown(end[1])
			}
		}
	}
}

// Partition cuts every link between servers of different sets: messages
// in flight on them are lost, and both ends are told the link is down.
// Links of servers in no set are left alone. Cuts add up until Heal.
func (ft *FakeTransport) Partition(sets ...[]uint64) {
	ft.mu.Lock()
	var cut [][2]uint64
	for i, s := range sets {
		for _, t := range sets[i+1:] {
			for _, a := range s {
				for _, b := range t {
					l := linkOf(a, b)
					if ft.mu.cut[l] {
						continue
					}
					if ft.connectedLocked(a, b) && ft.connectedLocked(b, a) {
						cut = append(cut, l)
					}
					ft.mu.cut[l] = true
					ft.dropLinkLocked(a, b)
				}
			}
		}
	}
	ft.mu.Unlock()
	ft.notify(cut, false)
}

// Heal restores every cut link and tells both ends of those that are live.
func (ft *FakeTransport) Heal() {
	ft.mu.Lock()
	var up [][2]uint64
	for l := range ft.mu.cut {
		delete(ft.mu.cut, l)
		if ft.connectedLocked(l[0], l[1]) && ft.connectedLocked(l[1], l[0]) {
			up = append(up, l)
		}
	}
	ft.mu.Unlock()
	slices.SortFunc(up, func(a, b [2]uint64) int {
		return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
	})
	ft.notify(up, true)
}

// Crash takes server id off the network, as a kill -9 does: its messages
// in flight are lost, its handler is dropped, and its live peers are told
// their link to it is down. SetHandler brings it back.
func (ft *FakeTransport) Crash(id uint64) {
	ft.mu.Lock()
	links := ft.linksOfLocked(id)
	for _, peer := range ft.idsLocked() {
		ft.dropLinkLocked(id, peer)
	}
	ft.mu.down[id] = true
	if ep := ft.mu.eps[id]; ep != nil {
		ep.h = nil
	}
	ft.mu.Unlock()
	ft.notify(links, false)
}
