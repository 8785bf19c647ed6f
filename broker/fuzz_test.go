package broker

import (
	"errors"
	"testing"
)

// FuzzParseConfig: no file makes the loader panic, and every error it
// returns is a *ConfigError or the parser's own syntax error.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		"port: 4222\nmax_payload: 1MB\n",
		"authorization { users: [ {user: a, password: b, permissions: {publish: {allow: [x], deny: y}}} ] }",
		"tls { cert_file: a, key_file: b, min_version: \"1.3\" }",
		"jetstream { store_dir: d, sync_interval: \"1s\", max_streams: 3 }",
		"listen: 127.0.0.1:4222\nping_interval: 2m\nwrite_deadline: \"2s\"",
		"accounts { A { users [ {user: a} ] } }\ncluster { port: 1 }",
		"X: 1\nport: $X",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		_, err := ParseConfig(text)
		if err == nil {
			return
		}
		var ce *ConfigError
		if errors.As(err, &ce) && ce.Line < 0 {
			t.Fatalf("negative line in %v", err)
		}
	})
}
