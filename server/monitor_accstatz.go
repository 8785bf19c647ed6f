package server

import (
	"net/http"
	"strings"
	"time"
)

// AccountStatzOptions select the accounts AccountStatz reports. The JSON
// names are nats-server's, for the $SYS request that carries them.
type AccountStatzOptions struct {
	// Accounts names the accounts to report, in this order; empty: every
	// account, by name. A name the server does not have is skipped.
	Accounts []string `json:"accounts"`
	// IncludeUnused reports accounts with no client connected too.
	IncludeUnused bool `json:"include_unused"`
}

// AccountStatz is the body of /accstatz: the connections and traffic of
// each account. Field names are nats-server's.
type AccountStatz struct {
	ID       string         `json:"server_id"`
	Now      time.Time      `json:"now"`
	Accounts []*AccountStat `json:"account_statz"`
}

// AccountStat is one account's connections and traffic on this server.
type AccountStat struct {
	Account string `json:"acc"`
	Name    string `json:"name"` // its name tag: a configured account's name
	Conns   int    `json:"conns"`
	// LeafNodes is always 0: Skiff has no leaf nodes. TotalConns is
	// Conns plus LeafNodes, as in nats-server (not a running total).
	LeafNodes  int    `json:"leafnodes"`
	TotalConns int    `json:"total_conns"`
	NumSubs    uint32 `json:"num_subscriptions"`
	// Sent counts the messages and payload bytes queued for the account's
	// clients, Received those its clients published, the connections
	// that closed included (see docs/monitoring.md for how this differs
	// from nats-server's counts across imports and routes).
	Sent          DataStats `json:"sent"`
	Received      DataStats `json:"received"`
	SlowConsumers int64     `json:"slow_consumers"` // its clients closed as slow consumers
}

// DataStats counts messages and their payload bytes. nats-server's adds a
// split by routes, gateways and leaf nodes, which Skiff does not count per
// account.
type DataStats struct {
	Msgs  int64 `json:"msgs"`
	Bytes int64 `json:"bytes"`
}

func (m *monitor) handleAccountStatz(w http.ResponseWriter, r *http.Request) {
	q := newQuery(r.URL.Query())
	opts := AccountStatzOptions{IncludeUnused: q.bool("unused")}
	if q.err != nil {
		writeError(w, q.err)
		return
	}
	if list := q.v.Get("accounts"); list != "" {
		opts.Accounts = strings.Split(list, ",")
	}
	writeJSON(w, http.StatusOK, m.s.AccountStatz(opts))
}

// AccountStatz answers /accstatz (and, later, the $SYS STATZ requests):
// per account, its clients connected to this server and their traffic.
// Without IncludeUnused only accounts with a client connected are
// reported, as in nats-server.
func (s *Server) AccountStatz(opts AccountStatzOptions) *AccountStatz {
	stz := &AccountStatz{ID: s.id, Now: time.Now().UTC(), Accounts: []*AccountStat{}}
	accs := s.Accounts()
	if len(opts.Accounts) > 0 {
		accs = make([]*Account, 0, len(opts.Accounts))
		for _, name := range opts.Accounts {
			if a, ok := s.LookupAccount(name); ok {
				accs = append(accs, a)
			}
		}
	}
	for _, a := range accs {
		u := a.usage()
		if u.conns == 0 && !opts.IncludeUnused {
			continue
		}
		stz.Accounts = append(stz.Accounts, &AccountStat{
			Account:       a.name,
			Name:          a.nameTag(),
			Conns:         u.conns,
			TotalConns:    u.conns,
			NumSubs:       uint32(u.subs),
			Sent:          DataStats{Msgs: u.traffic.outMsgs, Bytes: u.traffic.outBytes},
			Received:      DataStats{Msgs: u.traffic.inMsgs, Bytes: u.traffic.inBytes},
			SlowConsumers: u.slowConsumers,
		})
	}
	return stz
}
