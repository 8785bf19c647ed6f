package conf_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/conf"
)

// The tests here set environment variables, so none of them is parallel.

func TestVariables(t *testing.T) {
	t.Setenv("SKIFF_TEST_PORT", "4222")
	t.Setenv("SKIFF_TEST_WORDS", "two words")
	t.Setenv("SKIFF_TEST_LIST", `[1, "x"]`)
	t.Setenv("SKIFF_TEST_SIZE", "1MB")
	t.Setenv("SKIFF_TEST_EMPTY", "")
	t.Setenv("SKIFF_TEST_INDIRECT", "$SKIFF_TEST_PORT")
	t.Setenv("SKIFF_TEST_SHADOW", "from env")
	t.Setenv("shadow_ref", "$SKIFF_TEST_SHADOW")
	for _, tc := range []struct {
		name string
		src  string
		want obj
	}{
		{"top-level key", "TIMEOUT: 2\na: $TIMEOUT", obj{"TIMEOUT": int64(2), "a": int64(2)}},
		{"keeps kind and text", "S: 2m\na: $S", obj{"S": int64(2000000), "a": int64(2000000)}},
		{"from a nested map", "T: 1\nauth { x: {y: $T} }", obj{"T": int64(1), "auth": obj{"x": obj{"y": int64(1)}}}},
		{"innermost scope wins", "T: 1\nauth { T: 2, x: $T }\ny: $T", obj{"T": int64(1), "auth": obj{"T": int64(2), "x": int64(2)}, "y": int64(1)}},
		{"array element", "P: 1\na: [$P, $P]", obj{"P": int64(1), "a": arr{int64(1), int64(1)}}},
		{"map value", "M {a: 1}\nb: $M", obj{"M": obj{"a": int64(1)}, "b": obj{"a": int64(1)}}},
		{"case-insensitive key", "port: 1\na: $PORT", obj{"port": int64(1), "a": int64(1)}},
		{"latest definition", "P: 1\nP: 2\na: $P", obj{"P": int64(2), "a": int64(2)}},
		{"in braced file", `{"P": 1, "a": $P}`, obj{"P": int64(1), "a": int64(1)}},
		{"key before env", "SKIFF_TEST_PORT: x\na: $SKIFF_TEST_PORT", obj{"SKIFF_TEST_PORT": "x", "a": "x"}},
		{"env integer", "a: $SKIFF_TEST_PORT", obj{"a": int64(4222)}},
		{"env size", "a: $SKIFF_TEST_SIZE", obj{"a": int64(1 << 20)}},
		{"env array", "a: $SKIFF_TEST_LIST", obj{"a": arr{int64(1), "x"}}},
		{"env words", "a: $SKIFF_TEST_WORDS", obj{"a": "two words"}},
		{"env empty", "a: $SKIFF_TEST_EMPTY", obj{"a": ""}},
		{"env refers to env", "a: $SKIFF_TEST_INDIRECT", obj{"a": int64(4222)}},
		{"env sees only env", "SKIFF_TEST_SHADOW: file\na: $shadow_ref", obj{"SKIFF_TEST_SHADOW": "file", "a": "from env"}},
		{"bcrypt hash", "a: $2a$11$xyz", obj{"a": "$2a$11$xyz"}},
		{"quoted dollar", `a: "$SKIFF_TEST_PORT"`, obj{"a": "$SKIFF_TEST_PORT"}},
		{"dollar inside word", "a: x$SKIFF_TEST_PORT", obj{"a": "x$SKIFF_TEST_PORT"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, mustParse(t, tc.src).Interface())
		})
	}
}

func TestVariablePosition(t *testing.T) {
	m := mustParse(t, "USERS [\n  {user: a, timeout: soon}\n]\nauthorization {\n  users: $USERS\n}")
	var got []string
	require.NoError(t, m.Walk(func(v conf.Value) error {
		if strings.HasPrefix(v.Path(), "authorization") {
			got = append(got, v.Path()+"@"+string(rune('0'+v.Line())))
		}
		return nil
	}))
	// The reference sits on line 5; what it contains was written on line 2.
	require.Equal(t, []string{
		"authorization@4", "authorization.users@5", "authorization.users[0]@2",
		"authorization.users[0].user@2", "authorization.users[0].timeout@2",
	}, got)
}

func TestVariableErrors(t *testing.T) {
	t.Setenv("SKIFF_TEST_A", "$SKIFF_TEST_B")
	t.Setenv("SKIFF_TEST_B", "[$SKIFF_TEST_A]")
	t.Setenv("SKIFF_TEST_SELF", "$SKIFF_TEST_SELF")
	t.Setenv("SKIFF_TEST_MISSING", "$SKIFF_TEST_UNSET_VARIABLE")
	deep := strings.Repeat("[", conf.MaxDepth) + strings.Repeat("]", conf.MaxDepth)
	for _, tc := range []struct {
		name string
		src  string
		err  error
		msg  string
	}{
		{"env cycle", "a: $SKIFF_TEST_A", conf.ErrVariableCycle, "conf: line 1: a[0]: environment variable $SKIFF_TEST_A refers back to itself"},
		{"env self", "x: 1\na: $SKIFF_TEST_SELF", conf.ErrVariableCycle, "conf: line 2: a: environment variable $SKIFF_TEST_SELF refers back to itself"},
		{"env unknown", "a: $SKIFF_TEST_MISSING", conf.ErrUnknownVariable, "conf: line 1: a: $SKIFF_TEST_UNSET_VARIABLE is neither an earlier key nor an environment variable"},
		{"self reference", "a: [$a]", conf.ErrUnknownVariable, "conf: line 1: a[0]: $a is neither an earlier key nor an environment variable"},
		{"too deep", "D: " + deep + "\nb: [$D]", conf.ErrTooDeep, "conf: line 2: b[0]: $D nests maps and arrays more than 64 deep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := conf.Parse([]byte(tc.src))
			require.ErrorIs(t, err, tc.err)
			require.EqualError(t, err, tc.msg)
		})
	}
}

func TestVariableExpansionBound(t *testing.T) {
	// Each line refers to the previous one eight times: 8^9 copies of
	// "xxxx" would be gigabytes.
	var b strings.Builder
	b.WriteString("v0: xxxx\n")
	for i := 1; i < 10; i++ {
		b.WriteString("v" + string(rune('0'+i)) + ": [")
		for j := range 8 {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("$v" + string(rune('0'+i-1)))
		}
		b.WriteString("]\n")
	}
	_, err := conf.Parse([]byte(b.String()))
	require.ErrorIs(t, err, conf.ErrTooLarge)
}
