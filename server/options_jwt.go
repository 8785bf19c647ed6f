package server

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nkeys"
)

// ResolverType is how operator mode finds account JWTs.
type ResolverType int

const (
	// ResolverNone: no resolver (not operator mode).
	ResolverNone ResolverType = iota
	// ResolverMemory holds the accounts of ResolverOptions.Preload, and no
	// others, for the life of the server (nats-server's MEMORY resolver).
	ResolverMemory
	// ResolverFull keeps every account JWT in ResolverOptions.Dir, one
	// file each, and takes new and updated ones at run time through the
	// system account ($SYS.REQ.CLAIMS.UPDATE: `nsc push`), as
	// nats-server's full resolver (resolver_dir.go).
	ResolverFull
)

func (t ResolverType) String() string {
	switch t {
	case ResolverNone:
		return "none"
	case ResolverMemory:
		return "MEMORY"
	case ResolverFull:
		return "FULL"
	}
	return fmt.Sprintf("ResolverType(%d)", int(t))
}

// ResolverOptions configure the account resolver of operator mode.
// nats-server's URL and cache resolvers are not implemented.
type ResolverOptions struct {
	// Type is the resolver (ResolverNone outside operator mode).
	Type ResolverType
	// Preload are account JWTs by account public key
	// (resolver_preload). New checks and registers each (signed by a
	// trusted operator, valid now, its subject the key it is listed
	// under); one that does not verify is logged, and checked again when
	// a client or a peer names it (a JWT not valid yet may be by then).
	// The full resolver also stores each in Dir, unless Dir holds a newer
	// JWT of the account.
	Preload map[string]string

	// The full resolver's options (resolver { type: full, ... }).

	// Dir is the directory of the account JWTs (dir): created if
	// missing; no other process should write it. Required.
	Dir string
	// AllowDelete lets the operator delete accounts
	// ($SYS.REQ.CLAIMS.DELETE, allow_delete): a deleted account's JWT is
	// renamed <key>.jwt.deleted, or removed with HardDelete
	// (hard_delete). Default false: deletes are refused.
	AllowDelete, HardDelete bool
	// Limit bounds the accounts the directory holds (limit); an update
	// that would add one more is refused. Default (0): DefaultResolverLimit.
	Limit int
	// Timeout bounds how long a CONNECT waits for the peers to answer a
	// lookup of an account this server does not hold (timeout). Default
	// (0): DefaultResolverTimeout.
	Timeout time.Duration
	// Interval is how often a server of a cluster compares its accounts
	// with a peer's and takes the newer JWTs (interval). Default (0):
	// DefaultResolverInterval.
	Interval time.Duration
}

// The full resolver's defaults.
const (
	// DefaultResolverLimit is how many accounts the full resolver holds
	// unless ResolverOptions.Limit says.
	DefaultResolverLimit = 10000
	// DefaultResolverTimeout is nats-server's account fetch timeout.
	DefaultResolverTimeout = 1900 * time.Millisecond
	// DefaultResolverInterval is nats-server's default sync interval.
	DefaultResolverInterval = time.Minute
)

// operatorMode reports whether the options ask for decentralized
// authentication: operators or trusted keys.
func (o *Options) operatorMode() bool {
	return len(o.TrustedOperators) > 0 || len(o.TrustedKeys) > 0
}

// validateOperatorMode checks the operator-mode options that need no
// decoding (New decodes the JWTs: newTrust), with nats-server's messages
// where it has one.
func (o *Options) validateOperatorMode() error {
	if !o.operatorMode() {
		switch {
		case o.Resolver.Type != ResolverNone || len(o.Resolver.Preload) > 0:
			return errors.New("a resolver without operators or trusted keys: nothing would use it")
		case len(o.ResolverPinnedAccounts) > 0:
			return errors.New("resolver_pinned_accounts without operators or trusted keys: nothing would use it")
		}
		return nil
	}
	switch {
	case len(o.TrustedOperators) > 0 && len(o.TrustedKeys) > 0:
		return errors.New("conflicting options for 'TrustedKeys' and 'TrustedOperators'")
	case o.Resolver.Type == ResolverNone:
		return errors.New("operators require an account resolver to be configured")
	case o.Resolver.Type != ResolverMemory && o.Resolver.Type != ResolverFull:
		return fmt.Errorf("resolver %v is not implemented", o.Resolver.Type)
	case o.Resolver.Type == ResolverFull && o.Resolver.Dir == "":
		return errors.New("dir has no value and needs to point to a directory")
	case o.Resolver.Type != ResolverFull && (o.Resolver.Dir != "" || o.Resolver.AllowDelete || o.Resolver.Limit != 0 || o.Resolver.Timeout != 0 || o.Resolver.Interval != 0):
		return fmt.Errorf("resolver %v takes no dir, allow_delete, limit, timeout or interval", o.Resolver.Type)
	case o.Resolver.HardDelete && !o.Resolver.AllowDelete:
		return errors.New("hard_delete has no effect without delete")
	case o.Resolver.Limit < 0 || o.Resolver.Timeout < 0 || o.Resolver.Interval < 0:
		return errors.New("resolver limit, timeout and interval cannot be negative")
	case len(o.Accounts) > 0:
		return errors.New("operators do not allow Accounts to be configured directly")
	case len(o.Users) > 0 || len(o.Nkeys) > 0:
		return errors.New("operators do not allow users to be configured directly")
	case o.Username != "" || o.Token != "":
		// nats-server ignores them in operator mode; Skiff refuses what it
		// would ignore.
		return errors.New("operators do not allow a user or a token to be configured directly: clients authenticate with user JWTs")
	}
	for _, k := range o.TrustedKeys {
		if !nkeys.IsValidPublicOperatorKey(k) {
			return fmt.Errorf("trusted Keys %q are required to be a valid public operator nkey", k)
		}
	}
	for _, k := range o.ResolverPinnedAccounts {
		if !nkeys.IsValidPublicAccountKey(k) {
			return fmt.Errorf("pinned account key %q is not a valid public account nkey", k)
		}
	}
	if o.SystemAccount != "" && !nkeys.IsValidPublicAccountKey(o.SystemAccount) {
		return fmt.Errorf("system account %q is not a valid public account nkey", o.SystemAccount)
	}
	return nil
}
