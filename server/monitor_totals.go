package server

import "sync"

// counters are the server's message counters at one instant: messages and
// payload bytes received from clients (in) and queued for clients (out).
type counters struct {
	inMsgs, inBytes, outMsgs, outBytes int64
}

// plus returns the sum of c and d.
func (c counters) plus(d counters) counters {
	return counters{
		inMsgs:   c.inMsgs + d.inMsgs,
		inBytes:  c.inBytes + d.inBytes,
		outMsgs:  c.outMsgs + d.outMsgs,
		outBytes: c.outBytes + d.outBytes,
	}
}

// counters returns the client's own counters.
func (c *client) counters() counters {
	msgs, bytes := c.out.counts()
	return counters{inMsgs: c.inMsgs.Load(), inBytes: c.inBytes.Load(), outMsgs: msgs, outBytes: bytes}
}

// monotonicTotals keeps the totals that /varz and /metrics report from
// ever going down. The server keeps no running totals (a shared counter
// written per message would be contended by every publisher): a total is
// the sum over live clients plus the totals of closed ones, and a client
// that closes while the sum is taken can be missed by it for an instant.
// A Prometheus counter that goes down reads as a restart, so each total
// reported is at least the last one reported. mu guards last.
type monotonicTotals struct {
	mu   sync.Mutex
	last counters
}

// keep returns c raised, field by field, to the last totals returned.
func (t *monotonicTotals) keep(c counters) counters {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last = counters{
		inMsgs:   max(t.last.inMsgs, c.inMsgs),
		inBytes:  max(t.last.inBytes, c.inBytes),
		outMsgs:  max(t.last.outMsgs, c.outMsgs),
		outBytes: max(t.last.outBytes, c.outBytes),
	}
	return t.last
}

// counters returns the server's totals, never below earlier ones.
func (m *monitor) counters() counters { return m.totals.keep(m.s.counterTotals()) }
