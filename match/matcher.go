package match

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/skiffmq/skiff/subject"
)

// Matcher is a concurrent subscription index. S identifies a subscriber;
// the broker uses one pointer per client subscription.
//
// Every method is safe for concurrent use by any number of goroutines; see
// the package documentation for what a concurrent Lookup observes.
type Matcher[S comparable] interface {
	// Subscribe adds the entry (pattern, queue, sub). queue "" makes a plain
	// subscription; otherwise sub joins that queue group on that pattern.
	// Adding an entry that exists is a no-op. It returns a wrapped
	// subject error for an invalid pattern, or ErrInvalidQueue.
	Subscribe(pattern, queue string, sub S) error

	// Unsubscribe removes the entry (pattern, queue, sub). It returns
	// ErrNotFound if the entry is absent.
	Unsubscribe(pattern, queue string, sub S) error

	// Lookup resets r and fills it with the subscribers whose patterns
	// match subject (see Result). It returns a wrapped subject error for a
	// malformed subject, leaving r empty.
	Lookup(subject string, r *Result[S]) error

	// Count returns the number of entries.
	Count() int

	// Snapshot returns every entry as of one instant, in no particular
	// order.
	Snapshot() []Subscription[S]
}

// Subscription is one entry of a Matcher.
type Subscription[S comparable] struct {
	Pattern    string // canonical pattern
	Queue      string // "" for a plain subscription
	Subscriber S
}

// Errors returned by every Matcher.
var (
	// ErrNotFound is returned by Unsubscribe for an entry that is absent.
	ErrNotFound = errors.New("match: subscription not found")
	// ErrInvalidQueue is returned for a queue group name containing
	// whitespace, NUL or invalid UTF-8.
	ErrInvalidQueue = errors.New("match: invalid queue group name")
)

// ParsePattern validates a pattern and queue group name and returns the
// pattern in canonical form. Matcher implementations call it from
// Subscribe and Unsubscribe.
func ParsePattern(pattern, queue string) (string, error) {
	if err := subject.ValidatePattern(pattern); err != nil {
		return "", err
	}
	if err := validateQueue(queue); err != nil {
		return "", err
	}
	return subject.Canonical(pattern), nil
}

// SplitPattern validates a pattern and queue group name and appends the
// tokens of the pattern's canonical form to dst: what ParsePattern does,
// without building the canonical string. The tokens are substrings of
// pattern. Trie engines call it from Subscribe and Unsubscribe.
func SplitPattern(dst []string, pattern, queue string) ([]string, error) {
	n := len(dst)
	toks, err := subject.SplitPattern(dst, pattern)
	if err != nil {
		return dst, err
	}
	if err := validateQueue(queue); err != nil {
		return dst, err
	}
	out := toks[:n]
	for _, tok := range toks[n:] {
		if tok == subject.AnyToken && len(out) > n && out[len(out)-1] == subject.AnyToken {
			continue
		}
		out = append(out, tok)
	}
	return out, nil
}

func validateQueue(q string) error {
	for i := 0; i < len(q); {
		c := q[i]
		if c < utf8.RuneSelf {
			if c == 0 || c == ' ' || (c >= '\t' && c <= '\r') {
				return fmt.Errorf("%w: %q", ErrInvalidQueue, q)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(q[i:])
		if (r == utf8.RuneError && size <= 1) || unicode.IsSpace(r) {
			return fmt.Errorf("%w: %q", ErrInvalidQueue, q)
		}
		i += size
	}
	return nil
}
