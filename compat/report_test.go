package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestLoadReasons(t *testing.T) {
	dir := t.TempDir()
	write := func(text string) string {
		path := filepath.Join(dir, "reasons.txt")
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
		return path
	}

	rs, err := loadReasons(write("# why\n\nkv_tests  kv::get   needs   accounts\n"))
	require.NoError(t, err)
	require.Equal(t, Reasons{"kv_tests kv::get": "needs accounts"}, rs)

	_, err = loadReasons(write("kv_tests kv::get\n"))
	require.ErrorIs(t, err, ErrReasons)
	_, err = loadReasons(write("kv_tests kv::get a\nkv_tests kv::get b\n"))
	require.ErrorIs(t, err, ErrReasons)

	rs, err = loadReasons(filepath.Join(dir, "missing.txt"))
	require.NoError(t, err)
	require.Empty(t, rs)
}

func TestAutoReason(t *testing.T) {
	cases := []struct{ name, msg, want string }{
		{"refused keys, sorted, once each",
			`output: skiff serve: config: jetstream.conf:2: jetstream.strict: not supported by Skiff: x config: jetstream.conf:3: jetstream.max_mem_store: not supported by Skiff: y config: other.conf:2: jetstream.strict: not supported by Skiff: x`,
			"waits for JetStream storage quotas and strict mode: Skiff refuses jetstream.max_mem_store, jetstream.strict"},
		{"two features", `config: jwt.conf:6: resolver: not supported by Skiff: x config: a.conf:3: websocket.foo: not supported by Skiff: y`,
			"waits for the URL and cache account resolvers (JWT) and the key websocket.foo: Skiff refuses resolver, websocket.foo"},
		{"resolver block", `config: jwt.conf:6: resolver.ttl: not supported by Skiff: x`,
			"waits for the URL and cache account resolvers (JWT): Skiff refuses resolver.ttl"},
		{"clustering", "output: nats-server (Skiff's compat wrapper): -connect_retries is not implemented by Skiff's clustering (see docs/cluster.md)",
			"waits for clustering: compat's wrapper refuses a cluster flag Skiff does not have"},
		{"replicated streams", `Error { kind: JetStream(Error { code: 503, err_code: ErrorCode(10036), description: Some("not currently supported in clustered mode") }), source: None }`,
			"waits for replicated streams: Skiff refuses num_replicas above 1 (10036)"},
		{"account exports", `config: a.conf:4: accounts.A.exports: not supported by Skiff: x config: a.conf:9: accounts.B.imports: not supported by Skiff: x`,
			"waits for account exports and imports: Skiff refuses accounts.A.exports, accounts.B.imports"},
		{"refused stream fields", `Error { code: 500, err_code: ErrorCode(10052), description: Some("not supported by Skiff: [sources subject_transform]") }`,
			"waits for mirrors and sources and subject transforms: Skiff refuses sources, subject_transform"},
		{"sample_freq", `description: Some("sample_freq is not supported") }`, "waits for ack sampling: Skiff refuses sample_freq"},
		{"anything else", "assertion failed: left == right", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { require.Equal(t, c.want, autoReason(c.msg)) })
	}
}

func TestBuildReport(t *testing.T) {
	res := func(file, name string, ref, skiff Status, msg string) Result {
		return Result{File: file, Name: name, Ref: Outcome{Status: ref}, Skiff: Outcome{Status: skiff, Message: msg}}
	}
	results := []Result{
		res("a", "ok", Passed, Passed, ""),
		res("a", "skiff_bug", Passed, Failed, "boom"),
		res("a", "skiff_hang", Flaky, TimedOut, "killed after 30s"),
		res("a", "refused", Passed, Failed, "config: x.conf:1: cluster: not supported by Skiff: no"),
		res("b", "both", Failed, Failed, ""),
		res("b", "ref_only", TimedOut, Passed, ""),
		{File: "b", Name: "ignored", Ignored: true},
		{File: "b", Name: "skipped", Skipped: "connects to demo.nats.io"},
	}
	reasons := Reasons{"a skiff_bug": "a concrete bug", "gone old": "fixed since"}
	r := buildReport(Options{}, Environment{CrateVersion: "0.49.1"}, results, reasons)

	require.Equal(t, []FileRow{
		{File: "a", Tests: 4, Ref: Counts{Passed: 4}, Skiff: Counts{Passed: 1, Failed: 3}, SkiffOnly: 3},
		{File: "b", Tests: 4, Ignored: 1, Skipped: 1, Ref: Counts{Failed: 2}, Skiff: Counts{Passed: 1, Failed: 1}},
	}, r.Files)
	require.Equal(t, FileRow{File: "total", Tests: 8, Ignored: 1, Skipped: 1,
		Ref: Counts{Passed: 4, Failed: 2}, Skiff: Counts{Passed: 2, Failed: 4}, SkiffOnly: 3}, r.Total)

	names := func(fs []Failure) []string {
		var ns []string
		for _, f := range fs {
			ns = append(ns, f.Name)
		}
		return ns
	}
	require.Equal(t, []string{"skiff_bug", "skiff_hang", "refused"}, names(r.SkiffOnly))
	require.Equal(t, []string{"a concrete bug", "", "waits for clustering: Skiff refuses cluster"},
		[]string{r.SkiffOnly[0].Reason, r.SkiffOnly[1].Reason, r.SkiffOnly[2].Reason})
	require.Equal(t, []string{"both"}, names(r.Both))
	require.Equal(t, []string{"ref_only"}, names(r.RefOnly))
	require.Equal(t, []string{"skiff_hang"}, names(r.Flaky))
	require.Equal(t, []string{"gone old"}, r.StaleReasons)

	md := r.Markdown()
	for _, want := range []string{
		"| `tests/a.rs` | 4 | 0 | 0 | 4 | 0 | 1 | 3 | 3 |",
		"| **total** | 8 | 1 | 1 | 4 | 2 | 2 | 4 | 3 |",
		"## Fail only on Skiff (3)",
		"### a concrete bug (1)\n\n- `a` `skiff_bug`: `boom`",
		"- `a` `skiff_hang` (timed out): `killed after 30s`",
		"## Fail on both servers (1)",
		"## Not run here (1)",
		"- `b` `skipped`: connects to demo.nats.io",
		"## Reasons no longer needed",
	} {
		require.Contains(t, md, want)
	}
	// Unexplained failures come after every explained group.
	require.Greater(t, strings.Index(md, "### not yet classified"), strings.Index(md, "### waits for clustering"))
}

func TestParseCargoArtifacts(t *testing.T) {
	out := strings.Join([]string{
		`{"reason":"compiler-artifact","target":{"name":"serde","kind":["lib"]},"executable":null}`,
		`{"reason":"compiler-artifact","target":{"name":"kv_tests","kind":["test"]},"executable":"/t/kv_tests-1"}`,
		`{"reason":"compiler-artifact","target":{"name":"client_tests","kind":["test"]},"executable":"/t/client_tests-2"}`,
		`{"reason":"compiler-artifact","target":{"name":"async_nats","kind":["lib"]},"executable":"/t/async_nats-3"}`,
		`{"reason":"build-finished","success":true}`,
	}, "\n")
	bins, err := parseCargoArtifacts(strings.NewReader(out))
	require.NoError(t, err)
	require.Equal(t, []testBinary{{"async_nats", "/t/async_nats-3"}, {"client_tests", "/t/client_tests-2"}, {"kv_tests", "/t/kv_tests-1"}}, bins)

	_, err = parseCargoArtifacts(strings.NewReader("not json"))
	require.Error(t, err)
}
