package subject_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/subject"
)

func TestTransform(t *testing.T) {
	tests := []struct {
		src, dst, subj, want string
		ok                   bool
	}{
		{"orders.*.>", "shop.*.>", "orders.eu.new", "shop.eu.new", true},
		{"orders.*.>", "shop.*.>", "orders.eu.new.x", "shop.eu.new.x", true},
		{"orders.*.>", "shop.*.>", "orders.eu", "", false}, // '>' wants a token
		{"orders.*.*", "shop.$2.$1", "orders.eu.new", "shop.new.eu", true},
		{"orders.*.*", "shop.{{wildcard(2)}}.{{ Wildcard( 1 ) }}", "orders.eu.new", "shop.new.eu", true},
		{"orders.*", "x.*.y", "orders.eu", "x.eu.y", true},
		{"orders.*", "x.*.y", "orders.eu.z", "", false},
		{"orders.*", "x.*.y", "shop.eu", "", false},
		{"a", "b", "a", "b", true},
		{"a", "b", "a.b", "", false},
		{">", "p.>", "a.b.c", "p.a.b.c", true},
		{">", ">", "a", "a", true},
		{"a.*", "$x.*", "a.b", "$x.b", true},     // "$x" is a literal, as in nats-server
		{"a.*", "b.$1.$1", "a.c", "b.c.c", true}, // a wildcard may be used twice
		{"a.*.*", "b.$2", "a.c.d", "b.d", true},  // or not at all
		{"a.*", "b.*", "a.*", "b.*", true},       // subject tokens are literal
		{"_R_.abc.>", "in.>", "_R_.abc.x.y", "in.x.y", true},
	}
	for _, tc := range tests {
		tr, err := subject.NewTransform(tc.src, tc.dst)
		require.NoError(t, err, "%s -> %s", tc.src, tc.dst)
		got, ok := tr.Map(tc.subj)
		require.Equal(t, tc.ok, ok, "%s -> %s on %s", tc.src, tc.dst, tc.subj)
		require.Equal(t, tc.want, got, "%s -> %s on %s", tc.src, tc.dst, tc.subj)
		require.Equal(t, subject.Match(tc.src, tc.subj), ok, "matches the source iff mapped")
	}
}

func TestTransformRefused(t *testing.T) {
	for _, tc := range []struct {
		src, dst string
		want     error
	}{
		{"a.*", "b.{{partition(3,1)}}", subject.ErrUnsupported},
		{"a.*", "b.{{split(1,-)}}", subject.ErrUnsupported},
		{"a.*", "b.{{SplitFromLeft(1,2)}}", subject.ErrUnsupported},
		{"a.*", "b.{{random(3)}}", subject.ErrUnsupported},
		{"a.*", "b.{{nope}}", subject.ErrUnsupported},
		{"a.#", "b.#", subject.ErrUnsupported},
		{"a.*", "b.#", subject.ErrUnsupported},
		{"a.*", "b.$2", subject.ErrTransform},
		{"a.*", "b.$0", subject.ErrTransform},
		{"a.*", "b.{{wildcard()}}", subject.ErrTransform},
		{"a.*", "b.{{wildcard(x)}}", subject.ErrTransform},
		{"a.*", "b.*.*", subject.ErrTransform},
		{"a", "b.*", subject.ErrTransform},
		{"a.>", "b", subject.ErrTransform},
		{"a", "b.>", subject.ErrTransform},
		{"a.>", "b.>.c", subject.ErrTransform},
		{"a..b", "c", subject.ErrTransform},
		{"a", "c..d", subject.ErrTransform},
		{"a.>.b", "c", subject.ErrTransform},
	} {
		_, err := subject.NewTransform(tc.src, tc.dst)
		require.ErrorIs(t, err, tc.want, "%s -> %s", tc.src, tc.dst)
	}
}

func TestTransformReverse(t *testing.T) {
	tr, err := subject.NewTransform("svc.*.*.>", "local.$2.x.$1.>")
	require.NoError(t, err)
	require.Equal(t, "local.*.x.*.>", tr.Pattern())
	require.True(t, tr.UsesEveryWildcard())
	back, err := tr.Reverse()
	require.NoError(t, err)
	require.Equal(t, "svc.$2.$1.>", back.Destination())
	fwd, ok := tr.Map("svc.a.b.c.d")
	require.True(t, ok)
	require.Equal(t, "local.b.x.a.c.d", fwd)
	orig, ok := back.Map(fwd)
	require.True(t, ok)
	require.Equal(t, "svc.a.b.c.d", orig)

	for _, dst := range []string{"b.$1.$1", "b.x"} {
		tr, err := subject.NewTransform("a.*", dst)
		require.NoError(t, err)
		_, err = tr.Reverse()
		require.ErrorIs(t, err, subject.ErrTransform, dst)
	}
	tr, err = subject.NewTransform("a.*.*", "b.$1")
	require.NoError(t, err)
	require.False(t, tr.UsesEveryWildcard())
}

func TestTransformAppendAllocs(t *testing.T) {
	tr, err := subject.NewTransform("orders.*.>", "shop.$1.>")
	require.NoError(t, err)
	buf := make([]byte, 0, 64)
	allocs := testing.AllocsPerRun(100, func() {
		buf, _ = tr.Append(buf[:0], "orders.eu.new.x")
	})
	require.Zero(t, allocs)
}

func FuzzTransform(f *testing.F) {
	for _, s := range [][3]string{
		{"orders.*.>", "shop.*.>", "orders.eu.new"},
		{"orders.*.*", "shop.$2.$1", "orders.eu.new"},
		{"a.*", "{{wildcard(1)}}.b", "a.x"},
		{">", "p.>", "a.b"},
		{"a.*.*", "b.$1.$1", "a.c.d"},
		{"a", "$1", "a"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, src, dst, subj string) {
		tr, err := subject.NewTransform(src, dst)
		if err != nil {
			return
		}
		if subject.ValidateSubject(subj) != nil {
			return
		}
		got, ok := tr.Map(subj)
		if ok != subject.Match(src, subj) {
			t.Fatalf("%q -> %q: Map(%q) ok=%v, but Match says %v", src, dst, subj, ok, !ok)
		}
		if !ok {
			return
		}
		if err := subject.ValidateSubject(got); err != nil {
			t.Fatalf("%q -> %q: Map(%q) = %q, not a subject: %v", src, dst, subj, got, err)
		}
		if !subject.Match(tr.Pattern(), got) {
			t.Fatalf("%q -> %q: Map(%q) = %q does not match %q", src, dst, subj, got, tr.Pattern())
		}
		if back, err := tr.Reverse(); err == nil {
			if orig, ok := back.Map(got); !ok || orig != subj {
				t.Fatalf("%q -> %q: reverse of %q is %q (%v), want %q", src, dst, got, orig, ok, subj)
			}
		}
	})
}
