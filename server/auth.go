package server

import (
	"crypto/subtle"
	"fmt"
	"strings"

	"golang.org/x/crypto/bcrypt"

	"github.com/skiffmq/skiff/subject"
)

// authenticator checks the credentials of a CONNECT against the configured
// token or users. It is built once in New and only read afterwards.
type authenticator struct {
	token string
	users map[string]*account
}

// account is a configured user, with its permissions compiled.
type account struct {
	name     string
	password string
	bcrypt   bool
	perms    *Permissions // nil: may do anything
}

func newAuthenticator(o *Options) *authenticator {
	a := &authenticator{token: o.Token}
	add := func(u User) {
		if a.users == nil {
			a.users = map[string]*account{}
		}
		a.users[u.Name] = &account{
			name:     u.Name,
			password: u.Password,
			bcrypt:   strings.HasPrefix(u.Password, "$2"),
			perms:    u.Permissions,
		}
	}
	if o.Username != "" {
		add(User{Name: o.Username, Password: o.Password})
	}
	for _, u := range o.Users {
		add(u)
	}
	return a
}

// required reports whether clients must authenticate.
func (a *authenticator) required() bool { return a.token != "" || len(a.users) > 0 }

// check returns the account a CONNECT authenticates as (nil when no users
// are configured), or ok = false.
func (a *authenticator) check(c *connectOpts) (acct *account, ok bool) {
	switch {
	case a.token != "":
		return nil, subtle.ConstantTimeCompare([]byte(a.token), []byte(c.AuthToken)) == 1
	case len(a.users) > 0:
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
