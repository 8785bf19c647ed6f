package conf_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/conf"
)

func TestParseFSInclude(t *testing.T) {
	fsys := fstest.MapFS{
		"main.conf":          {Data: []byte("port: 4222\ninclude \"auth/users.conf\"\nmax_payload: 1MB\n")},
		"auth/users.conf":    {Data: []byte("# users\nauthorization {\n  include 'perms.conf'\n  timeout: 2\n}\n")},
		"auth/perms.conf":    {Data: []byte("users: [{user: alice}]\n")},
		"override.conf":      {Data: []byte("port: 1\ninclude base.conf\nport: 3\n")},
		"base.conf":          {Data: []byte("port: 2\nhost: h\n")},
		"braced.conf":        {Data: []byte("{\"a\": 1}")},
		"uses_braced.conf":   {Data: []byte("m { include braced.conf }")},
		"vars.conf":          {Data: []byte("P: 7\ninclude vars_inner.conf\nb: $Q\n")},
		"vars_inner.conf":    {Data: []byte("a: $P\nQ: 8\n")},
		"semicolon.conf":     {Data: []byte("include base.conf; x: 1")},
		"include_key.conf":   {Data: []byte("include: base.conf\n")},
		"include_upper.conf": {Data: []byte("INCLUDE base.conf\n")},
	}
	for _, tc := range []struct {
		name string
		file string
		want obj
	}{
		{"nested and relative", "main.conf", obj{
			"port":          int64(4222),
			"authorization": obj{"users": arr{obj{"user": "alice"}}, "timeout": int64(2)},
			"max_payload":   int64(1 << 20),
		}},
		{"later entries override", "override.conf", obj{"port": int64(3), "host": "h"}},
		{"braced included file", "uses_braced.conf", obj{"m": obj{"a": int64(1)}}},
		{"variables cross includes", "vars.conf", obj{"P": int64(7), "a": int64(7), "Q": int64(8), "b": int64(8)}},
		{"separator after include", "semicolon.conf", obj{"port": int64(2), "host": "h", "x": int64(1)}},
		{"include as a key", "include_key.conf", obj{"include": "base.conf"}},
		{"keyword ignores case", "include_upper.conf", obj{"port": int64(2), "host": "h"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := conf.ParseFS(fsys, tc.file)
			require.NoError(t, err)
			require.Equal(t, tc.want, m.Interface())
		})
	}

	m, err := conf.ParseFS(fsys, "main.conf")
	require.NoError(t, err)
	auth, _ := m.Get("authorization")
	require.Equal(t, "auth/users.conf", auth.File())
	require.Equal(t, 2, auth.Line())
	am, _ := auth.Map()
	users, _ := am.Get("users")
	require.Equal(t, "auth/perms.conf", users.File())
	require.Equal(t, 1, users.Line())
	require.Equal(t, "authorization.users", users.Path())
	mp, _ := m.Get("max_payload")
	require.Equal(t, "main.conf", mp.File())
	require.Equal(t, 3, mp.Line())
	require.Equal(t, []string{"port", "authorization", "max_payload"}, m.Keys())
}

func TestParseFSIncludeErrors(t *testing.T) {
	deep := fstest.MapFS{}
	for i := range conf.MaxIncludeDepth + 2 {
		deep[level(i)] = &fstest.MapFile{Data: []byte("include " + level(i+1) + "\n")}
	}
	deep[level(conf.MaxIncludeDepth+2)] = &fstest.MapFile{Data: []byte("a: 1")}
	fsys := fstest.MapFS{
		"self.conf":    {Data: []byte("a: 1\ninclude self.conf\n")},
		"a.conf":       {Data: []byte("include b.conf")},
		"b.conf":       {Data: []byte("x: 1\n\ninclude \"a.conf\"")},
		"missing.conf": {Data: []byte("a: 1\ninclude nope.conf")},
		"escape.conf":  {Data: []byte("include ../outside.conf")},
		"bad.conf":     {Data: []byte("include syntax.conf")},
		"syntax.conf":  {Data: []byte("a: 1\nb: [\n")},
	}
	for _, tc := range []struct {
		name string
		fsys fs.FS
		file string
		err  error
		msg  string
	}{
		{"self", fsys, "self.conf", conf.ErrIncludeCycle, `conf: self.conf: line 2: include "self.conf": self.conf is already being read`},
		{"two files", fsys, "a.conf", conf.ErrIncludeCycle, `conf: b.conf: line 3: include "a.conf": a.conf is already being read`},
		{"missing", fsys, "missing.conf", fs.ErrNotExist, `conf: missing.conf: line 2: include "nope.conf": open nope.conf: file does not exist`},
		{"outside fs", fsys, "escape.conf", conf.ErrInclude, `conf: escape.conf: line 1: include "../outside.conf": open ../outside.conf: file does not exist`},
		{"error inside include", fsys, "bad.conf", conf.ErrSyntax, `conf: syntax.conf: line 2: the '[' on this line is never closed`},
		{"too deep", deep, level(0), conf.ErrTooDeep, `conf: 10.conf: line 1: include "11.conf": includes nest more than 10 deep`},
		{"missing root", fsys, "none.conf", fs.ErrNotExist, `conf: none.conf: open none.conf: file does not exist`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := conf.ParseFS(tc.fsys, tc.file)
			require.ErrorIs(t, err, tc.err)
			require.EqualError(t, err, tc.msg)
		})
	}
	_, err := conf.ParseFS(fsys, "missing.conf")
	require.ErrorIs(t, err, conf.ErrInclude)

	// Exactly MaxIncludeDepth levels of include are fine.
	deep[level(conf.MaxIncludeDepth)] = &fstest.MapFile{Data: []byte("a: 1")}
	m, err := conf.ParseFS(deep, level(0))
	require.NoError(t, err)
	require.Equal(t, obj{"a": int64(1)}, m.Interface())
}

func level(i int) string {
	return strings.TrimLeft(string(rune('0'+i/10))+string(rune('0'+i%10)), "0") + ".conf"
}

func TestParseFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
		return p
	}
	abs := write("abs/shared.conf", "shared: true\n")
	main := write("etc/skiff.conf", "port: 4222\ninclude \"tls/tls.conf\"\ninclude '"+abs+"'\ninclude ../etc/tls/tls.conf\n")
	write("etc/tls/tls.conf", "tls { cert_file: ./server.pem }\n")

	m, err := conf.ParseFile(main)
	require.NoError(t, err)
	require.Equal(t, obj{
		"port":   int64(4222),
		"tls":    obj{"cert_file": "./server.pem"},
		"shared": true,
	}, m.Interface())
	tls, _ := m.Get("tls")
	require.Equal(t, filepath.Join(dir, "etc/tls/tls.conf"), tls.File())

	cycle := write("cycle/a.conf", "include ./b.conf\n")
	write("cycle/b.conf", "include ../cycle/a.conf\n")
	_, err = conf.ParseFile(cycle)
	require.ErrorIs(t, err, conf.ErrIncludeCycle)

	_, err = conf.ParseFile(filepath.Join(dir, "nope.conf"))
	require.ErrorIs(t, err, fs.ErrNotExist)
	var e *conf.Error
	require.True(t, errors.As(err, &e))
	require.Equal(t, 0, e.Line)

	big := write("big.conf", "a: 1\n"+strings.Repeat("#", conf.MaxInputSize))
	_, err = conf.ParseFile(big)
	require.ErrorIs(t, err, conf.ErrTooLarge)
	half := strings.Repeat("#", conf.MaxInputSize/2+1)
	write("half.conf", half)
	twice := write("twice.conf", "include half.conf\ninclude half.conf\n"+half)
	_, err = conf.ParseFile(twice)
	require.ErrorIs(t, err, conf.ErrTooLarge, "the size limit counts included files")
}
