package conf_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/conf"
)

// natsSample is the kind of file users bring from nats-server.
const natsSample = `port: 4222
authorization {
  users = [
    {user: alice, password: "$2a$11$abc", permissions: {publish: {allow: ["orders.>"], deny: ["orders.secret"]}, subscribe: ["_INBOX.>", "orders.*"]}}
    {user: bob, password: s3cret}
  ]
  timeout: 2
}
max_payload: 1MB
ping_interval: "2m"
tls { cert_file: "./server.pem"; key_file: "./key.pem" }
`

type obj = map[string]any
type arr = []any

func mustParse(t *testing.T, src string) *conf.Map {
	t.Helper()
	m, err := conf.Parse([]byte(src))
	require.NoError(t, err)
	return m
}

func TestParseNatsSample(t *testing.T) {
	m := mustParse(t, natsSample)
	require.Equal(t, []string{"port", "authorization", "max_payload", "ping_interval", "tls"}, m.Keys())
	require.Equal(t, obj{
		"port": int64(4222),
		"authorization": obj{
			"users": arr{
				obj{"user": "alice", "password": "$2a$11$abc", "permissions": obj{
					"publish":   obj{"allow": arr{"orders.>"}, "deny": arr{"orders.secret"}},
					"subscribe": arr{"_INBOX.>", "orders.*"},
				}},
				obj{"user": "bob", "password": "s3cret"},
			},
			"timeout": int64(2),
		},
		"max_payload":   int64(1 << 20),
		"ping_interval": "2m",
		"tls":           obj{"cert_file": "./server.pem", "key_file": "./key.pem"},
	}, m.Interface())

	auth, ok := m.Get("authorization")
	require.True(t, ok)
	require.Equal(t, 2, auth.Line())
	am, err := auth.Map()
	require.NoError(t, err)
	users, ok := am.Get("users")
	require.True(t, ok)
	require.Equal(t, 3, users.Line())
	list, err := users.Array()
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, 5, list[1].Line())
	um, err := list[1].Map()
	require.NoError(t, err)
	pw, _ := um.Get("password")
	require.Equal(t, "authorization.users[1].password", pw.Path())
	require.Equal(t, 5, pw.Line())
}

func TestParseSyntax(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want obj
	}{
		{"colon", "a: 1", obj{"a": int64(1)}},
		{"equals", "a = 1", obj{"a": int64(1)}},
		{"space", "a 1", obj{"a": int64(1)}},
		{"tab", "a\t1", obj{"a": int64(1)}},
		{"no space", "a:1\nb=2", obj{"a": int64(1), "b": int64(2)}},
		{"space before colon", "a :1", obj{"a": int64(1)}},
		{"empty file", "", obj{}},
		{"blank lines", "\n\n  \n", obj{}},
		{"only comments", "# one\n// two\n", obj{}},
		{"comma separated", "a: 1, b: 2, c: 3", obj{"a": int64(1), "b": int64(2), "c": int64(3)}},
		{"semicolon separated", "a: 1; b: 2;", obj{"a": int64(1), "b": int64(2)}},
		{"trailing comma", "a: 1,\n", obj{"a": int64(1)}},
		{"separator then newline", "a: 1;\nb: 2;\n", obj{"a": int64(1), "b": int64(2)}},
		{"crlf", "a: 1\r\nb: x\r\n", obj{"a": int64(1), "b": "x"}},
		{"bom", "\ufeffa: 1", obj{"a": int64(1)}},
		{"hash comment after value", "a: 1 # one\nb: 2", obj{"a": int64(1), "b": int64(2)}},
		{"slash comment after value", "a: x // one\nb: 2", obj{"a": "x", "b": int64(2)}},
		{"comment after quoted value", `a: "x"# c`, obj{"a": "x"}},
		{"comment after separator", "a: # c\n{b: 1}", obj{"a": obj{"b": int64(1)}}},
		{"hash inside word", "a: pa#ss", obj{"a": "pa#ss"}},
		{"slashes inside word", "url: nats://host:4222", obj{"url": "nats://host:4222"}},
		{"hash inside quotes", `a: "x # y"`, obj{"a": "x # y"}},
		{"slashes inside quotes", `a: 'x // y'`, obj{"a": "x // y"}},
		{"quoted keys", `"a b": 1, 'c:d' = 2`, obj{"a b": int64(1), "c:d": int64(2)}},
		{"escaped key", `"a\"b": 1`, obj{`a"b`: int64(1)}},
		{"key characters", "a.b-c_1: 1\n$SYS: 2\nfoo.*: 3\nfoo.>: 4", obj{"a.b-c_1": int64(1), "$SYS": int64(2), "foo.*": int64(3), "foo.>": int64(4)}},
		{"key case kept", "MaxPayload: 1", obj{"MaxPayload": int64(1)}},
		{"duplicate last wins", "a: 1\nb: 2\na: 3", obj{"a": int64(3), "b": int64(2)}},
		{"duplicate ignores case", "Port: 1\nport: 2", obj{"port": int64(2)}},
		{"include with colon is a key", "include: 5", obj{"include": int64(5)}},
		{"include with equals is a key", "include = 5", obj{"include": int64(5)}},
		{"quoted include is a key", `"include" 5`, obj{"include": int64(5)}},
		{"braced file", `{ "port": 4222, "list": [1, 2] }`, obj{"port": int64(4222), "list": arr{int64(1), int64(2)}}},
		{"braced file with comments", "# c\n{\n a: 1\n}\n# c\n", obj{"a": int64(1)}},
		{"empty braced file", "{}", obj{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, mustParse(t, tc.src).Interface())
		})
	}
}

func TestParseScalars(t *testing.T) {
	const noText = "\x00"

	for _, tc := range []struct {
		src  string
		kind conf.Kind
		want any
		text string // "" means src, noText means ""
	}{
		// strings
		{`"a\"b\\c\n\t\r\/\b\f"`, conf.KindString, "a\"b\\c\n\t\r/\b\f", "a\"b\\c\n\t\r/\b\f"},
		{`"\u00e9\x41\U0001F600"`, conf.KindString, "éA😀", "éA😀"},
		{`"\xff"`, conf.KindString, "\xff", "\xff"},
		{`'a\nb'`, conf.KindString, `a\nb`, `a\nb`},
		{`'it"s'`, conf.KindString, `it"s`, `it"s`},
		{"\"two\nlines\"", conf.KindString, "two\nlines", "two\nlines"},
		{`""`, conf.KindString, "", noText},
		{"alice", conf.KindString, "alice", ""},
		{"127.0.0.1", conf.KindString, "127.0.0.1", ""},
		{"0.0.0.0:4222", conf.KindString, "0.0.0.0:4222", ""},
		{"2s", conf.KindString, "2s", ""},
		{"1h30m", conf.KindString, "1h30m", ""},
		{"500ms", conf.KindString, "500ms", ""},
		{`C:\data\js`, conf.KindString, `C:\data\js`, ""},
		{"2020-01-02T03:04:05Z", conf.KindString, "2020-01-02T03:04:05Z", ""},
		{"$2a$11$abc/def.ghi", conf.KindString, "$2a$11$abc/def.ghi", ""},
		{`"$HOME"`, conf.KindString, "$HOME", "$HOME"},
		{`"4222"`, conf.KindString, "4222", "4222"},
		{`"true"`, conf.KindString, "true", "true"},
		{"-", conf.KindString, "-", ""},
		{"1e3", conf.KindString, "1e3", ""},
		{"1_", conf.KindString, "1_", ""},
		{"1__0", conf.KindString, "1__0", ""},
		{"_1", conf.KindString, "_1", ""},
		{"1.", conf.KindString, "1.", ""},
		{".5", conf.KindString, ".5", ""},
		{"1.5k", conf.KindString, "1.5k", ""},
		{"1.5e", conf.KindString, "1.5e", ""},
		{"1b", conf.KindString, "1b", ""},
		{"inf", conf.KindString, "inf", ""},
		{"NaN", conf.KindString, "NaN", ""},
		{"a{b", conf.KindString, "a{b", ""},
		// integers
		{"4222", conf.KindInt, int64(4222), ""},
		{"-1", conf.KindInt, int64(-1), ""},
		{"+7", conf.KindInt, int64(7), ""},
		{"007", conf.KindInt, int64(7), ""},
		{"1_000_000", conf.KindInt, int64(1000000), ""},
		{"9223372036854775807", conf.KindInt, int64(9223372036854775807), ""},
		{"-9223372036854775808", conf.KindInt, int64(-9223372036854775808), ""},
		// floats
		{"1.5", conf.KindFloat, 1.5, ""},
		{"-0.25", conf.KindFloat, -0.25, ""},
		{"1.5e3", conf.KindFloat, 1500.0, ""},
		{"2.5E-1", conf.KindFloat, 0.25, ""},
		{"1_000.000_1", conf.KindFloat, 1000.0001, ""},
		// sizes
		{"1k", conf.KindInt, int64(1000), ""},
		{"1K", conf.KindInt, int64(1000), ""},
		{"1kb", conf.KindInt, int64(1024), ""},
		{"1KB", conf.KindInt, int64(1024), ""},
		{"1ki", conf.KindInt, int64(1024), ""},
		{"1KiB", conf.KindInt, int64(1024), ""},
		{"2m", conf.KindInt, int64(2000000), ""},
		{"1MB", conf.KindInt, int64(1 << 20), ""},
		{"64MiB", conf.KindInt, int64(64 << 20), ""},
		{"1g", conf.KindInt, int64(1e9), ""},
		{"1Gi", conf.KindInt, int64(1 << 30), ""},
		{"3t", conf.KindInt, int64(3e12), ""},
		{"1TB", conf.KindInt, int64(1 << 40), ""},
		{"1p", conf.KindInt, int64(1e15), ""},
		{"1pib", conf.KindInt, int64(1 << 50), ""},
		{"9e", conf.KindInt, int64(9e18), ""},
		{"7EiB", conf.KindInt, int64(7 << 60), ""},
		{"-1k", conf.KindInt, int64(-1000), ""},
		{"1_024k", conf.KindInt, int64(1024000), ""},
		// booleans
		{"true", conf.KindBool, true, ""},
		{"false", conf.KindBool, false, ""},
		{"yes", conf.KindBool, true, ""},
		{"no", conf.KindBool, false, ""},
		{"on", conf.KindBool, true, ""},
		{"off", conf.KindBool, false, ""},
		{"TRUE", conf.KindBool, true, ""},
		{"Off", conf.KindBool, false, ""},
	} {
		t.Run(tc.src, func(t *testing.T) {
			m := mustParse(t, "v: "+tc.src)
			v, ok := m.Get("v")
			require.True(t, ok)
			require.Equal(t, tc.kind, v.Kind())
			require.Equal(t, tc.want, v.Interface())
			text := tc.text
			switch text {
			case "":
				text = tc.src
			case noText:
				text = ""
			}
			require.Equal(t, text, v.Text())
			require.Equal(t, 1, v.Line())
		})
	}
}

func TestParseWordEnds(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want obj
	}{
		{"comma", "a: x,b: y", obj{"a": "x", "b": "y"}},
		{"semicolon", "a: x;b: y", obj{"a": "x", "b": "y"}},
		{"brace", "m {a: x}", obj{"m": obj{"a": "x"}}},
		{"bracket", "l: [x]", obj{"l": arr{"x"}}},
		{"colon kept", "a: x:y", obj{"a": "x:y"}},
		{"equals kept", "a: x=y", obj{"a": "x=y"}},
		{"quote kept", `a: it's`, obj{"a": "it's"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, mustParse(t, tc.src).Interface())
		})
	}
}

func TestParseArraysAndMaps(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want obj
	}{
		{"commas", "a: [1, 2, 3]", obj{"a": arr{int64(1), int64(2), int64(3)}}},
		{"newlines", "a: [\n  1\n  2\n]", obj{"a": arr{int64(1), int64(2)}}},
		{"mixed separators", "a: [1,\n 2\n 3,]", obj{"a": arr{int64(1), int64(2), int64(3)}}},
		{"trailing comma", "a: [1, 2,]", obj{"a": arr{int64(1), int64(2)}}},
		{"empty", "a: []\nb: [ ]\nc: [\n]", obj{"a": arr{}, "b": arr{}, "c": arr{}}},
		{"comments", "a: [ # c\n 1, // c\n # c\n 2 # c\n]", obj{"a": arr{int64(1), int64(2)}}},
		{"mixed kinds", `a: [1, "x", y, 1.5, true, 1k, [], {}]`, obj{"a": arr{int64(1), "x", "y", 1.5, true, int64(1000), arr{}, obj{}}}},
		{"nested", "a: [[1, [2]], [{b: [3]}]]", obj{"a": arr{arr{int64(1), arr{int64(2)}}, arr{obj{"b": arr{int64(3)}}}}}},
		{"array on next line", "a\n[1]", obj{"a": arr{int64(1)}}},
		{"map", "a { b: 1, c { d: 2 } }", obj{"a": obj{"b": int64(1), "c": obj{"d": int64(2)}}}},
		{"map with separator", "a: { b = 1 }\nc = {d: 2}", obj{"a": obj{"b": int64(1)}, "c": obj{"d": int64(2)}}},
		{"map newlines", "a {\n  b: 1\n\n  c: 2\n}", obj{"a": obj{"b": int64(1), "c": int64(2)}}},
		{"map semicolons", "a { b: 1; c: 2; }", obj{"a": obj{"b": int64(1), "c": int64(2)}}},
		{"map trailing comma", "a { b: 1, }", obj{"a": obj{"b": int64(1)}}},
		{"empty map", "a {}\nb: { }", obj{"a": obj{}, "b": obj{}}},
		{"allman brace", "a\n{\n  b: 1\n}", obj{"a": obj{"b": int64(1)}}},
		{"allman after separator", "a =\n  {b: 1}", obj{"a": obj{"b": int64(1)}}},
		{"duplicate in map", "a { b: 1, B: 2 }", obj{"a": obj{"B": int64(2)}}},
		{"closing after value", "a {b: 1}", obj{"a": obj{"b": int64(1)}}},
		{"map then comment", "a {b: 1} # c\nd: 2", obj{"a": obj{"b": int64(1)}, "d": int64(2)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, mustParse(t, tc.src).Interface())
		})
	}
}

func TestParseDepth(t *testing.T) {
	nest := func(n int) string {
		s := "a: "
		for range n {
			s += "["
		}
		for range n {
			s += "]"
		}
		return s
	}
	_, err := conf.Parse([]byte(nest(conf.MaxDepth)))
	require.NoError(t, err)
	_, err = conf.Parse([]byte(nest(conf.MaxDepth + 1)))
	require.ErrorIs(t, err, conf.ErrTooDeep)

	maps := "a: "
	for range conf.MaxDepth + 1 {
		maps += "{b: "
	}
	_, err = conf.Parse([]byte(maps))
	require.ErrorIs(t, err, conf.ErrTooDeep)
}

func TestParseTooLarge(t *testing.T) {
	big := make([]byte, conf.MaxInputSize+1)
	_, err := conf.Parse(big)
	require.ErrorIs(t, err, conf.ErrTooLarge)
}

func TestMapAPI(t *testing.T) {
	m := mustParse(t, "Port: 4222\nhost: h\nnested { a: [1, {b: 2}] }")
	require.Equal(t, 3, m.Len())
	require.Equal(t, []string{"Port", "host", "nested"}, m.Keys())

	v, ok := m.Get("PORT")
	require.True(t, ok)
	require.Equal(t, int64(4222), v.Interface())
	_, ok = m.Get("missing")
	require.False(t, ok)

	var keys []string
	for k := range m.All() {
		keys = append(keys, k)
		if k == "host" {
			break
		}
	}
	require.Equal(t, []string{"Port", "host"}, keys)

	var paths []string
	require.NoError(t, m.Walk(func(v conf.Value) error {
		paths = append(paths, v.Path()+"@"+v.Kind().String())
		return nil
	}))
	require.Equal(t, []string{
		"Port@int", "host@string", "nested@map", "nested.a@array",
		"nested.a[0]@int", "nested.a[1]@map", "nested.a[1].b@int",
	}, paths)

	stop := conf.ErrType
	n := 0
	require.ErrorIs(t, m.Walk(func(conf.Value) error { n++; return stop }), stop)
	require.Equal(t, 1, n)

	var nilMap *conf.Map
	require.Equal(t, 0, nilMap.Len())
	require.Empty(t, nilMap.Keys())
	_, ok = nilMap.Get("x")
	require.False(t, ok)
	require.Equal(t, "", nilMap.String())
}

func TestKindString(t *testing.T) {
	for k, want := range map[conf.Kind]string{
		conf.KindInvalid: "invalid", conf.KindString: "string", conf.KindInt: "int",
		conf.KindFloat: "float", conf.KindBool: "bool", conf.KindArray: "array",
		conf.KindMap: "map", conf.Kind(99): "Kind(99)",
	} {
		t.Run(want, func(t *testing.T) { require.Equal(t, want, k.String()) })
	}
}
