package bitmap

import (
	"errors"
	"fmt"

	"github.com/skiffmq/skiff/subject"
)

// DefaultMaxTopics is the bound on the topic space when Options.MaxTopics
// is zero. At a few hundred bytes per topic it keeps the space within a few
// hundred megabytes.
const DefaultMaxTopics = 1 << 20

// ErrInvalidOptions is returned by New for options it cannot use. It is
// wrapped with the offending field.
var ErrInvalidOptions = errors.New("bitmap: invalid options")

// Options configures a Matcher. The zero value is ready to use: an empty
// topic space that grows up to DefaultMaxTopics.
type Options struct {
	// Topics is the topic space known in advance: each gets its bitmap
	// before any subscription. Each must be a valid subject (see
	// subject.ValidateSubject); repeats are ignored. Nil starts with an
	// empty space that grows as literal patterns are subscribed and
	// subjects are looked up.
	Topics []string

	// MaxTopics bounds the topic space, Topics included. Past it, a lookup
	// of a subject outside the space tests every pattern instead of adding
	// the subject. Zero means DefaultMaxTopics; it must not be negative or
	// smaller than the number of distinct Topics.
	MaxTopics int
}

// DefaultOptions returns the options the zero value stands for, with every
// default filled in.
func DefaultOptions() Options {
	return Options{MaxTopics: DefaultMaxTopics}
}

// withDefaults validates o and returns it with zero fields set to their
// defaults and Topics without repeats.
func (o Options) withDefaults() (Options, error) {
	if o.MaxTopics < 0 {
		return o, fmt.Errorf("%w: MaxTopics %d is negative", ErrInvalidOptions, o.MaxTopics)
	}
	if o.MaxTopics == 0 {
		o.MaxTopics = DefaultMaxTopics
	}
	seen := make(map[string]struct{}, len(o.Topics))
	topics := make([]string, 0, len(o.Topics))
	for _, t := range o.Topics {
		if err := subject.ValidateSubject(t); err != nil {
			return o, fmt.Errorf("%w: topic %q: %w", ErrInvalidOptions, t, err)
		}
		if _, dup := seen[t]; !dup {
			seen[t] = struct{}{}
			topics = append(topics, t)
		}
	}
	if len(topics) > o.MaxTopics {
		return o, fmt.Errorf("%w: %d topics exceed MaxTopics %d", ErrInvalidOptions, len(topics), o.MaxTopics)
	}
	o.Topics = topics
	return o, nil
}
