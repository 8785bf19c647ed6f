package subject

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// byteClass sorts bytes for the validating scan so that the common case,
// an ASCII byte allowed in a token, costs one table load.
type byteClass uint8

const (
	classOK   byteClass = iota
	classDot            // token separator
	classBad            // ASCII whitespace or NUL
	classHigh           // first byte of a multi-byte (or invalid) sequence
)

var classes = func() (t [256]byteClass) {
	for c := 0x80; c < 0x100; c++ {
		t[c] = classHigh
	}
	t['.'] = classDot
	for _, c := range []byte{0, ' ', '\t', '\n', '\v', '\f', '\r'} {
		t[c] = classBad
	}
	return t
}()

// SplitSubject validates s as a subject and appends its tokens to dst. The
// tokens are substrings of s. Tokens that look like wildcards are accepted
// and are literal; see ValidateLiteral for the strict check. It allocates
// only if dst must grow.
func SplitSubject(dst []string, s string) ([]string, error) {
	return split(dst, s, false, true)
}

// SplitPattern validates p as a pattern and appends its tokens to dst. The
// tokens are substrings of p, in the form given (runs of "#" are not
// collapsed; see Canonical). It allocates only if dst must grow.
func SplitPattern(dst []string, p string) ([]string, error) {
	return split(dst, p, true, true)
}

// ValidatePattern reports whether p is a valid pattern.
func ValidatePattern(p string) error {
	_, err := split(nil, p, true, false)
	return err
}

// ValidateSubject reports whether s is a well-formed subject. Tokens that
// look like wildcards are accepted and are literal, as in lookups; see
// ValidateLiteral for the strict check.
func ValidateSubject(s string) error {
	_, err := split(nil, s, false, false)
	return err
}

// ValidateLiteral reports whether s is a well-formed subject without
// wildcard tokens, as a publish subject in pedantic mode or a stream
// subject must be.
func ValidateLiteral(s string) error {
	if _, err := split(nil, s, false, false); err != nil {
		return err
	}
	for off := 0; off <= len(s); {
		var tok string
		tok, off = nextToken(s, off)
		if KindOf(tok) != Literal {
			return fmt.Errorf("%w: %q in %q", ErrWildcard, tok, s)
		}
	}
	return nil
}

// split validates s and, if collect is set, appends its tokens to dst.
func split(dst []string, s string, pattern, collect bool) ([]string, error) {
	if len(s) == 0 {
		return dst, ErrEmpty
	}
	start := 0
	for i := 0; i < len(s); {
		switch classes[s[i]] {
		case classOK:
			i++
		case classDot:
			if i == start {
				return dst, emptyTokenError(s, i)
			}
			tok := s[start:i]
			if pattern && tok == RestToken {
				return dst, fmt.Errorf("%w: %q", ErrRestNotLast, s)
			}
			if collect {
				dst = append(dst, tok)
			}
			i++
			start = i
		case classBad:
			return dst, fmt.Errorf("%w %q at byte %d of %q", ErrBadByte, s[i], i, s)
		case classHigh:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size <= 1 {
				return dst, fmt.Errorf("%w at byte %d of %q", ErrBadUTF8, i, s)
			}
			if unicode.IsSpace(r) {
				return dst, fmt.Errorf("%w %q at byte %d of %q", ErrBadByte, r, i, s)
			}
			i += size
		}
	}
	if start == len(s) {
		return dst, emptyTokenError(s, len(s))
	}
	if collect {
		dst = append(dst, s[start:])
	}
	return dst, nil
}

func emptyTokenError(s string, at int) error {
	return fmt.Errorf("%w at byte %d of %q", ErrEmptyToken, at, s)
}
