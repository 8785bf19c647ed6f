package server

import (
	"errors"
	"fmt"
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
	// wait allows it to ask the peers and wait for them (a CONNECT); a
	// route's read loop never waits.
	fetch(pub string, wait bool) (string, error)
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

// dirResolver is the full resolver: the JWTs of its directory, and,
// for an account the directory lacks, those its peers have (lookup).
type dirResolver struct {
	st *dirStore
	s  *Server
}

var _ accountResolver = dirResolver{}

func (r dirResolver) fetch(pub string, wait bool) (string, error) {
	raw, err := r.st.load(pub)
	if err == nil || !wait || r.s.sys == nil {
		return raw, err
	}
	raw, err = r.s.sys.lookup(pub)
	if err != nil {
		return "", err
	}
	if _, err := r.s.verifyUpdate(pub, raw); err != nil {
		return "", fmt.Errorf("a peer's JWT of account %s: %w", pub, err)
	}
	if _, err := r.st.saveIfNewer(pub, raw); err != nil && !errors.Is(err, errResolverOlder) {
		r.s.log.Warn("account JWT from a peer not stored", "account", pub, "err", err)
	}
	return raw, nil
}

func (r *memResolver) fetch(pub string, _ bool) (string, error) {
	if j, ok := r.jwts[pub]; ok {
		return j, nil
	}
	return "", errAccountMissing
}
