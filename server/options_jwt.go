package server

import (
	"errors"
	"fmt"

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
)

func (t ResolverType) String() string {
	switch t {
	case ResolverNone:
		return "none"
	case ResolverMemory:
		return "MEMORY"
	}
	return fmt.Sprintf("ResolverType(%d)", int(t))
}

// ResolverOptions configure the account resolver of operator mode.
// nats-server's URL, full (directory) and cache resolvers are not
// implemented yet.
type ResolverOptions struct {
	// Type is the resolver (ResolverNone outside operator mode).
	Type ResolverType
	// Preload are account JWTs by account public key
	// (resolver_preload). New checks and registers each (signed by a
	// trusted operator, valid now, its subject the key it is listed
	// under); one that does not verify is logged, and checked again when
	// a client or a peer names it (a JWT not valid yet may be by then).
	Preload map[string]string
}

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
	case o.Resolver.Type != ResolverMemory:
		return fmt.Errorf("resolver %v is not implemented", o.Resolver.Type)
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
