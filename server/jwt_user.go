package server

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"

	"github.com/skiffmq/skiff/internal/proto"
)

// jwtUser is what a user authenticated by a user JWT carries besides its
// permissions: one per connection.
type jwtUser struct {
	issuedAt int64  // the JWT's iat, for revocations
	signer   string // the key that signed the JWT: the account or one of its signing keys
	bearer   bool
	// maxSubs and maxPayload are the user's own limits (noLimit: none).
	maxSubs, maxPayload int32
	// expiresIn is how long the connection may stay: until the JWT
	// expires or its connect times end (0: no end).
	expiresIn time.Duration
	// raw is the user JWT, for /connz; "" for a bearer token, which is a
	// credential on its own (nats-server does not show it either). tags
	// are its tags.
	raw  string
	tags jwt.TagList
}

// errUserJWT wraps every reason a user JWT is refused; the client only
// ever hears 'Authorization Violation', the log says why.
var errUserJWT = errors.New("user JWT refused")

// checkJWT authenticates a CONNECT in operator mode: a user JWT, signed
// for an account a trusted operator signed, and the nonce signed by the
// user's key. The checks run in nats-server's order
// (processClientOrLeafAuthentication).
func (c *client) checkJWT(co *connectOpts) (*user, error) {
	refuse := func(format string, args ...any) (*user, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{errUserJWT}, args...)...)
	}
	s := c.srv
	if co.JWT == "" {
		return refuse("authentication requires a user JWT")
	}
	uc, err := jwt.DecodeUserClaims(co.JWT)
	if err != nil {
		return refuse("user JWT not valid: %v", err)
	}
	if uc.ProxyRequired {
		return refuse("the user JWT requires a trusted proxy, which Skiff does not implement")
	}
	if err := validationError(uc); err != nil {
		return refuse("user JWT no longer valid: %v", err)
	}
	issuer := uc.Issuer
	if uc.IssuerAccount != "" {
		issuer = uc.IssuerAccount
	}
	if s.trust.pinned != nil && !s.trust.pinned[issuer] {
		return refuse("account %s is not a pinned account", issuer)
	}
	acc, err := s.jwtAccount(issuer, true)
	if err != nil {
		return refuse("account %s: %v", issuer, err)
	}
	aj := acc.jwt.state()
	if !s.trust.keys[aj.claims.Issuer] {
		return refuse("account %s: %v", issuer, errAccountUntrusted)
	}
	scope, known := aj.signers[uc.Issuer]
	if !known {
		return refuse("the user JWT's issuer %s is not a key of account %s", uc.Issuer, issuer)
	}
	lim := uc.UserPermissionLimits
	if scope != nil {
		if err := scope.ValidateScopedSigner(uc); err != nil {
			return refuse("scoped signing key: %v", err)
		}
		us, ok := scope.(*jwt.UserScope)
		if !ok {
			return refuse("scoped signing key %s has no user scope", uc.Issuer)
		}
		if lim, err = expandTemplate(us.Template, uc, aj.claims); err != nil {
			return refuse("scoped signing key %s: the template generated invalid permissions: %v", uc.Issuer, err)
		}
		if lim.ProxyRequired {
			return refuse("the scope requires a trusted proxy, which Skiff does not implement")
		}
	}
	if acc.jwtExpired() {
		return refuse("account %s: %v", issuer, errAccountExpired)
	}
	if aj.refused != "" {
		return refuse("account %s: %s", issuer, aj.refused)
	}
	if lim.BearerToken && aj.claims.Limits.DisallowBearer {
		return refuse("account %s does not allow bearer tokens", issuer)
	}
	if ok, why := c.connectionTypeAllowed(lim.AllowedConnectionTypes); !ok {
		return refuse("%s", why)
	}
	if !lim.BearerToken && !verifyNonce(uc.Subject, co.Sig, c.nonce) {
		return refuse("the nonce signature does not verify with the user's key")
	}
	if isRevoked(aj.claims.Revocations, uc.Subject, uc.IssuedAt) {
		return refuse("user authentication revoked")
	}
	if !srcAllowed(lim.Src, c.ip) {
		return refuse("bad src IP %s", c.ip)
	}
	now := time.Now()
	allowNow, validFor := connectTimesAt(lim.Times, lim.Locale, now)
	if !allowNow {
		return refuse("outside connect times")
	}
	perms, resp := permissionsFromJWT(&lim.Permissions)
	if perms == nil && !resp {
		perms, resp = aj.defaultPerms, aj.defaultResp
	}
	if resp {
		return refuse("response permissions (resp) are not implemented")
	}
	if perms != nil {
		if err := perms.validate(); err != nil {
			return refuse("permissions: %v", err)
		}
	}
	return &user{name: uc.Subject, perms: perms, acc: acc, jwt: &jwtUser{
		issuedAt:   uc.IssuedAt,
		signer:     uc.Issuer,
		bearer:     lim.BearerToken,
		maxSubs:    jwtLimit(lim.Subs),
		maxPayload: jwtLimit(lim.Payload),
		expiresIn:  expiresIn(uc.Expires, validFor, now),
		raw:        bearerRedacted(co.JWT, lim.BearerToken),
		tags:       uc.Tags,
	}}, nil
}

// bearerRedacted returns raw, or "" for a bearer token.
func bearerRedacted(raw string, bearer bool) string {
	if bearer {
		return ""
	}
	return raw
}

// expiresIn is how long a connection authenticated by a JWT expiring at
// exp (unix seconds, 0 for never) may stay, given that its connect times
// end in validFor (0 for no end): the sooner of the two, or 0 for never.
func expiresIn(exp int64, validFor time.Duration, now time.Time) time.Duration {
	if exp == 0 {
		return validFor
	}
	d := untilUnix(exp, now)
	if validFor != 0 && validFor < d {
		return validFor
	}
	// A JWT that expires this very second still gets a timer: zero
	// would mean never.
	return max(d, time.Nanosecond)
}

// knownConnectionTypes are the connection types nats-server knows. Skiff's
// clients are STANDARD or WEBSOCKET; the others never match one.
var knownConnectionTypes = map[string]bool{
	jwt.ConnectionTypeStandard: true, jwt.ConnectionTypeWebsocket: true,
	jwt.ConnectionTypeLeafnode: true, jwt.ConnectionTypeLeafnodeWS: true,
	jwt.ConnectionTypeMqtt: true, jwt.ConnectionTypeMqttWS: true,
	jwt.ConnectionTypeInProcess: true,
}

// connectionTypeAllowed checks the client's type against a JWT's allowed
// connection types (none listed: every type). Unknown types are ignored
// as long as a known one is listed; a list of only unknown types allows
// nothing, as in nats-server.
func (c *client) connectionTypeAllowed(types jwt.StringList) (bool, string) {
	if len(types) == 0 {
		return true, ""
	}
	mine := jwt.ConnectionTypeStandard
	if c.ws {
		mine = jwt.ConnectionTypeWebsocket
	}
	known := 0
	for _, t := range types {
		t = strings.ToUpper(t)
		if !knownConnectionTypes[t] {
			continue
		}
		known++
		if t == mine {
			return true, ""
		}
	}
	if known == 0 {
		return false, fmt.Sprintf("no known connection type in %q", []string(types))
	}
	return false, fmt.Sprintf("connection type %s not allowed (%q)", mine, []string(types))
}

// srcAllowed reports whether host is in one of the CIDRs (none listed:
// every host).
func srcAllowed(cidrs jwt.CIDRList, host string) bool {
	if len(cidrs) == 0 {
		return true
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	for _, cidr := range cidrs {
		_, n, err := net.ParseCIDR(cidr)
		if err != nil {
			return false // Validate refused the JWT already
		}
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// connectTimesAt reports whether now is within one of the time ranges
// (none listed: always), read in locale (default: the server's), and how
// long until the latest-ending range that holds now ends.
func connectTimesAt(ranges []jwt.TimeRange, locale string, now time.Time) (bool, time.Duration) {
	if len(ranges) == 0 {
		return true, 0
	}
	loc := time.Local
	if locale != "" {
		var err error
		if loc, err = time.LoadLocation(locale); err != nil {
			return false, 0
		}
	}
	now = now.In(loc)
	ok, validFor := false, time.Duration(0)
	for _, r := range ranges {
		start, err1 := time.ParseInLocation("15:04:05", r.Start, loc)
		end, err2 := time.ParseInLocation("15:04:05", r.End, loc)
		if err1 != nil || err2 != nil {
			return false, 0
		}
		y, m, d := now.Date()
		start = time.Date(y, m, d, start.Hour(), start.Minute(), start.Second(), 0, loc)
		end = time.Date(y, m, d, end.Hour(), end.Minute(), end.Second(), 0, loc)
		if in, left := inTimeRange(start, end, now); in && (!ok || left > validFor) {
			ok, validFor = true, left
		}
	}
	return ok, validFor
}

// inTimeRange reports whether now is between start and end of today (a
// range with end before start crosses midnight), and how long is left.
func inTimeRange(start, end, now time.Time) (bool, time.Duration) {
	if start.Before(now) && end.After(now) {
		return true, end.Sub(now)
	}
	if start.After(end) {
		if end.After(now) { // past midnight: 22:00-06:00 at 05:00
			return true, end.Sub(now)
		}
		if end = end.AddDate(0, 0, 1); start.Before(now) && end.After(now) { // before it: at 23:30
			return true, end.Sub(now)
		}
	}
	return false, 0
}

// startJWTExpiry arms the end of a JWT user's connection (after CONNECT
// bound it), replacing any earlier one.
func (c *client) startJWTExpiry(u *user) {
	c.timers.Lock()
	defer c.timers.Unlock()
	if c.timers.expire != nil {
		c.timers.expire.Stop()
		c.timers.expire = nil
	}
	if u == nil || u.jwt == nil || u.jwt.expiresIn == 0 || c.closed.Load() {
		return
	}
	c.timers.expire = time.AfterFunc(u.jwt.expiresIn, func() { c.authExpired(proto.ErrUserExpired) })
}

// authExpired tells the client its user's or account's JWT expired, and
// closes it. It runs on a timer goroutine, so it only queues and closes.
func (c *client) authExpired(e *proto.Error) {
	if c.closed.Load() {
		return
	}
	var buf [64]byte
	c.out.queue(proto.AppendErr(buf[:0], e.Text))
	c.log.Info("authentication expired", "reason", e.Text)
	c.close(reasonAuthExpired, true)
}
