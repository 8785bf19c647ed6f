package server

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/skiffmq/skiff/match/cstrie"
)

// GlobalAccountName names the account of everything configured outside an
// account, as the reference server names it.
const GlobalAccountName = "$G"

// Account is a subject namespace: its own subscription index, the users
// that connect into it, and its limits. A message published in an account
// is delivered only to subscriptions of that account, on this server and,
// through routes, on its peers. The server makes the accounts (New); the
// zero value is not usable. An Account is safe for concurrent use.
type Account struct {
	name string
	srv  *Server
	subs *cstrie.Trie[*subscription]
	// limits are replaced whole when its JWT is updated (jwt_update.go).
	limits atomic.Pointer[accountLimits]
	// resp is its response table, made once it exports or imports
	// services, then kept.
	resp atomic.Pointer[respTable]
	// ports are its exports and imports, as validated: replaced whole
	// when the JWTs' are resolved again (jwt_update.go).
	ports atomic.Pointer[accountPorts]
	jwt   *accountJWT // operator mode: what its JWT says (jwt_account.go); nil for a configured account
	// js is the account's JetStream limits; nil: no JetStream of its own
	// configured. Replaced whole when its JWT is updated.
	js atomic.Pointer[JetStreamLimits]
	// remoteConns are the account's clients on the peers, as their
	// $SYS connection counts tell (sys_events.go): they count in
	// max_connections too.
	remoteConns atomic.Int32
	// updated is when the account was registered or its JWT last
	// applied (unix nanoseconds): /accountz update_time.
	updated atomic.Int64

	// subInserts and subRemoves count the subscriptions added to and
	// removed from the index; the server's totals are their sums. Written
	// on every SUB and UNSUB of the account's clients, so padded.
	subInserts, subRemoves paddedInt

	mu struct {
		sync.Mutex
		clients map[*client]struct{} // bound at CONNECT, until closed
		// closed sums the traffic of its clients that closed; with the
		// live clients' own counters it is the account's (usage).
		closed counters
		// slowConsumers counts its clients closed as slow consumers.
		slowConsumers int64
	}
}

// accountPorts are an account's exports and imports, as validated.
type accountPorts struct {
	exports []*Export
	streams []*streamImport
	svcs    []*serviceImport
}

func newAccount(s *Server, name string, limits accountLimits) *Account {
	a := &Account{name: name, srv: s, subs: cstrie.New[*subscription]()}
	a.limits.Store(&limits)
	a.ports.Store(&accountPorts{})
	a.updated.Store(time.Now().UnixNano())
	a.mu.clients = map[*client]struct{}{}
	return a
}

// lim returns the account's limits.
func (a *Account) lim() *accountLimits { return a.limits.Load() }

// Name returns the account's name: "$G" for the global account.
func (a *Account) Name() string { return a.name }

// NumConnections returns the account's clients connected to this server.
func (a *Account) NumConnections() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.mu.clients)
}

// NumSubscriptions returns the subscriptions in the account's index:
// its clients', internal ones, and one per subject (and queue group) a
// peer told for the account.
func (a *Account) NumSubscriptions() int { return a.subs.Count() }

// JetStreamLimits returns the account's JetStream limits, and whether its
// configuration gives it JetStream (see AccountConfig.JetStream).
func (a *Account) JetStreamLimits() (JetStreamLimits, bool) {
	if l := a.js.Load(); l != nil {
		return *l, true
	}
	return JetStreamLimits{}, false
}

// addClient binds c to the account unless that would pass the account's
// max_connections, counting its clients here and on the peers. Called
// with c.mu held (lock order c.mu, then a.mu).
func (a *Account) addClient(c *client) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if l := a.lim(); l.maxConns != noLimit && len(a.mu.clients)+int(a.remoteConns.Load()) >= int(l.maxConns) {
		return false
	}
	a.mu.clients[c] = struct{}{}
	return true
}

// removeClient unbinds c, which closed for reason, and adds its traffic to
// the account's closed totals. Called once c queues nothing more, so that
// its counters are final; both happen under a.mu, so that usage
// counts c either live or closed, never in neither or both.
func (a *Account) removeClient(c *client, reason string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.mu.clients[c]; !ok {
		return
	}
	delete(a.mu.clients, c)
	a.mu.closed = a.mu.closed.plus(c.counters())
	if reason == reasonSlowConsumer || reason == reasonSlowWrite {
		a.mu.slowConsumers++
	}
}

// GlobalAccount returns the account "$G": that of clients and users
// configured outside any account.
func (s *Server) GlobalAccount() *Account { return s.gacc }

// LookupAccount returns the account named name.
func (s *Server) LookupAccount(name string) (*Account, bool) {
	a := s.accounts.lookup(name)
	return a, a != nil
}

// Accounts returns every account, "$G" first, then by name.
func (s *Server) Accounts() []*Account { return s.accounts.all() }

// newAccounts makes the global account and the configured ones.
func (s *Server) newAccounts() {
	s.gacc = newAccount(s, GlobalAccountName, unlimited)
	s.accounts.add(s.gacc)
	for _, ac := range s.opts.Accounts {
		a := newAccount(s, ac.Name, ac.Limits.compile())
		if ac.JetStream != nil {
			l := *ac.JetStream
			a.js.Store(&l)
		}
		s.accounts.add(a) // names validated unique
	}
}

// limitsFor returns the payload and subscription bounds of a client of
// acc (as user u, nil for none): the lowest of the server's, the
// account's and a JWT user's own, as nats-server's applyAccountLimits.
func (s *Server) limitsFor(acc *Account, u *user) (maxPayload, maxSubs int) {
	maxPayload, maxSubs = s.opts.MaxPayload, s.opts.MaxSubscriptions
	lower := func(v *int, l int32) {
		if l != noLimit {
			*v = min(*v, int(l))
		}
	}
	al := acc.lim()
	lower(&maxPayload, al.maxPayload)
	lower(&maxSubs, al.maxSubs)
	if u != nil && u.jwt != nil {
		lower(&maxPayload, u.jwt.maxPayload)
		lower(&maxSubs, u.jwt.maxSubs)
	}
	return maxPayload, maxSubs
}
