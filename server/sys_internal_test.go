package server

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"
)

// newSysTestServer returns a server with accounts SYS (the system
// account, user sys) and A (users a, a2, max_connections limit), not
// started.
func newSysTestServer(t *testing.T, maxConns int, cluster bool) *Server {
	t.Helper()
	o := Options{
		Host: "127.0.0.1", Port: RandomPort, SystemAccount: "SYS",
		Accounts: []AccountConfig{
			{Name: "SYS", Users: []User{{Name: "sys", Password: "sys"}}},
			{Name: "A", Users: []User{{Name: "a", Password: "a"}, {Name: "a2", Password: "a2"}},
				Limits: AccountLimits{MaxConnections: maxConns}},
		},
	}
	if cluster {
		o.Cluster = ClusterOptions{Name: "c", Host: "127.0.0.1", Port: RandomPort}
	}
	s, err := New(o)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return s
}

// sysSubscribe subscribes the system account's user to subject on s.
func sysSubscribe(t *testing.T, s *Server, subject string) *nats.Subscription {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), nats.UserInfo("sys", "sys"))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	sub, err := nc.SubscribeSync(subject)
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	return sub
}

// TestSysSendQueueBounded: the send queue never blocks who fills it; past
// its bound a message is dropped and counted.
func TestSysSendQueueBounded(t *testing.T) {
	s := newSysTestServer(t, 0, false) // not started: nothing drains the queue
	sy := s.sys
	for range sysSendQueue {
		sy.event("$SYS.TEST", nil, []byte("x"))
	}
	require.Zero(t, sy.sendDrops.Load())
	done := make(chan struct{})
	go func() {
		sy.event("$SYS.TEST", nil, []byte("x"))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a full send queue blocked the sender of an event")
	}
	require.Equal(t, int64(1), sy.sendDrops.Load())
}

// TestSysRecvQueueBounded: a request that finds the worker's queue full is
// dropped and counted, on the read loop that delivered it, which does not
// wait.
func TestSysRecvQueueBounded(t *testing.T) {
	s := newSysTestServer(t, 0, false)
	require.NoError(t, s.Start())
	sy := s.sys
	// Stop the worker, so that nothing takes requests off the queue.
	block := make(chan struct{})
	sy.recvq <- &sysIn{h: func(*sysIn) { <-block }}
	defer close(block)
	nc, err := nats.Connect(s.ClientURL(), nats.UserInfo("sys", "sys"))
	require.NoError(t, err)
	defer nc.Close()
	require.Eventually(t, func() bool { return len(sy.recvq) == 0 }, 5*time.Second, time.Millisecond, "the worker took the blocker")
	for range sysRecvQueue + 10 {
		require.NoError(t, nc.Publish("$SYS.REQ.SERVER.PING.IDZ", nil))
	}
	require.NoError(t, nc.FlushTimeout(5*time.Second), "the read loop is not held by a full queue")
	require.Equal(t, int64(10), sy.recvDrops.Load())
}

// TestSysEventsOnlyIfListened: an event nobody listens to is not built or
// sent: a server alone publishes nothing until a subscriber appears.
func TestSysEventsOnlyIfListened(t *testing.T) {
	s := newSysTestServer(t, 0, false)
	sy := s.sys
	sy.statszEvery = 20 * time.Millisecond
	require.NoError(t, s.Start())
	a, err := nats.Connect(s.ClientURL(), nats.UserInfo("a", "a"))
	require.NoError(t, err)
	a.Close()
	_, err = nats.Connect(s.ClientURL(), nats.UserInfo("a", "wrong"))
	require.Error(t, err)
	time.Sleep(200 * time.Millisecond) // STATSZ timers and connection counts come and go
	require.Zero(t, sy.seq.Load(), "nothing sent")

	sub := sysSubscribe(t, s, "$SYS.SERVER.*.STATSZ")
	_, err = sub.NextMsg(5 * time.Second)
	require.NoError(t, err, "the heartbeat goes out once someone listens")
	require.Positive(t, sy.seq.Load())
}

// TestSysConnsCoalesced: a burst of connection changes makes one update.
func TestSysConnsCoalesced(t *testing.T) {
	s := newSysTestServer(t, 0, false)
	sy := s.sys
	sy.connsWait = 300 * time.Millisecond
	require.NoError(t, s.Start())
	sub := sysSubscribe(t, s, "$SYS.ACCOUNT.A.SERVER.CONNS")
	acc, _ := s.LookupAccount("A")
	for range 50 {
		sy.connsChanged(acc)
	}
	m, err := sub.NextMsg(5 * time.Second)
	require.NoError(t, err)
	var n AccountNumConns
	require.NoError(t, json.Unmarshal(m.Data, &n))
	require.Equal(t, "A", n.Account)
	_, err = sub.NextMsg(2 * sy.connsWait)
	require.ErrorIs(t, err, nats.ErrTimeout, "fifty changes, one update")
}

// TestSysRemoteConnsOverLimit: a peer's count that puts the account over
// its max_connections closes the newest clients here, down to the limit,
// and counts against new ones; the peer's shutdown gives them back.
func TestSysRemoteConnsOverLimit(t *testing.T) {
	s := newSysTestServer(t, 3, true)
	require.NoError(t, s.Start())
	sy := s.sys
	var conns []*nats.Conn
	for _, u := range []string{"a", "a2", "a"} {
		nc, err := nats.Connect(s.ClientURL(), nats.UserInfo(u, u), nats.NoReconnect())
		require.NoError(t, err)
		defer nc.Close()
		conns = append(conns, nc)
		time.Sleep(2 * time.Millisecond) // distinct start times
	}
	acc, _ := s.LookupAccount("A")
	require.Equal(t, 3, acc.NumConnections())

	peer := func(conns int) []byte {
		m := AccountNumConns{AccountStat: AccountStat{Account: "A", Conns: conns}}
		m.Server.ID, m.Server.Name = "NPEER", "peer"
		b, err := json.Marshal(&m)
		require.NoError(t, err)
		return b
	}
	sy.remoteConns(&sysIn{subject: "$SYS.SERVER.ACCOUNT.A.CONNS", data: peer(2)})
	require.Equal(t, int32(2), acc.remoteConns.Load())
	require.Eventually(t, func() bool { return acc.NumConnections() == 1 }, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return conns[1].IsClosed() && conns[2].IsClosed() }, 5*time.Second, 10*time.Millisecond,
		"the two newest are closed")
	require.False(t, conns[0].IsClosed(), "the oldest stays")
	require.ErrorContains(t, conns[2].LastError(), "maximum account active connections exceeded")

	_, err := nats.Connect(s.ClientURL(), nats.UserInfo("a", "a"), nats.NoReconnect())
	require.ErrorContains(t, err, "maximum account active connections exceeded", "1 here and 2 there")

	sy.remoteShutdown(&sysIn{subject: "$SYS.SERVER.NPEER.SHUTDOWN"})
	require.Zero(t, acc.remoteConns.Load())
	nc, err := nats.Connect(s.ClientURL(), nats.UserInfo("a", "a"), nats.NoReconnect())
	require.NoError(t, err, "the peer's clients are gone")
	nc.Close()
}

// TestSysOrphanedPeer: a peer silent for orphanWait is forgotten with its
// counts.
func TestSysOrphanedPeer(t *testing.T) {
	s := newSysTestServer(t, 0, true)
	sy := s.sys
	sy.orphanWait = 300 * time.Millisecond
	require.NoError(t, s.Start())
	acc, _ := s.LookupAccount("A")
	m := AccountNumConns{AccountStat: AccountStat{Account: "A", Conns: 4}}
	m.Server.ID = "NPEER"
	b, err := json.Marshal(&m)
	require.NoError(t, err)
	sy.remoteConns(&sysIn{data: b})
	require.Equal(t, int32(4), acc.remoteConns.Load())
	require.Equal(t, 2, sy.activeServers())
	// The STATSZ heartbeats (250ms, 500ms, 1s, ... after the start) find
	// it silent.
	require.Eventually(t, func() bool { return acc.remoteConns.Load() == 0 }, 5*time.Second, 10*time.Millisecond)
	require.Equal(t, 1, sy.activeServers())
}

// FuzzSysRequestOptions feeds request bodies to the option checks of the
// z requests: whatever a requester sends, they answer with options or an
// error, never a panic, and never a page past the list bounds.
func FuzzSysRequestOptions(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `{"sort":"rtt"}`, `{"sort":"subs","limit":50000,"offset":3}`, `{"state":2}`,
		`{"acc":"A","user":"a","auth":true,"subscriptions_detail":true}`, `{"limit":-1}`,
		`{"subscriptions":true,"test":"a.*","account":"NOPE"}`, `{"server_name":"x","exact_match":true,"tags":["t"]}`,
		`{"cid":18446744073709551615}`, `not json`, `[1,2]`,
	} {
		f.Add([]byte(seed))
	}
	s, err := New(Options{Accounts: []AccountConfig{{Name: "A"}}})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, body []byte) {
		var co connzEventOptions
		if json.Unmarshal(body, &co) == nil {
			s.filtered(&co.EventFilterOptions)
			if cq, err := co.query(); err == nil {
				require.True(t, cq.limit > 0 && cq.limit <= maxListLimit, "limit %d", cq.limit)
				require.GreaterOrEqual(t, cq.offset, 0)
			}
		}
		var so subszEventOptions
		if json.Unmarshal(body, &so) == nil {
			if sq, err := so.query(s); err == nil {
				require.True(t, sq.limit > 0 && sq.limit <= maxListLimit, "limit %d", sq.limit)
				require.GreaterOrEqual(t, sq.offset, 0)
			}
		}
	})
}
