package broker

import (
	"os"
	"regexp"
	"strings"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"

	"github.com/skiffmq/skiff/server"
)

// Operator mode (docs/accounts.md): the keys that configure it, read as
// nats-server's opts.go reads them. The server checks how they fit
// together (server.New): operators need a resolver, exclude accounts and
// users, and so on.

// Reasons given for the operator-mode keys Skiff does not implement yet.
const (
	whyResolverURL   = "the URL resolver is not implemented; use resolver { type: full, dir: ... } or resolver: MEMORY with resolver_preload"
	whyResolverCache = "the cache resolver is not implemented; use resolver { type: full, dir: ... }"
	whyResolverTLS   = "resolver_tls serves the URL resolver, which is not implemented"
	whySentinel      = "default_sentinel serves auth callout, which is not implemented"
)

// jwtPrefix starts every encoded JWT: an operator value that is not a
// readable file but starts so is the JWT itself, as nats-server reads it.
const jwtPrefix = "eyJ"

// applyOperators reads operator (or operators, roots, ...): a file holding
// an operator JWT (as nsc writes it, decorated or not) or the JWT inline,
// or a list of them.
func applyOperators(o *server.Options, v value) error {
	items, err := v.list(true)
	if err != nil {
		return err
	}
	o.TrustedOperators = o.TrustedOperators[:0]
	for _, it := range items {
		s, err := it.str()
		if err != nil {
			return it.errorf(ErrInvalidValue, "error parsing operators: want a file name or a JWT, not %s", describe(it.v))
		}
		tok, err := readOperatorJWT(s)
		if err != nil {
			return it.errorf(ErrInvalidValue, "error parsing operator JWT: %v", err)
		}
		o.TrustedOperators = append(o.TrustedOperators, tok)
	}
	return nil
}

// readOperatorJWT reads the operator JWT of a file, or of the value itself.
func readOperatorJWT(s string) (string, error) {
	contents, err := os.ReadFile(s)
	if err != nil {
		if !strings.HasPrefix(s, jwtPrefix) {
			return "", err
		}
		contents = []byte(s)
	}
	tok, err := jwt.ParseDecoratedJWT(contents)
	if err != nil {
		return "", err
	}
	if _, err := jwt.DecodeOperatorClaims(tok); err != nil {
		return "", err
	}
	return tok, nil
}

// memResolver matches nats-server's MEMORY resolver names.
var memResolver = regexp.MustCompile(`(?i)^\s*(MEM|MEMORY)\s*$`)

// applyResolver reads resolver: MEMORY (or MEM), or the block form with
// type MEMORY or FULL. The URL and cache resolvers are refused by name.
func applyResolver(o *server.Options, v value) error {
	switch x := v.v.(type) {
	case string:
		if memResolver.MatchString(x) {
			o.Resolver.Type = server.ResolverMemory
			return nil
		}
		if strings.HasPrefix(strings.ToUpper(strings.TrimSpace(x)), "URL") {
			return v.errorf(ErrUnsupported, "%s", whyResolverURL)
		}
		return v.errorf(ErrInvalidValue, "error parsing account resolver, should be MEM or URL(\"url\") or a map containing dir and type state=[FULL|CACHE]")
	case map[string]any:
		return resolverKeys.apply(o, v)
	}
	return v.errorf(ErrInvalidValue, "error parsing operator resolver, wrong type %s", describe(v.v))
}

// resolverKeys is the resolver block: type MEMORY, or FULL with its
// directory and options (the server checks how they fit together).
var resolverKeys = func() keys[*server.Options] {
	k := newKeys[*server.Options]()
	k.on(func(o *server.Options, v value) error {
		s, err := v.str()
		if err != nil {
			return err
		}
		switch strings.ToUpper(s) {
		case "MEM", "MEMORY":
			o.Resolver.Type = server.ResolverMemory
			return nil
		case "FULL":
			o.Resolver.Type = server.ResolverFull
			return nil
		case "CACHE":
			return v.errorf(ErrUnsupported, "%s", whyResolverCache)
		}
		return v.errorf(ErrInvalidValue, "resolver type %q: want FULL or MEMORY (CACHE is not implemented)", s)
	}, "type")
	k.on(func(o *server.Options, v value) (err error) { o.Resolver.Dir, err = v.str(); return }, "dir")
	k.on(func(o *server.Options, v value) (err error) { o.Resolver.AllowDelete, err = v.boolean(); return }, "allow_delete")
	k.on(func(o *server.Options, v value) (err error) { o.Resolver.HardDelete, err = v.boolean(); return }, "hard_delete")
	k.on(func(o *server.Options, v value) (err error) { o.Resolver.Limit, err = v.intIn(1, 1<<31-1); return }, "limit")
	k.on(func(o *server.Options, v value) (err error) { o.Resolver.Interval, err = v.duration(); return }, "interval")
	k.on(func(o *server.Options, v value) (err error) { o.Resolver.Timeout, err = v.duration(); return }, "timeout")
	k.refuse(whyResolverCache, "ttl")
	return k
}()

// applyPreload reads resolver_preload: account JWTs by account public key,
// each checked to be an account JWT, as nats-server checks while reading.
func applyPreload(o *server.Options, v value) error {
	ents, err := v.block()
	if err != nil {
		return v.errorf(ErrInvalidValue, "preload should be a map of account_public_key:account_jwt")
	}
	o.Resolver.Preload = make(map[string]string, len(ents))
	for _, e := range ents {
		s, err := e.val.str()
		if err != nil {
			return e.val.errorf(ErrInvalidValue, "preload map value should be a string JWT")
		}
		if _, err := jwt.DecodeAccountClaims(s); err != nil {
			return e.val.errorf(ErrInvalidValue, "invalid account JWT: %v", err)
		}
		o.Resolver.Preload[e.key] = s
	}
	return nil
}

// applyTrustedKeys reads trusted (trusted_keys): operator public keys.
func applyTrustedKeys(o *server.Options, v value) (err error) {
	o.TrustedKeys, err = publicKeys(v, nkeys.IsValidPublicOperatorKey, "trust key %q required to be a valid public operator nkey")
	return
}

// applyPinned reads resolver_pinned_accounts: account public keys.
func applyPinned(o *server.Options, v value) (err error) {
	o.ResolverPinnedAccounts, err = publicKeys(v, nkeys.IsValidPublicAccountKey, "pinned account key %q is not a valid public account nkey")
	return
}

// publicKeys reads a key or a list of keys, each of the kind valid
// accepts (nats-server's message otherwise).
func publicKeys(v value, valid func(string) bool, invalid string) ([]string, error) {
	keys, err := v.strings()
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if !valid(k) {
			return nil, v.errorf(ErrInvalidValue, invalid, k)
		}
	}
	return keys, nil
}

// operatorKeys registers the top-level keys of operator mode on k.
func operatorKeys(k keys[*loader]) {
	srv := func(set func(o *server.Options, v value) error) handler[*loader] {
		return func(l *loader, v value) error { return set(&l.cfg.Server, v) }
	}
	k.on(srv(applyOperators), "operator", "operators", "roots", "root", "root_operators", "root_operator")
	k.on(srv(applyResolver), "resolver", "account_resolver", "accounts_resolver")
	k.on(srv(applyPreload), "resolver_preload")
	k.on(srv(applyPinned), "resolver_pinned_accounts")
	k.on(srv(applyTrustedKeys), "trusted", "trusted_keys")
	k.on(srv(func(o *server.Options, v value) (err error) { o.SystemAccount, err = v.str(); return }), "system_account", "system")
	k.refuse(whyResolverTLS, "resolver_tls")
	k.refuse(whySentinel, "default_sentinel")
}
