package broker

import (
	"math"
	"strings"

	"github.com/skiffmq/skiff/server"
)

// Reasons given for keys of an account Skiff does not implement yet, by
// the phase of issue 14 that brings them (docs/accounts.md).
const (
	whyLatency        = "service latency tracking is not implemented"
	whyAccountNkey    = "an account nkey identity in a configured account serves leaf nodes, which are not implemented (operator mode names accounts by their JWT's key)"
	whyAccountMapping = "subject mappings are not implemented"
	whyAccountTrace   = "message tracing is not implemented"
)

// applyAccounts reads the accounts block: a block of accounts by name, or
// a list of names (accounts without users), as nats-server accepts both.
func applyAccounts(o *server.Options, v value) error {
	if _, isList := v.v.([]any); isList {
		return accountNames(o, v)
	}
	ents, err := v.block()
	if err != nil {
		return v.typeError("a block of accounts or a list of account names")
	}
	seen := map[string]bool{}
	for _, e := range ents {
		if e.val.usedVar {
			continue // a variable referenced elsewhere, as in nats-server
		}
		if err := checkAccountName(e.val, e.key, seen); err != nil {
			return err
		}
		if _, ok := e.val.v.(map[string]any); !ok {
			return e.val.errorf(ErrInvalidValue, "Expected map entries for accounts")
		}
		a := &server.AccountConfig{Name: e.key}
		if err := accountKeys.apply(a, e.val); err != nil {
			return err
		}
		o.Accounts = append(o.Accounts, *a)
	}
	return nil
}

// accountNames reads `accounts: [A, B]`.
func accountNames(o *server.Options, v value) error {
	items, err := v.list(false)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, it := range items {
		name, err := it.str()
		if err != nil {
			return err
		}
		if err := checkAccountName(it, name, seen); err != nil {
			return err
		}
		o.Accounts = append(o.Accounts, server.AccountConfig{Name: name})
	}
	return nil
}

// checkAccountName refuses, with the line, what nats-server refuses while
// reading: the reserved name and a name given twice. server.New checks
// the rest.
func checkAccountName(v value, name string, seen map[string]bool) error {
	switch {
	case name == server.GlobalAccountName:
		return v.errorf(ErrInvalidValue, "%q is a Reserved Account", name)
	case seen[name]:
		return v.errorf(ErrInvalidValue, "Duplicate Account Entry: %s", name)
	}
	seen[name] = true
	return nil
}

var accountKeys = func() keys[*server.AccountConfig] {
	k := newKeys[*server.AccountConfig]()
	k.on(func(a *server.AccountConfig, v value) (err error) { a.Users, a.Nkeys, err = users(v); return }, "users")
	k.on(func(a *server.AccountConfig, v value) (err error) {
		a.DefaultPermissions, err = permissions(v)
		return
	}, "default_permissions")
	k.on(func(a *server.AccountConfig, v value) error { return accountLimitKeys.apply(&a.Limits, v) }, "limits")
	k.on(func(a *server.AccountConfig, v value) (err error) { a.Exports, err = exports(v); return }, "exports")
	k.on(func(a *server.AccountConfig, v value) (err error) { a.Imports, err = imports(v); return }, "imports")
	k.on(applyAccountJetStream, "jetstream")
	k.refuse(whyAccountNkey, "nkey")
	k.refuse(whyAccountMapping, "mappings", "maps")
	k.refuse(whyAccountTrace, "msg_trace", "trace_dest")
	return k
}()

var accountLimitKeys = func() keys[*server.AccountLimits] {
	k := newKeys[*server.AccountLimits]()
	k.on(func(l *server.AccountLimits, v value) (err error) { l.MaxConnections, err = accountLimit(v); return },
		"max_connections", "max_conn")
	k.on(func(l *server.AccountLimits, v value) (err error) { l.MaxSubscriptions, err = accountLimit(v); return },
		"max_subscriptions", "max_subs")
	k.on(func(l *server.AccountLimits, v value) (err error) { l.MaxPayload, err = accountLimit(v); return },
		"max_payload", "max_pay")
	k.refuse(whyCluster, "max_leafnodes", "max_leafs")
	return k
}()

// accountLimit reads an account limit: a positive bound, or -1 for none.
// nats-server reads 0 (and any other negative number) as "none allowed",
// where an Options zero means "no limit of the account's own": such a
// value is refused rather than read the other way round.
func accountLimit(v value) (int, error) {
	n, err := v.integer()
	if err != nil {
		return 0, err
	}
	switch {
	case n == 0 || n < server.NoLimit:
		return 0, v.errorf(ErrUnsupported, "%d allows nothing at all in nats-server and is not implemented; write a positive bound, or -1 for no limit", n)
	case n > math.MaxInt32:
		return 0, v.errorf(ErrInvalidValue, "%d is out of range (at most %d)", n, math.MaxInt32)
	}
	return int(n), nil
}

// applyAccountJetStream reads an account's `jetstream`: enabled, disabled,
// a boolean, or a block of limits (which enables it), as nats-server's
// parseJetStreamForAccount. It takes effect on a server with JetStream
// (package jetstream says which accounts have it).
func applyAccountJetStream(a *server.AccountConfig, v value) error {
	switch x := v.v.(type) {
	case bool:
		a.JetStream = nil
		if x {
			a.JetStream = &server.JetStreamLimits{}
		}
		return nil
	case string:
		switch strings.ToLower(x) {
		case "enabled", "enable":
			a.JetStream = &server.JetStreamLimits{}
		case "disabled", "disable":
			a.JetStream = nil
		default:
			return v.errorf(ErrInvalidValue, "Expected 'enabled' or 'disabled' for string value, got '%s'", x)
		}
		return nil
	case map[string]any:
		a.JetStream = &server.JetStreamLimits{}
		return jsAccountKeys.apply(a.JetStream, v)
	}
	return v.typeError("enabled, disabled, a boolean or a block of limits")
}

var jsAccountKeys = func() keys[*server.JetStreamLimits] {
	k := newKeys[*server.JetStreamLimits]()
	k.on(func(l *server.JetStreamLimits, v value) (err error) { l.MaxMemory, err = accountQuota(v); return },
		"max_memory", "max_mem", "mem", "memory")
	k.on(func(l *server.JetStreamLimits, v value) (err error) { l.MaxStore, err = accountQuota(v); return },
		"max_store", "max_file", "max_disk", "store", "disk")
	k.on(func(l *server.JetStreamLimits, v value) (err error) { l.MaxStreams, err = jsCount(v); return },
		"max_streams", "streams")
	k.on(func(l *server.JetStreamLimits, v value) (err error) { l.MaxConsumers, err = jsCount(v); return },
		"max_consumers", "consumers")
	k.on(func(l *server.JetStreamLimits, v value) (err error) { l.MaxAckPending, err = jsCount(v); return },
		"max_ack_pending")
	k.on(func(l *server.JetStreamLimits, v value) (err error) { l.MaxBytesRequired, err = v.boolean(); return },
		"max_bytes_required", "max_stream_bytes", "max_bytes")
	k.on(func(l *server.JetStreamLimits, v value) (err error) { l.MemoryMaxStreamBytes, err = jsBytes(v); return },
		"mem_max_stream_bytes", "memory_max_stream_bytes")
	k.on(func(l *server.JetStreamLimits, v value) (err error) { l.StoreMaxStreamBytes, err = jsBytes(v); return },
		"disk_max_stream_bytes", "store_max_stream_bytes")
	k.refuse(whyCluster, "cluster_traffic")
	return k
}()

// accountQuota reads an account's max_memory or max_store: a size, or a
// negative number for none (as nats-server, where every negative is
// none). Zero, which nats-server reads as "no stream of that storage at
// all", is refused: an Options zero means no limit.
func accountQuota(v value) (int64, error) {
	n, err := v.size()
	switch {
	case err != nil:
		return 0, err
	case n == 0:
		return 0, v.errorf(ErrUnsupported, "0 allows no stream of this storage at all in nats-server and is not implemented; write a positive size, or -1 for no limit")
	}
	return max(n, server.NoLimit), nil
}

// jsCount reads an account's max_streams, max_consumers or
// max_ack_pending: a bound, or zero or a negative number for none, as
// nats-server reads them.
func jsCount(v value) (int, error) {
	n, err := v.integer()
	switch {
	case err != nil:
		return 0, err
	case n > math.MaxInt32:
		return 0, v.errorf(ErrInvalidValue, "%d is out of range (at most %d)", n, math.MaxInt32)
	}
	return int(max(n, server.NoLimit)), nil
}

// jsBytes reads an account's mem_max_stream_bytes or
// disk_max_stream_bytes: a size, or zero or a negative number for none.
func jsBytes(v value) (int64, error) {
	n, err := v.size()
	return max(n, server.NoLimit), err
}
