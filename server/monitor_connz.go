package server

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
)

// Connz is the body of /connz: one page of the open connections.
type Connz struct {
	ID       string      `json:"server_id"`
	Now      time.Time   `json:"now"`
	NumConns int         `json:"num_connections"` // on this page
	Total    int         `json:"total"`           // selected, over all pages
	Offset   int         `json:"offset"`
	Limit    int         `json:"limit"`
	Conns    []*ConnInfo `json:"connections"`
}

// ConnInfo describes one connection. Field names are the reference
// server's.
type ConnInfo struct {
	Cid          uint64    `json:"cid"`
	Kind         string    `json:"kind,omitempty"`
	Type         string    `json:"type,omitempty"`
	IP           string    `json:"ip"`
	Port         int       `json:"port"`
	Start        time.Time `json:"start"`
	LastActivity time.Time `json:"last_activity"` // the last read from the client
	Uptime       string    `json:"uptime"`
	Idle         string    `json:"idle"`
	Pending      int       `json:"pending_bytes"`
	InMsgs       int64     `json:"in_msgs"`
	OutMsgs      int64     `json:"out_msgs"`
	InBytes      int64     `json:"in_bytes"`
	OutBytes     int64     `json:"out_bytes"`
	NumSubs      uint32    `json:"subscriptions"`
	Name         string    `json:"name,omitempty"`
	Lang         string    `json:"lang,omitempty"`
	Version      string    `json:"version,omitempty"`
	// AuthorizedUser, Account, JWT, IssuerKey, NameTag and Tags are
	// filled only when asked for with auth=true, as in nats-server: the
	// user the client authenticated as (a name, an nkey, or a user JWT's
	// key); its account, unless the global one; a user JWT, unless a
	// bearer token; the user's issuer (a configured nkey's account, the
	// key that signed a user JWT); the account's name tag; a user JWT's
	// tags.
	AuthorizedUser string      `json:"authorized_user,omitempty"`
	Account        string      `json:"account,omitempty"`
	Subs           []string    `json:"subscriptions_list,omitempty"`
	SubsDetail     []SubDetail `json:"subscriptions_list_detail,omitempty"`
	JWT            string      `json:"jwt,omitempty"`
	IssuerKey      string      `json:"issuer_key,omitempty"`
	NameTag        string      `json:"name_tag,omitempty"`
	Tags           jwt.TagList `json:"tags,omitempty"`
}

// connOrder is one way /connz sorts: how to compare two connections, and
// whether the largest comes first.
type connOrder struct {
	cmp        func(a, b *ConnInfo) int
	descending bool
}

// connOrders are the sort options of /connz, with the reference server's
// names and directions: everything descending except the connection ID and
// start time (the same order) and uptime (shortest first, so that it is
// not the same order again).
var connOrders = map[string]connOrder{
	"cid":        {cmp: byCid},
	"start":      {cmp: byCid},
	"subs":       {cmp: func(a, b *ConnInfo) int { return cmp.Compare(a.NumSubs, b.NumSubs) }, descending: true},
	"pending":    {cmp: func(a, b *ConnInfo) int { return cmp.Compare(a.Pending, b.Pending) }, descending: true},
	"msgs_to":    {cmp: func(a, b *ConnInfo) int { return cmp.Compare(a.OutMsgs, b.OutMsgs) }, descending: true},
	"msgs_from":  {cmp: func(a, b *ConnInfo) int { return cmp.Compare(a.InMsgs, b.InMsgs) }, descending: true},
	"bytes_to":   {cmp: func(a, b *ConnInfo) int { return cmp.Compare(a.OutBytes, b.OutBytes) }, descending: true},
	"bytes_from": {cmp: func(a, b *ConnInfo) int { return cmp.Compare(a.InBytes, b.InBytes) }, descending: true},
	"last":       {cmp: func(a, b *ConnInfo) int { return a.LastActivity.Compare(b.LastActivity) }, descending: true},
	// Idle time at one instant is the reverse of the last activity.
	"idle":   {cmp: func(a, b *ConnInfo) int { return b.LastActivity.Compare(a.LastActivity) }, descending: true},
	"uptime": {cmp: func(a, b *ConnInfo) int { return b.Start.Compare(a.Start) }},
}

func byCid(a, b *ConnInfo) int { return cmp.Compare(a.Cid, b.Cid) }

// connzQuery is a parsed /connz request.
type connzQuery struct {
	order         connOrder
	subs          subsMode
	auth          bool
	offset, limit int
	cid           uint64 // 0: every connection
	acc           string // only this account's connections; "": every account
	user          string // only this user's; "": every user
}

func parseConnzQuery(r *http.Request) (connzQuery, error) {
	q := newQuery(r.URL.Query())
	var cq connzQuery
	sortBy := q.v.Get("sort")
	switch sortBy {
	case "":
		sortBy = "cid"
	case "stop", "reason":
		return cq, fmt.Errorf("%w sort=%q: Skiff keeps no closed connections", errBadQuery, sortBy)
	case "rtt":
		return cq, fmt.Errorf("%w sort=%q: Skiff does not measure round-trip times", errBadQuery, sortBy)
	}
	order, ok := connOrders[sortBy]
	if !ok {
		return cq, fmt.Errorf("%w sort=%q: want one of %s", errBadQuery, sortBy, sortNames())
	}
	cq.order = order
	switch state := strings.ToLower(q.v.Get("state")); state {
	case "", "open":
	default:
		return cq, fmt.Errorf("%w state=%q: Skiff keeps no closed connections; only state=open", errBadQuery, state)
	}
	if strings.EqualFold(q.v.Get("subs"), "detail") {
		cq.subs = subsDetail
	} else if q.bool("subs") {
		cq.subs = subsList
	}
	cq.auth = q.bool("auth")
	cq.offset, cq.limit = q.page()
	cq.cid = q.uint64("cid")
	cq.acc, cq.user = q.v.Get("acc"), q.v.Get("user")
	return cq, q.err
}

func sortNames() string {
	names := make([]string, 0, len(connOrders))
	for n := range connOrders {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

func (m *monitor) handleConnz(w http.ResponseWriter, r *http.Request) {
	cq, err := parseConnzQuery(r)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, m.connz(cq, time.Now()))
}

func (m *monitor) connz(cq connzQuery, now time.Time) *Connz {
	clients := m.s.clients()
	if cq.cid != 0 {
		clients = slices.DeleteFunc(clients, func(c *client) bool { return c.cid != cq.cid })
	}
	if cq.acc != "" || cq.user != "" {
		clients = slices.DeleteFunc(clients, func(c *client) bool { return !c.selected(cq.acc, cq.user) })
	}
	type entry struct {
		info *ConnInfo
		c    *client
	}
	entries := make([]entry, len(clients))
	for i, c := range clients {
		entries[i] = entry{c.connInfo(now, cq.auth), c}
	}
	// Ties keep connection ID order, so that pages do not overlap.
	slices.SortFunc(entries, func(a, b entry) int { return byCid(a.info, b.info) })
	slices.SortStableFunc(entries, func(a, b entry) int {
		if cq.order.descending {
			return cq.order.cmp(b.info, a.info)
		}
		return cq.order.cmp(a.info, b.info)
	})
	lo, hi := paginate(len(entries), cq.offset, cq.limit)
	page := make([]*ConnInfo, 0, hi-lo)
	for _, e := range entries[lo:hi] {
		// Only the page's lists are built: they can be long.
		e.c.listSubs(e.info, cq.subs)
		page = append(page, e.info)
	}
	return &Connz{
		ID:       m.s.id,
		Now:      now.UTC(),
		NumConns: len(page),
		Total:    len(entries),
		Offset:   cq.offset,
		Limit:    cq.limit,
		Conns:    page,
	}
}
