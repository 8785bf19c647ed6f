package conf_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/conf"
)

func TestMapString(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want string
	}{
		{"scalars as written", "a: 1_000\nb: 2m\nc: YES\nd: 1.50\ne: -7", "a: 1_000\nb: 2m\nc: YES\nd: 1.50\ne: -7\n"},
		{"strings quoted", "a: alice\nb: '2m'\nc: \"$X\"\nd: $2a$1", "a: \"alice\"\nb: \"2m\"\nc: \"$X\"\nd: \"$2a$1\"\n"},
		{"escapes", `a: "q\"b\\n\nt\tr\rc\u0001d\u007fé\xff"`, `a: "q\"b\\n\nt\tr\rc\u0001d\u007fé\xff"` + "\n"},
		{"keys", "\"a b\": 1\nfoo.*: 2\n$SYS: 3\n\"include\": 4\n'': 5\n\"-x\": 6\nx-y.z: 7\n\"é\": 8",
			"\"a b\": 1\nfoo.*: 2\n$SYS: 3\n\"include\": 4\n\"\": 5\n\"-x\": 6\nx-y.z: 7\n\"é\": 8\n"},
		{"maps", "m {a: 1, n {b: 2}}\ne {}", "m {\n  a: 1\n  n {\n    b: 2\n  }\n}\ne {}\n"},
		{"short array inline", "a: [1, x, \"y\"]\nb: []", "a: [1, \"x\", \"y\"]\nb: []\n"},
		{"nested arrays one per line", "a: [[1], {b: 2}]", "a: [\n  [1]\n  {\n    b: 2\n  }\n]\n"},
		{"long array one per line", "a: [" + strings.Repeat("aaaaaaaaaa, ", 7) + "]",
			"a: [\n" + strings.Repeat("  \"aaaaaaaaaa\"\n", 7) + "]\n"},
		{"variables expanded", "P: 1\na: $P", "P: 1\na: 1\n"},
		{"duplicates dropped", "a: 1\nb: 2\nA: 3", "b: 2\nA: 3\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mustParse(t, tc.src)
			require.Equal(t, tc.want, m.String())
			requireRoundTrip(t, m)
		})
	}
}

func TestValueString(t *testing.T) {
	v := get(t, "{a: [1, \"x\"]}")
	require.Equal(t, "{\n  a: [1, \"x\"]\n}", v.String())
	require.Equal(t, `"x y"`, get(t, "'x y'").String())
}

func TestRoundTripSamples(t *testing.T) {
	for name, src := range map[string]string{
		"nats sample": natsSample,
		"everything": "a = 1; b 2.5e3, c: on\n\"q k\" = 'v'\nl: [1, [2, {x: y}], {}, []]\n" +
			"m {\n n { o: \"\\u00e9\\x00\" }\n}\nurl: nats://h:4222 // c\nsize: 64MiB\nd: 1h30m\n",
	} {
		t.Run(name, func(t *testing.T) { requireRoundTrip(t, mustParse(t, src)) })
	}
}

// requireRoundTrip checks that m's canonical form parses to the same
// entries, kinds and texts, and is itself canonical.
func requireRoundTrip(t *testing.T, m *conf.Map) {
	t.Helper()
	out := m.String()
	back, err := conf.Parse([]byte(out))
	require.NoError(t, err, "canonical form:\n%s", out)
	require.Equal(t, m.Interface(), back.Interface())
	require.Equal(t, describe(m), describe(back))
	require.Equal(t, out, back.String())
}

// describe lists every value's path, kind and text, which Interface does
// not show (1k and 1000 are both int64(1000) there).
func describe(m *conf.Map) []string {
	var out []string
	_ = m.Walk(func(v conf.Value) error {
		out = append(out, v.Path()+" "+v.Kind().String()+" "+v.Text())
		return nil
	})
	return out
}
