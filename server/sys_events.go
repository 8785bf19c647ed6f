package server

import (
	"encoding/json"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/skiffmq/skiff/internal/proto"
)

// Events of the system account, each built only when something listens
// (a subscriber here, or a peer's interest):
//
//	$SYS.ACCOUNT.<acc>.CONNECT        a client connected (ConnectEventMsg)
//	$SYS.ACCOUNT.<acc>.DISCONNECT     it closed (DisconnectEventMsg)
//	$SYS.ACCOUNT.<acc>.SERVER.CONNS   the account's clients here (AccountNumConns),
//	$SYS.SERVER.ACCOUNT.<acc>.CONNS   also on the old subject, as nats-server
//	$SYS.SERVER.<id>.STATSZ           statistics, every statszInterval (ServerStatsMsg)
//	$SYS.SERVER.<id>.SHUTDOWN         shutting down (ServerInfo)
//	$SYS.SERVER.<id>.LAMEDUCK         entering lame duck mode (ServerInfo)
//	$SYS.SERVER.<id>.CLIENT.AUTH.ERR  a client failed to authenticate (DisconnectEventMsg)
//
// In a cluster every server listens to its peers' STATSZ, SHUTDOWN,
// LAMEDUCK and connection counts: a peer's counts add to this server's in
// each account's max_connections, until the peer shuts down or stays
// silent for orphanAfter.

// newEventID returns an event's unique ID (nats-server uses a NUID).
func newEventID() string { return randomChars(22) }

// subscribeEvents subscribes what a server of a cluster hears from its
// peers. A server alone subscribes none, so that it publishes its STATSZ
// only when someone asks for it.
func (sy *sysState) subscribeEvents() {
	if sy.s.cluster == nil {
		return
	}
	sy.on("$SYS.SERVER.*.STATSZ", false, sy.remoteStatsz)
	sy.on("$SYS.SERVER.*.SHUTDOWN", false, sy.remoteShutdown)
	sy.on("$SYS.SERVER.*.LAMEDUCK", false, sy.remoteShutdown)
	sy.on("$SYS.SERVER.ACCOUNT.*.CONNS", false, sy.remoteConns)
}

// clientInfo describes c, bound to acc, for an event (the server is the
// event's own).
func (s *Server) clientInfo(c *client, acc *Account) ClientInfo {
	ci := ClientInfo{
		Start: c.start.UTC(), Host: c.ip, ID: c.cid, Account: acc.name,
		NameTag: acc.nameTag(), Kind: "Client", ClientType: "nats",
	}
	if c.ws {
		ci.ClientType = "websocket"
	}
	if u := c.usr.Load(); u != nil {
		switch {
		case u.jwt != nil:
			ci.IssuerKey = u.jwt.signer
		case u.nkey:
			ci.IssuerKey = u.acc.name // as nats-server names a configured nkey user's issuer
		}
	}
	c.mu.Lock()
	ci.User, ci.Name, ci.Lang, ci.Version = c.mu.user, c.mu.name, c.mu.lang, c.mu.version
	c.mu.Unlock()
	return ci
}

// sysConnected runs on the read loop of a client whose first CONNECT
// bound it to acc.
func (s *Server) sysConnected(c *client, acc *Account) {
	sy := s.sys
	if sy == nil {
		return
	}
	sy.connsChanged(acc)
	subj := "$SYS.ACCOUNT." + acc.name + ".CONNECT"
	if !sy.acc.HasSubscribers(subj) {
		return
	}
	m := &ConnectEventMsg{
		TypedEvent: TypedEvent{Type: ConnectEventMsgType, ID: newEventID(), Time: time.Now().UTC()},
		Client:     s.clientInfo(c, acc),
	}
	sy.event(subj, &m.Server, m)
}

// sysDisconnected runs once a client bound to acc has closed.
func (s *Server) sysDisconnected(c *client, acc *Account, reason string) {
	sy := s.sys
	if sy == nil {
		return
	}
	sy.connsChanged(acc)
	subj := "$SYS.ACCOUNT." + acc.name + ".DISCONNECT"
	if !sy.acc.HasSubscribers(subj) {
		return
	}
	now := time.Now().UTC()
	m := &DisconnectEventMsg{
		TypedEvent: TypedEvent{Type: DisconnectEventMsgType, ID: newEventID(), Time: now},
		Client:     s.clientInfo(c, acc),
		Reason:     reason,
	}
	m.Client.Stop, m.Client.RTT = &now, c.rtt
	m.Sent = DataStats{Msgs: c.inMsgs.Load(), Bytes: c.inBytes.Load()}
	m.Received.Msgs, m.Received.Bytes = c.out.counts()
	sy.event(subj, &m.Server, m)
}

// sysAuthError runs on the read loop of a client whose CONNECT co failed
// to authenticate.
func (s *Server) sysAuthError(c *client, co *connectOpts) {
	sy := s.sys
	if sy == nil {
		return
	}
	subj := "$SYS.SERVER." + s.id + ".CLIENT.AUTH.ERR"
	if !sy.acc.HasSubscribers(subj) {
		return
	}
	now := time.Now().UTC()
	m := &DisconnectEventMsg{
		TypedEvent: TypedEvent{Type: DisconnectEventMsgType, ID: newEventID(), Time: now},
		// The client is not bound to an account: the global one, as
		// nats-server names it. The round trip so far is the first
		// estimate, as at CONNECT.
		Client: ClientInfo{
			Start: c.start.UTC(), Stop: &now, Host: c.ip, ID: c.cid, Account: s.gacc.name, NameTag: s.gacc.name,
			User: cmpOr(co.User, co.Nkey), Name: co.Name, Lang: co.Lang, Version: co.Version,
			RTT: max(time.Since(c.start), time.Nanosecond), Kind: "Client", ClientType: "nats",
		},
		Sent:   DataStats{Msgs: c.inMsgs.Load(), Bytes: c.inBytes.Load()},
		Reason: reasonAuth,
	}
	if c.ws {
		m.Client.ClientType = "websocket"
	}
	sy.event(subj, &m.Server, m)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// sysLameDuck tells that the server enters lame duck mode.
func (s *Server) sysLameDuck() {
	sy := s.sys
	if sy == nil {
		return
	}
	subj := "$SYS.SERVER." + s.id + ".LAMEDUCK"
	if sy.acc.HasSubscribers(subj) {
		si := &ServerInfo{}
		sy.event(subj, si, si)
	}
}

// statsz builds the server's statistics.
func (sy *sysState) statsz() *ServerStatsMsg {
	s := sy.s
	m := s.mon
	now := time.Now()
	t := m.counters()
	slow, slowRoutes := s.stats.slowConsumers.Load(), s.stats.slowRoutes.Load()
	st := ServerStats{
		Start: s.start.UTC(), Mem: residentMemory(), Cores: runtime.NumCPU(), CPU: m.cpu.percent(now),
		Connections: s.NumClients(), TotalConnections: uint64(s.stats.totalConns.Load()),
		NumSubs:             uint32(s.NumSubscriptions()),
		Sent:                DataStats{Msgs: t.outMsgs, Bytes: t.outBytes},
		SentToClients:       DataStats{Msgs: t.outMsgs, Bytes: t.outBytes},
		Received:            DataStats{Msgs: t.inMsgs, Bytes: t.inBytes},
		ReceivedFromClients: DataStats{Msgs: t.inMsgs, Bytes: t.inBytes},
		SlowConsumers:       slow, StalledClients: s.stats.stalls.Load(),
		ActiveServers: sy.activeServers(), MaxProcs: runtime.GOMAXPROCS(0),
	}
	if slow != 0 {
		st.SlowConsumersStats = &SlowConsumersStats{Clients: uint64(slow - slowRoutes), Routes: uint64(slowRoutes)}
	}
	for _, a := range s.accounts.all() {
		if a.NumConnections() > 0 {
			st.ActiveAccounts++
		}
	}
	for _, r := range s.routez(now, false).Routes {
		st.Routes = append(st.Routes, &RouteStat{
			ID: r.Rid, Name: r.RemoteName, Pending: r.Pending,
			Sent: DataStats{Msgs: r.OutMsgs, Bytes: r.OutBytes}, Received: DataStats{Msgs: r.InMsgs, Bytes: r.InBytes},
		})
	}
	return &ServerStatsMsg{Stats: st}
}

// activeServers counts the servers of the cluster this one knows of:
// itself, its routes' peers and the peers it heard from.
func (sy *sysState) activeServers() int {
	ids := map[string]bool{}
	for _, id := range sy.s.PeerIDs() {
		ids[id] = true
	}
	sy.mu.Lock()
	for id := range sy.mu.servers {
		ids[id] = true
	}
	sy.mu.Unlock()
	return 1 + len(ids)
}

// sendStatsz publishes STATSZ on subj, if anyone listens there. On the
// server's own subject it does so at most once per statszMinGap, unless
// heartbeat (the timer's).
func (sy *sysState) sendStatsz(subj string, heartbeat bool) {
	if !sy.acc.HasSubscribers(subj) {
		return
	}
	if !heartbeat {
		sy.mu.Lock()
		if time.Since(sy.mu.lastStatsz) < statszMinGap {
			sy.mu.Unlock()
			return
		}
		sy.mu.lastStatsz = time.Now()
		sy.mu.Unlock()
	}
	m := sy.statsz()
	sy.event(subj, &m.Server, m)
}

func (sy *sysState) statszSubject() string { return "$SYS.SERVER." + sy.s.id + ".STATSZ" }

// heartbeat is the STATSZ timer's: publish STATSZ, and drop the peers
// that stayed silent too long.
func (sy *sysState) heartbeat() {
	sy.sendStatsz(sy.statszSubject(), true)
	cutoff := time.Now().Add(-sy.orphanWait)
	sy.mu.Lock()
	var gone []string
	for id, rs := range sy.mu.servers {
		if rs.last.Before(cutoff) {
			gone = append(gone, id)
		}
	}
	sy.mu.Unlock()
	for _, id := range gone {
		sy.s.log.Info("peer silent: its account connection counts are dropped", "server_id", id)
		sy.forget(id)
	}
}

// connsChanged records that acc's clients here changed: an update goes
// out connsDelay later (coalescing a burst), for the peers that count it.
func (sy *sysState) connsChanged(acc *Account) {
	if acc == sy.s.gacc {
		return // nats-server sends none for the global account
	}
	sy.mu.Lock()
	defer sy.mu.Unlock()
	if sy.mu.stopped {
		return
	}
	sy.mu.dirty[acc] = true
	if sy.mu.timer == nil {
		sy.mu.timer = time.AfterFunc(sy.connsWait, func() {
			select {
			case sy.kick <- struct{}{}:
			default:
			}
		})
	} else if len(sy.mu.dirty) == 1 {
		sy.mu.timer.Reset(sy.connsWait)
	}
}

// sendDirtyConns publishes the connection counts that changed.
func (sy *sysState) sendDirtyConns() {
	sy.mu.Lock()
	dirty := sy.mu.dirty
	sy.mu.dirty = map[*Account]bool{}
	sy.mu.Unlock()
	for a := range dirty {
		sy.sendConns(a, "")
	}
}

// connsHeartbeat publishes the connection count of every account with
// clients here, so that peers that missed a change catch up.
func (sy *sysState) connsHeartbeat() {
	for _, a := range sy.s.accounts.all() {
		if a != sy.s.gacc && a.NumConnections() > 0 {
			sy.sendConns(a, "")
		}
	}
}

// sendConns publishes acc's connection count on its two event subjects,
// or, with reply, there only.
func (sy *sysState) sendConns(acc *Account, reply string) {
	subjs := []string{"$SYS.SERVER.ACCOUNT." + acc.name + ".CONNS", "$SYS.ACCOUNT." + acc.name + ".SERVER.CONNS"}
	if reply != "" {
		subjs = []string{reply}
	}
	subjs = slices.DeleteFunc(subjs, func(s string) bool { return !sy.acc.HasSubscribers(s) })
	if len(subjs) == 0 {
		return
	}
	m := &AccountNumConns{
		TypedEvent:  TypedEvent{Type: AccountNumConnsMsgType, ID: newEventID(), Time: time.Now().UTC()},
		AccountStat: *acc.stat(),
	}
	for _, subj := range subjs {
		// One body per subject: the sender fills each one's ServerInfo.
		mc := *m
		sy.event(subj, &mc.Server, &mc)
	}
}

// serverToken returns the second token of $SYS.SERVER.<id>.<...>.
func serverToken(subj string) string {
	toks := strings.Split(subj, ".")
	if len(toks) < 4 {
		return ""
	}
	return toks[2]
}

// remoteStatsz hears a peer's STATSZ: it is alive. A peer heard from the
// first time hears this server's STATSZ and counts in return.
func (sy *sysState) remoteStatsz(in *sysIn) {
	var m ServerStatsMsg
	if err := json.Unmarshal(in.data, &m); err != nil || m.Server.ID == "" || m.Server.ID == sy.s.id {
		return
	}
	if sy.heard(m.Server.ID, m.Server.Name) {
		sy.announce()
	}
}

// heard records a message from peer id and reports whether it is new.
func (sy *sysState) heard(id, name string) bool {
	sy.mu.Lock()
	defer sy.mu.Unlock()
	rs := sy.mu.servers[id]
	if rs != nil {
		rs.last = time.Now()
		return false
	}
	sy.mu.servers[id] = &remoteServer{name: name, last: time.Now(), conns: map[*Account]int32{}}
	return true
}

// announce publishes this server's STATSZ and its accounts' connection
// counts, for a peer that just appeared.
func (sy *sysState) announce() {
	sy.sendStatsz(sy.statszSubject(), true)
	sy.connsHeartbeat()
}

// remoteShutdown hears that a peer is leaving: its counts are dropped.
func (sy *sysState) remoteShutdown(in *sysIn) {
	if id := serverToken(in.subject); id != "" && id != sy.s.id {
		sy.forget(id)
	}
}

// forget drops peer id and what it said about its accounts' clients.
func (sy *sysState) forget(id string) {
	sy.mu.Lock()
	rs := sy.mu.servers[id]
	delete(sy.mu.servers, id)
	sy.mu.Unlock()
	if rs == nil {
		return
	}
	for a := range rs.conns {
		sy.recountRemote(a)
	}
}

// remoteConns hears a peer's connection count of one account. An account
// this server has not registered is not looked up (a JWT account is not
// fetched for it): it counts once a client here needs it.
func (sy *sysState) remoteConns(in *sysIn) {
	var m AccountNumConns
	if err := json.Unmarshal(in.data, &m); err != nil || m.Server.ID == "" || m.Server.ID == sy.s.id {
		return
	}
	isNew := sy.heard(m.Server.ID, m.Server.Name)
	if acc := sy.s.accounts.lookup(m.Account); acc != nil {
		sy.mu.Lock()
		if rs := sy.mu.servers[m.Server.ID]; rs != nil { // not forgotten since
			rs.conns[acc] = int32(max(m.Conns, 0))
		}
		sy.mu.Unlock()
		sy.recountRemote(acc)
		sy.enforceMaxConns(acc)
	}
	if isNew {
		sy.announce()
	}
}

// NumRemoteConnections returns the account's clients on the other
// servers of the cluster, as their $SYS connection counts last said.
func (a *Account) NumRemoteConnections() int { return int(a.remoteConns.Load()) }

// recountRemote sums acc's clients on the peers into acc.remoteConns.
func (sy *sysState) recountRemote(acc *Account) {
	sy.mu.Lock()
	var n int32
	for _, rs := range sy.mu.servers {
		n += rs.conns[acc]
	}
	acc.remoteConns.Store(n)
	sy.mu.Unlock()
}

// enforceMaxConns closes acc's newest clients here while the account has
// more clients across the cluster than its max_connections: clients on
// several servers connected at once, before each server heard of the
// others' (nats-server's updateRemoteServer does the same).
func (sy *sysState) enforceMaxConns(acc *Account) {
	limit := acc.lim().maxConns
	if limit == noLimit {
		return
	}
	acc.mu.Lock()
	over := len(acc.mu.clients) + int(acc.remoteConns.Load()) - int(limit)
	var victims []*client
	if over > 0 {
		victims = make([]*client, 0, len(acc.mu.clients))
		for c := range acc.mu.clients {
			victims = append(victims, c)
		}
	}
	acc.mu.Unlock()
	if over <= 0 {
		return
	}
	slices.SortFunc(victims, func(a, b *client) int { return b.start.Compare(a.start) })
	victims = victims[:min(over, len(victims))]
	sy.s.log.Warn("account over its max_connections across the cluster: closing its newest clients here",
		"account", acc.name, "max_connections", limit, "closing", len(victims))
	for _, c := range victims {
		c.maxAccountConnsExceeded()
	}
}

// maxAccountConnsExceeded tells the client its account has too many
// connections, and closes it. It runs off the read loop.
func (c *client) maxAccountConnsExceeded() {
	if c.closed.Load() {
		return
	}
	var buf [64]byte
	c.out.queue(proto.AppendErr(buf[:0], proto.ErrMaxAccountConnections.Text))
	c.close(reasonMaxAccConns, true)
}
