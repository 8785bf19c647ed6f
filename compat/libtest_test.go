package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseList(t *testing.T) {
	out := "client::basic_pub_sub: test\nclient::client_timeout: test\nmain: benchmark\n\n"
	require.Equal(t, []string{"client::basic_pub_sub", "client::client_timeout"}, parseList(out))
	require.Empty(t, parseList(""))
}

// Outputs as libtest (Rust 1.95) prints them for one test run with --exact.
const (
	okOutput = `
running 1 test
test client::basic_pub_sub ... ok

test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 60 filtered out; finished in 0.06s
`
	panicOutput = `
running 1 test
test client::multiple_auth_methods ... FAILED

failures:

---- client::multiple_auth_methods stdout ----

thread 'client::multiple_auth_methods' (6244) panicked at /work/compat/nats-server/src/lib.rs:224:17:
nats-server exited (exit status: 1) before listening: config "tests/configs/jwt.conf"; output: skiff serve: config: jwt.conf:2: operator: not supported by Skiff: no JWT
config: jwt.conf:6: resolver: not supported by Skiff: no JWT
note: run with ` + "`RUST_BACKTRACE=1`" + ` environment variable to display a backtrace


failures:
    client::multiple_auth_methods

test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 60 filtered out; finished in 0.05s
`
	oldPanicOutput = `
running 1 test
test kv::get ... FAILED

failures:

---- kv::get stdout ----
thread 'kv::get' panicked at tests/kv_tests.rs:10:5:
assertion ` + "`left == right`" + ` failed
  left: 1
 right: 2

failures:
    kv::get
`
	crashOutput = `
running 1 test
test kv::get ... error: test failed, to rerun pass ` + "`--test kv_tests`" + `

Caused by:
  process didn't exit successfully (signal: 6, SIGABRT: process abort signal)
`
)

func TestParseOutcome(t *testing.T) {
	cases := []struct {
		name, test, out string
		status          Status
		message         string
	}{
		{"ok", "client::basic_pub_sub", okOutput, Passed, ""},
		{"should panic, and did", "header::tests::rejects_cr",
			"running 1 test\ntest header::tests::rejects_cr - should panic ... ok\n\ntest result: ok.", Passed, ""},
		{"panic with thread ID", "client::multiple_auth_methods", panicOutput, Failed,
			`nats-server exited (exit status: 1) before listening: config "tests/configs/jwt.conf"; output: skiff serve: config: jwt.conf:2: operator: not supported by Skiff: no JWT config: jwt.conf:6: resolver: not supported by Skiff: no JWT (at /work/compat/nats-server/src/lib.rs:224:17)`},
		{"panic without thread ID", "kv::get", oldPanicOutput, Failed,
			"assertion `left == right` failed left: 1 right: 2 (at tests/kv_tests.rs:10:5)"},
		{"crash: the last lines", "kv::get", crashOutput, Failed,
			"test kv::get ... error: test failed, to rerun pass `--test kv_tests` Caused by: process didn't exit successfully (signal: 6, SIGABRT: process abort signal)"},
		{"another test's ok is not this one's", "client::other", okOutput, Failed,
			"test client::basic_pub_sub ... ok test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 60 filtered out; finished in 0.06s"},
		{"nothing", "x", "", Failed, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, msg := parseOutcome(c.out, c.test)
			require.Equal(t, c.status, status)
			require.Equal(t, c.message, msg)
		})
	}
}

func TestClip(t *testing.T) {
	require.Equal(t, "short", clip("short"))
	long := strings.Repeat("é", messageLimit) // two bytes each
	got := clip(long)
	require.True(t, strings.HasSuffix(got, " …"))
	require.LessOrEqual(t, len(got), messageLimit+len(" …"))
	require.Equal(t, strings.Repeat("é", messageLimit/2), strings.TrimSuffix(got, " …"))
}
