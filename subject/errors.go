package subject

import "errors"

// Errors returned by validation. Each is wrapped with the position or token
// that failed; test for them with errors.Is.
var (
	// ErrEmpty is returned for an empty subject or pattern.
	ErrEmpty = errors.New("subject: empty")
	// ErrEmptyToken is returned when a leading, trailing or doubled dot
	// leaves a token with no characters.
	ErrEmptyToken = errors.New("subject: empty token")
	// ErrBadByte is returned for whitespace (ASCII or Unicode), CR, LF or
	// NUL inside a token.
	ErrBadByte = errors.New("subject: invalid character")
	// ErrBadUTF8 is returned when the text is not valid UTF-8.
	ErrBadUTF8 = errors.New("subject: invalid UTF-8")
	// ErrRestNotLast is returned for a pattern with a ">" token that is not
	// the last token.
	ErrRestNotLast = errors.New("subject: '>' must be the last token")
	// ErrWildcard is returned by ValidateLiteral for a subject that contains
	// a wildcard token where only literal tokens are allowed.
	ErrWildcard = errors.New("subject: wildcard in a literal subject")
)
