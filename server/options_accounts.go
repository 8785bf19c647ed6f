package server

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/nats-io/nkeys"
)

// AccountConfig is one account (nats-server's accounts block): a subject
// namespace of its own, the users that connect into it, and its limits. A
// message published in an account reaches only subscribers of that
// account; users configured outside any account (Options.Users, Nkeys,
// Username, Token, or no authentication at all) are in the global account,
// "$G".
type AccountConfig struct {
	// Name is the account's name, as the INFO after CONNECT and the route
	// protocol carry it. It may not be "$G" (reserved), contain white
	// space, a slash, a backslash or NUL, or be "." or "..".
	Name string
	// Users and Nkeys connect into this account. A user name or nkey may
	// be defined once across all accounts and Options.Users and Nkeys.
	Users []User
	Nkeys []NkeyUser
	// DefaultPermissions apply to the account's users that have no
	// permissions of their own (nil: none, they may do anything).
	DefaultPermissions *Permissions
	// Limits bound the account's clients (zero fields: no limit of the
	// account's own).
	Limits AccountLimits
	// Exports are the subjects other accounts may import from this one,
	// and Imports those this one takes from others (docs/accounts.md):
	// only through them does a message cross accounts.
	Exports []Export
	Imports []Import
	// JetStream, when not nil, gives the account streams, within these
	// limits (the zero value: none of the account's own), on a server
	// with JetStream. nil: the account has no JetStream, unless it is the
	// only account (see package jetstream).
	JetStream *JetStreamLimits
}

// JetStreamLimits bound an account's streams and consumers
// (nats-server's account `jetstream` block). Zero or NoLimit means none of
// the account's own; the server-wide bounds (jetstream.Options) still
// apply.
type JetStreamLimits struct {
	// MaxMemory and MaxStore bound the bytes of the account's memory and
	// file streams: what their max_bytes reserve at create (10028,
	// 10047), and what they hold at publish (10002).
	MaxMemory int64
	MaxStore  int64
	// MaxStreams bounds the account's streams (10027).
	MaxStreams int
	// MaxConsumers bounds the consumers of each of the account's streams
	// (10026), as nats-server's: a stream's own max_consumers may be
	// lower, not higher.
	MaxConsumers int
	// MaxAckPending bounds a consumer's max_ack_pending, and is the
	// default of one that sets none, when below the server's.
	MaxAckPending int
	// MemoryMaxStreamBytes and StoreMaxStreamBytes bound the max_bytes
	// of one memory or file stream (10122).
	MemoryMaxStreamBytes int64
	StoreMaxStreamBytes  int64
	// MaxBytesRequired refuses a stream without max_bytes (10113).
	MaxBytesRequired bool
	// NoMemory and NoStore allow no memory (file) streams at all,
	// whatever MaxMemory (MaxStore) says. An account JWT's JetStream
	// limits say so with a mem_storage (disk_storage) of 0, which
	// nats-server reads as no room; a configuration file cannot (a
	// max_mem of 0 is refused).
	NoMemory, NoStore bool
}

// systemAccountName is the name nats-server gives its system account by
// default: JetStream is never enabled in it.
const systemAccountName = "$SYS"

// AccountLimits bound an account's clients on one server. Zero, or
// NoLimit, means no limit of the account's own; the server's limits
// (Options.MaxConnections, MaxSubscriptions, MaxPayload) still apply, and
// the lower of the two wins.
type AccountLimits struct {
	// MaxConnections bounds the account's concurrent client connections.
	// Past it a CONNECT gets -ERR 'maximum account active connections
	// exceeded' and is closed.
	MaxConnections int
	// MaxSubscriptions bounds the subscriptions of each connection of the
	// account (per connection, as nats-server's account limit, not the
	// account's total). Past it: -ERR 'maximum subscriptions exceeded'.
	MaxSubscriptions int
	// MaxPayload bounds a message published by the account's clients,
	// which learn it in the INFO that answers their first PING. Past it:
	// -ERR 'Maximum Payload Violation' and close.
	MaxPayload int
}

// NoLimit, as an AccountLimits field, means no limit (as zero does).
const NoLimit = -1

// accountLimits are AccountLimits in force: noLimit (-1) for none.
type accountLimits struct{ maxConns, maxSubs, maxPayload int32 }

const noLimit = -1

var unlimited = accountLimits{noLimit, noLimit, noLimit}

func (l AccountLimits) compile() accountLimits {
	f := func(n int) int32 {
		if n <= 0 {
			return noLimit
		}
		return int32(n)
	}
	return accountLimits{f(l.MaxConnections), f(l.MaxSubscriptions), f(l.MaxPayload)}
}

// validateAccounts checks the accounts and no_auth_user with nats-server's
// rules (its messages, where it has one). seen holds the user names and
// nkeys of Options.Users and Nkeys.
func (o *Options) validateAccounts(seen map[string]bool) error {
	names := map[string]bool{}
	for _, a := range o.Accounts {
		if err := validAccountName(a.Name); err != nil {
			return err
		}
		if names[a.Name] {
			return fmt.Errorf("Duplicate Account Entry: %s", a.Name) //nolint:staticcheck // nats-server's text
		}
		names[a.Name] = true
		if len(a.Users) > 0 || len(a.Nkeys) > 0 {
			if o.Username != "" {
				return errors.New("Can not have a single user/pass and accounts") //nolint:staticcheck // nats-server's text
			}
			if o.Token != "" {
				return errors.New("Can not have a token and accounts") //nolint:staticcheck // nats-server's text
			}
		}
		if err := a.Limits.validate(); err != nil {
			return fmt.Errorf("account %q: %w", a.Name, err)
		}
		if a.JetStream != nil {
			if a.Name == systemAccountName {
				return errors.New("jetstream can not be enabled on the system account") // nats-server's text
			}
			if err := a.JetStream.validate(); err != nil {
				return fmt.Errorf("account %q: jetstream: %w", a.Name, err)
			}
		}
		if p := a.DefaultPermissions; p != nil {
			if err := p.validate(); err != nil {
				return fmt.Errorf("account %q: default permissions: %w", a.Name, err)
			}
		}
		for _, u := range a.Users {
			if u.Name == "" {
				return fmt.Errorf("account %q: a user without a name", a.Name)
			}
			if seen[u.Name] {
				return fmt.Errorf("Duplicate user %q detected", u.Name) //nolint:staticcheck // nats-server's text
			}
			seen[u.Name] = true
			if u.Permissions != nil {
				if err := u.Permissions.validate(); err != nil {
					return fmt.Errorf("account %q: user %q: %w", a.Name, u.Name, err)
				}
			}
		}
		for _, u := range a.Nkeys {
			if !nkeys.IsValidPublicUserKey(u.PublicKey) {
				return fmt.Errorf("account %q: nkey %q is not a user's public key", a.Name, u.PublicKey)
			}
			if seen[u.PublicKey] {
				return fmt.Errorf("Duplicate nkey %q detected", u.PublicKey) //nolint:staticcheck // nats-server's text
			}
			seen[u.PublicKey] = true
			if u.Permissions != nil {
				if err := u.Permissions.validate(); err != nil {
					return fmt.Errorf("account %q: nkey %q: %w", a.Name, u.PublicKey, err)
				}
			}
		}
	}
	if err := o.validateNoAuthUser(seen); err != nil {
		return err
	}
	_, err := o.validateImports()
	return err
}

// validateNoAuthUser checks that NoAuthUser names a configured user or
// nkey (in any account), with nats-server's messages. The single user of
// Username and Password is not one nats-server looks it up in.
func (o *Options) validateNoAuthUser(seen map[string]bool) error {
	if o.NoAuthUser == "" {
		return nil
	}
	users := len(o.Users) + len(o.Nkeys)
	for _, a := range o.Accounts {
		users += len(a.Users) + len(a.Nkeys)
	}
	switch {
	case users == 0:
		return fmt.Errorf("no_auth_user: %q present, but users/nkeys are not defined", o.NoAuthUser)
	case !seen[o.NoAuthUser] || o.NoAuthUser == o.Username:
		return fmt.Errorf("no_auth_user: %q not present as user or nkey in authorization block or account configuration", o.NoAuthUser)
	}
	return nil
}

// validAccountName refuses names the route protocol (one word) and later
// a store directory per account could not carry.
func validAccountName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("an account without a name")
	case name == GlobalAccountName:
		return fmt.Errorf("%q is a Reserved Account", name)
	case name == "." || name == "..":
		return fmt.Errorf("account name %q is not allowed", name)
	case strings.ContainsAny(name, " \t\r\n\f\v/\\\x00"):
		return fmt.Errorf("account name %q: no white space, slash, backslash or NUL", name)
	}
	return nil
}

func (l AccountLimits) validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"max_connections", l.MaxConnections}, {"max_subscriptions", l.MaxSubscriptions}, {"max_payload", l.MaxPayload}} {
		if f.v < NoLimit || f.v > math.MaxInt32 {
			return fmt.Errorf("limit %s %d: want 1 to %d, or %d for none", f.name, f.v, math.MaxInt32, NoLimit)
		}
	}
	return nil
}

func (l *JetStreamLimits) validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"max_memory", l.MaxMemory}, {"max_store", l.MaxStore}, {"max_streams", int64(l.MaxStreams)},
		{"max_consumers", int64(l.MaxConsumers)}, {"max_ack_pending", int64(l.MaxAckPending)},
		{"memory_max_stream_bytes", l.MemoryMaxStreamBytes}, {"store_max_stream_bytes", l.StoreMaxStreamBytes},
	} {
		if f.v < NoLimit {
			return fmt.Errorf("limit %s %d: want a positive bound, or %d for none", f.name, f.v, NoLimit)
		}
	}
	if l.MaxStreams > math.MaxInt32 || l.MaxConsumers > math.MaxInt32 || l.MaxAckPending > math.MaxInt32 {
		return fmt.Errorf("limits max_streams, max_consumers and max_ack_pending: at most %d", math.MaxInt32)
	}
	return nil
}
