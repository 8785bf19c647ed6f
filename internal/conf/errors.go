package conf

import (
	"errors"
	"strconv"
)

// Sentinel errors. Every error returned by this package is an *Error that
// wraps one of these, so callers test with errors.Is; the one exception is
// a file given to ParseFile or ParseFS that cannot be opened, whose *Error
// wraps the file system's error alone.
var (
	// ErrSyntax reports input that does not follow the format.
	ErrSyntax = errors.New("conf: syntax error")
	// ErrRange reports a number or size that does not fit its Go type.
	ErrRange = errors.New("conf: value out of range")
	// ErrType reports a value read with an accessor of the wrong kind,
	// such as Duration on an array.
	ErrType = errors.New("conf: wrong type")
	// ErrUnknownVariable reports a $NAME that is neither an earlier key
	// nor an environment variable.
	ErrUnknownVariable = errors.New("conf: unknown variable")
	// ErrVariableCycle reports environment variables that refer to each
	// other, such as A="$B" and B="$A".
	ErrVariableCycle = errors.New("conf: variable reference cycle")
	// ErrInclude reports an include that cannot be read: Parse was used
	// (it has no file system), or the file is missing or unreadable. The
	// *Error also wraps the file system's error, so
	// errors.Is(err, fs.ErrNotExist) works.
	ErrInclude = errors.New("conf: cannot include")
	// ErrIncludeCycle reports a file that includes itself, directly or not.
	ErrIncludeCycle = errors.New("conf: include cycle")
	// ErrTooDeep reports nesting past MaxDepth or includes past
	// MaxIncludeDepth.
	ErrTooDeep = errors.New("conf: nested too deep")
	// ErrTooLarge reports input past MaxInputSize, or variables that
	// expand past MaxExpansion.
	ErrTooLarge = errors.New("conf: input too large")
)

// Error is the error type of this package: a message with the position it
// applies to.
//
// Its text is
//
//	conf: [FILE: ]line N: [PATH: ]MESSAGE
//
// where FILE is absent for Parse, the line is absent for a file that
// cannot be read at all, and PATH (such as "authorization.users[0].user")
// is present for errors about a value.
type Error struct {
	File string // the file, as named to ParseFile or ParseFS or in include; "" for Parse
	Line int    // 1-based line in File; 0 when the file itself cannot be read
	Path string // key path of the value concerned; "" for syntax errors
	Msg  string // what went wrong, without position
	Err  error  // a sentinel such as ErrSyntax, possibly joined with a cause
}

func (e *Error) Error() string {
	b := make([]byte, 0, 32+len(e.File)+len(e.Path)+len(e.Msg))
	b = append(b, "conf: "...)
	if e.File != "" {
		b = append(b, e.File...)
		b = append(b, ": "...)
	}
	if e.Line > 0 {
		b = append(b, "line "...)
		b = strconv.AppendInt(b, int64(e.Line), 10)
		b = append(b, ": "...)
	}
	if e.Path != "" {
		b = append(b, e.Path...)
		b = append(b, ": "...)
	}
	b = append(b, e.Msg...)
	return string(b)
}

// Unwrap returns the sentinel (and cause, if any) the error wraps.
func (e *Error) Unwrap() error { return e.Err }
