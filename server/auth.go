package server

import (
	"cmp"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/nats-io/nkeys"
	"golang.org/x/crypto/bcrypt"

	"github.com/skiffmq/skiff/subject"
)

// authenticator checks the credentials of a CONNECT against the configured
// token, users or nkeys, in every account. It is built once in New and only
// read afterwards.
type authenticator struct {
	token  string
	users  map[string]*user
	nkeys  map[string]*user // by public key
	noAuth *user            // Options.NoAuthUser: whom a CONNECT without credentials is
	// operator: operator mode, where every client presents a user JWT
	// (Server.checkJWT) and signs the nonce.
	operator bool
}

// user is a configured user, with its permissions compiled and the
// account it connects into.
type user struct {
	name     string // the user name, or the nkey
	password string
	bcrypt   bool
	perms    *Permissions // nil: may do anything
	acc      *Account
	nkey     bool     // name is an nkey
	jwt      *jwtUser // a user of operator mode, authenticated by its JWT (jwt_user.go)
}

// newAuthenticator indexes the users of opts, with their accounts (made
// already by newAccounts). Permissions a user lacks are its account's
// default ones.
func newAuthenticator(o *Options, s *Server) *authenticator {
	a := &authenticator{token: o.Token, operator: o.operatorMode()}
	a.users, a.nkeys = map[string]*user{}, map[string]*user{}
	addUser := func(u User, acc *Account, def *Permissions) {
		a.users[u.Name] = &user{
			name:     u.Name,
			password: u.Password,
			bcrypt:   strings.HasPrefix(u.Password, "$2"),
			perms:    cmp.Or(u.Permissions, def),
			acc:      acc,
		}
	}
	addNkey := func(u NkeyUser, acc *Account, def *Permissions) {
		a.nkeys[u.PublicKey] = &user{name: u.PublicKey, perms: cmp.Or(u.Permissions, def), acc: acc, nkey: true}
	}
	if o.Username != "" {
		addUser(User{Name: o.Username, Password: o.Password}, s.gacc, nil)
	}
	for _, u := range o.Users {
		addUser(u, s.gacc, nil)
	}
	for _, u := range o.Nkeys {
		addNkey(u, s.gacc, nil)
	}
	for _, ac := range o.Accounts {
		acc := s.accounts.lookup(ac.Name)
		for _, u := range ac.Users {
			addUser(u, acc, ac.DefaultPermissions)
		}
		for _, u := range ac.Nkeys {
			addNkey(u, acc, ac.DefaultPermissions)
		}
	}
	if o.NoAuthUser != "" {
		a.noAuth = a.users[o.NoAuthUser]
		if a.noAuth == nil {
			a.noAuth = a.nkeys[o.NoAuthUser]
		}
	}
	return a
}

// required reports whether clients must authenticate.
func (a *authenticator) required() bool {
	return a.token != "" || len(a.users) > 0 || len(a.nkeys) > 0 || a.operator
}

// nonceRequired reports whether INFO carries a nonce for nkeys to sign.
func (a *authenticator) nonceRequired() bool { return len(a.nkeys) > 0 || a.operator }

// nonceRawLen is the random bytes of a nonce, which INFO carries in
// unpadded URL-safe base64, as the reference server's.
const nonceRawLen = 11

func newNonce() []byte {
	var raw [nonceRawLen]byte
	if _, err := rand.Read(raw[:]); err != nil {
		panic("server: no randomness: " + err.Error())
	}
	n := make([]byte, base64.RawURLEncoding.EncodedLen(nonceRawLen))
	base64.RawURLEncoding.Encode(n, raw[:])
	return n
}

// check returns the user a CONNECT authenticates as (nil, in the global
// account, when no users are configured or for the token), or ok = false.
// nonce is the one the client's INFO carried.
func (a *authenticator) check(c *connectOpts, nonce []byte) (u *user, ok bool) {
	if a.noAuth != nil && c.User == "" && c.Pass == "" && c.AuthToken == "" && (c.Nkey == "" || len(a.nkeys) == 0) {
		return a.checkNoAuth()
	}
	switch {
	case c.Nkey != "" && len(a.nkeys) > 0:
		u := a.nkeys[c.Nkey]
		if u == nil || !verifyNonce(c.Nkey, c.Sig, nonce) {
			return nil, false
		}
		return u, true
	case a.token != "":
		return nil, subtle.ConstantTimeCompare([]byte(a.token), []byte(c.AuthToken)) == 1
	case len(a.users) > 0 || len(a.nkeys) > 0:
		u := a.users[c.User]
		if u == nil {
			return nil, false
		}
		if u.bcrypt {
			return u, bcrypt.CompareHashAndPassword([]byte(u.password), []byte(c.Pass)) == nil
		}
		return u, subtle.ConstantTimeCompare([]byte(u.password), []byte(c.Pass)) == 1
	}
	return nil, true
}

// checkNoAuth admits a CONNECT without credentials as the no_auth_user.
// As in nats-server, which fills in the user's configured password as the
// client's and compares them, a no_auth_user whose password is a bcrypt
// hash admits nobody: the hash is not its own password.
func (a *authenticator) checkNoAuth() (*user, bool) {
	u := a.noAuth
	if u.bcrypt {
		return nil, false
	}
	return u, true
}

// verifyNonce checks that sig (base64, URL-safe or standard) is the
// signature of nonce by the nkey pub.
func verifyNonce(pub, sig string, nonce []byte) bool {
	if len(nonce) == 0 || sig == "" {
		return false
	}
	raw, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		if raw, err = base64.StdEncoding.DecodeString(sig); err != nil {
			return false
		}
	}
	kp, err := nkeys.FromPublicKey(pub)
	if err != nil {
		return false
	}
	return kp.Verify(nonce, raw) == nil
}

func (p *Permissions) validate() error {
	for _, list := range [][]string{p.Publish.Allow, p.Publish.Deny, p.Subscribe.Allow, p.Subscribe.Deny} {
		for _, pat := range list {
			if err := subject.ValidatePattern(pat); err != nil {
				return fmt.Errorf("permission %q: %w", pat, err)
			}
		}
	}
	return nil
}

// canPublish reports whether a literal subject may be published to.
func (p *Permissions) canPublish(subj string) bool {
	return allowed(p.Publish.Allow, subj) && !denied(p.Publish.Deny, subj)
}

// canSubscribe reports whether a pattern may be subscribed to: some allow
// pattern covers all of it and no deny pattern covers all of it. A deny
// pattern that covers only part of it is enforced per message instead (see
// canReceive).
func (p *Permissions) canSubscribe(pattern string) bool {
	if len(p.Subscribe.Allow) > 0 {
		ok := false
		for _, a := range p.Subscribe.Allow {
			if subject.Covers(a, pattern) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	for _, d := range p.Subscribe.Deny {
		if subject.Covers(d, pattern) {
			return false
		}
	}
	return true
}

// canReceive reports whether a message on subj may be delivered to a
// subscription of this user: a wildcard subscription can overlap a denied
// subject without being wholly denied.
func (p *Permissions) canReceive(subj string) bool {
	return !denied(p.Subscribe.Deny, subj)
}

func allowed(allow []string, subj string) bool {
	if len(allow) == 0 {
		return true
	}
	for _, a := range allow {
		if subject.Match(a, subj) {
			return true
		}
	}
	return false
}

func denied(deny []string, subj string) bool {
	for _, d := range deny {
		if subject.Match(d, subj) {
			return true
		}
	}
	return false
}
