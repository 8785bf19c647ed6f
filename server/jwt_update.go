package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/skiffmq/skiff/internal/proto"
)

// With the full resolver, account JWTs change while the server runs: a
// new account is pushed, an account's JWT is replaced, an account is
// deleted ($SYS.REQ.CLAIMS.*, resolver_sys.go). What a new JWT changes
// takes effect at once, as in nats-server's updateAccountClaims:
//
//   - limits: new connections get them; connected clients take the new
//     max_payload and max_subscriptions at their next read; clients past
//     the new max_connections are closed, newest first;
//   - revocations: a connected user the new JWT revokes gets -ERR 'User
//     Authentication Revoked' and is closed;
//   - signing keys: a user signed by a key the account no longer has, or
//     whose scope changed, is closed with -ERR 'Authorization Violation';
//   - default permissions and bearer rules: for new connections;
//   - expiry: the timer is set again (a renewed account is live again);
//   - exports and imports: every account's are resolved again, and the
//     bridges that changed replaced (imports.go), so that an import from
//     an account pushed later works;
//   - JetStream: enabled, changed or disabled through the component that
//     serves it (OnAccountUpdate).
//
// A deleted account locks out: its clients are closed as if it expired,
// no user connects into it, it exports and imports nothing, and its
// JetStream is disabled (its streams stay on disk).

// errAccountDeleted: the operator deleted the account.
var errAccountDeleted = errors.New("account deleted")

// AccountUpdateFunc is told that account a's JWT was applied (a new
// account, or a new JWT of one) or that a was deleted: its JetStream
// limits (Account.JetStreamLimits) may have changed. It runs on the
// goroutine that applied the JWT, after the account's state changed.
type AccountUpdateFunc func(a *Account)

// OnAccountUpdate registers f to hear of accounts registered after the
// server started and of account JWT updates. Call it before Start.
func (s *Server) OnAccountUpdate(f AccountUpdateFunc) {
	s.accountHooks = append(s.accountHooks, f)
}

// accountUpdated tells the hooks about a.
func (s *Server) accountUpdated(a *Account) {
	for _, f := range s.accountHooks {
		f(a)
	}
}

// applyAccountJWT makes ac (the JWT raw, verified) the JWT of account a
// and enforces it on a's clients.
func (s *Server) applyAccountJWT(a *Account, ac *jwt.AccountClaims, raw string) {
	old := a.jwt.state()
	st := s.jwtStateOf(ac, raw)
	lim := limitsFromJWT(ac)
	a.jwt.st.Store(st)
	a.jwt.deleted.Store(false)
	a.limits.Store(&lim)
	a.js.Store(s.jetStreamOf(st))
	a.updated.Store(time.Now().UnixNano())
	s.restartAccountExpiry(a)
	s.log.Info("account JWT updated", "account", a.name, "name", ac.Name, "refused", st.refused)
	s.enforceAccountJWT(a, old, st)
	if portsChanged(old, st) {
		s.resolveJWTImports(a.name)
	}
	s.accountUpdated(a)
}

// enforceAccountJWT applies st, which replaced old, to a's clients.
func (s *Server) enforceAccountJWT(a *Account, old, st *jwtState) {
	a.mu.Lock()
	clients := make([]*client, 0, len(a.mu.clients))
	for c := range a.mu.clients {
		clients = append(clients, c)
	}
	a.mu.Unlock()
	// Oldest first, so that the newest are the ones past max_connections.
	slices.SortFunc(clients, func(x, y *client) int { return x.start.Compare(y.start) })
	maxConns := int(a.lim().maxConns) - int(a.remoteConns.Load())
	kept := 0
	for _, c := range clients {
		u := c.usr.Load()
		switch {
		case st.refused != "":
			c.closeWithErr(proto.ErrAuthorization.Text, reasonAuth)
		case u != nil && u.jwt != nil && isRevoked(st.claims.Revocations, u.name, u.jwt.issuedAt):
			c.closeWithErr(proto.ErrUserRevoked.Text, reasonRevoked)
		case u != nil && u.jwt != nil && !sameScope(old.signers, st.signers, u.jwt.signer):
			c.closeWithErr(proto.ErrAuthorization.Text, reasonAuth)
		case u != nil && u.jwt != nil && u.jwt.bearer && st.claims.Limits.DisallowBearer:
			c.closeWithErr(proto.ErrAuthorization.Text, reasonAuth)
		case a.lim().maxConns != noLimit && kept >= maxConns:
			c.maxAccountConnsExceeded()
		default:
			kept++
			c.limitsStale.Store(true)
		}
	}
}

// reasonRevoked is why a revoked user's connection closed, nats-server's.
const reasonRevoked = "Credentials Revoked"

// sameScope reports whether key signs users with the same scope in after
// as in before (and may sign at all in after).
func sameScope(before, after map[string]jwt.Scope, key string) bool {
	sa, ok := after[key]
	if !ok {
		return false
	}
	sb, ok := before[key]
	if !ok {
		return true // it was not a signer before: the user connected some other way
	}
	if (sa == nil) != (sb == nil) {
		return false
	}
	if sa == nil {
		return true
	}
	ja, err1 := json.Marshal(sa)
	jb, err2 := json.Marshal(sb)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

// portsChanged reports whether the exports or imports of an account, or
// whether it is refused, differ between two of its JWTs.
func portsChanged(old, st *jwtState) bool {
	if (old.refused == "") != (st.refused == "") {
		return true
	}
	a, err1 := json.Marshal([]any{old.claims.Exports, old.claims.Imports})
	b, err2 := json.Marshal([]any{st.claims.Exports, st.claims.Imports})
	return err1 != nil || err2 != nil || string(a) != string(b)
}

// resolveJWTImports resolves the exports and imports of every account of
// operator mode again and replaces the bridges that changed. Problems are
// logged for the account changed only (every one: "").
func (s *Server) resolveJWTImports(changed string) {
	s.bridges.resolve.Lock()
	defer s.bridges.resolve.Unlock()
	s.setBridges(s.jwtImportIndex(changed))
}

// deleteJWTAccount locks account a out: the operator deleted it.
func (s *Server) deleteJWTAccount(a *Account) {
	a.jwt.deleted.Store(true)
	zero := accountLimits{}
	a.limits.Store(&zero)
	a.js.Store(nil)
	a.updated.Store(time.Now().UnixNano())
	a.expireJWT()
	s.resolveJWTImports(a.name)
	s.accountUpdated(a)
}

// restartAccountExpiry sets a's expiry timer again for the JWT applied
// last: an account whose new JWT is valid is live again.
func (s *Server) restartAccountExpiry(a *Account) {
	a.jwt.mu.Lock()
	if a.jwt.timer != nil {
		a.jwt.timer.Stop()
		a.jwt.timer = nil
	}
	a.jwt.mu.Unlock()
	a.jwt.expired.Store(false)
	s.startAccountExpiry(a)
}

// closeWithErr tells the client why with -ERR and closes it. It runs off
// the read loop.
func (c *client) closeWithErr(text, reason string) {
	if c.closed.Load() {
		return
	}
	c.out.queue(proto.AppendErr(nil, text))
	c.log.Info("closed by an account JWT update", "reason", reason)
	c.close(reason, true)
}

// reapplyLimits takes the limits of the client's account and user again,
// after its account's JWT changed. The read loop calls it.
func (c *client) reapplyLimits() {
	c.limitsStale.Store(false)
	c.maxPay, c.maxSubs = c.srv.limitsFor(c.acc, c.usr.Load())
	c.parser.SetMaxPayload(c.maxPay)
}

// verifyUpdate checks an account JWT pushed to the full resolver: that it
// decodes, is the account pub's (when the subject names one), is signed
// by a trusted operator key (a signing key if the operator is strict),
// and is valid now.
func (s *Server) verifyUpdate(pub, raw string) (*jwt.AccountClaims, error) {
	ac, err := jwt.DecodeAccountClaims(raw)
	if err != nil {
		return nil, err
	}
	if pub != "" && ac.Subject != pub {
		return ac, errors.New("subject does not match jwt content")
	}
	if _, err := s.verifyAccountJWT(ac.Subject, raw); err != nil {
		return ac, err
	}
	if s.trust.strictOperator(ac.Issuer) {
		return ac, errors.New("operator requires issuer to be a signing key")
	}
	return ac, nil
}

// storeAccountJWT stores an account JWT pushed to the full resolver and
// applies it: it registers a new account, or updates a registered one.
// The JWT stored already changes nothing.
func (s *Server) storeAccountJWT(ac *jwt.AccountClaims, raw string) error {
	st := s.trust.dir
	if st == nil {
		return errors.New("the resolver takes no updates")
	}
	changed, err := st.saveIfNewer(ac.Subject, raw)
	if err != nil || !changed {
		return err
	}
	if a := s.accounts.lookup(ac.Subject); a != nil {
		if a.jwt == nil {
			return fmt.Errorf("%w: %s", errNotJWTAccount, ac.Subject)
		}
		s.applyAccountJWT(a, ac, raw)
		return nil
	}
	_, err = s.jwtAccount(ac.Subject, false)
	return err
}
