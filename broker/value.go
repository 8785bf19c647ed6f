package broker

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// The configuration syntax is nats-server's, read by its own parser
// (github.com/nats-io/nats-server/v2/conf) in its pedantic mode, which
// wraps every value in a token that knows its line and file. value is
// Skiff's view of one such token: the decoded value plus where it came
// from, so that every error names the file, line and key path.

// token is what the reference parser's pedantic mode wraps values in.
type token interface {
	Value() any
	Line() int
	SourceFile() string
	IsUsedVariable() bool
}

// value is one configuration value and where it was written.
type value struct {
	v    any    // string, int64, float64, bool, time.Time, []any, map[string]any
	path string // the key path, such as "authorization.users[0].user"
	file string
	line int
	// usedVar marks a key that defined a variable referenced elsewhere:
	// it configures nothing, as in nats-server.
	usedVar bool
}

// wrap unwraps a token (or a raw value) found at path. A value without a
// token inherits its parent's position.
func wrap(raw any, path string, parent value) value {
	v := value{v: raw, path: path, file: parent.file, line: parent.line}
	if t, ok := raw.(token); ok {
		v.v, v.line, v.usedVar = t.Value(), t.Line(), t.IsUsedVariable()
		if f := t.SourceFile(); f != "" {
			v.file = f
		}
	}
	return v
}

// errorf reports a problem with this value, wrapping sentinel.
func (v value) errorf(sentinel error, format string, args ...any) error {
	return &ConfigError{File: v.file, Line: v.line, Key: v.path, Err: fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)}
}

// typeError says the value is not of the wanted kind.
func (v value) typeError(want string) error {
	return v.errorf(ErrInvalidValue, "want %s, not %s", want, describe(v.v))
}

func describe(x any) string {
	switch x := x.(type) {
	case string:
		return fmt.Sprintf("the string %q", x)
	case int64:
		return fmt.Sprintf("the number %d", x)
	case float64:
		return fmt.Sprintf("the number %g", x)
	case bool:
		return fmt.Sprintf("the boolean %t", x)
	case time.Time:
		return "a date"
	case []any:
		return "a list"
	case map[string]any:
		return "a block"
	}
	return fmt.Sprintf("%T", x)
}

func (v value) str() (string, error) {
	if s, ok := v.v.(string); ok {
		return s, nil
	}
	return "", v.typeError("a string")
}

// integer reads a whole number (sizes such as 1MB are whole numbers to the
// parser).
func (v value) integer() (int64, error) {
	switch n := v.v.(type) {
	case int64:
		return n, nil
	case float64:
		if n == math.Trunc(n) && math.Abs(n) < 1<<53 {
			return int64(n), nil
		}
	}
	return 0, v.typeError("a whole number")
}

// intIn reads a whole number within [lo, hi].
func (v value) intIn(lo, hi int64) (int, error) {
	n, err := v.integer()
	if err != nil {
		return 0, err
	}
	if n < lo || n > hi {
		return 0, v.errorf(ErrInvalidValue, "%d is outside [%d, %d]", n, lo, hi)
	}
	return int(n), nil
}

// size reads a byte count: a number, with or without a unit (1MB, 64MiB,
// 1K = 1,000), or such a number quoted.
func (v value) size() (int64, error) {
	if s, ok := v.v.(string); ok {
		n, err := parseSize(s)
		if err != nil {
			return 0, v.errorf(ErrInvalidValue, "%v", err)
		}
		return n, nil
	}
	n, err := v.integer()
	if err != nil {
		return 0, v.typeError("a size such as 1MB")
	}
	return n, nil
}

// duration reads a duration as nats-server does: a string in Go syntax
// ("2m", "500ms"), or a bare number of seconds. An unquoted 2m is, in
// this syntax, the number 2,000,000 (m is the unit 10^6), so durations
// with units are written quoted.
func (v value) duration() (time.Duration, error) {
	switch d := v.v.(type) {
	case string:
		dur, err := time.ParseDuration(d)
		if err != nil {
			return 0, v.errorf(ErrInvalidValue, "%q is not a duration such as \"2s\" or \"500ms\"", d)
		}
		return dur, nil
	case int64:
		if d > math.MaxInt64/int64(time.Second) || d < 0 {
			return 0, v.errorf(ErrInvalidValue, "%d seconds is out of range", d)
		}
		return time.Duration(d) * time.Second, nil
	case float64:
		if d < 0 || d > float64(math.MaxInt64/int64(time.Second)) {
			return 0, v.errorf(ErrInvalidValue, "%g seconds is out of range", d)
		}
		return time.Duration(d * float64(time.Second)), nil
	}
	return 0, v.typeError("a duration such as \"2s\"")
}

func (v value) boolean() (bool, error) {
	if b, ok := v.v.(bool); ok {
		return b, nil
	}
	return false, v.typeError("true or false")
}

// list reads an array; a single value counts as a list of one when one is
// allowed.
func (v value) list(single bool) ([]value, error) {
	arr, ok := v.v.([]any)
	if !ok {
		if single {
			return []value{v}, nil
		}
		return nil, v.typeError("a list")
	}
	out := make([]value, len(arr))
	for i, item := range arr {
		out[i] = wrap(item, fmt.Sprintf("%s[%d]", v.path, i), v)
	}
	return out, nil
}

// strings reads a string or a list of strings.
func (v value) strings() ([]string, error) {
	items, err := v.list(true)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		s, err := it.str()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// entry is one key of a block.
type entry struct {
	key string // as written
	val value
}

// block reads a map's entries in file order (the parser keeps no order,
// so by line, then key).
func (v value) block() ([]entry, error) {
	m, ok := v.v.(map[string]any)
	if !ok {
		return nil, v.typeError("a block { ... }")
	}
	return entries(m, v.path, v), nil
}

func entries(m map[string]any, prefix string, parent value) []entry {
	out := make([]entry, 0, len(m))
	for k, raw := range m {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		out = append(out, entry{key: k, val: wrap(raw, path, parent)})
	}
	slices.SortFunc(out, func(a, b entry) int {
		return cmp.Or(cmp.Compare(a.val.line, b.val.line), cmp.Compare(a.key, b.key))
	})
	return out
}

// parseSize reads a quoted size such as "1MB" with the units of the
// reference parser: k, m, g, t = powers of 1,000; kb, kib, ki and the
// like = powers of 1,024.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("%q is not a size such as 1MB", s)
	}
	var n int64
	for _, c := range t[:i] {
		if n > (math.MaxInt64-9)/10 {
			return 0, fmt.Errorf("%q is too large", s)
		}
		n = n*10 + int64(c-'0')
	}
	mult := int64(1)
	switch strings.ToLower(strings.TrimSpace(t[i:])) {
	case "", "b":
	case "k":
		mult = 1e3
	case "kb", "ki", "kib":
		mult = 1 << 10
	case "m":
		mult = 1e6
	case "mb", "mi", "mib":
		mult = 1 << 20
	case "g":
		mult = 1e9
	case "gb", "gi", "gib":
		mult = 1 << 30
	case "t":
		mult = 1e12
	case "tb", "ti", "tib":
		mult = 1 << 40
	default:
		return 0, fmt.Errorf("%q is not a size such as 1MB", s)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is too large", s)
	}
	return n * mult, nil
}
