package server

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/skiffmq/skiff/internal/proto"
	"github.com/skiffmq/skiff/store/vfs"
)

// accountJWT is what an account of operator mode holds from its JWT:
// the JWT applied last (state), and its expiry.
type accountJWT struct {
	st atomic.Pointer[jwtState]
	// expired is set when the JWT applied last expired; deleted when the
	// operator deleted the account (full resolver).
	expired, deleted atomic.Bool
	mu               sync.Mutex
	timer            *time.Timer // the expiry timer, set once the account is registered
}

// state returns what the JWT applied last says.
func (aj *accountJWT) state() *jwtState { return aj.st.Load() }

// jwtState is what one account JWT says, as Skiff reads it; replaced
// whole when the JWT is updated, never changed.
type jwtState struct {
	claims *jwt.AccountClaims
	raw    string
	// signers are the keys that may sign the account's users: its
	// signing keys (a scope for a scoped one, nil otherwise) and, unless
	// its operator has strict signing key usage, its own key.
	signers map[string]jwt.Scope
	// defaultPerms apply to users whose JWT has no permissions (nil:
	// none); defaultResp is set if they include response permissions.
	defaultPerms *Permissions
	defaultResp  bool
	// refused says why the account's users may not connect: its JWT asks
	// for what Skiff does not implement yet, and an account that lacks
	// what it asks for fails closed ("" if they may connect).
	refused string
}

// Why an account of operator mode is refused.
var (
	errAccountUntrusted = errors.New("account JWT not signed by a trusted operator")
	errAccountInvalid   = errors.New("account JWT not valid")
	errAccountExpired   = errors.New("account JWT has expired")
	errNotJWTAccount    = errors.New("not an account of operator mode")
)

// jwtAccount returns the operator-mode account pub: registered already,
// or fetched from the resolver, checked and registered. It runs on
// client read loops (CONNECT), where the resolver may ask the peers
// (wait), and on routes' and the system account's, where it may not.
func (s *Server) jwtAccount(pub string, wait bool) (*Account, error) {
	if a := s.accounts.lookup(pub); a != nil {
		switch {
		case a.jwt == nil:
			return nil, errNotJWTAccount
		case a.jwt.deleted.Load():
			return nil, errAccountDeleted
		case a.jwt.expired.Load():
			// A newer JWT comes through the full resolver's updates.
			return nil, errAccountExpired
		}
		return a, nil
	}
	raw, err := s.trust.resolver.fetch(pub, wait)
	if err != nil {
		return nil, err
	}
	ac, err := s.verifyAccountJWT(pub, raw)
	if err != nil {
		return nil, err
	}
	a := s.newJWTAccount(ac, raw)
	got, added := s.accounts.add(a)
	if added {
		s.startAccountExpiry(a)
		if st := a.jwt.state(); st.refused != "" {
			s.log.Warn("account refused: its users cannot connect", "account", pub, "name", ac.Name, "reason", st.refused)
		}
		if s.trust.late.Load() {
			s.resolveJWTImports(pub)
			s.accountUpdated(a)
		}
	}
	return got, nil
}

// routeAccount returns the account a peer names in RS+, RS- or RMSG. In
// operator mode an account not registered yet is fetched and checked as
// at CONNECT: a peer's client may be the first of an account whose JWT
// only became valid after this server started. The MEMORY resolver
// answers from memory, so the route's read loop does not wait.
func (s *Server) routeAccount(name []byte) *Account {
	if a := s.accounts.lookupBytes(name); a != nil || s.trust == nil || !nkeys.IsValidPublicAccountKey(string(name)) {
		return a
	}
	a, err := s.jwtAccount(string(name), false)
	if err != nil {
		return nil
	}
	return a
}

// verifyAccountJWT decodes an account JWT (checking its signature) and
// checks that a trusted operator key signed it, that it is valid now and
// that it is the account pub's.
func (s *Server) verifyAccountJWT(pub, raw string) (*jwt.AccountClaims, error) {
	ac, err := jwt.DecodeAccountClaims(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errAccountInvalid, err)
	}
	if !s.trust.keys[ac.Issuer] {
		return nil, fmt.Errorf("%w: issuer %s", errAccountUntrusted, ac.Issuer)
	}
	if err := validationError(ac); err != nil {
		return nil, fmt.Errorf("%w: %v", errAccountInvalid, err)
	}
	if ac.Subject != pub {
		return nil, fmt.Errorf("%w: the JWT is account %s's, not %s's", errAccountInvalid, ac.Subject, pub)
	}
	return ac, nil
}

// newJWTAccount builds the account of claims ac (not registered yet).
func (s *Server) newJWTAccount(ac *jwt.AccountClaims, raw string) *Account {
	a := newAccount(s, ac.Subject, limitsFromJWT(ac))
	a.jwt = &accountJWT{}
	st := s.jwtStateOf(ac, raw)
	a.jwt.st.Store(st)
	a.js.Store(s.jetStreamOf(st))
	return a
}

// limitsFromJWT returns the account limits of claims ac.
func limitsFromJWT(ac *jwt.AccountClaims) accountLimits {
	return accountLimits{
		maxConns:   jwtLimit(ac.Limits.Conn),
		maxSubs:    jwtLimit(ac.Limits.Subs),
		maxPayload: jwtLimit(ac.Limits.Payload),
	}
}

// jwtStateOf reads the claims ac (the JWT raw) of an account.
func (s *Server) jwtStateOf(ac *jwt.AccountClaims, raw string) *jwtState {
	st := &jwtState{claims: ac, raw: raw, signers: map[string]jwt.Scope{}}
	for k, scope := range ac.SigningKeys {
		st.signers[k] = scope
	}
	if !s.trust.strict[ac.Issuer] {
		st.signers[ac.Subject] = nil
	}
	st.defaultPerms, st.defaultResp = permissionsFromJWT(&ac.DefaultPermissions)
	st.refused = unsupportedClaims(ac)
	if ac.Trace != nil {
		s.log.Warn("account JWT asks for message tracing, which Skiff does not implement: ignored", "account", ac.Subject)
	}
	return st
}

// jetStreamOf returns the JetStream limits an account JWT gives (nil:
// none).
func (s *Server) jetStreamOf(st *jwtState) *JetStreamLimits {
	ac := st.claims
	switch {
	case !ac.Limits.IsJSEnabled() || st.refused != "":
		return nil
	case ac.Subject == s.trust.sysAccount:
		// As nats-server, which refuses to enable it there.
		s.log.Warn("account JWT gives the system account JetStream, which it cannot have: ignored", "account", ac.Subject)
		return nil
	}
	l := jetStreamFromJWT(&ac.Limits)
	return &l
}

// unsupportedClaims names what ac asks for that Skiff does not implement,
// or returns "". Such an account fails closed: honouring only part of it
// could skip the mappings and authorization it relies on.
func unsupportedClaims(ac *jwt.AccountClaims) string {
	var why []string
	if len(ac.Mappings) > 0 {
		why = append(why, "subject mappings")
	}
	if ac.HasExternalAuthorization() {
		why = append(why, "authorization callout")
	}
	for _, e := range ac.Exports {
		if e != nil && e.Latency != nil {
			why = append(why, "service latency tracking")
			break
		}
	}
	if len(why) == 0 {
		return ""
	}
	return "the account JWT has " + strings.Join(why, ", ") + ", which Skiff does not implement"
}

// jetStreamFromJWT returns the JetStream limits of account claims that
// enable JetStream, as nats-server reads them for a stream of one
// replica: the account-wide limits, or else the R1 tier's. A storage
// limit of 0 where the other is set allows no stream of that type; any
// other limit of 0 or less is none. Tiers without R1 leave no room for
// any stream: Skiff's streams have one replica.
func jetStreamFromJWT(l *jwt.OperatorLimits) JetStreamLimits {
	jl := l.JetStreamLimits
	if jl.MemoryStorage == 0 && jl.DiskStorage == 0 {
		jl = l.JetStreamTieredLimits["R1"] // the zero limits if there is none
	}
	none := func(v int64) int64 { return max(v, NoLimit) }
	return JetStreamLimits{
		MaxMemory:            none(jl.MemoryStorage),
		MaxStore:             none(jl.DiskStorage),
		NoMemory:             jl.MemoryStorage == 0,
		NoStore:              jl.DiskStorage == 0,
		MaxStreams:           int(none(jl.Streams)),
		MaxConsumers:         int(none(jl.Consumer)),
		MaxAckPending:        int(none(jl.MaxAckPending)),
		MemoryMaxStreamBytes: none(jl.MemoryMaxStreamBytes),
		StoreMaxStreamBytes:  none(jl.DiskMaxStreamBytes),
		MaxBytesRequired:     jl.MaxBytesRequired,
	}
}

// jwtLimit reads a limit of a JWT as nats-server does: -1 for none, any
// other negative value and zero allow nothing.
func jwtLimit(v int64) int32 {
	switch {
	case v == jwt.NoLimit:
		return noLimit
	case v < 0:
		return 0
	case v > math.MaxInt32:
		return math.MaxInt32
	}
	return int32(v)
}

// permissionsFromJWT returns the permissions p says (nil if it says
// none) and whether it has response permissions.
func permissionsFromJWT(p *jwt.Permissions) (*Permissions, bool) {
	if p == nil {
		return nil, false
	}
	resp := p.Resp != nil
	if p.Pub.Empty() && p.Sub.Empty() {
		return nil, resp
	}
	return &Permissions{
		Publish:   SubjectPermission{Allow: clone(p.Pub.Allow), Deny: clone(p.Pub.Deny)},
		Subscribe: SubjectPermission{Allow: clone(p.Sub.Allow), Deny: clone(p.Sub.Deny)},
	}, resp
}

func clone(l jwt.StringList) []string {
	if len(l) == 0 {
		return nil
	}
	return append([]string(nil), l...)
}

// startAccountExpiry arms the expiry of a registered account: when its
// JWT expires, its clients get -ERR 'Account Authentication Expired' and
// are closed, and no user connects into it any more.
func (s *Server) startAccountExpiry(a *Account) {
	exp := a.jwt.state().claims.Expires
	if exp == 0 {
		return
	}
	a.jwt.mu.Lock()
	defer a.jwt.mu.Unlock()
	a.jwt.timer = time.AfterFunc(untilUnix(exp, time.Now()), a.expireJWT)
}

// expireJWT runs on a timer goroutine when the account's JWT expires.
func (a *Account) expireJWT() {
	// Set before the clients are gathered: a client binding concurrently
	// either is gathered or sees expired (bind).
	a.jwt.expired.Store(true)
	a.mu.Lock()
	clients := make([]*client, 0, len(a.mu.clients))
	for c := range a.mu.clients {
		clients = append(clients, c)
	}
	a.mu.Unlock()
	a.srv.log.Info("account JWT expired", "account", a.name, "clients", len(clients))
	for _, c := range clients {
		c.authExpired(proto.ErrAccountExpired)
	}
}

// jwtExpired reports whether a is an operator-mode account whose JWT has
// expired.
func (a *Account) jwtExpired() bool { return a.jwt != nil && a.jwt.expired.Load() }

// stopAccountTimers stops the expiry timers of the accounts (Shutdown).
func (s *Server) stopAccountTimers() {
	s.stopBridgeTimers()
	for _, a := range s.accounts.all() {
		if a.jwt == nil {
			continue
		}
		a.jwt.mu.Lock()
		if a.jwt.timer != nil {
			a.jwt.timer.Stop()
		}
		a.jwt.mu.Unlock()
	}
}

// startOperatorMode builds the trust of operator mode and registers the
// accounts the resolver holds, so that routes and clients find them. An
// account that does not verify is logged and left out (its users are
// refused), as nats-server only warns about a preload; the system account
// must resolve, or New fails, as nats-server's Start does.
func (s *Server) startOperatorMode() error {
	t, err := newTrust(&s.opts)
	if err != nil {
		return err
	}
	s.trust = t
	accounts := slices.Collect(maps.Keys(s.opts.Resolver.Preload))
	switch s.opts.Resolver.Type {
	case ResolverFull:
		if accounts, err = s.openFullResolver(); err != nil {
			return err
		}
	default:
		t.resolver = newMemResolver(s.opts.Resolver.Preload)
	}
	for _, pub := range accounts {
		if _, err := s.jwtAccount(pub, false); err != nil {
			s.log.Warn("account not usable", "account", pub, "err", err)
		}
	}
	if sys := t.sysAccount; sys != "" {
		if _, err := s.jwtAccount(sys, false); err != nil {
			return fmt.Errorf("error resolving system account %s: %w", sys, err)
		}
	}
	t.late.Store(true)
	return nil
}

// openFullResolver opens the full resolver's directory, stores the
// preloaded JWTs there (unless it holds newer ones), and returns the
// accounts it holds.
func (s *Server) openFullResolver() ([]string, error) {
	o := &s.opts.Resolver
	st, skipped, err := openDirStore(vfs.OS, o)
	if err != nil {
		return nil, err
	}
	for _, err := range skipped {
		s.log.Warn("resolver dir: file not read", "err", err)
	}
	for pub, raw := range o.Preload {
		if _, err := st.saveIfNewer(pub, raw); err != nil && !errors.Is(err, errResolverOlder) {
			s.log.Warn("preloaded account JWT not stored", "account", pub, "err", err)
		}
	}
	s.trust.dir, s.trust.resolver = st, dirResolver{st: st, s: s}
	s.log.Info("managing all account JWTs in exclusive directory", "dir", o.Dir, "accounts", len(st.list()))
	return st.list(), nil
}

// OperatorMode reports whether the server runs in operator mode: its
// accounts come from account JWTs (docs/accounts.md).
func (s *Server) OperatorMode() bool { return s.trust != nil }
