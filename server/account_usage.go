package server

// accountUsage is an account's clients and their traffic at one instant,
// as /accstatz, /accountz and /metrics report it.
type accountUsage struct {
	conns, subs int
	// traffic is that of the account's clients: in, the messages (and
	// their bytes, headers and payload) they published; out, those
	// queued for them.
	traffic       counters
	slowConsumers int64 // its clients closed as slow consumers
}

// usage sums the counters of the account's live clients and the totals of
// its closed ones. Nothing on the message path counts per account (that
// would be one more shared write per message): each client keeps its own
// counters, which the account adds up here. Under a.mu a client is either
// live or closed (removeClient), so no client is counted twice or missed,
// and a total never goes down. It holds a.mu for one pass over the
// account's clients, delaying their CONNECTs and closes that long.
func (a *Account) usage() accountUsage {
	a.mu.Lock()
	u := accountUsage{conns: len(a.mu.clients), traffic: a.mu.closed, slowConsumers: a.mu.slowConsumers}
	for c := range a.mu.clients {
		u.traffic = u.traffic.plus(c.counters())
	}
	a.mu.Unlock()
	u.subs = a.subs.Count()
	return u
}
