package conf_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/conf"
)

func get(t *testing.T, src string) conf.Value {
	t.Helper()
	v, ok := mustParse(t, "v: "+src).Get("v")
	require.True(t, ok)
	return v
}

func TestValueDuration(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want time.Duration
		err  error
	}{
		{"2", 2 * time.Second, nil},
		{"0", 0, nil},
		{"-3", -3 * time.Second, nil},
		{"1_000", 1000 * time.Second, nil},
		{"1.5", 1500 * time.Millisecond, nil},
		{"2m", 2 * time.Minute, nil}, // also the size 2,000,000
		{`"2m"`, 2 * time.Minute, nil},
		{"10s", 10 * time.Second, nil},
		{"1h30m", 90 * time.Minute, nil},
		{"500ms", 500 * time.Millisecond, nil},
		{`"2"`, 2 * time.Second, nil},
		{`"1.5"`, 1500 * time.Millisecond, nil},
		{"-1.5h", -90 * time.Minute, nil},
		{"1k", 0, conf.ErrType},
		{"soon", 0, conf.ErrType},
		{`""`, 0, conf.ErrType},
		{"true", 0, conf.ErrType},
		{"[1]", 0, conf.ErrType},
		{"{a: 1}", 0, conf.ErrType},
		{"9223372036854775807", 0, conf.ErrRange},
		{"1.0e300", 0, conf.ErrRange},
		{`"99999999999999999999"`, 0, conf.ErrRange},
	} {
		t.Run(tc.src, func(t *testing.T) {
			d, err := get(t, tc.src).Duration()
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, d)
		})
	}
}

func TestValueSize(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want int64
		err  error
	}{
		{"4222", 4222, nil},
		{"1MB", 1 << 20, nil},
		{"1k", 1000, nil},
		{`"64MiB"`, 64 << 20, nil},
		{`"512"`, 512, nil},
		{`"1.5GB"`, 0, conf.ErrType},
		{"1.5", 0, conf.ErrType},
		{"big", 0, conf.ErrType},
		{"true", 0, conf.ErrType},
		{"[]", 0, conf.ErrType},
		{`"8EiB"`, 0, conf.ErrRange},
	} {
		t.Run(tc.src, func(t *testing.T) {
			n, err := get(t, tc.src).Size()
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, n)
		})
	}
}

func TestValueAccessors(t *testing.T) {
	// Each row lists what Str, Int, Float, Bool, Array and Map return; a
	// false in ok means that accessor fails with ErrType.
	for _, tc := range []struct {
		src string
		str string
		i   int64
		f   float64
		b   bool
		n   int
		ok  [6]bool // Str Int Float Bool Array Map
	}{
		{"hello", "hello", 0, 0, false, 0, [6]bool{true, false, false, false, false, false}},
		{`"4222"`, "4222", 0, 0, false, 0, [6]bool{true, false, false, false, false, false}},
		{"4222", "4222", 4222, 4222, false, 0, [6]bool{true, true, true, false, false, false}},
		{"1k", "1k", 1000, 1000, false, 0, [6]bool{true, true, true, false, false, false}},
		{"2.5", "2.5", 0, 2.5, false, 0, [6]bool{true, false, true, false, false, false}},
		{"yes", "yes", 0, 0, true, 0, [6]bool{true, false, false, true, false, false}},
		{"[1, 2]", "", 0, 0, false, 2, [6]bool{false, false, false, false, true, false}},
		{"{a: 1}", "", 0, 0, false, 1, [6]bool{false, false, false, false, false, true}},
	} {
		t.Run(tc.src, func(t *testing.T) {
			v := get(t, tc.src)
			check := func(ok bool, err error) {
				t.Helper()
				if ok {
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, conf.ErrType)
				}
			}
			s, err := v.Str()
			check(tc.ok[0], err)
			require.Equal(t, tc.str, s)
			i, err := v.Int()
			check(tc.ok[1], err)
			require.Equal(t, tc.i, i)
			f, err := v.Float()
			check(tc.ok[2], err)
			require.Equal(t, tc.f, f)
			b, err := v.Bool()
			check(tc.ok[3], err)
			require.Equal(t, tc.b, b)
			_, err = v.Array()
			check(tc.ok[4], err)
			_, err = v.Map()
			check(tc.ok[5], err)
			require.Equal(t, tc.n, v.Len())
		})
	}
}

func TestValueErrors(t *testing.T) {
	m := mustParse(t, "port: 4222\nauthorization {\n  users: [\n    {timeout: soon}\n  ]\n}")
	auth, _ := m.Get("authorization")
	am, err := auth.Map()
	require.NoError(t, err)
	users, _ := am.Get("users")
	list, err := users.Array()
	require.NoError(t, err)
	um, err := list[0].Map()
	require.NoError(t, err)
	timeout, _ := um.Get("timeout")

	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"duration", func() error { _, err := timeout.Duration(); return err }(),
			`conf: line 4: authorization.users[0].timeout: cannot read string "soon" as a duration`},
		{"int", func() error { _, err := timeout.Int(); return err }(),
			`conf: line 4: authorization.users[0].timeout: cannot read string "soon" as an integer`},
		{"map as string", func() error { _, err := auth.Str(); return err }(),
			`conf: line 2: authorization: cannot read map as a string`},
		{"array as map", func() error { _, err := users.Map(); return err }(),
			`conf: line 3: authorization.users: cannot read array as a map`},
		{"zero value", func() error { _, err := conf.Value{}.Size(); return err }(),
			`conf: missing value, want a size`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.ErrorIs(t, tc.err, conf.ErrType)
			require.EqualError(t, tc.err, tc.want)
		})
	}
}

func TestValueZero(t *testing.T) {
	var v conf.Value
	require.Equal(t, conf.KindInvalid, v.Kind())
	require.Nil(t, v.Interface())
	require.Equal(t, "", v.String())
	require.Equal(t, 0, v.Len())
	_, err := v.Duration()
	require.ErrorIs(t, err, conf.ErrType)
	_, err = v.Str()
	require.ErrorIs(t, err, conf.ErrType)
}

func TestValueArrayIsCopy(t *testing.T) {
	v := get(t, "[1, 2]")
	a, err := v.Array()
	require.NoError(t, err)
	a[0] = conf.Value{}
	b, err := v.Array()
	require.NoError(t, err)
	require.Equal(t, conf.KindInt, b[0].Kind())
}
