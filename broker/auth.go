package broker

import (
	"strings"

	"github.com/nats-io/nkeys"

	"github.com/skiffmq/skiff/server"
	"github.com/skiffmq/skiff/subject"
)

// authorization is the authorization block while it is read: default
// permissions apply to the users that have none, whatever the order of
// the keys.
type authorization struct {
	opts        *server.Options
	users       []server.User
	nkeys       []server.NkeyUser
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
	for i := range a.nkeys {
		if a.nkeys[i].Permissions == nil && a.defaultPerm != nil {
			p := *a.defaultPerm
			a.nkeys[i].Permissions = &p
		}
	}
	if a.users != nil {
		o.Users = a.users
	}
	if a.nkeys != nil {
		o.Nkeys = a.nkeys
	}
	return nil
}

var authKeys = func() keys[*authorization] {
	k := newKeys[*authorization]()
	k.on(func(a *authorization, v value) (err error) { a.opts.Username, err = v.str(); return }, "user", "username")
	k.on(func(a *authorization, v value) (err error) { a.opts.Password, err = v.str(); return }, "pass", "password")
	k.on(func(a *authorization, v value) (err error) { a.opts.Token, err = v.str(); return }, "token")
	k.on(func(a *authorization, v value) (err error) { a.opts.AuthTimeout, err = v.duration(); return }, "timeout")
	k.on(func(a *authorization, v value) (err error) { a.users, a.nkeys, err = users(v); return }, "users")
	k.on(func(a *authorization, v value) (err error) {
		a.defaultPerm, err = permissions(v)
		return
	}, "default_permission", "default_permissions", "permissions")
	k.refuse("authorization callouts are not implemented", "auth_callout", "auth_hook")
	k.refuse("the PROXY protocol is not implemented", "proxy_required")
	return k
}()

// userEntry is one entry of users: a named user or an nkey user.
type userEntry struct {
	server.User
	nkey value
}

// users reads the users list into named users and nkey users.
func users(v value) ([]server.User, []server.NkeyUser, error) {
	list, err := v.list(false)
	if err != nil {
		return nil, nil, err
	}
	var named []server.User
	var nk []server.NkeyUser
	for _, item := range list {
		var u userEntry
		if err := userKeys.apply(&u, item); err != nil {
			return nil, nil, err
		}
		switch {
		case u.nkey.v != nil && (u.Name != "" || u.Password != ""):
			return nil, nil, u.nkey.errorf(ErrInvalidValue, "nkey users do not take user names or passwords")
		case u.nkey.v != nil:
			pub, _ := u.nkey.str()
			nk = append(nk, server.NkeyUser{PublicKey: pub, Permissions: u.Permissions})
		case u.Name == "":
			return nil, nil, item.errorf(ErrInvalidValue, "a user needs a name (user: NAME) or an nkey")
		default:
			named = append(named, u.User)
		}
	}
	return named, nk, nil
}

var userKeys = func() keys[*userEntry] {
	k := newKeys[*userEntry]()
	k.on(func(u *userEntry, v value) (err error) { u.Name, err = v.str(); return }, "user", "username")
	k.on(func(u *userEntry, v value) (err error) { u.Password, err = v.str(); return }, "pass", "password")
	k.on(func(u *userEntry, v value) (err error) {
		u.Permissions, err = permissions(v)
		return
	}, "permission", "permissions", "authorization")
	k.on(func(u *userEntry, v value) error {
		pub, err := v.str()
		if err != nil {
			return err
		}
		if !nkeys.IsValidPublicUserKey(pub) {
			return v.errorf(ErrInvalidValue, "%q is not a user's public nkey (U...)", pub)
		}
		u.nkey = v
		return nil
	}, "nkey")
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
