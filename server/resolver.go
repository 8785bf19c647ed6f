package server

import (
	"errors"
	"maps"
)

// errAccountMissing is a resolver's answer for an account it does not
// have.
var errAccountMissing = errors.New("server: account missing")

// accountResolver finds account JWTs by account public key, for operator
// mode. fetch is called from client read loops (at CONNECT, for an
// account not registered yet) and must not block for long. Safe for
// concurrent use.
type accountResolver interface {
	// fetch returns the JWT of the account pub, or errAccountMissing.
	fetch(pub string) (string, error)
}

// memResolver is the MEMORY resolver: the preloaded accounts, read-only
// once the server is built. (nats-server's takes updates of the accounts
// it holds through $SYS; Skiff's full resolver does, jwt_update.go.)
type memResolver struct {
	jwts map[string]string
}

var _ accountResolver = (*memResolver)(nil)

func newMemResolver(preload map[string]string) *memResolver {
	return &memResolver{jwts: maps.Clone(preload)}
}

// dirResolver is the full resolver: the JWTs of its directory.
type dirResolver struct{ st *dirStore }

var _ accountResolver = dirResolver{}

func (r dirResolver) fetch(pub string) (string, error) { return r.st.load(pub) }

func (r *memResolver) fetch(pub string) (string, error) {
	if j, ok := r.jwts[pub]; ok {
		return j, nil
	}
	return "", errAccountMissing
}
