package server

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/skiffmq/skiff/subject"
)

// The system account is where the server talks about itself: it publishes
// events there ($SYS.ACCOUNT.<account>.CONNECT, $SYS.SERVER.<id>.STATSZ,
// ...) and answers requests for its monitoring data ($SYS.REQ.SERVER.PING,
// $SYS.REQ.SERVER.PING.CONNZ, ...), which `nats server ...` sends. Its
// users see all of it; every other account imports a few requests that
// answer about that account only (its own connections, its own
// statistics, who its user is). docs/accounts.md says how to configure it.
//
//	read loops (connect, close)     handlers of $SYS subjects (any read loop)
//	    │ event, if someone listens       │ copy of the request
//	    ▼                                 ▼
//	  sendq (bounded) ◄──── answers ─── worker goroutine: requests, STATSZ
//	    │                                 timers, account connection counts
//	    ▼
//	sender goroutine: one Publisher in the system account
//
// Nothing on a read loop waits for the system account: a full queue drops
// the event or request and counts it (skiff_sys_dropped_total).

// Queue bounds of the system account, and its timings (nats-server's).
const (
	sysSendQueue = 4096
	sysRecvQueue = 1024

	// statszInterval is how often STATSZ is published; the first ones
	// come sooner after the start (statszFirst, doubling), so that peers
	// learn of a new server quickly.
	statszInterval = 10 * time.Second
	statszFirst    = 250 * time.Millisecond
	// statszMinGap bounds how often a request makes the server publish
	// STATSZ on its own subject.
	statszMinGap = time.Second
	// connsInterval is how often an account's connection count is
	// published while it has clients here, and connsDelay how long a
	// change waits, so that a burst of connects makes one update.
	connsInterval = 30 * time.Second
	connsDelay    = 100 * time.Millisecond
	// orphanAfter is how long a peer may stay silent (no STATSZ) before
	// its connection counts are dropped: three heartbeats.
	orphanAfter = 3 * statszInterval
)

// sysState is the machinery of the system account; the server has none
// without a system account.
type sysState struct {
	s     *Server
	acc   *Account
	sendq chan *sysOut
	recvq chan *sysIn
	kick  chan struct{} // a coalesced connection count update is due
	stop  chan struct{}
	wg    sync.WaitGroup
	seq   atomic.Uint64 // of every message sent, in ServerInfo.Seq

	sendDrops, recvDrops atomic.Int64

	// The intervals above, per server so that tests can shorten them
	// before Start.
	statszEvery, connsEvery, connsWait, orphanWait time.Duration

	// reqs are the z requests components added (HandleSysRequest).
	reqs map[string]SysFunc
	// packInbox is where peers answer this server's PACK requests (full
	// resolver, resolver_sys.go); packEvery how often it asks.
	packInbox string
	packEvery time.Duration
	lookups   atomic.Uint64 // numbers the inboxes of lookups

	mu struct {
		sync.Mutex
		started, stopped bool
		// imported are the accounts importInto saw: true for those given
		// the system imports.
		imported map[*Account]bool
		// dirty are the accounts whose connection count changed since
		// the last update, due when the kick timer fires.
		dirty map[*Account]bool
		timer *time.Timer
		// servers are the peers heard from, by server ID.
		servers    map[string]*remoteServer
		lastStatsz time.Time
	}
}

// remoteServer is a peer the system account heard from, and what it
// said about its accounts' clients.
type remoteServer struct {
	name  string
	last  time.Time
	conns map[*Account]int32
}

// sysOut is a message for the sender to publish.
type sysOut struct {
	subject, reply string
	// v is the body: marshaled by the sender once si is filled, or raw
	// bytes.
	v  any
	si *ServerInfo
	pr Principal
	// done, if set, is closed once it is published.
	done chan struct{}
}

// sysIn is a message to a $SYS subject the server handles, copied off the
// read loop that delivered it.
type sysIn struct {
	subject, reply string
	hdr, data      []byte
	h              func(*sysIn)
	pr             Principal // whom the publisher acted for
	// from is the client that published it on this server (nil for a
	// peer's, or the server's own).
	from *client
	// self is set for a message this server published.
	self bool
}

// SystemAccount returns the system account, or nil without one.
func (s *Server) SystemAccount() *Account {
	if s.sys == nil {
		return nil
	}
	return s.sys.acc
}

// ErrSysRequest wraps the errors HandleSysRequest returns.
var ErrSysRequest = errors.New("server: system request")

// SysFunc answers a $SYS monitoring request that a component added with
// HandleSysRequest. acc is the account asked about
// ($SYS.REQ.ACCOUNT.<acc>.<name>), nil for a request about the server
// ($SYS.REQ.SERVER.PING.<name> and $SYS.REQ.SERVER.<id>.<name>). opts is
// the request's JSON body (the event filters are applied already), nil if
// empty. It runs on the system account's worker goroutine: it may take
// some time, but the server's other requests wait for it. The value is
// sent as JSON in the answer's data; an error is sent as its error.
type SysFunc func(acc *Account, opts []byte) (any, error)

// HandleSysRequest makes the server answer the z request name (JetStream
// adds JSZ) on $SYS.REQ.SERVER.PING.<name>, $SYS.REQ.SERVER.<id>.<name>
// and $SYS.REQ.ACCOUNT.<account>.<name>. Call it before Start. Without a
// system account it does nothing.
func (s *Server) HandleSysRequest(name string, f SysFunc) error {
	s.mu.Lock()
	switch {
	case s.mu.started:
		s.mu.Unlock()
		return fmt.Errorf("%w: %s added after Start", ErrSysRequest, name)
	case name == "" || !subject.IsLiteral(name) || strings.Contains(name, "."):
		s.mu.Unlock()
		return fmt.Errorf("%w: %q is not one subject token", ErrSysRequest, name)
	case s.sys == nil:
		s.mu.Unlock()
		return nil
	}
	if _, dup := s.sys.reqs[name]; dup || builtinSysRequest(name) {
		s.mu.Unlock()
		return fmt.Errorf("%w: %s answered already", ErrSysRequest, name)
	}
	s.sys.reqs[name] = f
	s.mu.Unlock()
	if name != "JSZ" { // subscribed already, with an answer for a server without JetStream
		s.sys.subscribeComponent(name)
	}
	return nil
}

// newSys sets the system account up, if the server has one: the named
// account (made without users if it is "$SYS" and not configured), or in
// operator mode the operator's. It runs in New, once the accounts, the
// response prefix and the cluster exist.
func (s *Server) newSys() {
	o := &s.opts
	if o.NoSystemAccount {
		return
	}
	var acc *Account
	if s.trust != nil {
		if s.trust.sysAccount == "" {
			return
		}
		acc = s.accounts.lookup(s.trust.sysAccount) // resolved in startOperatorMode
	} else {
		name := o.systemAccount()
		if acc = s.accounts.lookup(name); acc == nil {
			acc, _ = s.accounts.add(newAccount(s, name, unlimited)) // validated: only $SYS may be missing
		}
	}
	if acc == nil {
		return
	}
	sy := &sysState{
		s: s, acc: acc,
		sendq: make(chan *sysOut, sysSendQueue), recvq: make(chan *sysIn, sysRecvQueue),
		kick: make(chan struct{}, 1), stop: make(chan struct{}),
		statszEvery: statszInterval, connsEvery: connsInterval, connsWait: connsDelay, orphanWait: orphanAfter,
		reqs: map[string]SysFunc{}, packEvery: cmp.Or(o.Resolver.Interval, DefaultResolverInterval),
	}
	sy.mu.imported = map[*Account]bool{}
	sy.mu.dirty = map[*Account]bool{}
	sy.mu.servers = map[string]*remoteServer{}
	s.sys = sy
	s.respTable(acc)
	sy.subscribeEvents()
	sy.subscribeRequests()
	if s.trust != nil && s.trust.dir != nil {
		sy.subscribeClaims()
	}
	for _, a := range s.accounts.all() {
		sy.importInto(a)
	}
	// Accounts registered later (operator mode) get the imports too.
	s.accounts.added = sy.importInto
	s.extraMetrics = append(s.extraMetrics, &sysCollector{sy: sy})
}

// systemAccount returns the system account's name in a configuration
// without operators.
func (o *Options) systemAccount() string {
	if o.SystemAccount != "" {
		return o.SystemAccount
	}
	return systemAccountName
}

// The system account's service exports that every account imports, as
// nats-server's addSystemAccountExports: each answers, through the
// token at position 4, about the importing account only.
var (
	sysExportConnz = &Export{Subject: "$SYS.REQ.ACCOUNT.*.CONNZ", Service: true, Response: Streamed, TokenPosition: 4}
	sysExportStatz = &Export{Subject: "$SYS.REQ.ACCOUNT.*.STATZ", Service: true, Response: Streamed, TokenPosition: 4}
	sysExportUser  = &Export{Subject: "$SYS.REQ.USER.*.INFO", Service: true, TokenPosition: 4}
)

// sysImports are the imports of every account but the system account
// (nats-server's registerSystemImports): the local subject, the export,
// and the subject in the system account, where %s is the account.
var sysImports = []struct {
	local  string
	export *Export
	to     string
	share  bool
}{
	{"$SYS.REQ.ACCOUNT.PING.CONNZ", sysExportConnz, "$SYS.REQ.ACCOUNT.%s.CONNZ", false},
	{"$SYS.REQ.SERVER.PING.CONNZ", sysExportConnz, "$SYS.REQ.ACCOUNT.%s.CONNZ", false},
	{"$SYS.REQ.ACCOUNT.PING.STATZ", sysExportStatz, "$SYS.REQ.ACCOUNT.%s.STATZ", false},
	{"$SYS.REQ.USER.INFO", sysExportUser, "$SYS.REQ.USER.%s.INFO", true},
}

// importInto gives account a the system imports, once. The system account
// imports only $SYS.REQ.USER.INFO, from itself. An account whose name is
// not one subject token (a configured name with a dot) cannot be named in
// the subjects: it gets none, and its clients' requests find no
// responders.
func (sy *sysState) importInto(a *Account) {
	sy.mu.Lock()
	defer sy.mu.Unlock()
	if _, seen := sy.mu.imported[a]; seen {
		return
	}
	ok := !strings.ContainsAny(a.name, ".*>")
	sy.mu.imported[a] = ok
	if !ok {
		sy.s.log.Warn("account name is not one subject token: it gets no $SYS imports", "account", a.name)
		return
	}
	info, _ := json.Marshal(&requestInfo{Account: a.name})
	for _, im := range sysImports {
		if a == sy.acc && im.export != sysExportUser {
			continue
		}
		to := fmt.Sprintf(im.to, a.name)
		tr, err := subject.NewTransform(im.local, to)
		if err != nil {
			panic("server: a system import's transform: " + err.Error()) // literal subjects
		}
		sy.s.indexBridge(a, im.local, subServiceImport, &bridge{to: sy.acc, tr: tr, export: im.export, share: im.share, info: info})
	}
}

// extPorts adds the system exports and imports to what /accountz says of
// account a, as nats-server lists them.
func (sy *sysState) extPorts(a *Account, ai *AccountInfo) {
	sy.mu.Lock()
	ok := sy.mu.imported[a]
	sy.mu.Unlock()
	if a == sy.acc {
		for _, e := range []*Export{sysExportConnz, sysExportStatz, sysExportUser} {
			ai.Exports = append(ai.Exports, ExtExport{Subject: e.Subject, Type: kindName(true), ResponseType: e.Response.String()})
		}
	}
	if !ok {
		return
	}
	for _, im := range sysImports {
		if a == sy.acc && im.export != sysExportUser {
			continue
		}
		ai.Imports = append(ai.Imports, ExtImport{Subject: fmt.Sprintf(im.to, a.name), Account: sy.acc.name,
			To: im.local, LocalSubject: im.local, Type: kindName(true), Share: im.share})
	}
}

// on subscribes h to pattern in the system account; h runs on the
// worker goroutine. A request (request set) the server published itself
// is ignored: the server's own messages, whose subjects and replies a
// requester may choose, never act as requests.
func (sy *sysState) on(pattern string, request bool, h func(*sysIn)) {
	_, err := sy.acc.SubscribeInternal(pattern, "", func(m *Msg) {
		if request && m.Internal() {
			return
		}
		in := &sysIn{
			subject: strings.Clone(m.Subject), reply: strings.Clone(m.Reply),
			hdr: bytes.Clone(m.Header), data: bytes.Clone(m.Data), h: h, pr: m.Principal(),
			self: m.pub != nil && m.pub.internal,
		}
		if c := m.pub; c != nil && !c.internal && c.route == nil && !m.Internal() {
			in.from = c
		}
		select {
		case sy.recvq <- in:
		default:
			sy.recvDrops.Add(1)
		}
	})
	if err != nil {
		panic("server: a system subscription: " + err.Error()) // fixed, valid subjects
	}
}

// start runs the worker and the sender (Start).
func (sy *sysState) start() {
	sy.mu.Lock()
	sy.mu.started = true
	sy.mu.Unlock()
	sy.wg.Add(2)
	go sy.sendLoop()
	go sy.workLoop()
}

// shutdown publishes the SHUTDOWN event, waits (at most wait) until it is
// sent, and stops the goroutines. Shutdown calls it once every read has
// stopped and before connections close, so that peers hear it.
func (sy *sysState) shutdown(wait time.Duration) {
	sy.mu.Lock()
	if !sy.mu.started || sy.mu.stopped {
		sy.mu.Unlock()
		return
	}
	sy.mu.stopped = true
	if sy.mu.timer != nil {
		sy.mu.timer.Stop()
	}
	sy.mu.Unlock()
	done := make(chan struct{})
	subj := "$SYS.SERVER." + sy.s.id + ".SHUTDOWN"
	si := &ServerInfo{}
	if sy.acc.HasSubscribers(subj) && sy.enqueue(&sysOut{subject: subj, v: si, si: si, pr: ServerPrincipal, done: done}) {
		select {
		case <-done:
		case <-time.After(wait):
		}
	}
	close(sy.stop)
	sy.wg.Wait()
}

// enqueue queues o for the sender, unless the queue is full (then it is
// dropped and counted).
func (sy *sysState) enqueue(o *sysOut) bool {
	select {
	case sy.sendq <- o:
		return true
	default:
		sy.sendDrops.Add(1)
		return false
	}
}

// event queues an event the server publishes for itself.
func (sy *sysState) event(subj string, si *ServerInfo, v any) {
	sy.enqueue(&sysOut{subject: subj, v: v, si: si, pr: ServerPrincipal})
}

// answer queues the answer to a request, on its reply subject, acting for
// the requester: a requester of the system account is judged by its own
// permissions wherever the answer goes; a request that came through an
// import goes back through it, which acts for the requester.
func (sy *sysState) answer(in *sysIn, si *ServerInfo, v any) {
	if in.reply == "" {
		return
	}
	pr := in.pr
	if pr.acc != nil && pr.acc != sy.acc {
		pr = Principal{}
	}
	sy.enqueue(&sysOut{subject: in.reply, v: v, si: si, pr: pr})
}

// sendLoop publishes what is queued, in order, until stop.
func (sy *sysState) sendLoop() {
	defer sy.wg.Done()
	p := sy.acc.NewPublisher()
	for {
		select {
		case o := <-sy.sendq:
			sy.publish(p, o)
		case <-sy.stop:
			return
		}
	}
}

func (sy *sysState) publish(p *Publisher, o *sysOut) {
	if o.si != nil {
		sy.fill(o.si)
	}
	var data []byte
	switch v := o.v.(type) {
	case []byte:
		data = v
	default:
		var err error
		if data, err = json.Marshal(v); err != nil {
			panic("server: a $SYS message does not marshal: " + err.Error()) // fixed structs of plain values
		}
	}
	p.ActFor(o.pr)
	p.PublishNow(o.subject, o.reply, nil, data)
	if o.done != nil {
		close(o.done)
	}
}

// fill fills si in as the message carrying it is sent.
func (sy *sysState) fill(si *ServerInfo) {
	s := sy.s
	si.Name, si.Host, si.ID = s.name, s.opts.Host, s.id
	si.Cluster, si.Version, si.Tags = s.clusterName(), Version, s.opts.Tags
	si.JetStream = s.jetstream
	if s.jetstream {
		si.Flags = JetStreamEnabled
	}
	si.Seq = sy.seq.Add(1)
	si.Time = time.Now().UTC()
}

// workLoop runs the handlers of $SYS subjects and the timers, until stop.
func (sy *sysState) workLoop() {
	defer sy.wg.Done()
	every := statszFirst
	statsz := time.NewTimer(every)
	defer statsz.Stop()
	conns := time.NewTicker(sy.connsEvery)
	defer conns.Stop()
	var pack <-chan time.Time
	if sy.packInbox != "" && sy.s.cluster != nil {
		t := time.NewTicker(sy.packEvery)
		defer t.Stop()
		pack = t.C
	}
	for {
		select {
		case in := <-sy.recvq:
			in.h(in)
		case <-statsz.C:
			// Sooner after the start, so that peers learn of this server
			// quickly; then every statszEvery.
			every = min(2*every, sy.statszEvery)
			statsz.Reset(every)
			sy.heartbeat()
		case <-sy.kick:
			sy.sendDirtyConns()
		case <-conns.C:
			sy.connsHeartbeat()
		case <-pack:
			sy.sendPack()
		case <-sy.stop:
			return
		}
	}
}

// sysCollector exports the system account's drop counters to /metrics.
type sysCollector struct{ sy *sysState }

var descSysDropped = newDesc("skiff_sys_dropped_total",
	"$SYS events and answers (queue=send) and $SYS requests (queue=recv) dropped because the system account's queue was full.", "queue")

func (c *sysCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descSysDropped }

func (c *sysCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(descSysDropped, prometheus.CounterValue, float64(c.sy.sendDrops.Load()), "send")
	ch <- prometheus.MustNewConstMetric(descSysDropped, prometheus.CounterValue, float64(c.sy.recvDrops.Load()), "recv")
}
