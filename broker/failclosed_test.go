package broker

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/nats-io/jwt/v2"
	"github.com/stretchr/testify/require"
)

// A reference key and what Skiff must do with it. base is a configuration
// without the key, with the same configuration plus the key (on its own
// line). An applied key must change the Config; a refused one must fail
// with ErrUnsupported naming refusedAs (the key, or the block that holds
// it) and its line. No key may load without effect: that is a setting
// silently ignored.
type refKey struct {
	path      string // the key, as a path
	base      string
	with      string
	refusedAs string // "" if Skiff applies the key
}

// testNkey is a user's public nkey.
const testNkey = "UDXU4RCSJNZOIQHZNWXHXORDPRTGNJAHAHFRGZNEEJCPQTT2M7NLCNF4"

// Configurations the nested rows build on.
const (
	tlsBase   = "tls {\n  cert_file: $SKIFF_TEST_CERT\n  key_file: $SKIFF_TEST_KEY\n"
	usersBase = "authorization {\n  users: [\n    {user: a, password: p\n"
	permBase  = usersBase + "     permissions: {\n"
)

func top(key, val string) refKey { return refKey{path: key, with: key + ": " + val} }

func topRefused(key, val string) refKey {
	return refKey{path: key, with: key + ": " + val, refusedAs: key}
}

// in builds a row for key inside a block: base is opening (the block's
// start and any lines it needs), closed by closing.
func in(opening, closing, path, line string, refusedAs string) refKey {
	return refKey{path: path, base: opening + closing, with: opening + line + "\n" + closing, refusedAs: refusedAs}
}

// referenceKeys lists every key of nats-server's configuration reference
// (v2.15's opts.go: the top level, authorization, users, permissions, tls,
// jetstream, and the cluster and websocket blocks), aliases included.
func referenceKeys() []refKey {
	var rows []refKey
	// Top level, applied.
	for _, kv := range [][2]string{
		{"listen", `"127.0.0.2:4333"`}, {"port", "4333"}, {"server_name", "n1"}, {"name", "n1"},
		{"server_tags", `["az:1", "SSD"]`},
		{"host", "127.0.0.2"}, {"net", "127.0.0.2"}, {"addr", "127.0.0.2"},
		{"http", `"127.0.0.1:8333"`}, {"monitor", `"127.0.0.1:8333"`}, {"http_port", "8333"},
		{"monitor_port", "8333"}, {"http_host", "127.0.0.2"},
		{"max_payload", "2MB"}, {"max_control_line", "8KB"}, {"max_pending", "128MB"},
		{"max_connections", "100"}, {"max_conn", "100"}, {"max_subscriptions", "100"}, {"max_subs", "100"},
		{"write_deadline", `"3s"`}, {"ping_interval", `"30s"`}, {"ping_max", "5"}, {"max_pings_out", "5"},
		{"shutdown_timeout", `"3s"`}, {"authorization", "{ token: t }"}, {"jetstream", "disabled"},
		{"websocket", "{ port: 8080, no_tls: true }"},
		{"store_dir", "/tmp/skiff-x"}, {"storedir", "/tmp/skiff-x"},
		{"debug", "true"}, {"trace", "true"}, {"logtime", "false"}, {"logtime_utc", "true"},
		{"logfile", "/tmp/skiff.log"}, {"log_file", "/tmp/skiff.log"},
		{"pidfile", "/tmp/skiff.pid"}, {"pid_file", "/tmp/skiff.pid"}, {"prof_port", "6060"},
		{"lame_duck_duration", `"30s"`}, {"lame_duck_grace_period", `"5s"`},
		{"accounts", "{ A: { users: [ {user: a, password: b} ] } }"}, {"no_auth_user", "a"},
	} {
		rows = append(rows, top(kv[0], kv[1]))
	}
	rows = append(rows,
		refKey{path: "tls", with: tlsBase + "}"},
		refKey{path: "allow_non_tls", base: tlsBase + "}", with: tlsBase + "}\nallow_non_tls: true"},
	)
	// Operator mode, applied: the committed nsc set's operator (a file,
	// or the JWT inline) and accounts.
	set := committedJWTSet()
	for _, kv := range [][2]string{
		{"operator", `"` + set.operatorFile + `"`}, {"operators", `["` + set.operatorFile + `"]`},
		{"roots", `["` + set.operatorJWT + `"]`}, {"root", `"` + set.operatorJWT + `"`},
		{"root_operators", `["` + set.operatorFile + `"]`}, {"root_operator", `"` + set.operatorFile + `"`},
		{"resolver", "MEMORY"}, {"account_resolver", "MEM"}, {"accounts_resolver", "{ type: memory }"},
		{"resolver_preload", "{ " + set.accountPub + `: "` + set.accountJWT + `" }`},
		{"resolver_pinned_accounts", "[" + set.accountPub + "]"},
		{"trusted", "[" + set.operatorPub + "]"}, {"trusted_keys", set.operatorPub},
	} {
		rows = append(rows, top(kv[0], kv[1]))
	}
	for _, k := range []string{"system_account", "system"} {
		rows = append(rows, in("operator: \""+set.operatorFile+"\"\n", "", k, k+": "+set.accountPub, ""))
	}
	// No system account (TestSystemAccountKeys covers system_account
	// without operators).
	for _, k := range []string{"no_system_account", "no_system", "no_sys_acc"} {
		rows = append(rows, top(k, "true"))
	}
	// Top level, refused.
	for _, kv := range [][2]string{
		{"resolver_tls", "{ verify: true }"}, {"default_sentinel", "jwt"},
		{"gateway", "{ name: g }"}, {"leaf", "{ port: 7422 }"},
		{"leafnodes", "{ port: 7422 }"}, {"client_advertise", `"h:4222"`}, {"connect_error_reports", "5"},
		{"reconnect_error_reports", "5"}, {"default_js_domain", "{ A: d }"},
		{"trace_verbose", "true"}, {"trace_headers", "true"}, {"logfile_size_limit", "1MB"},
		{"log_size_limit", "1MB"}, {"logfile_max_num", "3"}, {"log_max_num", "3"}, {"syslog", "true"},
		{"remote_syslog", `"udp://h:514"`}, {"max_traced_msg_len", "10"}, {"ocsp", "{ mode: always }"},
		{"ocsp_cache", "true"}, {"https", `"127.0.0.1:8443"`}, {"https_port", "8443"},
		{"http_base_path", `"/nats"`}, {"mappings", "{ a: b }"}, {"maps", "{ a: b }"},
		{"disable_sublist_cache", "true"}, {"no_sublist_cache", "true"},
		{"mqtt", "{ port: 1883 }"}, {"ports_file_dir", `"/tmp"`},
		{"prof_block_rate", "1"}, {"proxy_protocol", "true"}, {"proxies", "{ trusted: [] }"},
		{"max_sub_tokens", "10"}, {"max_subscription_tokens", "10"}, {"write_timeout", "close"},
		{"no_header_support", "true"}, {"server_metadata", "{ a: b }"}, {"feature_flags", "{ a: true }"},
		{"no_fast_producer_stall", "true"}, {"max_closed_clients", "100"},
	} {
		rows = append(rows, topRefused(kv[0], kv[1]))
	}

	// authorization
	for _, kv := range [][2]string{
		{"user", "u"}, {"username", "u"}, {"pass", "p"}, {"password", "p"}, {"token", "t"},
		{"timeout", `"5s"`}, {"users", "[ {user: a, password: b} ]"},
	} {
		rows = append(rows, in("authorization {\n", "}", "authorization."+kv[0], kv[0]+": "+kv[1], ""))
	}
	for _, k := range []string{"default_permission", "default_permissions", "permissions"} {
		rows = append(rows, in("authorization {\n  users: [ {user: a, password: p} ]\n", "}",
			"authorization."+k, k+": { publish: x }", ""))
	}
	for _, kv := range [][2]string{
		{"auth_callout", "{ issuer: X }"}, {"auth_hook", "{ issuer: X }"}, {"proxy_required", "true"},
	} {
		rows = append(rows, in("authorization {\n", "}", "authorization."+kv[0], kv[0]+": "+kv[1], "authorization."+kv[0]))
	}
	// authorization.users[]
	for _, kv := range [][2]string{
		{"user", "b"}, {"username", "b"}, {"pass", "q"}, {"password", "q"},
		{"permission", "{ publish: x }"}, {"permissions", "{ publish: x }"}, {"authorization", "{ publish: x }"},
	} {
		rows = append(rows, in(usersBase, "    }\n  ]\n}", "authorization.users[0]."+kv[0], "     "+kv[0]+": "+kv[1], ""))
	}
	for _, kv := range [][2]string{
		{"allowed_connection_types", `["STANDARD"]`}, {"connection_types", `["STANDARD"]`},
		{"clients", `["STANDARD"]`}, {"proxy_required", "true"},
	} {
		p := "authorization.users[0]." + kv[0]
		rows = append(rows, in(usersBase, "    }\n  ]\n}", p, "     "+kv[0]+": "+kv[1], p))
	}
	rows = append(rows, refKey{path: "authorization.users[1].nkey", base: usersBase + "    }\n  ]\n}",
		with: usersBase + "    }\n    {\n     nkey: " + testNkey + "\n    }\n  ]\n}"})
	// permissions
	for _, k := range []string{"pub", "publish", "import", "sub", "subscribe", "export"} {
		rows = append(rows, in(permBase, "     }\n    }\n  ]\n}", "authorization.users[0].permissions."+k, "       "+k+": x", ""))
	}
	for _, k := range []string{"publish_allow_responses", "allow_responses"} {
		p := "authorization.users[0].permissions." + k
		rows = append(rows, in(permBase, "     }\n    }\n  ]\n}", p, "       "+k+": true", p))
	}
	for _, k := range []string{"allow", "deny"} {
		rows = append(rows, in(permBase+"       publish: {\n", "       }\n     }\n    }\n  ]\n}",
			"authorization.users[0].permissions.publish."+k, "         "+k+": [x]", ""))
	}

	// accounts: users, their default permissions and limits are applied;
	// what later phases bring is refused by name.
	rows = append(rows, refKey{path: "accounts[0]", with: "accounts: [A, B]"})
	const accBase, accEnd = "accounts {\n  A {\n", "  }\n}"
	rows = append(rows,
		in(accBase, accEnd, "accounts.A.users", "    users: [ {user: a, password: b} ]", ""),
		in(accBase+"    users: [ {user: a, password: p} ]\n", accEnd, "accounts.A.default_permissions",
			"    default_permissions: { publish: x }", ""),
		in(accBase, accEnd, "accounts.A.limits", "    limits: { max_connections: 5 }", ""),
		in(accBase, accEnd, "accounts.A.jetstream", "    jetstream: enabled", ""),
		in(accBase+"    users: [\n      {user: a, password: p}\n", "    ]\n"+accEnd, "accounts.A.users[1].nkey",
			"      {nkey: "+testNkey+"}", ""),
	)
	for _, kv := range [][2]string{
		{"nkey", "ABQA6QHS32OGY6I53KK5PWU3FWUYBTJYLRLCVPNP2JDKFYNA3V2XPAKA"}, {"mappings", "{ a: b }"},
		{"maps", "{ a: b }"}, {"msg_trace", "{ dest: t }"}, {"trace_dest", "t"},
	} {
		p := "accounts.A." + kv[0]
		rows = append(rows, in(accBase, accEnd, p, "    "+kv[0]+": "+kv[1], p))
	}
	rows = append(rows,
		in(accBase, accEnd, "accounts.A.exports", "    exports: [ {stream: x} ]", ""),
		in(accBase, accEnd, "accounts.A.imports", "    imports: [ {stream: {account: B, subject: x}} ]", ""),
	)
	// exports[]: a service export's keys on a base that has the service;
	// stream and service each on a base without the export.
	const expNone, expEnd = accBase + "    exports: [\n", "    ]\n" + accEnd
	const expBase, expClose = expNone + "      {\n        service: \"svc.*\"\n", "      }\n" + expEnd
	for _, k := range []string{"stream", "service"} {
		rows = append(rows, in(expNone, expEnd, "accounts.A.exports[0]."+k, "      { "+k+": x }", ""))
	}
	for _, kv := range [][2]string{
		{"response", "stream"}, {"response_type", "chunked"}, {"threshold", `"5s"`}, {"response_threshold", `"5s"`},
		{"response_max_time", `"5s"`}, {"response_time", `"5s"`}, {"accounts", "[B]"}, {"account_token_position", "2"},
	} {
		rows = append(rows, in(expBase, expClose, "accounts.A.exports[0]."+kv[0], "        "+kv[0]+": "+kv[1], ""))
	}
	for _, kv := range [][2]string{{"latency", `"lat.x"`}, {"allow_trace", "true"}} {
		p := "accounts.A.exports[0]." + kv[0]
		rows = append(rows, in(expBase, expClose, p, "        "+kv[0]+": "+kv[1], p))
	}
	// imports[]: a stream import's keys on a base that has the stream (its
	// account and subject are in every base); service and share on a base
	// with the service.
	const impNone, impEnd = accBase + "    imports: [\n", "    ]\n" + accEnd
	const impStream, impClose = impNone + "      {\n        stream: {account: B, subject: \"x.>\"}\n", "      }\n" + impEnd
	const impService = impNone + "      {\n        service: {account: B, subject: \"x\"}\n"
	rows = append(rows,
		in(impNone, impEnd, "accounts.A.imports[0].stream", "      { stream: {account: B, subject: x} }", ""),
		in(impNone, impEnd, "accounts.A.imports[0].service", "      { service: {account: B, subject: x} }", ""),
		in(impStream, impClose, "accounts.A.imports[0].prefix", "        prefix: p", ""),
		in(impStream, impClose, "accounts.A.imports[0].to", `        to: "y.>"`, ""),
		in(impService, impClose, "accounts.A.imports[0].share", "        share: true", ""),
		in(impStream, impClose, "accounts.A.imports[0].allow_trace", "        allow_trace: true", "accounts.A.imports[0].allow_trace"),
	)
	const limBase, limEnd = accBase + "    limits {\n", "    }\n" + accEnd
	for _, k := range []string{"max_connections", "max_conn", "max_subscriptions", "max_subs", "max_payload", "max_pay"} {
		rows = append(rows, in(limBase, limEnd, "accounts.A.limits."+k, "      "+k+": 5", ""))
	}
	for _, k := range []string{"max_leafnodes", "max_leafs"} {
		p := "accounts.A.limits." + k
		rows = append(rows, in(limBase, limEnd, p, "      "+k+": 5", p))
	}
	// An account's jetstream block: every limit is applied; the
	// clustered one is refused.
	const jsBase, jsEnd = accBase + "    jetstream {\n", "    }\n" + accEnd
	for _, kv := range [][2]string{
		{"max_memory", "1MB"}, {"max_mem", "1MB"}, {"mem", "1MB"}, {"memory", "1MB"},
		{"max_store", "1GB"}, {"max_file", "1GB"}, {"max_disk", "1GB"}, {"store", "1GB"}, {"disk", "1GB"},
		{"max_streams", "5"}, {"streams", "5"}, {"max_consumers", "5"}, {"consumers", "5"},
		{"max_bytes_required", "true"}, {"max_stream_bytes", "true"}, {"max_bytes", "true"},
		{"mem_max_stream_bytes", "1KB"}, {"memory_max_stream_bytes", "1KB"},
		{"disk_max_stream_bytes", "1KB"}, {"store_max_stream_bytes", "1KB"}, {"max_ack_pending", "5"},
	} {
		rows = append(rows, in(jsBase, jsEnd, "accounts.A.jetstream."+kv[0], "      "+kv[0]+": "+kv[1], ""))
	}
	rows = append(rows, in(jsBase, jsEnd, "accounts.A.jetstream.cluster_traffic", "      cluster_traffic: owner",
		"accounts.A.jetstream.cluster_traffic"))

	// tls
	for _, kv := range [][2]string{
		{"ca_file", "$SKIFF_TEST_CA"}, {"verify", "true"}, {"allow_non_tls", "true"}, {"timeout", `"5s"`},
		{"min_version", `"1.3"`}, {"cipher_suites", `["TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"]`},
		{"curve_preferences", `["CurveP256"]`}, {"handshake_first", "true"}, {"first", "auto"},
		{"immediate", `"300ms"`},
	} {
		rows = append(rows, in(tlsBase, "}", "tls."+kv[0], "  "+kv[0]+": "+kv[1], ""))
	}
	for _, kv := range [][2]string{
		{"insecure", "true"}, {"verify_and_map", "true"}, {"verify_cert_and_check_known_urls", "true"},
		{"allow_insecure_cipher_suites", "true"}, {"connection_rate_limit", "10"}, {"pinned_certs", "[abc]"},
		{"cert_store", "WindowsCurrentUser"}, {"cert_match_by", "Subject"}, {"cert_match", "x"},
		{"ca_certs_match", "[x]"}, {"cert_match_skip_invalid", "true"}, {"ocsp_peer", "true"}, {"certs", "[]"},
		{"certificates", "[]"},
	} {
		rows = append(rows, in(tlsBase, "}", "tls."+kv[0], "  "+kv[0]+": "+kv[1], "tls."+kv[0]))
	}

	// jetstream
	for _, kv := range [][2]string{
		{"enabled", "false"}, {"enable", "false"}, {"store_dir", "/tmp/j"}, {"store", "/tmp/j"},
		{"storedir", "/tmp/j"}, {"max_streams", "5"}, {"max_consumers", "5"}, {"request_queue_limit", "100"},
		{"sync_interval", "always"}, {"sync", "always"}, {"max_memory_store", "1GB"}, {"max_mem_store", "1GB"},
		{"max_mem", "1GB"}, {"max_file_store", "1GB"}, {"max_file", "1GB"}, {"strict", "false"}, {"unique_tag", "az"}, {"hold_timeout", `"10s"`},
	} {
		rows = append(rows, in("jetstream {\n", "}", "jetstream."+kv[0], kv[0]+": "+kv[1], ""))
	}
	for _, kv := range [][2]string{
		{"key", "secret"}, {"ek", "secret"}, {"encryption_key", "secret"},
		{"prev_key", "old"}, {"prev_ek", "old"}, {"prev_encryption_key", "old"}, {"cipher", "chachapoly"},
		{"tpm", "{ keys_file: x }"}, {"domain", "hub"}, {"max_outstanding_catchup", "1MB"},
		{"meta_compact", "100"}, {"meta_compact_size", "1MB"}, {"meta_compact_sync", "true"},
		{"extension_hint", "x"}, {"limits", "{ max_ack_pending: 10 }"}, {"max_buffered_size", "1MB"},
		{"max_buffered_msgs", "100"}, {"info_queue_limit", "100"}, {"max_concurrent_io", "4"},
	} {
		rows = append(rows, in("jetstream {\n", "}", "jetstream."+kv[0], kv[0]+": "+kv[1], "jetstream."+kv[0]))
	}

	// cluster: what routes need is applied; the rest is refused by name.
	const clBase = "cluster {\n  port: 6222\n"
	for _, kv := range [][2]string{
		{"name", "c1"}, {"listen", `"127.0.0.1:6333"`}, {"port", "6333"}, {"host", "127.0.0.2"}, {"net", "127.0.0.2"},
		{"routes", `["nats-route://127.0.0.1:6223"]`}, {"no_advertise", "true"}, {"connect_retries", "7"},
		{"authorization", "{ user: r, password: s }"}, {"ping_interval", `"1m"`}, {"ping_max", "3"},
		{"advertise", `"h:6222"`}, {"cluster_advertise", `"h:6222"`},
	} {
		rows = append(rows, in(clBase, "}", "cluster."+kv[0], "  "+kv[0]+": "+kv[1], ""))
	}
	rows = append(rows, refKey{path: "cluster", with: "cluster { port: 6222 }"})
	for _, kv := range [][2]string{
		{"tls", "{ cert_file: $SKIFF_TEST_CERT, key_file: $SKIFF_TEST_KEY }"}, {"connect_backoff", "true"}, {"permissions", "{ import: x }"}, {"pool_size", "3"},
		{"accounts", "[A]"}, {"compression", "s2_auto"}, {"write_deadline", `"5s"`}, {"write_timeout", "close"},
	} {
		rows = append(rows, in(clBase, "}", "cluster."+kv[0], "  "+kv[0]+": "+kv[1], "cluster."+kv[0]))
	}
	const clAuth = clBase + "  authorization {\n    user: r\n    password: s\n"
	for _, kv := range [][2]string{{"user", "q"}, {"username", "q"}, {"pass", "t"}, {"password", "t"}, {"timeout", `"5s"`}} {
		rows = append(rows, in(clAuth, "  }\n}", "cluster.authorization."+kv[0], "    "+kv[0]+": "+kv[1], ""))
	}
	for _, kv := range [][2]string{{"token", "t"}, {"users", "[]"}, {"permissions", "{ publish: x }"}} {
		p := "cluster.authorization." + kv[0]
		rows = append(rows, in(clAuth, "  }\n}", p, "    "+kv[0]+": "+kv[1], p))
	}
	const wsBase = "websocket {\n  port: 8080\n  no_tls: true\n"
	for _, kv := range [][2]string{
		{"listen", `"127.0.0.1:8081"`}, {"port", "8081"}, {"host", "127.0.0.2"}, {"net", "127.0.0.2"},
		{"tls", "{ cert_file: $SKIFF_TEST_CERT, key_file: $SKIFF_TEST_KEY }"}, {"same_origin", "true"},
		{"allowed_origins", `["https://a.example"]`}, {"allowed_origin", `["https://a.example"]`},
		{"allow_origins", `["https://a.example"]`}, {"allow_origin", `["https://a.example"]`},
		{"origins", `["https://a.example"]`}, {"origin", `["https://a.example"]`},
		{"compress", "true"}, {"compression", "true"}, {"handshake_timeout", `"5s"`},
	} {
		rows = append(rows, in(wsBase, "}", "websocket."+kv[0], "  "+kv[0]+": "+kv[1], ""))
	}
	rows = append(rows, in("websocket {\n  port: 8080\n  tls { cert_file: $SKIFF_TEST_CERT, key_file: $SKIFF_TEST_KEY }\n", "}",
		"websocket.no_tls", "  no_tls: true", ""))
	rows = append(rows, refKey{path: "ws", with: "ws { port: 8080, no_tls: true }"})
	for _, kv := range [][2]string{
		{"advertise", `"h:8080"`}, {"authorization", "{ token: t }"}, {"authentication", "{ token: t }"},
		{"jwt_cookie", "jwt"}, {"user_cookie", "u"}, {"pass_cookie", "p"}, {"token_cookie", "t"},
		{"no_auth_user", "a"}, {"headers", "{ X: y }"}, {"ping_interval", `"1m"`},
	} {
		rows = append(rows, in(wsBase, "}", "websocket."+kv[0], "  "+kv[0]+": "+kv[1], "websocket."+kv[0]))
	}
	return rows
}

// TestEveryReferenceKey: every key nats-server's configuration knows is
// either applied, changing the Config, or refused by name and line.
func TestEveryReferenceKey(t *testing.T) {
	writeTestCert(t)
	seen := map[string]bool{}
	for _, row := range referenceKeys() {
		require.False(t, seen[row.path], "%s listed twice", row.path)
		seen[row.path] = true
		t.Run(row.path, func(t *testing.T) {
			got, err := ParseConfig(row.with)
			if row.refusedAs != "" {
				require.ErrorIs(t, err, ErrUnsupported, "%s must be refused:\n%s", row.path, row.with)
				var ce *ConfigError
				require.ErrorAs(t, err, &ce)
				require.Equal(t, row.refusedAs, ce.Key)
				require.Equal(t, keyLine(t, row.with, row.refusedAs), ce.Line, "line of %s in:\n%s", ce.Key, row.with)
				require.Contains(t, err.Error(), row.refusedAs)
				return
			}
			require.NoError(t, err, "%s:\n%s", row.path, row.with)
			base, err := ParseConfig(row.base)
			require.NoError(t, err, row.base)
			require.False(t, sameConfig(base, got), "%s was accepted without effect:\n%s", row.path, row.with)
		})
	}
}

// keyLine finds the line of the last segment of a key path in text.
func keyLine(t *testing.T, text, path string) int {
	seg := path[strings.LastIndex(path, ".")+1:]
	seg = regexp.MustCompile(`\[\d+\]$`).ReplaceAllString(seg, "")
	re := regexp.MustCompile(`(^|[\s{,])` + regexp.QuoteMeta(seg) + `\s*[:={\[ ]`)
	for i, line := range strings.Split(text, "\n") {
		if re.MatchString(line) {
			return i + 1
		}
	}
	t.Fatalf("%s not found in %q", seg, text)
	return 0
}

// sameConfig compares two Configs; TLS configurations by what they set.
func sameConfig(a, b Config) bool {
	ta, tb := a.Server.TLS, b.Server.TLS
	wa, wb := a.Server.WebSocket.TLS, b.Server.WebSocket.TLS
	a.Server.TLS, b.Server.TLS, a.Server.WebSocket.TLS, b.Server.WebSocket.TLS = nil, nil, nil, nil
	return reflect.DeepEqual(a, b) && tlsSummary(ta) == tlsSummary(tb) && tlsSummary(wa) == tlsSummary(wb)
}

func tlsSummary(c *tls.Config) string {
	if c == nil {
		return "none"
	}
	return fmt.Sprint(len(c.Certificates), c.ClientCAs != nil, c.ClientAuth, c.MinVersion, c.CipherSuites, c.CurvePreferences)
}

// TestRefusedConfigLeavesNothingOpen: the hole this guards against was a
// server started without the accounts, JWT or cluster settings its file
// asked for, open to any client. Such a file fails to load: an account
// with an export Skiff cannot honour (latency tracking), a limit it would
// read otherwise, an operator whose resolver is not implemented, a
// default sentinel user (a JWT Skiff would not check).
func TestRefusedConfigLeavesNothingOpen(t *testing.T) {
	for _, text := range []string{
		"accounts { A: { users: [ {user: a, password: b} ], exports: [ {service: x, latency: y} ] } }",
		"accounts { A: { users: [ {user: a, password: b} ], limits: { max_connections: 0 } } }",
		"operator: \"../testdata/jwt/operator.jwt\"\nresolver: \"URL(http://127.0.0.1:9090/jwt/v1/accounts/)\"",
		"operator: \"../testdata/jwt/operator.jwt\"\nresolver: { type: cache, dir: \"/tmp/jwt\" }",
		"operator: \"../testdata/jwt/operator.jwt\"\nresolver: MEMORY\nresolver_tls { verify: true }",
		"default_sentinel: jwt",
		"cluster { listen: 127.0.0.1:6222, pool_size: 3 }",
		"cluster { listen: 127.0.0.1:6222, tls: { cert_file: a, key_file: b } }",
		"authorization { users: [ {user: a, password: b, allowed_connection_types: [\"STANDARD\"]} ] }",
	} {
		_, err := ParseConfig(text)
		require.True(t, errors.Is(err, ErrUnsupported), "%q: %v", text, err)
	}
}

// jwtSet is the committed nsc material (testdata/jwt) the operator-mode
// rows use.
type jwtSet struct {
	operatorFile, operatorJWT, operatorPub string
	accountPub, accountJWT                 string
}

func committedJWTSet() jwtSet {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "jwt", name))
		if err != nil {
			panic(err) // the committed set is part of the repository
		}
		tok, err := jwt.ParseDecoratedJWT(b)
		if err != nil {
			panic(err)
		}
		return tok
	}
	set := jwtSet{operatorFile: "../testdata/jwt/operator.jwt", operatorJWT: read("operator.jwt"), accountJWT: read("A.jwt")}
	opc, err := jwt.DecodeOperatorClaims(set.operatorJWT)
	if err != nil {
		panic(err)
	}
	ac, err := jwt.DecodeAccountClaims(set.accountJWT)
	if err != nil {
		panic(err)
	}
	set.operatorPub, set.accountPub = opc.Subject, ac.Subject
	return set
}
