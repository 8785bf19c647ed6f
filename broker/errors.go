package broker

import (
	"errors"
	"fmt"
	"path/filepath"
)

// Sentinel errors of configuration loading; a *ConfigError wraps one.
var (
	// ErrUnsupported: a key nats-server knows and Skiff does not
	// implement. Skiff refuses to start rather than run without a setting
	// the file asks for: a security setting silently ignored is a server
	// silently open.
	ErrUnsupported = errors.New("not supported by Skiff")
	// ErrUnknownKey: a key neither Skiff nor nats-server knows (a typo).
	ErrUnknownKey = errors.New("unknown key")
	// ErrInvalidValue: a known key with a value of the wrong kind or out
	// of range.
	ErrInvalidValue = errors.New("invalid value")
)

// ConfigError is a problem with one key of a configuration file: where it
// is, which key, and what is wrong (wrapping ErrUnsupported, ErrUnknownKey
// or ErrInvalidValue).
type ConfigError struct {
	File string // the file the key is in ("" for a configuration given as text)
	Line int
	Key  string // its path, such as "authorization.users[0].nkey"
	Err  error
}

func (e *ConfigError) Error() string {
	where := fmt.Sprintf("line %d", e.Line)
	if e.File != "" {
		where = fmt.Sprintf("%s:%d", filepath.Base(e.File), e.Line)
	}
	return fmt.Sprintf("config: %s: %s: %v", where, e.Key, e.Err)
}

func (e *ConfigError) Unwrap() error { return e.Err }
