package posbitmap

import (
	"errors"
	"fmt"
)

// DefaultMaxTokens is the number of token positions indexed when
// Options.MaxTokens is zero. It covers the subjects of almost any
// deployment; longer patterns still work, through the fallback list.
const DefaultMaxTokens = 16

// maxMaxTokens bounds Options.MaxTokens. Subscribing a pattern ending in a
// multi-token wildcard touches two bitmaps per position past the wildcard,
// so positions are not free.
const maxMaxTokens = 256

// ErrInvalidOptions is returned by New for options it cannot use. It is
// wrapped with the offending field.
var ErrInvalidOptions = errors.New("posbitmap: invalid options")

// Options configures a Matcher. The zero value is ready to use.
type Options struct {
	// MaxTokens is the number of token positions that have bitmaps.
	// Patterns with more tokens go to the fallback list, which every
	// lookup scans; subjects with more tokens are matched through the
	// "longer" bitmap. Zero means DefaultMaxTokens; it must be between 1
	// and 256.
	MaxTokens int
}

// DefaultOptions returns the options the zero value stands for, with every
// default filled in.
func DefaultOptions() Options {
	return Options{MaxTokens: DefaultMaxTokens}
}

// withDefaults validates o and returns it with zero fields set to their
// defaults.
func (o Options) withDefaults() (Options, error) {
	if o.MaxTokens == 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	if o.MaxTokens < 1 || o.MaxTokens > maxMaxTokens {
		return o, fmt.Errorf("%w: MaxTokens %d is not between 1 and %d", ErrInvalidOptions, o.MaxTokens, maxMaxTokens)
	}
	return o, nil
}
