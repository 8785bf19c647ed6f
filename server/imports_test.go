package server_test

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/server"
)

// importsOptions are three accounts: A exports streams and services, B
// and C import some of them (as testdata/diff/conf/imports.conf).
// Passwords are the user names; b2 may publish only on echo, req.> and
// _INBOX.>, and a2 not on events.secret.
func importsOptions() server.Options {
	return server.Options{
		Users: []server.User{{Name: "g", Password: "g"}},
		Accounts: []server.AccountConfig{
			{
				Name: "A",
				Users: []server.User{{Name: "a", Password: "a"},
					{Name: "a2", Password: "a2", Permissions: &server.Permissions{Publish: server.SubjectPermission{Deny: []string{"events.secret"}}}}},
				Exports: []server.Export{
					{Subject: "events.>"},
					{Subject: "private.>", Accounts: []string{"B"}},
					{Subject: "svc.echo", Service: true},
					{Subject: "svc.stream", Service: true, Response: server.Streamed, Threshold: 5 * time.Second},
					{Subject: "svc.map.*.*", Service: true},
				},
			},
			{
				Name: "B",
				Users: []server.User{{Name: "b", Password: "b"},
					{Name: "b2", Password: "b2", Permissions: &server.Permissions{Publish: server.SubjectPermission{Allow: []string{"echo", "req.>", "_INBOX.>"}}}}},
				Imports: []server.Import{
					{Account: "A", Subject: "events.>", To: "a.events.>"},
					{Account: "A", Subject: "private.>", Prefix: "from_a"},
					{Account: "A", Subject: "svc.echo", Service: true, To: "echo"},
					{Account: "A", Subject: "svc.stream", Service: true},
					{Account: "A", Subject: "svc.map.*.*", Service: true, To: "map.$2.$1"},
				},
			},
			{
				Name:    "C",
				Users:   []server.User{{Name: "c", Password: "c"}},
				Imports: []server.Import{{Account: "A", Subject: "svc.echo", Service: true, Share: true}},
			},
		},
	}
}

// echo answers every request on subject with its data, reporting the
// Nats-Request-Info header it got.
func echo(t testing.TB, nc *nats.Conn, subject string, infos chan<- string) {
	t.Helper()
	_, err := nc.Subscribe(subject, func(m *nats.Msg) {
		if infos != nil {
			infos <- m.Header.Get(server.RequestInfoHeader)
		}
		_ = m.Respond(m.Data)
	})
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
}

// TestImportsIsolation: only exported subjects cross, mapped as the
// import says, and only to the accounts an export lets import them.
func TestImportsIsolation(t *testing.T) {
	s := RunServer(t, importsOptions())
	a, b, c, g := connectAs(t, s, "a"), connectAs(t, s, "b"), connectAs(t, s, "c"), connectAs(t, s, "g")

	t.Run("streams", func(t *testing.T) {
		bMapped, err := b.SubscribeSync("a.events.>")
		require.NoError(t, err)
		bPrefixed, err := b.SubscribeSync("from_a.>")
		require.NoError(t, err)
		var others []*nats.Subscription
		for _, nc := range []*nats.Conn{b, c, g} {
			for _, subj := range []string{"events.>", "private.>", "other"} {
				sub, err := nc.SubscribeSync(subj)
				require.NoError(t, err)
				others = append(others, sub)
			}
		}
		cAll, err := c.SubscribeSync(">")
		require.NoError(t, err)
		others = append(others, cAll)
		for _, nc := range []*nats.Conn{b, c, g} {
			require.NoError(t, nc.Flush())
		}
		for _, subj := range []string{"events.new", "private.x", "other"} {
			require.NoError(t, a.Publish(subj, []byte(subj)))
		}
		m, err := bMapped.NextMsg(5 * time.Second)
		require.NoError(t, err)
		require.Equal(t, "a.events.new", m.Subject)
		m, err = bPrefixed.NextMsg(5 * time.Second)
		require.NoError(t, err)
		require.Equal(t, "from_a.private.x", m.Subject)
		for _, sub := range others {
			requireNothing(t, sub, a, b, c, g)
		}

		// Nothing goes back: B publishing on the imported subjects stays in B.
		aAll, err := a.SubscribeSync(">")
		require.NoError(t, err)
		require.NoError(t, a.Flush())
		for _, subj := range []string{"a.events.new", "events.new", "from_a.private.x"} {
			require.NoError(t, b.Publish(subj, nil))
		}
		requireNothing(t, aAll, b, a)
		unsubscribe(t, others, []*nats.Subscription{bMapped, bPrefixed, aAll})
	})

	t.Run("queue groups in the importer", func(t *testing.T) {
		b2 := connectAs(t, s, "b")
		var members []*nats.Subscription
		for _, nc := range []*nats.Conn{b, b2} {
			for range 2 {
				sub, err := nc.QueueSubscribeSync("a.events.*", "workers")
				require.NoError(t, err)
				members = append(members, sub)
			}
			require.NoError(t, nc.Flush())
		}
		aMember, err := a.QueueSubscribeSync("events.*", "workers") // A's own group of the same name
		require.NoError(t, err)
		require.NoError(t, a.Flush())
		const n = 40
		for range n {
			require.NoError(t, a.Publish("events.job", []byte("j")))
		}
		require.NoError(t, a.Flush())
		require.NoError(t, b.Flush())
		require.NoError(t, b2.Flush())
		total := 0
		for _, sub := range members {
			for {
				if _, err := sub.NextMsg(50 * time.Millisecond); err != nil {
					break
				}
				total++
			}
		}
		require.Equal(t, n, total, "each message to one member of B's group")
		got, _, err := aMember.Pending()
		require.NoError(t, err)
		require.Equal(t, n, got, "A's group is A's: it gets every message too (nats-server shares one group across the accounts)")
		unsubscribe(t, members, []*nats.Subscription{aMember})
	})

	t.Run("services", func(t *testing.T) {
		infos := make(chan string, 4)
		echo(t, a, "svc.echo", infos)
		echo(t, a, "svc.map.>", nil)
		echo(t, a, "secret", nil)
		m, err := b.Request("echo", []byte("hi"), 5*time.Second)
		require.NoError(t, err)
		require.Equal(t, "hi", string(m.Data))
		var ri map[string]any
		require.NoError(t, json.Unmarshal([]byte(<-infos), &ri))
		require.Equal(t, "B", ri["acc"])
		require.Nil(t, ri["user"], "without share the responder learns the account only")

		m, err = c.Request("svc.echo", []byte("hi"), 5*time.Second)
		require.NoError(t, err)
		require.Equal(t, "hi", string(m.Data))
		require.NoError(t, json.Unmarshal([]byte(<-infos), &ri))
		require.Equal(t, "C", ri["acc"])
		require.Equal(t, "c", ri["user"], "share gives the requester's details")
		require.Equal(t, "Client", ri["kind"])

		// A mapped service: map.x.y in B is svc.map.y.x in A.
		mapped, err := a.SubscribeSync("svc.map.y.x")
		require.NoError(t, err)
		require.NoError(t, a.Flush())
		m, err = b.Request("map.x.y", []byte("m"), 5*time.Second)
		require.NoError(t, err)
		require.Equal(t, "m", string(m.Data))
		got, err := mapped.NextMsg(5 * time.Second)
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(got.Reply, "_R_."), "the responder sees a reply of A's table: %s", got.Reply)

		// What A does not export cannot be asked for.
		for _, subj := range []string{"secret", "svc.echo", "svc.map.x.y"} {
			_, err = b.Request(subj, nil, 5*time.Second)
			require.ErrorIs(t, err, nats.ErrNoResponders, subj)
		}
		_, err = g.Request("echo", nil, 5*time.Second)
		require.ErrorIs(t, err, nats.ErrNoResponders)
	})
}

// TestImportsRepliesStayInTheirAccount: a requester cannot reach the
// exporter's subjects through the reply subject it sets, and nobody
// outside the exporter sees its side of a request: the responder's reply
// subject is of the exporter's response table, and the response reaches
// the requester's account only.
func TestImportsRepliesStayInTheirAccount(t *testing.T) {
	s := RunServer(t, importsOptions())
	a, b, c := connectAs(t, s, "a"), connectAs(t, s, "b"), connectAs(t, s, "c")
	echo(t, a, "svc.echo", nil)
	aSecret, err := a.SubscribeSync("secret.>")
	require.NoError(t, err)
	aR, err := a.SubscribeSync("_R_.>")
	require.NoError(t, err)
	require.NoError(t, a.Flush())
	bSecret, err := b.SubscribeSync("secret.>")
	require.NoError(t, err)
	cAll, err := c.SubscribeSync(">")
	require.NoError(t, err)
	require.NoError(t, c.Flush())
	require.NoError(t, b.PublishRequest("echo", "secret.x", []byte("to A's secret?")))
	m, err := bSecret.NextMsg(5 * time.Second)
	require.NoError(t, err)
	require.Equal(t, "to A's secret?", string(m.Data), "the answer comes back to B's own secret.x")
	requireNothing(t, aSecret, b, a)
	_, err = aR.NextMsg(5 * time.Second) // A sees its own response pass, in A
	require.NoError(t, err)

	// B and C, subscribed to everything, see nothing of each other's
	// requests nor of A's own.
	bAll, err := b.SubscribeSync(">")
	require.NoError(t, err)
	require.NoError(t, b.Flush())
	_, err = c.Request("svc.echo", []byte("c"), 5*time.Second)
	require.NoError(t, err)
	_, err = a.Request("svc.echo", []byte("a"), 5*time.Second)
	require.NoError(t, err)
	requireNothing(t, bAll, a, b, c)
	for {
		m, err := cAll.NextMsg(100 * time.Millisecond)
		if err != nil {
			break
		}
		require.True(t, m.Subject == "svc.echo" || strings.HasPrefix(m.Subject, "_INBOX."),
			"C sees its own request and inbox only: %s", m.Subject)
	}
}

// TestImportsResponseTypes: a Singleton export answers once, a Streamed
// one as often as the responder likes, until the threshold passes without
// a response; a response nobody takes, or a request nobody takes, closes
// the way back.
func TestImportsResponseTypes(t *testing.T) {
	o := importsOptions()
	o.Accounts[0].Exports[3].Threshold = 300 * time.Millisecond
	s := RunServer(t, o)
	a, b := connectAs(t, s, "a"), connectAs(t, s, "b")
	accA, _ := s.LookupAccount("A")

	replies := make(chan string, 8)
	for _, subj := range []string{"svc.echo", "svc.stream"} {
		_, err := a.Subscribe(subj, func(m *nats.Msg) { replies <- m.Reply })
		require.NoError(t, err)
	}
	require.NoError(t, a.Flush())
	inbox, err := b.SubscribeSync("_INBOX.rt.>")
	require.NoError(t, err)
	require.NoError(t, b.Flush())

	require.NoError(t, b.PublishRequest("echo", "_INBOX.rt.1", nil))
	r := <-replies
	require.Equal(t, 1, accA.NumPendingResponses())
	for _, d := range []string{"1", "2"} {
		require.NoError(t, a.Publish(r, []byte(d)))
	}
	require.NoError(t, a.Flush())
	requireNext(t, inbox, "1")
	requireNothing(t, inbox, a, b)
	require.Zero(t, accA.NumPendingResponses(), "a Singleton's way back closes with its response")

	require.NoError(t, b.PublishRequest("svc.stream", "_INBOX.rt.2", nil))
	r = <-replies
	for _, d := range []string{"1", "2", "3"} {
		require.NoError(t, a.Publish(r, []byte(d)))
	}
	for _, d := range []string{"1", "2", "3"} {
		m, err := inbox.NextMsg(5 * time.Second)
		require.NoError(t, err)
		require.Equal(t, d, string(m.Data))
	}
	require.Equal(t, 1, accA.NumPendingResponses(), "a Streamed one stays open")
	require.Eventually(t, func() bool { return accA.NumPendingResponses() == 0 }, 5*time.Second, 50*time.Millisecond,
		"the sweeper closes it once the threshold passes without a response")
	require.NoError(t, a.Publish(r, []byte("late")))
	requireNothing(t, inbox, a, b)

	// A response nobody takes closes a Streamed way back at once.
	require.NoError(t, b.PublishRequest("svc.stream", "_INBOX.nobody", nil))
	r = <-replies
	require.Equal(t, 1, accA.NumPendingResponses())
	require.NoError(t, a.Publish(r, []byte("x")))
	require.NoError(t, a.Flush())
	require.Zero(t, accA.NumPendingResponses())

	// A request nobody takes leaves no way back.
	require.NoError(t, b.PublishRequest("map.x.y", "_INBOX.rt.3", nil))
	require.NoError(t, b.Flush())
	require.Zero(t, accA.NumPendingResponses())
}

// TestImportsDeputy: across accounts the server does no more for a
// principal than the principal could (principal.go).
func TestImportsDeputy(t *testing.T) {
	s := RunServer(t, importsOptions())
	accA, _ := s.LookupAccount("A")
	accB, _ := s.LookupAccount("B")

	type seen struct {
		subject             string
		internal, permitted bool
		principal           server.Principal
	}
	record := func(acc *server.Account, pattern string) <-chan seen {
		ch := make(chan seen, 16)
		_, err := acc.SubscribeInternal(pattern, "", func(m *server.Msg) {
			ch <- seen{strings.Clone(m.Subject), m.Internal(), m.Permitted(), m.Principal()}
		})
		require.NoError(t, err)
		return ch
	}

	t.Run("a response acts for the requester", func(t *testing.T) {
		// A component of B storing orders.new (as a stream would).
		stored := record(accB, "orders.new")
		api := record(accB, "$JS.API.>")
		a := connectAs(t, s, "a")
		echo(t, a, "svc.echo", nil)
		bConn := connectAs(t, s, "b")
		bClient, err := bConn.SubscribeSync("orders.new")
		require.NoError(t, err)
		require.NoError(t, bConn.Flush()) // subscribed before b2 asks

		// b2 may not publish orders.new: its reply there is delivered to
		// B's subscribers, as nats-server does, but is not b2's to store.
		b2 := connectAs(t, s, "b2")
		require.NoError(t, b2.PublishRequest("echo", "orders.new", []byte("from A's responder")))
		got := <-stored
		require.True(t, got.internal, "a response is the server's, acting for the requester")
		require.False(t, got.permitted, "b2 may not publish orders.new")
		require.Equal(t, "b2", got.principal.User())
		require.Equal(t, accB, got.principal.Account())
		_, err = bClient.NextMsg(5 * time.Second)
		require.NoError(t, err)

		// b may: stored.
		require.NoError(t, connectAs(t, s, "b").PublishRequest("echo", "orders.new", []byte("ok")))
		got = <-stored
		require.True(t, got.internal)
		require.True(t, got.permitted)

		// A reply aimed at the JetStream API reaches it as an internal
		// message, which the API ignores.
		require.NoError(t, b2.PublishRequest("echo", "$JS.API.STREAM.DELETE.ORDERS", []byte("{}")))
		got = <-api
		require.Equal(t, "$JS.API.STREAM.DELETE.ORDERS", got.subject)
		require.True(t, got.internal, "the exporter's responder cannot call B's API as b2")
	})

	t.Run("a server-published message crosses for its principal", func(t *testing.T) {
		stored := record(accB, "a.events.>")
		pub := accA.NewPublisher()
		pub.ActFor(accA.PrincipalOf("a2"))
		pub.PublishNow("events.secret", "", nil, []byte("x")) // a2 may not publish events.secret
		got := <-stored
		require.Equal(t, "a.events.secret", got.subject)
		require.True(t, got.internal)
		require.False(t, got.permitted, "checked against a2 before it was mapped")
		require.Equal(t, accB, got.principal.Account())
		require.False(t, got.principal.CanPublish("a.events.secret"), "a crossed principal may publish nothing itself")

		pub.PublishNow("events.open", "", nil, []byte("x"))
		got = <-stored
		require.True(t, got.permitted)

		pub.ActFor(server.Principal{})
		pub.PublishNow("events.open", "", nil, []byte("x"))
		got = <-stored
		require.False(t, got.permitted, "nobody stays nobody across")

		// A publisher of B told to act for the crossed principal is
		// permitted nothing.
		var mu sync.Mutex
		var crossed server.Principal
		_, err := accB.SubscribeInternal("a.events.again", "", func(m *server.Msg) {
			mu.Lock()
			crossed = m.Principal()
			mu.Unlock()
		})
		require.NoError(t, err)
		pub.ActFor(accA.PrincipalOf("a"))
		pub.PublishNow("events.again", "", nil, nil)
		require.Equal(t, "a.events.again", (<-stored).subject)
		mu.Lock()
		pr := crossed
		mu.Unlock()
		bPub := accB.NewPublisher()
		bPub.ActFor(pr)
		bPub.PublishNow("a.events.relay", "", nil, nil)
		got = <-stored
		require.Equal(t, "a.events.relay", got.subject)
		require.False(t, got.permitted, "what crossed as permitted permits nothing else")
	})

	t.Run("a client's request crosses as the client's", func(t *testing.T) {
		calls := record(accA, "svc.echo")
		b := connectAs(t, s, "b")
		require.NoError(t, b.PublishRequest("echo", "_INBOX.x", nil))
		got := <-calls
		require.False(t, got.internal)
		require.True(t, got.permitted)
		require.Equal(t, "b", got.principal.User())
		require.Equal(t, accB, got.principal.Account(), "the requester's own account: a component of A acting for it acts for nobody")
		p := accA.NewPublisher()
		p.ActFor(got.principal)
		stored := record(accA, "events.relay")
		p.PublishNow("events.relay", "", nil, nil)
		require.False(t, (<-stored).permitted)
	})
}

// TestImportsFromItself: an account may import its own export; a bridge
// is crossed once per message (as nats-server stops a request that comes
// back to a service import it crossed), so this is no loop.
func TestImportsFromItself(t *testing.T) {
	s := RunServer(t, server.Options{Accounts: []server.AccountConfig{{
		Name:    "A",
		Users:   []server.User{{Name: "a", Password: "a"}},
		Exports: []server.Export{{Subject: "x", Service: true}, {Subject: "ev.>"}},
		Imports: []server.Import{{Account: "A", Subject: "x", Service: true}, {Account: "A", Subject: "ev.>", To: "copy.ev.>"}},
	}}})
	a := connectAs(t, s, "a")
	calls, err := a.SubscribeSync("x")
	require.NoError(t, err)
	copies, err := a.SubscribeSync("copy.ev.>")
	require.NoError(t, err)
	require.NoError(t, a.Flush())
	require.NoError(t, a.PublishRequest("x", "_INBOX.y", nil))
	require.NoError(t, a.Publish("ev.1", nil))
	require.NoError(t, a.Flush())
	n, _, err := calls.Pending()
	require.NoError(t, err)
	require.Equal(t, 2, n, "directly, and once through the import")
	n, _, err = copies.Pending()
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// TestImportsEscapes: a tenant cannot reach past its account through the
// subjects servers give meaning to. What B publishes on $SYS and $JS.API
// subjects, sends as requests through its imports or sets as reply
// subjects reaches neither the global account (where the server's own
// components live without accounts) nor the exporter, other than the
// exported service's request on the response table's reply.
func TestImportsEscapes(t *testing.T) {
	s := RunServer(t, importsOptions())
	accA, _ := s.LookupAccount("A")
	type seen struct{ acc, subject, reply string }
	got := make(chan seen, 64)
	for _, acc := range []*server.Account{s.GlobalAccount(), accA} {
		_, err := acc.SubscribeInternal(">", "", func(m *server.Msg) {
			got <- seen{m.Account().Name(), strings.Clone(m.Subject), strings.Clone(m.Reply)} // views of the read buffer
		})
		require.NoError(t, err)
	}
	a, b := connectAs(t, s, "a"), connectAs(t, s, "b")
	echo(t, a, "svc.echo", nil)
	for len(got) > 0 {
		<-got
	}

	inbox, err := b.SubscribeSync(">")
	require.NoError(t, err)
	require.NoError(t, b.Flush())
	for _, subj := range []string{"$SYS.REQ.SERVER.PING", "$SYS.REQ.ACCOUNT.A.CONNZ", "$JS.API.INFO", "$JS.API.STREAM.DELETE.X"} {
		require.NoError(t, b.PublishRequest(subj, "_INBOX.b.x", nil))
	}
	for _, reply := range []string{"$SYS.REQ.SERVER.PING", "$JS.API.STREAM.DELETE.X", "svc.echo"} {
		require.NoError(t, b.PublishRequest("echo", reply, []byte(reply)))
	}
	require.NoError(t, b.Flush())
	require.NoError(t, a.Flush())
	deadline := time.After(5 * time.Second)
	for range 6 { // each echo request in A, and A's response on its reply
		select {
		case m := <-got:
			require.Equal(t, "A", m.acc, "nothing of B's reaches the global account: %+v", m)
			if m.subject == "svc.echo" {
				require.True(t, strings.HasPrefix(m.reply, "_R_."), "B's reply is not A's to see: %+v", m)
			} else {
				require.True(t, strings.HasPrefix(m.subject, "_R_."), "only the exported service and its responses: %+v", m)
			}
		case <-deadline:
			t.Fatal("the requests through the import did not arrive")
		}
	}
	require.NoError(t, b.Flush())
	require.NoError(t, a.Flush())
	select {
	case m := <-got:
		t.Fatalf("reached past B: %+v", m)
	default:
	}
	// B saw its own messages, and the responses came back to B, on its
	// own subjects.
	var back []string
	for range 10 {
		m, err := inbox.NextMsg(5 * time.Second)
		require.NoError(t, err)
		back = append(back, m.Subject)
	}
	require.ElementsMatch(t, []string{"$SYS.REQ.SERVER.PING", "$SYS.REQ.ACCOUNT.A.CONNZ", "$JS.API.INFO", "$JS.API.STREAM.DELETE.X",
		"echo", "echo", "echo", "$SYS.REQ.SERVER.PING", "$JS.API.STREAM.DELETE.X", "svc.echo"}, back)
	requireNothing(t, inbox, a, b)
}

// TestImportOptions: New refuses exports and imports nats-server refuses,
// with its messages, naming the account: an import nothing exports to the
// importer (a restricted export, an account token of another account),
// cycles, and mappings it cannot make.
func TestImportOptions(t *testing.T) {
	a := func(name string, ex []server.Export, im []server.Import) server.AccountConfig {
		return server.AccountConfig{Name: name, Exports: ex, Imports: im}
	}
	stream := func(acc, subj string) server.Import { return server.Import{Account: acc, Subject: subj} }
	service := func(acc, subj string) server.Import { return server.Import{Account: acc, Subject: subj, Service: true} }
	for _, tc := range []struct {
		name     string
		accounts []server.AccountConfig
		err      string // "" for accepted
	}{
		{"public stream", []server.AccountConfig{a("A", []server.Export{{Subject: "x.>"}}, nil), a("B", nil, []server.Import{stream("A", "x.y")})}, ""},
		{"restricted to the importer", []server.AccountConfig{
			a("A", []server.Export{{Subject: "x.>", Accounts: []string{"B"}}}, nil), a("B", nil, []server.Import{stream("A", "x.>")})}, ""},
		{"restricted to another", []server.AccountConfig{
			a("A", []server.Export{{Subject: "x.>", Accounts: []string{"B"}}}, nil), a("B", nil, nil),
			a("C", nil, []server.Import{stream("A", "x.>")})}, `account "C": Error adding stream import "x.>" from account "A": stream import not authorized`},
		{"restricted service", []server.AccountConfig{
			a("A", []server.Export{{Subject: "s", Service: true, Accounts: []string{"B"}}}, nil), a("B", nil, nil),
			a("C", nil, []server.Import{service("A", "s")})}, "service import not authorized"},
		{"account token of the importer", []server.AccountConfig{
			a("A", []server.Export{{Subject: "t.*.e", TokenPosition: 2}}, nil), a("B", nil, []server.Import{stream("A", "t.B.e")})}, ""},
		{"account token of another", []server.AccountConfig{
			a("A", []server.Export{{Subject: "t.*.e", TokenPosition: 2}}, nil), a("B", nil, []server.Import{stream("A", "t.C.e")}),
			a("C", nil, nil)}, "stream import not authorized"},
		{"a service is not a stream", []server.AccountConfig{
			a("A", []server.Export{{Subject: "s", Service: true}}, nil), a("B", nil, []server.Import{stream("A", "s")})}, "stream import not authorized"},
		{"undefined exporter", []server.AccountConfig{a("B", nil, []server.Import{stream("Z", "x")})}, `"Z" account not defined for stream import`},
		{"stream cycle", []server.AccountConfig{
			a("A", []server.Export{{Subject: "x.>"}}, []server.Import{stream("B", "x.>")}),
			a("B", []server.Export{{Subject: "x.>"}}, []server.Import{stream("A", "x.>")})}, "import forms a cycle"},
		{"service cycle", []server.AccountConfig{
			a("A", []server.Export{{Subject: "s", Service: true}}, []server.Import{service("B", "s")}),
			a("B", []server.Export{{Subject: "s", Service: true}}, []server.Import{service("A", "s")})}, "import forms a cycle"},
		{"mapping dropping a wildcard", []server.AccountConfig{
			a("A", []server.Export{{Subject: "x.*.*", Service: true}}, nil),
			a("B", nil, []server.Import{{Account: "A", Subject: "x.*.*", Service: true, To: "y.$1"}})}, "failed to create mapping transform"},
		{"response type on a stream", []server.AccountConfig{a("A", []server.Export{{Subject: "x", Response: server.Streamed}}, nil)},
			"Detected response directive on non-service"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := server.New(server.Options{Accounts: tc.accounts})
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, server.ErrInvalidOptions)
			require.ErrorContains(t, err, tc.err)
		})
	}
}
