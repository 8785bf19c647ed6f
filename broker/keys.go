package broker

import (
	"errors"
	"strings"
)

// handler applies one key's value to its target (the Config, a user, a
// permission list, ...).
type handler[T any] func(t T, v value) error

// keys is one block's table: what each key Skiff implements does, and
// which keys nats-server has there that Skiff refuses, with the reason.
// A key in neither is unknown. Every key of the reference configuration
// is in one of the two, so that nothing is skipped silently
// (TestEveryReferenceKey).
type keys[T any] struct {
	do      map[string]handler[T]
	refused map[string]string
}

func newKeys[T any]() keys[T] {
	return keys[T]{do: map[string]handler[T]{}, refused: map[string]string{}}
}

// on registers h under every name (case does not matter).
func (k keys[T]) on(h handler[T], names ...string) {
	for _, n := range names {
		k.do[strings.ToLower(n)] = h
	}
}

// refuse registers names as known but not implemented, for reason.
func (k keys[T]) refuse(reason string, names ...string) {
	for _, n := range names {
		k.refused[strings.ToLower(n)] = reason
	}
}

// apply runs the handler of every key of block v on t. It reports every
// problem, not only the first, so that one run of the server lists all a
// file's refusals.
func (k keys[T]) apply(t T, v value) error {
	ents, err := v.block()
	if err != nil {
		return err
	}
	return k.applyEntries(t, ents)
}

func (k keys[T]) applyEntries(t T, ents []entry) error {
	var errs []error
	for _, e := range ents {
		name := strings.ToLower(e.key)
		// A key Skiff knows is applied or refused even when other values
		// refer to it as a variable ("cluster { authorization:
		// $authorization }" must not switch client authorization off).
		// Only an unknown name that is used as a variable is a pure
		// variable and configures nothing, as in nats-server.
		if h, ok := k.do[name]; ok {
			if err := h(t, e.val); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		if why, ok := k.refused[name]; ok {
			errs = append(errs, e.val.errorf(ErrUnsupported, "%s", why))
			continue
		}
		if e.val.usedVar {
			continue
		}
		errs = append(errs, e.val.errorf(ErrUnknownKey, "%q is neither a Skiff nor a nats-server setting here", e.key))
	}
	return errors.Join(errs...)
}
