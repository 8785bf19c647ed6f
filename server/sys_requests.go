package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/skiffmq/skiff/subject"
)

// reasonKicked is why a connection closed on a KICK request, nats-server's.
const reasonKicked = "Kicked"

// Requests the system account answers, on every server (a request to
// .PING. reaches them all through their interest, and each answers):
//
//	$SYS.REQ.SERVER.PING                   STATSZ, legacy form (`nats server list`, `ping`)
//	$SYS.REQ.SERVER.PING.<Z>               every server's Z
//	$SYS.REQ.SERVER.<id>.<Z>               one server's Z
//	$SYS.REQ.SERVER.<id>.KICK, .LDM        close a connection, or tell it lame duck mode
//	$SYS.REQ.ACCOUNT.<acc>.<AZ>            AZ of one account
//	$SYS.REQ.USER.<acc>.INFO               who the requester is (this server only)
//
// Z is IDZ, STATSZ, VARZ, SUBSZ, CONNZ, ROUTEZ, GATEWAYZ, LEAFZ, HEALTHZ,
// JSZ, and those components add (HandleSysRequest); AZ is SUBSZ, CONNZ,
// LEAFZ, JSZ and CONNS. The answers are the HTTP endpoints' (the same
// builders), in a ServerAPIResponse, except for IDZ and STATSZ, which
// answer bare as nats-server's do. A request's JSON body holds the
// endpoint's options and the EventFilterOptions; a server the filters do
// not select stays silent. Answers are never compressed: the nats CLI asks
// for snappy, but reads what comes as it comes.
//
// PROFILEZ, EXPVARZ and IPQUEUESZ are answered in sys_runtime.go, RAFTZ
// by a clustered JetStream (HandleSysRequest). Not answered (no
// responders): RELOAD, as Skiff does not reload its configuration.

// builtinSysRequest reports whether the server answers the z request name
// itself (JSZ is JetStream's, with an answer for a server without it).
func builtinSysRequest(name string) bool {
	switch name {
	case "IDZ", "STATSZ", "VARZ", "SUBSZ", "CONNZ", "ROUTEZ", "GATEWAYZ", "LEAFZ", "HEALTHZ", "ACCOUNTZ",
		"KICK", "LDM", "INFO", "STATZ", "CONNS", "PROFILEZ", "EXPVARZ", "IPQUEUESZ":
		return true
	}
	return false
}

// errSkip: the request is not for this server; it stays silent.
var errSkip = errors.New("not for this server")

// subscribeRequests subscribes the requests the server answers.
func (sy *sysState) subscribeRequests() {
	server := func(z string, h func(*sysIn)) {
		sy.on("$SYS.REQ.SERVER.PING."+z, true, h)
		sy.on("$SYS.REQ.SERVER."+sy.s.id+"."+z, true, h)
	}
	sy.on("$SYS.REQ.SERVER.PING", true, sy.statszReq)
	server("STATSZ", sy.statszReq)
	server("IDZ", sy.idzReq)
	server("VARZ", func(in *sysIn) {
		var o EventFilterOptions
		sy.zreq(in, &o, &o, func() (any, error) { return sy.s.mon.varz(time.Now()), nil })
	})
	server("SUBSZ", func(in *sysIn) { sy.subszReq(in, nil) })
	server("CONNZ", func(in *sysIn) { sy.connzReq(in, nil) })
	server("ROUTEZ", sy.routezReq)
	server("GATEWAYZ", func(in *sysIn) {
		var o EventFilterOptions
		sy.zreq(in, &o, &o, func() (any, error) { return sy.s.gatewayz(), nil })
	})
	server("LEAFZ", func(in *sysIn) { sy.leafzReq(in, nil) })
	server("HEALTHZ", sy.healthzReq)
	server("JSZ", func(in *sysIn) { sy.jszReq(in, nil) })
	server("ACCOUNTZ", func(in *sysIn) {
		var o struct {
			AccountzOptions
			EventFilterOptions
		}
		sy.zreq(in, &o, &o.EventFilterOptions, func() (any, error) { return sy.s.Accountz(o.AccountzOptions) })
	})
	sy.subscribeRuntime(server)
	sy.on("$SYS.REQ.SERVER."+sy.s.id+".KICK", true, sy.kickReq)
	sy.on("$SYS.REQ.SERVER."+sy.s.id+".LDM", true, sy.ldmReq)

	account := func(z string, h func(in *sysIn, acc *Account)) {
		sy.on("$SYS.REQ.ACCOUNT.*."+z, true, func(in *sysIn) {
			toks := strings.Split(in.subject, ".")
			if len(toks) != 5 {
				return
			}
			sy.accountReq(in, toks[3], h)
		})
	}
	account("SUBSZ", sy.subszReq)
	account("CONNZ", sy.connzReq)
	account("LEAFZ", sy.leafzReq)
	account("JSZ", sy.jszReq)
	account("CONNS", sy.connsReq)
	account("INFO", func(in *sysIn, acc *Account) {
		var o EventFilterOptions
		sy.zreq(in, &o, &o, func() (any, error) { return acc.info(), nil })
	})
	account("STATZ", func(in *sysIn, acc *Account) { sy.statzReq(in, acc) })
	sy.on("$SYS.REQ.ACCOUNT.PING.STATZ", true, func(in *sysIn) { sy.statzReq(in, nil) })
	sy.on("$SYS.REQ.USER.*.INFO", true, sy.userInfoReq)
}

// statzReq answers STATZ: the statistics of one account (acc), or of
// those the body names, every one without; a server where none of them
// has a client stays silent unless include_unused, as nats-server's.
func (sy *sysState) statzReq(in *sysIn, acc *Account) {
	var o struct {
		AccountStatzOptions
		EventFilterOptions
	}
	sy.zreq(in, &o, &o.EventFilterOptions, func() (any, error) {
		if acc != nil {
			o.Accounts = []string{acc.name} // whatever the body says: a tenant's import asks here
		}
		stz := sy.s.AccountStatz(o.AccountStatzOptions)
		if len(stz.Accounts) == 0 && !o.IncludeUnused {
			return nil, errSkip
		}
		return stz, nil
	})
}

// subscribeComponent subscribes the z request name that a component
// added (HandleSysRequest), about the server and about one account.
func (sy *sysState) subscribeComponent(name string) {
	h := func(in *sysIn, acc *Account) {
		var o EventFilterOptions
		sy.zreq(in, &o, &o, func() (any, error) { return sy.reqs[name](acc, in.data) })
	}
	sy.on("$SYS.REQ.SERVER.PING."+name, true, func(in *sysIn) { h(in, nil) })
	sy.on("$SYS.REQ.SERVER."+sy.s.id+"."+name, true, func(in *sysIn) { h(in, nil) })
	sy.on("$SYS.REQ.ACCOUNT.*."+name, true, func(in *sysIn) {
		if toks := strings.Split(in.subject, "."); len(toks) == 5 {
			sy.accountReq(in, toks[3], h)
		}
	})
}

// accountReq runs h for the account named in a $SYS.REQ.ACCOUNT request.
// "PING" names no account: $SYS.REQ.ACCOUNT.PING.<AZ> is a request of its
// own. An account this server does not have gets an error.
func (sy *sysState) accountReq(in *sysIn, name string, h func(*sysIn, *Account)) {
	if name == "PING" {
		return
	}
	acc := sy.s.accounts.lookup(name)
	if acc == nil {
		var o EventFilterOptions
		sy.zreq(in, &o, &o, func() (any, error) { return nil, fmt.Errorf("account %q not found", name) })
		return
	}
	h(in, acc)
}

// zreq answers a request: its body decoded into opts (whose filter part
// is filter) selects this server or not, then build makes the data.
func (sy *sysState) zreq(in *sysIn, opts any, filter *EventFilterOptions, build func() (any, error)) {
	if in.reply == "" {
		return
	}
	resp := &ServerAPIResponse{Server: &ServerInfo{}}
	var err error
	status := 0
	if len(in.data) != 0 {
		if err = json.Unmarshal(in.data, opts); err != nil {
			status = http.StatusBadRequest
		} else if sy.s.filtered(filter) {
			return
		}
	}
	if err == nil {
		resp.Data, err = build()
		switch {
		case errors.Is(err, errSkip):
			return
		case errors.Is(err, errBadQuery):
			status = http.StatusBadRequest
		case err != nil:
			status = http.StatusInternalServerError
		}
	}
	if err != nil {
		resp.Data, resp.Error = nil, &APIError{Code: status, Description: err.Error()}
	}
	sy.answer(in, resp.Server, resp)
}

// filtered reports whether f leaves this server out (nats-server's
// filterRequest).
func (s *Server) filtered(f *EventFilterOptions) bool {
	name, host, cluster := s.name, s.opts.Host, s.clusterName()
	if f.ExactMatch {
		if (f.Name != "" && f.Name != name) || (f.Host != "" && f.Host != host) || (f.Cluster != "" && f.Cluster != cluster) {
			return true
		}
	} else if (f.Name != "" && !strings.Contains(name, f.Name)) || (f.Host != "" && !strings.Contains(host, f.Host)) ||
		(f.Cluster != "" && !strings.Contains(cluster, f.Cluster)) {
		return true
	}
	// Every tag asked for must be the server's; Skiff servers have no
	// JetStream domain.
	for _, t := range f.Tags {
		if !slices.Contains(s.opts.Tags, strings.ToLower(strings.TrimSpace(t))) {
			return true
		}
	}
	return f.Domain != ""
}

// statszReq answers STATSZ; without a reply it publishes STATSZ on the
// server's own subject instead (at most once a second).
func (sy *sysState) statszReq(in *sysIn) {
	if in.reply == "" {
		sy.sendStatsz(sy.statszSubject(), false)
		return
	}
	if len(in.data) != 0 {
		var f EventFilterOptions
		if err := json.Unmarshal(in.data, &f); err != nil {
			resp := &ServerAPIResponse{Server: &ServerInfo{}, Error: &APIError{Code: http.StatusBadRequest, Description: err.Error()}}
			sy.answer(in, resp.Server, resp)
			return
		}
		if sy.s.filtered(&f) {
			return
		}
	}
	m := sy.statsz()
	sy.answer(in, &m.Server, m)
}

// idzReq answers IDZ, unfiltered as nats-server's.
func (sy *sysState) idzReq(in *sysIn) {
	s := sy.s
	sy.answer(in, nil, &ServerID{Name: s.name, Host: s.opts.Host, ID: s.id})
}

// ConnzOptions are the options of CONNZ: /connz's query parameters, with
// nats-server's JSON names.
type ConnzOptions struct {
	Sort                string `json:"sort"`
	Username            bool   `json:"auth"`
	Subscriptions       bool   `json:"subscriptions"`
	SubscriptionsDetail bool   `json:"subscriptions_detail"`
	Offset              int    `json:"offset"`
	Limit               int    `json:"limit"`
	CID                 uint64 `json:"cid"`
	// State selects open (0), closed (1) or all (2) connections; Skiff
	// keeps no closed connections, so only 0 is answered.
	State         int    `json:"state"`
	User          string `json:"user"`
	Account       string `json:"acc"`
	FilterSubject string `json:"filter_subject"`
	MQTTClient    string `json:"mqtt_client"`
}

type connzEventOptions struct {
	ConnzOptions
	EventFilterOptions
}

// query checks o as parseConnzQuery checks /connz's parameters.
func (o *ConnzOptions) query() (connzQuery, error) {
	var cq connzQuery
	bad := func(format string, args ...any) (connzQuery, error) {
		return cq, fmt.Errorf("%w "+format, append([]any{errBadQuery}, args...)...)
	}
	sortBy := o.Sort
	switch sortBy {
	case "":
		sortBy = "cid"
	case "stop", "reason":
		return bad("sort=%q: Skiff keeps no closed connections", sortBy)
	case "rtt":
		return bad("sort=%q: Skiff does not measure round-trip times", sortBy)
	}
	order, ok := connOrders[sortBy]
	if !ok {
		return bad("sort=%q: want one of %s", sortBy, sortNames())
	}
	switch {
	case o.State != 0:
		return bad("state=%d: Skiff keeps no closed connections; only state 0 (open)", o.State)
	case o.FilterSubject != "":
		return bad("filter_subject: Skiff's connz does not filter by subject")
	case o.MQTTClient != "":
		return bad("mqtt_client: Skiff has no MQTT clients")
	case o.Offset < 0 || o.Limit < 0:
		return bad("offset %d, limit %d: want non-negative numbers", o.Offset, o.Limit)
	}
	cq.order, cq.auth, cq.offset, cq.cid = order, o.Username, o.Offset, o.CID
	cq.acc, cq.user = o.Account, o.User
	cq.limit = o.Limit
	if cq.limit == 0 {
		cq.limit = defaultListLimit
	}
	cq.limit = min(cq.limit, maxListLimit)
	switch {
	case o.SubscriptionsDetail:
		cq.subs = subsDetail
	case o.Subscriptions:
		cq.subs = subsList
	}
	return cq, nil
}

// connzReq answers CONNZ: of the server, or (acc set) of one account.
func (sy *sysState) connzReq(in *sysIn, acc *Account) {
	var o connzEventOptions
	sy.zreq(in, &o, &o.EventFilterOptions, func() (any, error) {
		cq, err := o.query()
		if err != nil {
			return nil, err
		}
		if acc != nil {
			cq.acc = acc.name // whatever the body says: a tenant's import asks here
		}
		return sy.s.mon.connz(cq, time.Now()), nil
	})
}

// SubszOptions are the options of SUBSZ: /subsz's query parameters, with
// nats-server's JSON names.
type SubszOptions struct {
	Offset        int    `json:"offset"`
	Limit         int    `json:"limit"`
	Subscriptions bool   `json:"subscriptions"`
	Account       string `json:"account,omitempty"`
	Test          string `json:"test,omitempty"`
}

type subszEventOptions struct {
	SubszOptions
	EventFilterOptions
}

// query checks o as parseSubszQuery checks /subsz's parameters.
func (o *SubszOptions) query(s *Server) (subszQuery, error) {
	sq := subszQuery{subs: o.Subscriptions, offset: o.Offset, limit: o.Limit, test: o.Test, acc: o.Account}
	if sq.offset < 0 || sq.limit < 0 {
		return sq, fmt.Errorf("%w offset %d, limit %d: want non-negative numbers", errBadQuery, sq.offset, sq.limit)
	}
	if sq.limit == 0 {
		sq.limit = defaultListLimit
	}
	sq.limit = min(sq.limit, maxListLimit)
	if sq.test != "" {
		if err := subject.ValidateLiteral(sq.test); err != nil {
			return sq, fmt.Errorf("%w test=%q: want a literal subject: %v", errBadQuery, sq.test, err)
		}
	}
	if sq.acc != "" && s.accounts.lookup(sq.acc) == nil {
		return sq, fmt.Errorf("%w account=%q: no such account", errBadQuery, sq.acc)
	}
	return sq, nil
}

// subszReq answers SUBSZ: of the server, or (acc set) of one account,
// with its subscriptions listed.
func (sy *sysState) subszReq(in *sysIn, acc *Account) {
	var o subszEventOptions
	sy.zreq(in, &o, &o.EventFilterOptions, func() (any, error) {
		if acc != nil {
			o.Subscriptions, o.Account = true, acc.name
		}
		sq, err := o.query(sy.s)
		if err != nil {
			return nil, err
		}
		return sy.s.mon.subsz(sq, time.Now()), nil
	})
}

// routezReq answers ROUTEZ.
func (sy *sysState) routezReq(in *sysIn) {
	var o struct {
		Subscriptions       bool `json:"subscriptions"`
		SubscriptionsDetail bool `json:"subscriptions_detail"`
		EventFilterOptions
	}
	sy.zreq(in, &o, &o.EventFilterOptions, func() (any, error) {
		return sy.s.routez(time.Now(), o.Subscriptions || o.SubscriptionsDetail), nil
	})
}

// Gatewayz and Leafz are nats-server's bodies for gateways and leaf nodes,
// which Skiff does not have: always empty.
type Gatewayz struct {
	ID               string              `json:"server_id"`
	Now              time.Time           `json:"now"`
	OutboundGateways map[string]struct{} `json:"outbound_gateways"`
	InboundGateways  map[string]struct{} `json:"inbound_gateways"`
}

// Leafz is nats-server's body of /leafz: no leaf nodes in Skiff.
type Leafz struct {
	ID       string     `json:"server_id"`
	Now      time.Time  `json:"now"`
	NumLeafs int        `json:"leafnodes"`
	Leafs    []struct{} `json:"leafs"`
}

func (s *Server) gatewayz() *Gatewayz {
	return &Gatewayz{ID: s.id, Now: time.Now().UTC(), OutboundGateways: map[string]struct{}{}, InboundGateways: map[string]struct{}{}}
}

func (sy *sysState) leafzReq(in *sysIn, _ *Account) {
	var o EventFilterOptions
	sy.zreq(in, &o, &o, func() (any, error) {
		return &Leafz{ID: sy.s.id, Now: time.Now().UTC(), Leafs: []struct{}{}}, nil
	})
}

// HealthStatus is the answer to HEALTHZ, nats-server's.
type HealthStatus struct {
	Status     string `json:"status"`
	StatusCode int    `json:"status_code,omitempty"`
	Error      string `json:"error,omitempty"`
}

// healthzReq answers HEALTHZ as /healthz does (health.go). The health of
// streams and consumers is not checked: asking for one is an error.
func (sy *sysState) healthzReq(in *sysIn) {
	var o struct {
		JSEnabled     bool   `json:"js-enabled,omitempty"`
		JSEnabledOnly bool   `json:"js-enabled-only,omitempty"`
		JSServerOnly  bool   `json:"js-server-only,omitempty"`
		JSMetaOnly    bool   `json:"js-meta-only,omitempty"`
		Account       string `json:"account,omitempty"`
		Stream        string `json:"stream,omitempty"`
		Consumer      string `json:"consumer,omitempty"`
		EventFilterOptions
	}
	sy.zreq(in, &o, &o.EventFilterOptions, func() (any, error) {
		if o.Account != "" || o.Stream != "" || o.Consumer != "" {
			return nil, fmt.Errorf("%w: Skiff's healthz does not check accounts, streams or consumers", errBadQuery)
		}
		return sy.s.healthz(o.JSEnabled || o.JSEnabledOnly), nil
	})
}

// jszDisabled is JSZ's answer on a server without JetStream: nothing,
// in nats-server's shape.
type jszDisabled struct {
	Memory          uint64 `json:"memory"`
	Storage         uint64 `json:"storage"`
	ReservedMemory  uint64 `json:"reserved_memory"`
	ReservedStorage uint64 `json:"reserved_storage"`
	Accounts        int    `json:"accounts"`
	HAAssets        int    `json:"ha_assets"`
	API             struct {
		Level  int    `json:"level"`
		Total  uint64 `json:"total"`
		Errors uint64 `json:"errors"`
	} `json:"api"`
	ID       string    `json:"server_id"`
	Now      time.Time `json:"now"`
	Disabled bool      `json:"disabled"`
	Config   struct {
		MaxMemory  int64 `json:"max_memory"`
		MaxStorage int64 `json:"max_storage"`
	} `json:"config"`
	Streams   int    `json:"streams"`
	Consumers int    `json:"consumers"`
	Messages  uint64 `json:"messages"`
	Bytes     uint64 `json:"bytes"`
	Total     int    `json:"total"`
}

// jszReq answers JSZ with what JetStream registered, of the server or
// (acc set) of one account.
func (sy *sysState) jszReq(in *sysIn, acc *Account) {
	var f struct {
		LeaderOnly bool `json:"leader_only"`
		EventFilterOptions
	}
	sy.zreq(in, &f, &f.EventFilterOptions, func() (any, error) {
		switch js := sy.reqs["JSZ"]; {
		case js != nil:
			return js(acc, in.data)
		case acc != nil:
			return nil, errors.New("jetstream not enabled")
		case f.LeaderOnly:
			return nil, errSkip
		}
		return &jszDisabled{ID: sy.s.id, Now: time.Now().UTC(), Disabled: true}, nil
	})
}

// connsReq answers an account's connection count (CONNS), when it has
// clients here.
func (sy *sysState) connsReq(in *sysIn, acc *Account) {
	if len(in.data) > 0 {
		var m struct {
			Account string `json:"acc"`
		}
		if err := json.Unmarshal(in.data, &m); err != nil || (m.Account != "" && m.Account != acc.name) {
			return
		}
	}
	if in.reply != "" && acc.NumConnections() > 0 {
		sy.sendConns(acc, in.reply)
	}
}

// kickReq closes the connection a KICK names.
func (sy *sysState) kickReq(in *sysIn) {
	sy.clientReq(in, "no such client or leafnode id", func(c *client) error {
		c.log.Info("client kicked through $SYS")
		c.close(reasonKicked, true)
		return nil
	})
}

// ldmReq tells the connection an LDM names that the server is entering
// lame duck mode, so that it moves to another server.
func (sy *sysState) ldmReq(in *sysIn) {
	sy.clientReq(in, "no such client id", func(c *client) error {
		if !c.asyncInfo.Load() {
			return errors.New("client does not support Lame Duck Mode or is not ready to receive the notification")
		}
		info := sy.s.info
		info.LameDuckMode = true
		info.ConnectURLs = sy.s.connectURLs()
		if c.out.queue(appendInfoJSON(nil, &info)) {
			c.out.wake()
		}
		return nil
	})
}

// clientReq runs do on the connection a KICK or LDM body names, and
// answers with its error (unknown when there is no such connection). A
// body that does not parse gets no answer, as from nats-server.
func (sy *sysState) clientReq(in *sysIn, unknown string, do func(*client) error) {
	var req ClientIDReq
	if json.Unmarshal(in.data, &req) != nil {
		return
	}
	var o EventFilterOptions
	sy.zreq(in, &o, &o, func() (any, error) {
		c := sy.s.clientByID(req.CID)
		if c == nil {
			return nil, errors.New(unknown)
		}
		return nil, do(c)
	})
}

// clientByID returns the client connection cid, or nil.
func (s *Server) clientByID(cid uint64) *client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.clients[cid]
}

// userInfoReq answers who the requester is. Only the server the requester
// is connected to knows: a request from a peer is ignored.
func (sy *sysState) userInfoReq(in *sysIn) {
	c := in.from
	if c == nil || in.reply == "" {
		return
	}
	resp := &ServerAPIResponse{Server: &ServerInfo{}}
	ui := &UserInfo{Account: c.acc.name, AccountName: c.acc.nameTag()}
	c.mu.Lock()
	ui.UserID = c.mu.user
	c.mu.Unlock()
	if u := c.usr.Load(); u != nil {
		ui.Permissions = publicPermissions(u.perms)
		if u.jwt != nil && u.jwt.expiresIn > 0 {
			// expiresIn counts from CONNECT, which follows the accept
			// (c.start) closely: this errs early by that much.
			ui.Expires = max(0, u.jwt.expiresIn-time.Since(c.start))
		}
	}
	resp.Data = ui
	sy.answer(in, resp.Server, resp)
}

// publicPermissions shows p as nats-server's UserInfo does (nil: none).
func publicPermissions(p *Permissions) *UserPerms {
	if p == nil {
		return nil
	}
	side := func(sp SubjectPermission) *SubjectPerm {
		if len(sp.Allow) == 0 && len(sp.Deny) == 0 {
			return nil
		}
		return &SubjectPerm{Allow: sp.Allow, Deny: sp.Deny}
	}
	return &UserPerms{Publish: side(p.Publish), Subscribe: side(p.Subscribe)}
}
