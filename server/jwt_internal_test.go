package server

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/subject"
)

func TestExpandTemplate(t *testing.T) {
	uc := jwt.NewUserClaims("UAXXX")
	uc.Name, uc.IssuerAccount = "bob", "ACCOUNT"
	uc.Tags = jwt.TagList{"team:red", "team:blue", "site:x"}
	ac := jwt.NewAccountClaims("ACCOUNT")
	ac.Name, ac.Tags = "Sales", jwt.TagList{"region:eu"}

	for _, tc := range []struct {
		name                string
		pubAllow, pubDeny   []string
		wantAllow, wantDeny []string
		wantErr             string
	}{
		{name: "no template", pubAllow: []string{"a.>"}, wantAllow: []string{"a.>"}},
		{name: "user and account", pubAllow: []string{"u.{{name()}}.{{subject()}}", "a.{{account-name()}}.{{account-subject()}}"},
			wantAllow: []string{"u.bob.UAXXX", "a.Sales.ACCOUNT"}},
		{name: "case and spaces", pubAllow: []string{"u.{{ Name() }}"}, wantAllow: []string{"u.bob"}},
		{name: "tags expand to every value", pubAllow: []string{"t.{{tag(team)}}.{{tag(site)}}"}, wantAllow: []string{"t.red.x", "t.blue.x"}},
		{name: "account tag", pubAllow: []string{"r.{{account-tag(region)}}"}, wantAllow: []string{"r.eu"}},
		{name: "missing tag in allow: dropped, and nothing left denies all",
			pubAllow: []string{"t.{{tag(nope)}}"}, wantAllow: nil, wantDeny: []string{">"}},
		{name: "missing tag in allow, another left", pubAllow: []string{"t.{{tag(nope)}}", "ok"}, wantAllow: []string{"ok"}},
		{name: "missing tag in deny is an error", pubDeny: []string{"t.{{tag(nope)}}"}, wantErr: "tag \"nope\" is not defined"},
		{name: "unknown operation", pubAllow: []string{"{{nope()}}"}, wantErr: "is not defined"},
		{name: "invalid result in deny", pubDeny: []string{"a..{{name()}}"}, wantErr: "generated invalid subject"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := jwt.UserPermissionLimits{}
			tmpl.Pub.Allow, tmpl.Pub.Deny = tc.pubAllow, tc.pubDeny
			got, err := expandTemplate(tmpl, uc, ac)
			if tc.wantErr != "" {
				require.ErrorIs(t, err, errTemplate)
				require.Contains(t, err.Error(), tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantAllow, []string(got.Pub.Allow))
			require.Equal(t, tc.wantDeny, []string(got.Pub.Deny))
			require.Equal(t, tc.pubAllow, []string(tmpl.Pub.Allow), "the scope's template is not changed")
		})
	}
}

func TestExpandTemplateLimit(t *testing.T) {
	uc := jwt.NewUserClaims("UAXXX")
	for i := range 100 {
		uc.Tags = append(uc.Tags, "k:v"+strings.Repeat("x", i%7)+string(rune('a'+i%26)))
	}
	tmpl := jwt.UserPermissionLimits{}
	tmpl.Pub.Allow = jwt.StringList{"{{tag(k)}}.{{tag(k)}}"}
	_, err := expandTemplate(tmpl, uc, jwt.NewAccountClaims("A"))
	require.ErrorIs(t, err, errTemplate)
	require.Contains(t, err.Error(), "exceeds limit")
}

// FuzzExpandTemplate: any template either fails or expands to valid
// patterns only, and never grants a deny away. (A list without template
// operations is passed through as it is; checkJWT validates it.)
func FuzzExpandTemplate(f *testing.F) {
	for _, s := range []string{"a.{{name()}}", "{{tag(x)}}.>", "{{account-tag(y)}}", "{{", "}}{{", "a.{{tag(}}", "x"} {
		f.Add(s, "x:1", "bob")
	}
	f.Fuzz(func(t *testing.T, pattern, tag, name string) {
		uc := jwt.NewUserClaims("UAXXX")
		uc.Name, uc.Tags = name, jwt.TagList{tag}
		ac := jwt.NewAccountClaims("A")
		ac.Tags = jwt.TagList{tag}
		tmpl := jwt.UserPermissionLimits{}
		tmpl.Sub.Allow, tmpl.Pub.Deny = jwt.StringList{pattern}, jwt.StringList{pattern}
		got, err := expandTemplate(tmpl, uc, ac)
		if err != nil || !templateOp.MatchString(pattern) {
			return
		}
		for _, l := range [][]string{got.Sub.Allow, got.Sub.Deny, got.Pub.Allow, got.Pub.Deny} {
			for _, p := range l {
				require.NoError(t, subject.ValidatePattern(p), "%q from %q", p, pattern)
			}
		}
		require.NotEmpty(t, got.Pub.Deny, "a deny of %q vanished", pattern)
	})
}

func TestConnectTimes(t *testing.T) {
	utc := time.UTC
	at := func(h, m int) time.Time { return time.Date(2026, 3, 1, h, m, 0, 0, utc) }
	r := func(s, e string) jwt.TimeRange { return jwt.TimeRange{Start: s, End: e} }
	for _, tc := range []struct {
		name   string
		ranges []jwt.TimeRange
		now    time.Time
		ok     bool
		left   time.Duration
	}{
		{"no ranges", nil, at(3, 0), true, 0},
		{"inside", []jwt.TimeRange{r("09:00:00", "17:00:00")}, at(12, 0), true, 5 * time.Hour},
		{"outside", []jwt.TimeRange{r("09:00:00", "17:00:00")}, at(18, 0), false, 0},
		{"across midnight, after it", []jwt.TimeRange{r("22:00:00", "06:00:00")}, at(5, 0), true, time.Hour},
		{"across midnight, before it", []jwt.TimeRange{r("22:00:00", "06:00:00")}, at(23, 30), true, 6*time.Hour + 30*time.Minute},
		{"across midnight, outside", []jwt.TimeRange{r("22:00:00", "06:00:00")}, at(12, 0), false, 0},
		{"the latest end wins", []jwt.TimeRange{r("09:00:00", "13:00:00"), r("10:00:00", "15:00:00")}, at(12, 0), true, 3 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, left := connectTimesAt(tc.ranges, "UTC", tc.now)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.left, left)
		})
	}
	ok, _ := connectTimesAt([]jwt.TimeRange{r("00:00:00", "23:59:59")}, "Nowhere/Nothing", at(12, 0))
	require.False(t, ok, "an unknown location admits nobody")
}

func TestExpiresIn(t *testing.T) {
	now := time.Unix(1000, 0)
	require.Equal(t, time.Duration(0), expiresIn(0, 0, now), "never")
	require.Equal(t, time.Minute, expiresIn(0, time.Minute, now), "connect times only")
	require.Equal(t, 10*time.Second, expiresIn(1010, time.Minute, now), "the JWT first")
	require.Equal(t, time.Second, expiresIn(1010, time.Second, now), "the connect times first")
	require.Equal(t, time.Nanosecond, expiresIn(1000, 0, now), "expiring now still ends")
}

func TestJWTLimit(t *testing.T) {
	for in, want := range map[int64]int32{-1: noLimit, 0: 0, -5: 0, 10: 10, 1 << 40: 1<<31 - 1} {
		require.Equal(t, want, jwtLimit(in), "%d", in)
	}
}

func TestIsRevoked(t *testing.T) {
	rl := jwt.RevocationList{"U1": 100}
	require.True(t, isRevoked(rl, "U1", 100))
	require.True(t, isRevoked(rl, "U1", 99))
	require.False(t, isRevoked(rl, "U1", 101))
	require.False(t, isRevoked(rl, "U2", 1))
	rl[jwt.All] = 50
	require.True(t, isRevoked(rl, "U2", 50))
	require.False(t, isRevoked(rl, "U2", 51))
}

func TestAssertVersion(t *testing.T) {
	for v, ok := range map[string]bool{"": true, "2.0.0": true, "2.11.0": true, "2.10.99": true, "1.99.99": true,
		"2.11.1": false, "2.12.0": false, "3.0.0": false, "x": false} {
		err := assertVersion(v)
		require.Equal(t, ok, err == nil, "%q: %v", v, err)
	}
}
