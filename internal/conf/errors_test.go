package conf_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/conf"
)

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		err  error
		msg  string // the whole error text
	}{
		{"no value", "a: 1\nb:\nc: 3", conf.ErrSyntax, `conf: line 2: key "b" has no value`},
		{"no value at eof", "a", conf.ErrSyntax, `conf: line 1: key "a" has no value`},
		{"no value before comment", "a: # c\nb: 1", conf.ErrSyntax, `conf: line 1: key "a" has no value`},
		{"value on next line", "a\n1", conf.ErrSyntax, `conf: line 1: key "a" has no value`},
		{"missing value before brace", "m { a: }", conf.ErrSyntax, `conf: line 1: expected a value, found '}'`},
		{"two entries on a line", "a: 1 b: 2", conf.ErrSyntax, `conf: line 1: expected a new line, ',' or ';' after a value, found 'b'`},
		{"stray closing brace", "a: 1\n}", conf.ErrSyntax, `conf: line 2: expected a key, found '}'`},
		{"stray bracket", "\n\n]", conf.ErrSyntax, `conf: line 3: expected a key, found ']'`},
		{"empty entry", "a: 1,,", conf.ErrSyntax, `conf: line 1: expected a key, found ','`},
		{"key separator first", ": 1", conf.ErrSyntax, `conf: line 1: expected a key, found ':'`},
		{"unclosed map", "a {\n b: 1\n", conf.ErrSyntax, `conf: line 1: the '{' on this line is never closed`},
		{"unclosed array", "x: 1\na: [1, 2\n", conf.ErrSyntax, `conf: line 2: the '[' on this line is never closed`},
		{"empty array element", "a: [1,,2]", conf.ErrSyntax, `conf: line 1: unexpected ',' in an array: an element is missing`},
		{"leading array comma", "a: [,1]", conf.ErrSyntax, `conf: line 1: unexpected ',' in an array: an element is missing`},
		{"array without separators", "a: [1 2]", conf.ErrSyntax, `conf: line 1: expected ',' or ']' after an array element, found '2'`},
		{"brace in array", "a: [1, }", conf.ErrSyntax, `conf: line 1: expected a value, found '}'`},
		{"map without separators", "a: {b: 1 c: 2}", conf.ErrSyntax, `conf: line 1: expected a new line, ',' or ';' after a value, found 'c'`},
		{"unclosed string", "a: 1\nb: \"abc\nd", conf.ErrSyntax, `conf: line 2: string is never closed`},
		{"unclosed single quote", "a: 'abc", conf.ErrSyntax, `conf: line 1: string is never closed`},
		{"unclosed quoted key", `"abc`, conf.ErrSyntax, `conf: line 1: string is never closed`},
		{"invalid escape", `a: "\q"`, conf.ErrSyntax, `conf: line 1: invalid escape \'q' in a double-quoted string; use \\ for a backslash`},
		{"short unicode escape", `a: "\u12"`, conf.ErrSyntax, `conf: line 1: escape needs 4 hexadecimal digits`},
		{"bad unicode escape", `a: "\u12zz"`, conf.ErrSyntax, `conf: line 1: escape needs 4 hexadecimal digits, found "12zz"`},
		{"bad byte escape", `a: "\x4"`, conf.ErrSyntax, `conf: line 1: escape needs 2 hexadecimal digits, found "4\""`},
		{"escape at eof", `a: "\`, conf.ErrSyntax, `conf: line 1: string is never closed`},
		{"surrogate escape", `a: "\uD800"`, conf.ErrSyntax, `conf: line 1: escape \uD800 is not a valid Unicode code point`},
		{"rune past max", `a: "\U00110000"`, conf.ErrSyntax, `conf: line 1: escape \U00110000 is not a valid Unicode code point`},
		{"line after multiline string", "a: \"x\ny\"\nb: ]", conf.ErrSyntax, `conf: line 3: expected a value, found ']'`},
		{"line after comments", "# 1\n// 2\n\na: [\n# 5\n,]", conf.ErrSyntax, `conf: line 6: unexpected ',' in an array: an element is missing`},
		{"crlf lines", "a: 1\r\nb: 2\r\nc: }", conf.ErrSyntax, `conf: line 3: expected a value, found '}'`},
		{"text after braced file", "{a: 1}\nb: 2", conf.ErrSyntax, `conf: line 2: unexpected 'b' after the '}' that closes the file`},
		{"unclosed braced file", "{a: 1", conf.ErrSyntax, `conf: line 1: the '{' on this line is never closed`},
		{"lone dollar", "a: $", conf.ErrSyntax, `conf: line 1: '$' needs a variable name`},
		{"integer overflow", "a {\n b: 9223372036854775808\n}", conf.ErrRange, `conf: line 2: a.b: "9223372036854775808" does not fit in 64 bits`},
		{"negative overflow", "a: -9223372036854775809", conf.ErrRange, `conf: line 1: a: "-9223372036854775809" does not fit in 64 bits`},
		{"size overflow", "a: 8EiB", conf.ErrRange, `conf: line 1: a: "8EiB" does not fit in 64 bits`},
		{"size overflow exa", "a: 10e", conf.ErrRange, `conf: line 1: a: "10e" does not fit in 64 bits`},
		{"size overflow kilo", "a: [9223372036854775807k]", conf.ErrRange, `conf: line 1: a[0]: "9223372036854775807k" does not fit in 64 bits`},
		{"float overflow", "a: 1.0e999", conf.ErrRange, `conf: line 1: a: "1.0e999" does not fit in 64 bits`},
		{"unknown variable", "a: 1\nb: $SKIFF_CONF_TEST_UNSET", conf.ErrUnknownVariable, `conf: line 2: b: $SKIFF_CONF_TEST_UNSET is neither an earlier key nor an environment variable`},
		{"variable before definition", "a: $b\nb: 1", conf.ErrUnknownVariable, `conf: line 1: a: $b is neither an earlier key nor an environment variable`},
		{"include in Parse", "a: 1\ninclude \"x.conf\"", conf.ErrInclude, `conf: line 2: include "x.conf": Parse reads no files; use ParseFile or ParseFS`},
		{"include without name", "include\n", conf.ErrSyntax, `conf: line 1: include needs a file name, found a new line`},
		{"include a map", "include {a: 1}", conf.ErrSyntax, `conf: line 1: include needs a file name, found '{'`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := conf.Parse([]byte(tc.src))
			require.ErrorIs(t, err, tc.err)
			require.EqualError(t, err, tc.msg)
			var e *conf.Error
			require.True(t, errors.As(err, &e))
			require.Empty(t, e.File)
		})
	}
}

func TestErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  conf.Error
		want string
	}{
		{"line only", conf.Error{Line: 3, Msg: "m"}, "conf: line 3: m"},
		{"file and path", conf.Error{File: "a.conf", Line: 3, Path: "x.y", Msg: "m"}, "conf: a.conf: line 3: x.y: m"},
		{"no line", conf.Error{File: "a.conf", Msg: "m"}, "conf: a.conf: m"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.err.Error())
		})
	}
	e := &conf.Error{Err: conf.ErrSyntax}
	require.ErrorIs(t, e, conf.ErrSyntax)
	for _, s := range []error{conf.ErrSyntax, conf.ErrRange, conf.ErrType, conf.ErrUnknownVariable,
		conf.ErrVariableCycle, conf.ErrInclude, conf.ErrIncludeCycle, conf.ErrTooDeep, conf.ErrTooLarge} {
		require.True(t, strings.HasPrefix(s.Error(), "conf: "), s.Error())
	}
}
