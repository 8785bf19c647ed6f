package conf_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/conf"
)

var fuzzSeeds = []string{
	"",
	"port: 4222",
	"a = 1; b : 2, c 3\n",
	"a: [1, [2, {b: c}], {}, []]\n",
	"m {\n n { o: \"\\u00e9\\x00\\xff\" }\n}",
	"{\"port\": 4222, \"list\": [1, 2,]}",
	"s: 1k\nt: 1KiB\nu: 2m\nv: -3t\nw: 9e\nx: 8EiB\ny: 1_000\nz: 1.5e3",
	"b: [true, FALSE, yes, no, On, off]",
	"P: 1\na: [$P, $P]\nm { P: 2, x: $P }\ny: $HOME\nz: $2a$11$abc",
	"url: nats://h:4222 // c\npw: pa#ss # c\n",
	"a\n{\n b: 1\n}\nc =\n [1]",
	"\"include\": 1\ninclude: 2\nk 'v'\n\"a\\\"b\": c",
	"include \"x.conf\"",
	"a: \"unterminated",
	"a: [1,,2]",
	"a: {b: 1 c: 2}",
	"a: $",
	"\ufeffa: 1\r\nb: 2\r\n",
	"a: \"two\nlines\"\nb: 'x\ny'",
	"D: [[[[[[[[1]]]]]]]]\nE: [$D, $D, $D]\nF: {e: $E}",
}

// FuzzParse checks that Parse never panics, that every error is an *Error
// wrapping a sentinel, that every accessor is safe on every value, and that
// what parses reads back the same from its canonical form.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	for _, s := range compatConfigs {
		f.Add([]byte(s))
	}
	f.Add([]byte(natsSample))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := conf.Parse(data)
		if err != nil {
			var e *conf.Error
			require.True(t, errors.As(err, &e), "%T: %v", err, err)
			require.Positive(t, e.Line)
			require.True(t, isSentinel(err), "%v wraps no sentinel", err)
			return
		}
		require.NoError(t, m.Walk(func(v conf.Value) error {
			for _, read := range []func() error{
				func() error { _, err := v.Str(); return err },
				func() error { _, err := v.Int(); return err },
				func() error { _, err := v.Float(); return err },
				func() error { _, err := v.Bool(); return err },
				func() error { _, err := v.Size(); return err },
				func() error { _, err := v.Duration(); return err },
				func() error { _, err := v.Array(); return err },
				func() error { _, err := v.Map(); return err },
			} {
				if err := read(); err != nil {
					require.True(t, isSentinel(err), "%v wraps no sentinel", err)
				}
			}
			return nil
		}))
		// Variables can expand past what Parse accepts back; the limit is
		// documented, so such outputs are not compared.
		if len(m.String()) > conf.MaxInputSize {
			return
		}
		requireRoundTrip(t, m)
	})
}

func isSentinel(err error) bool {
	for _, s := range []error{conf.ErrSyntax, conf.ErrRange, conf.ErrType, conf.ErrUnknownVariable,
		conf.ErrVariableCycle, conf.ErrInclude, conf.ErrIncludeCycle, conf.ErrTooDeep, conf.ErrTooLarge} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}
