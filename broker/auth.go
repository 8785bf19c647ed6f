package broker

import (
	"strings"

	"github.com/skiffmq/skiff/server"
	"github.com/skiffmq/skiff/subject"
)

// authorization is the authorization block while it is read: default
// permissions apply to the users that have none, whatever the order of
// the keys.
type authorization struct {
	opts        *server.Options
	users       []server.User
	defaultPerm *server.Permissions
}

func applyAuthorization(o *server.Options, v value) error {
	a := &authorization{opts: o}
	if err := authKeys.apply(a, v); err != nil {
		return err
	}
	for i := range a.users {
		if a.users[i].Permissions == nil && a.defaultPerm != nil {
			p := *a.defaultPerm
			a.users[i].Permissions = &p
		}
	}
	if a.users != nil {
		o.Users = a.users
	}
	return nil
}

var authKeys = func() keys[*authorization] {
	k := newKeys[*authorization]()
	k.on(func(a *authorization, v value) (err error) { a.opts.Username, err = v.str(); return }, "user", "username")
	k.on(func(a *authorization, v value) (err error) { a.opts.Password, err = v.str(); return }, "pass", "password")
	k.on(func(a *authorization, v value) (err error) { a.opts.Token, err = v.str(); return }, "token")
	k.on(func(a *authorization, v value) (err error) { a.opts.AuthTimeout, err = v.duration(); return }, "timeout")
	k.on(func(a *authorization, v value) (err error) { a.users, err = users(v); return }, "users")
	k.on(func(a *authorization, v value) (err error) {
		a.defaultPerm, err = permissions(v)
		return
	}, "default_permission", "default_permissions", "permissions")
	k.refuse("authorization callouts are not implemented", "auth_callout", "auth_hook")
	k.refuse("the PROXY protocol is not implemented", "proxy_required")
	return k
}()

func users(v value) ([]server.User, error) {
	list, err := v.list(false)
	if err != nil {
		return nil, err
	}
	out := make([]server.User, 0, len(list))
	for _, item := range list {
		var u server.User
		if err := userKeys.apply(&u, item); err != nil {
			return nil, err
		}
		if u.Name == "" {
			return nil, item.errorf(ErrInvalidValue, "a user needs a name (user: NAME)")
		}
		out = append(out, u)
	}
	return out, nil
}

var userKeys = func() keys[*server.User] {
	k := newKeys[*server.User]()
	k.on(func(u *server.User, v value) (err error) { u.Name, err = v.str(); return }, "user", "username")
	k.on(func(u *server.User, v value) (err error) { u.Password, err = v.str(); return }, "pass", "password")
	k.on(func(u *server.User, v value) (err error) {
		u.Permissions, err = permissions(v)
		return
	}, "permission", "permissions", "authorization")
	k.refuse("nkey users are not implemented", "nkey")
	k.refuse("restricting a user's connection types is not implemented; Skiff refuses to start rather than let the user connect in every way",
		"allowed_connection_types", "connection_types", "clients")
	k.refuse("the PROXY protocol is not implemented", "proxy_required")
	return k
}()

// permissions reads {publish: P, subscribe: P}, where P is a pattern, a
// list of patterns (the allow list), or {allow: [...], deny: [...]}.
func permissions(v value) (*server.Permissions, error) {
	p := &server.Permissions{}
	return p, permKeys.apply(p, v)
}

var permKeys = func() keys[*server.Permissions] {
	k := newKeys[*server.Permissions]()
	k.on(func(p *server.Permissions, v value) error { return subjectPermission(v, &p.Publish, false) },
		"pub", "publish", "import")
	k.on(func(p *server.Permissions, v value) error { return subjectPermission(v, &p.Subscribe, true) },
		"sub", "subscribe", "export")
	k.refuse("response permissions are not implemented", "publish_allow_responses", "allow_responses")
	return k
}()

// subjectPermission reads an allow list, or a block with allow and deny.
func subjectPermission(v value, sp *server.SubjectPermission, sub bool) error {
	if _, isBlock := v.v.(map[string]any); !isBlock {
		list, err := patterns(v, sub)
		sp.Allow = list
		return err
	}
	ents, err := v.block()
	if err != nil {
		return err
	}
	k := newKeys[*server.SubjectPermission]()
	k.on(func(sp *server.SubjectPermission, v value) (err error) { sp.Allow, err = patterns(v, sub); return }, "allow")
	k.on(func(sp *server.SubjectPermission, v value) (err error) { sp.Deny, err = patterns(v, sub); return }, "deny")
	return k.applyEntries(sp, ents)
}

// patterns reads subject patterns, checked here so that a bad one is
// reported with its line.
func patterns(v value, sub bool) ([]string, error) {
	items, err := v.list(true)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		s, err := it.str()
		if err != nil {
			return nil, err
		}
		if sub && strings.ContainsAny(strings.TrimSpace(s), " \t") {
			return nil, it.errorf(ErrUnsupported, "queue group permissions (%q) are not implemented", s)
		}
		if err := subject.ValidatePattern(s); err != nil {
			return nil, it.errorf(ErrInvalidValue, "%q: %v", s, err)
		}
		out = append(out, s)
	}
	return out, nil
}
