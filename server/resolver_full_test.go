package server_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/jwttest"
	"github.com/skiffmq/skiff/server"
)

// fullResolver is an operator with a system account whose servers keep
// their account JWTs in a directory, and whose system user pushes
// account JWTs as `nsc push` does.
type fullResolver struct {
	t   *testing.T
	op  *jwttest.Operator
	sys *jwttest.Account
}

func newFullResolver(t *testing.T) *fullResolver {
	op := jwttest.NewOperator(t)
	sys := op.Account("SYS")
	op.Update(jwttest.SystemAccount(sys.Pub))
	return &fullResolver{t: t, op: op, sys: sys}
}

// options are a server's: the directory dir, the system account
// preloaded (so that it is there before any push), deletes allowed.
func (f *fullResolver) options(dir string) server.Options {
	return server.Options{TrustedOperators: []string{f.op.JWT}, Resolver: server.ResolverOptions{
		Type: server.ResolverFull, Dir: dir, AllowDelete: true, Preload: f.op.Preload(f.sys)}}
}

// claimsAnswer is nats-server's answer to an update or a delete.
type claimsAnswer struct {
	Server struct {
		ID string `json:"id"`
	} `json:"server"`
	Data *struct {
		Account string `json:"account"`
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"data"`
	Error *struct {
		Account     string `json:"account"`
		Code        int    `json:"code"`
		Description string `json:"description"`
	} `json:"error"`
}

// sysConn connects the system user to s.
func (f *fullResolver) sysConn(s *server.Server) *nats.Conn {
	nc, err := nats.Connect(s.ClientURL(), nats.UserCredentials(f.sys.User("admin").CredsFile(f.t)))
	require.NoError(f.t, err)
	f.t.Cleanup(nc.Close)
	return nc
}

// push sends body to subject and returns the answers of want servers.
func (f *fullResolver) push(nc *nats.Conn, subject, body string, want int) []claimsAnswer {
	f.t.Helper()
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	require.NoError(f.t, err)
	defer func() { _ = sub.Unsubscribe() }()
	require.NoError(f.t, nc.PublishRequest(subject, inbox, []byte(body)))
	var out []claimsAnswer
	for range want {
		m, err := sub.NextMsg(5 * time.Second)
		require.NoError(f.t, err, "answer %d of %d", len(out)+1, want)
		var a claimsAnswer
		require.NoError(f.t, json.Unmarshal(m.Data, &a), string(m.Data))
		out = append(out, a)
	}
	return out
}

// update pushes acc's JWT and requires it accepted.
func (f *fullResolver) update(nc *nats.Conn, acc *jwttest.Account) {
	f.t.Helper()
	a := f.push(nc, "$SYS.REQ.CLAIMS.UPDATE", acc.JWT, 1)[0]
	require.Nil(f.t, a.Error, "%+v", a.Error)
	require.Equal(f.t, 200, a.Data.Code)
	require.Equal(f.t, acc.Pub, a.Data.Account)
}

func userConn(t *testing.T, s *server.Server, u *jwttest.User, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(s.ClientURL(), append([]nats.Option{nats.UserCredentials(u.CredsFile(t))}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	return nc
}

// TestFullResolverPush: an account pushed to a running server is stored
// in the directory and its users connect; LIST and LOOKUP answer as
// nats-server's; after a restart the directory still has it.
func TestFullResolverPush(t *testing.T) {
	f := newFullResolver(t)
	dir := t.TempDir()
	s := RunServer(t, f.options(dir))
	a := f.op.Account("A")
	requireRefused(t, s, a.User("u"))
	sys := f.sysConn(s)
	f.update(sys, a)
	require.FileExists(t, filepath.Join(dir, a.Pub+".jwt"))
	nc := userConn(t, s, a.User("u"))
	require.NoError(t, nc.Flush())

	again := f.push(sys, "$SYS.REQ.CLAIMS.UPDATE", a.JWT, 1)[0]
	require.Equal(t, 200, again.Data.Code, "the same JWT again is no error")

	m, err := sys.Request("$SYS.REQ.CLAIMS.LIST", nil, 5*time.Second)
	require.NoError(t, err)
	var list struct {
		Data []string `json:"data"`
	}
	require.NoError(t, json.Unmarshal(m.Data, &list))
	require.ElementsMatch(t, []string{f.sys.Pub, a.Pub}, list.Data)
	m, err = sys.Request("$SYS.REQ.ACCOUNT."+a.Pub+".CLAIMS.LOOKUP", nil, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, a.JWT, string(m.Data))
	m, err = sys.Request("$SYS.REQ.ACCOUNT."+f.op.Account("NEVER").Pub+".CLAIMS.LOOKUP", nil, 5*time.Second)
	require.NoError(t, err)
	require.Empty(t, m.Data, "an account the server does not have: an empty answer")

	nc.Close()
	sys.Close()
	require.NoError(t, s.Shutdown(t.Context()))
	s2 := RunServer(t, f.options(dir))
	requireAccepted(t, s2, a.User("u"))
}

// TestFullResolverRefusals: what is not a valid account JWT of a trusted
// operator is refused with nats-server's answer, and stored nowhere; an
// older JWT of an account does not replace a newer one; a tenant cannot
// reach the claims subjects at all.
func TestFullResolverRefusals(t *testing.T) {
	f := newFullResolver(t)
	dir := t.TempDir()
	s := RunServer(t, f.options(dir))
	sys := f.sysConn(s)
	foreign := jwttest.NewOperator(t).Account("F")
	a := f.op.Account("A")
	b := f.op.Account("B")
	expired := f.op.Account("X", jwttest.AccountExpires(time.Now().Add(-time.Hour)))
	for _, tc := range []struct {
		name, subject, body, account, want string
	}{
		{"not a JWT", "$SYS.REQ.CLAIMS.UPDATE", "hello", "n/a", "jwt update resulted in error"},
		{"foreign operator", "$SYS.REQ.CLAIMS.UPDATE", foreign.JWT, foreign.Pub, "account JWT not signed by a trusted operator"},
		{"expired", "$SYS.REQ.CLAIMS.UPDATE", expired.JWT, expired.Pub, "jwt validation failed"},
		{"another account's subject", "$SYS.REQ.ACCOUNT." + b.Pub + ".CLAIMS.UPDATE", a.JWT, b.Pub, "subject does not match jwt content"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := f.push(sys, tc.subject, tc.body, 1)[0]
			require.Nil(t, got.Data)
			require.NotNil(t, got.Error)
			require.Equal(t, 500, got.Error.Code)
			require.Equal(t, tc.account, got.Error.Account)
			require.Contains(t, got.Error.Description, tc.want)
		})
	}
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, ents, 1, "only the system account is stored")

	f.update(sys, a)
	older := a.JWT
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	a.Update(jwttest.AccountLimits(5, -1, -1))
	f.update(sys, a)
	got := f.push(sys, "$SYS.REQ.CLAIMS.UPDATE", older, 1)[0]
	require.NotNil(t, got.Error, "an older JWT does not replace a newer one")
	require.Contains(t, got.Error.Description, "issued later")
	b2, err := os.ReadFile(filepath.Join(dir, a.Pub+".jwt"))
	require.NoError(t, err)
	require.Equal(t, a.JWT, string(b2))

	tenant := userConn(t, s, a.User("u"))
	_, err = tenant.Request("$SYS.REQ.CLAIMS.UPDATE", []byte(b.JWT), 500*time.Millisecond)
	require.ErrorIs(t, err, nats.ErrNoResponders, "a tenant's $SYS is its own account's subject")
	requireRefused(t, s, b.User("u"))
}

// TestFullResolverUpdateEnforced: a new JWT of an account with connected
// users takes effect at once: max_connections closes the newest, a
// revocation closes the user it revokes, a removed signing key closes
// the users it signed, and max_payload binds the clients that stay.
func TestFullResolverUpdateEnforced(t *testing.T) {
	f := newFullResolver(t)
	s := RunServer(t, f.options(t.TempDir()))
	sys := f.sysConn(s)
	a := f.op.Account("A")
	sk := a.AddSigningKey()
	f.update(sys, a)

	errs := make(chan string, 8)
	onErr := nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err.Error() })
	noReconnect := nats.NoReconnect()
	old := userConn(t, s, a.User("old"), onErr, noReconnect)
	revoked := a.User("revoked")
	victim := userConn(t, s, revoked, onErr, noReconnect)
	signed := userConn(t, s, a.User("signed", jwttest.SignedWith(sk)), onErr, noReconnect)
	newest := userConn(t, s, a.User("newest"), onErr, noReconnect)
	for _, nc := range []*nats.Conn{old, victim, signed, newest} {
		require.NoError(t, nc.Flush())
	}

	a.Update(jwttest.AccountClaims(func(c *jwt.AccountClaims) {
		c.Limits.Conn = 1
		c.Limits.Payload = 16
		c.SigningKeys = jwt.SigningKeys{}
		c.RevokeAt(revoked.Pub, time.Now())
	}))
	f.update(sys, a)
	for i, nc := range []*nats.Conn{victim, signed, newest} {
		require.Eventually(t, nc.IsClosed, 5*time.Second, 10*time.Millisecond, "client %d", i)
	}
	require.False(t, old.IsClosed(), "the oldest stays: max_connections 1")
	require.False(t, old.IsClosed(), "the oldest stays: max_connections 1")
	require.NoError(t, old.Publish("p", make([]byte, 16)))
	require.NoError(t, old.Flush())
	// nats.go knows the max_payload of the INFO it had: the server judges.
	require.NoError(t, old.Publish("p", make([]byte, 100)))
	require.Eventually(t, old.IsClosed, 5*time.Second, 10*time.Millisecond, "the new max_payload binds the client that stayed")
	seen := map[string]bool{}
	require.Eventually(t, func() bool {
		for len(errs) > 0 {
			seen[<-errs] = true
		}
		return seen[nats.ErrAuthRevoked.Error()] && seen[nats.ErrAuthorization.Error()]
	}, 5*time.Second, 10*time.Millisecond, "%v", seen)
	require.ErrorContains(t, old.LastError(), "Maximum Payload Violation")
}

// TestFullResolverImports: an import of an account pushed after the
// start works, and goes when the exporter's new JWT drops the export.
func TestFullResolverImports(t *testing.T) {
	f := newFullResolver(t)
	s := RunServer(t, f.options(t.TempDir()))
	sys := f.sysConn(s)
	e := f.op.Account("E", jwttest.Exports(&jwt.Export{Subject: "feed.>", Type: jwt.Stream},
		&jwt.Export{Subject: "svc", Type: jwt.Service}))
	i := f.op.Account("I", jwttest.Imports(&jwt.Import{Account: e.Pub, Subject: "feed.>", Type: jwt.Stream},
		&jwt.Import{Account: e.Pub, Subject: "svc", Type: jwt.Service}))
	f.update(sys, i) // the importer first: its imports wait for the exporter
	f.update(sys, e)

	pub := userConn(t, s, e.User("p"))
	_, err := pub.Subscribe("svc", func(m *nats.Msg) { _ = m.Respond([]byte("served")) })
	require.NoError(t, err)
	require.NoError(t, pub.Flush())
	imp := userConn(t, s, i.User("s"))
	got, err := imp.SubscribeSync("feed.x")
	require.NoError(t, err)
	require.NoError(t, imp.Flush())
	require.NoError(t, pub.Publish("feed.x", []byte("1")))
	requireNext(t, got, "1")
	m, err := imp.Request("svc", nil, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "served", string(m.Data))

	e.Update(jwttest.AccountClaims(func(c *jwt.AccountClaims) { c.Exports = nil }))
	f.update(sys, e)
	require.NoError(t, pub.Publish("feed.x", []byte("2")))
	require.NoError(t, pub.Flush())
	_, err = got.NextMsg(300 * time.Millisecond)
	require.ErrorIs(t, err, nats.ErrTimeout, "the export is gone: nothing crosses")
	_, err = imp.Request("svc", nil, 500*time.Millisecond)
	require.ErrorIs(t, err, nats.ErrNoResponders)
}

// TestFullResolverDelete: the operator deletes an account: its clients
// are closed, its users refused, its JWT renamed .deleted; the system
// account cannot be deleted, and a server without allow_delete refuses.
func TestFullResolverDelete(t *testing.T) {
	f := newFullResolver(t)
	dir := t.TempDir()
	s := RunServer(t, f.options(dir))
	sys := f.sysConn(s)
	a := f.op.Account("A")
	f.update(sys, a)
	nc := userConn(t, s, a.User("u"), nats.NoReconnect())
	require.NoError(t, nc.Flush())

	got := f.push(sys, "$SYS.REQ.CLAIMS.DELETE", f.op.DeleteRequest(f.sys.Pub), 1)[0]
	require.NotNil(t, got.Error)
	require.Contains(t, got.Error.Description, "not allowed to delete system account")
	got = f.push(sys, "$SYS.REQ.CLAIMS.DELETE", jwttest.NewOperator(t).DeleteRequest(a.Pub), 1)[0]
	require.NotNil(t, got.Error)
	require.Contains(t, got.Error.Description, "not trusted")

	got = f.push(sys, "$SYS.REQ.CLAIMS.DELETE", f.op.DeleteRequest(a.Pub), 1)[0]
	require.Nil(t, got.Error, "%+v", got.Error)
	require.Equal(t, "deleted 1 accounts", got.Data.Message)
	require.Eventually(t, nc.IsClosed, 5*time.Second, 10*time.Millisecond)
	requireRefused(t, s, a.User("u"))
	require.NoFileExists(t, filepath.Join(dir, a.Pub+".jwt"))
	require.FileExists(t, filepath.Join(dir, a.Pub+".jwt.deleted"))

	// Pushed again, it is back.
	f.update(sys, a)
	requireAccepted(t, s, a.User("u"))

	opts := f.options(t.TempDir())
	opts.Resolver.AllowDelete = false
	s2 := RunServer(t, opts)
	got = f.push(f.sysConn(s2), "$SYS.REQ.CLAIMS.DELETE", f.op.DeleteRequest(a.Pub), 1)[0]
	require.NotNil(t, got.Error)
	require.Contains(t, got.Error.Description, "delete must be enabled in server config")
}

// TestFullResolverCluster: in a cluster every server takes a push and
// answers it; a server that was not there catches up from a peer
// (PACK) within the interval, and one whose interval is far off asks its
// peers for an account at its user's CONNECT (LOOKUP).
func TestFullResolverCluster(t *testing.T) {
	f := newFullResolver(t)
	interval := 200 * time.Millisecond
	opts := func() server.Options {
		o := f.options(t.TempDir())
		o.Resolver.Interval = interval
		o.Cluster = server.ClusterOptions{Name: "full", Host: "127.0.0.1", Port: server.RandomPort}
		return o
	}
	s1 := RunServer(t, opts())
	o2 := opts()
	o2.Cluster.Routes = []string{s1.RouteURL()}
	s2 := RunServer(t, o2)
	require.Eventually(t, func() bool { return s1.NumRoutes() == 1 && s2.NumRoutes() == 1 }, 5*time.Second, 10*time.Millisecond)
	sys := f.sysConn(s1)
	a := f.op.Account("A")
	// Both servers' interest in the claims subjects must have crossed.
	require.Eventually(t, func() bool {
		m, err := sys.Request("$SYS.REQ.CLAIMS.LIST", nil, time.Second)
		return err == nil && m != nil && hasServerAnswers(t, sys, 2)
	}, 5*time.Second, 50*time.Millisecond)
	answers := f.push(sys, "$SYS.REQ.CLAIMS.UPDATE", a.JWT, 2)
	require.NotEqual(t, answers[0].Server.ID, answers[1].Server.ID, "each server answers")
	requireAccepted(t, s2, a.User("u"))

	o3 := opts()
	o3.Cluster.Routes = []string{s1.RouteURL()}
	RunServer(t, o3)
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(o3.Resolver.Dir, a.Pub+".jwt"))
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "the late server took the account from a peer (PACK)")

	interval = time.Hour
	o4 := opts()
	o4.Cluster.Routes = []string{s1.RouteURL()}
	s4 := RunServer(t, o4)
	require.Eventually(t, func() bool { return s4.NumRoutes() == 3 }, 5*time.Second, 10*time.Millisecond)
	require.NoFileExists(t, filepath.Join(o4.Resolver.Dir, a.Pub+".jwt"))
	creds := nats.UserCredentials(a.User("u").CredsFile(t))
	require.Eventually(t, func() bool {
		nc, err := nats.Connect(s4.ClientURL(), creds, nats.NoReconnect())
		if err != nil {
			return false
		}
		nc.Close()
		return true
	}, 10*time.Second, 100*time.Millisecond, "the CONNECT found the account at a peer (LOOKUP)")
	require.FileExists(t, filepath.Join(o4.Resolver.Dir, a.Pub+".jwt"))
}

// hasServerAnswers reports whether want servers answer a LIST.
func hasServerAnswers(t *testing.T, nc *nats.Conn, want int) bool {
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	require.NoError(t, err)
	defer func() { _ = sub.Unsubscribe() }()
	require.NoError(t, nc.PublishRequest("$SYS.REQ.CLAIMS.LIST", inbox, nil))
	for range want {
		if _, err := sub.NextMsg(time.Second); err != nil {
			return false
		}
	}
	return true
}
