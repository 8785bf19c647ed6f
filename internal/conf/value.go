package conf

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// Kind is the kind of a Value. The zero Kind, KindInvalid, is the kind of
// the zero Value, which Map.Get returns for a missing key.
type Kind uint8

// The kinds of Value. Sizes such as 1MB are KindInt: their Text keeps the
// unit.
const (
	KindInvalid Kind = iota
	KindString
	KindInt
	KindFloat
	KindBool
	KindArray
	KindMap
)

var kindNames = [...]string{"invalid", "string", "int", "float", "bool", "array", "map"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Value is one value of a configuration: a scalar (string, int, float,
// bool), an array or a map. It records where it came from, for error
// messages, and a scalar keeps its text as written, so that "2m" (a size,
// 2,000,000) can still be read as a duration of two minutes.
//
// The zero Value has KindInvalid and every accessor fails on it. Values are
// immutable and safe for concurrent use.
type Value struct {
	kind Kind
	text string // scalars: the bare word as written, or a quoted string's decoded content
	i    int64
	f    float64
	b    bool
	arr  []Value
	m    *Map
	line int
	file string
	path string
	// height counts the containers from this value down to its deepest
	// scalar, and weight approximates its size when written out. Both let
	// a variable reference be checked against MaxDepth and MaxExpansion
	// without walking the value.
	height int
	weight int
}

// Kind reports the kind of v.
func (v Value) Kind() Kind { return v.kind }

// Line reports the 1-based line v was defined on: for a map entry, the
// line of its key; for an array element, the line it starts on; for a
// variable reference, the line of the reference.
func (v Value) Line() int { return v.line }

// File reports the file v was read from: the name given to ParseFile or
// ParseFS, or the included file's path; "" for Parse.
func (v Value) File() string { return v.file }

// Path reports where v sits in the configuration, such as "port",
// "authorization.users[0].user" or "tls.cipher_suites[2]". Keys appear as
// written.
func (v Value) Path() string { return v.path }

// Text returns a scalar's text: a bare word exactly as written (such as
// "2m", "1_000", "YES", "127.0.0.1") or a quoted string's content after
// escapes. It returns "" for arrays, maps and the zero Value.
func (v Value) Text() string { return v.text }

// Str returns the text of any scalar, so that `user: 1234` reads as the
// string "1234". It fails only for arrays, maps and the zero Value.
func (v Value) Str() (string, error) {
	switch v.kind {
	case KindString, KindInt, KindFloat, KindBool:
		return v.text, nil
	}
	return "", v.typeError("a string")
}

// Int returns an integer or size (`1MB` is 1048576). Quoted strings are not
// read as numbers.
func (v Value) Int() (int64, error) {
	if v.kind != KindInt {
		return 0, v.typeError("an integer")
	}
	return v.i, nil
}

// Float returns a float, or an integer converted to float64.
func (v Value) Float() (float64, error) {
	switch v.kind {
	case KindFloat:
		return v.f, nil
	case KindInt:
		return float64(v.i), nil
	}
	return 0, v.typeError("a number")
}

// Bool returns a boolean written as true/false, yes/no or on/off (any
// case, unquoted).
func (v Value) Bool() (bool, error) {
	if v.kind != KindBool {
		return false, v.typeError("a boolean")
	}
	return v.b, nil
}

// Size returns a byte count: an integer, with or without a unit (1k is
// 1000, 1KB and 1KiB are 1024). A quoted string is read the same way, so
// "64MB" works too.
func (v Value) Size() (int64, error) {
	switch v.kind {
	case KindInt:
		return v.i, nil
	case KindString:
		n, ok, err := parseSize(v.text)
		if err != nil {
			return 0, v.errorf(ErrRange, "%q: %v", v.text, err)
		}
		if ok {
			return n, nil
		}
	}
	return 0, v.typeError("a size")
}

// Duration returns a duration. A plain number, integer or float, counts
// seconds, as nats-server reads `auth_timeout: 2`; anything else, quoted
// or not, is read with time.ParseDuration, so `2m` is two minutes even
// though it also parses as the size 2,000,000.
func (v Value) Duration() (time.Duration, error) {
	switch v.kind {
	case KindInt, KindFloat, KindString:
	default:
		return 0, v.typeError("a duration")
	}
	if lit, ok := parseNumber(v.text); ok && lit.unit == "" {
		secs := lit.f
		if lit.kind == KindInt {
			secs = float64(lit.i)
		}
		d := secs * float64(time.Second)
		if lit.err != nil || math.Abs(d) >= math.MaxInt64 {
			return 0, v.errorf(ErrRange, "%q seconds does not fit a duration", v.text)
		}
		return time.Duration(d), nil
	}
	d, err := time.ParseDuration(v.text)
	if err != nil {
		return 0, v.typeError("a duration")
	}
	return d, nil
}

// Array returns a copy of an array's elements.
func (v Value) Array() ([]Value, error) {
	if v.kind != KindArray {
		return nil, v.typeError("an array")
	}
	return slices.Clone(v.arr), nil
}

// Map returns a map's entries.
func (v Value) Map() (*Map, error) {
	if v.kind != KindMap {
		return nil, v.typeError("a map")
	}
	return v.m, nil
}

// Len returns the number of elements of an array or entries of a map, and
// 0 for anything else.
func (v Value) Len() int {
	switch v.kind {
	case KindArray:
		return len(v.arr)
	case KindMap:
		return v.m.Len()
	}
	return 0
}

// Interface returns v as plain Go values, the way nats-server's parser
// does: string, int64, float64, bool, []any or map[string]any (keys as
// written); nil for the zero Value.
func (v Value) Interface() any {
	switch v.kind {
	case KindString:
		return v.text
	case KindInt:
		return v.i
	case KindFloat:
		return v.f
	case KindBool:
		return v.b
	case KindArray:
		out := make([]any, len(v.arr))
		for i, e := range v.arr {
			out[i] = e.Interface()
		}
		return out
	case KindMap:
		return v.m.Interface()
	}
	return nil
}

// String renders v in the canonical syntax written by Map.String: quoted
// strings, scalars as written, and containers spread over lines.
func (v Value) String() string {
	var w writer
	w.value(v, 0)
	return w.b.String()
}

func (v Value) typeError(want string) error {
	if v.kind == KindInvalid {
		return &Error{Msg: "missing value, want " + want, Err: ErrType}
	}
	what := v.kind.String()
	if v.kind != KindArray && v.kind != KindMap {
		what += " " + strconv.Quote(v.text)
	}
	return v.errorf(ErrType, "cannot read %s as %s", what, want)
}

func (v Value) errorf(sentinel error, format string, args ...any) error {
	return &Error{File: v.file, Line: v.line, Path: v.path, Msg: fmt.Sprintf(format, args...), Err: sentinel}
}
