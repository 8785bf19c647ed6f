package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/skiffmq/skiff/internal/conf"
	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// brokerConfig is everything `skiff serve` configures: the server, and
// JetStream on top of it.
type brokerConfig struct {
	server    server.Options
	jetstream jetstream.Options
	// streams turns JetStream on (the default).
	streams bool
}

func defaultBrokerConfig() brokerConfig {
	return brokerConfig{server: server.DefaultOptions(), streams: true}
}

// loadConfig reads a configuration file (docs/config.md) into cfg. Keys
// the broker does not know, such as nats-server's cluster settings, are
// reported to stderr and ignored, so that a nats-server file can be reused.
func loadConfig(path string, cfg *brokerConfig) error {
	m, err := conf.ParseFile(path)
	if err != nil {
		return err
	}
	return applyConfig(m, cfg, func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "skiff: config: "+format+"\n", args...)
	})
}

// applyConfig sets cfg from a parsed file. warn receives keys it ignores.
func applyConfig(m *conf.Map, cfg *brokerConfig, warn func(string, ...any)) error {
	opts := &cfg.server
	for key, v := range m.All() {
		var err error
		switch strings.ToLower(key) {
		case "host", "net", "addr":
			opts.Host, err = v.Str()
		case "listen":
			err = setHostPort(v, &opts.Host, &opts.Port)
		case "port":
			opts.Port, err = intValue(v)
		case "server_name", "name":
			opts.ServerName, err = v.Str()
		case "http_port", "monitor_port":
			opts.HTTPPort, err = intValue(v)
		case "http", "monitor":
			err = setHostPort(v, &opts.HTTPHost, &opts.HTTPPort)
		case "http_host":
			opts.HTTPHost, err = v.Str()
		case "max_payload":
			opts.MaxPayload, err = sizeValue(v)
		case "max_control_line":
			opts.MaxControlLine, err = sizeValue(v)
		case "max_connections", "max_conn":
			opts.MaxConnections, err = intValue(v)
		case "max_subscriptions", "max_subs":
			opts.MaxSubscriptions, err = intValue(v)
		case "max_pending":
			opts.MaxPending, err = sizeValue(v)
		case "write_deadline":
			opts.WriteDeadline, err = v.Duration()
		case "ping_interval":
			opts.PingInterval, err = v.Duration()
		case "ping_max", "max_pings_out":
			opts.MaxPingsOut, err = intValue(v)
		case "shutdown_timeout":
			opts.ShutdownTimeout, err = v.Duration()
		case "authorization":
			err = applyAuthorization(v, opts)
		case "tls":
			err = applyTLS(v, opts)
		case "jetstream":
			err = applyJetStream(v, cfg, warn)
		default:
			warn("line %d: ignoring unknown key %q", v.Line(), key)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// applyJetStream reads `jetstream: enabled|disabled|true|false` or a
// block {store_dir: DIR, max_streams: N, max_consumers: N,
// sync_interval: always|never|DURATION}; nats-server's storage quotas are
// reported and ignored.
func applyJetStream(v conf.Value, cfg *brokerConfig, warn func(string, ...any)) error {
	if v.Kind() != conf.KindMap {
		switch strings.ToLower(v.Text()) {
		case "true", "enabled", "enable", "on", "yes":
			cfg.streams = true
		case "false", "disabled", "disable", "off", "no":
			cfg.streams = false
		default:
			return fmt.Errorf("config: line %d: jetstream: want enabled or disabled, not %q", v.Line(), v.Text())
		}
		return nil
	}
	m, _ := v.Map()
	cfg.streams = true
	for key, v := range m.All() {
		var err error
		switch strings.ToLower(key) {
		case "store_dir", "store", "storedir":
			cfg.jetstream.StoreDir, err = v.Str()
		case "max_streams":
			cfg.jetstream.MaxStreams, err = intValue(v)
		case "max_consumers":
			cfg.jetstream.MaxConsumers, err = intValue(v)
		case "sync_interval", "sync":
			err = applySync(v, &cfg.jetstream)
		case "enabled":
			var on bool
			on, err = v.Bool()
			cfg.streams = on
		default:
			warn("line %d: ignoring unknown jetstream key %q", v.Line(), key)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// applySync reads nats-server's `sync_interval`: `always` (fsync before
// every acknowledgement), a duration (acknowledge once written, fsync that
// often), or Skiff's `never` (leave flushing to the operating system). It
// is the policy of streams whose configuration names none.
func applySync(v conf.Value, o *jetstream.Options) error {
	switch strings.ToLower(v.Text()) {
	case "always":
		o.Sync = jetstream.SyncAlways
		return nil
	case "never":
		o.Sync = jetstream.SyncNever
		return nil
	}
	d, err := v.Duration()
	if err != nil {
		return err
	}
	if d <= 0 {
		return fmt.Errorf("config: line %d: sync_interval: want always, never or a positive duration, not %q", v.Line(), v.Text())
	}
	o.Sync, o.SyncInterval = jetstream.SyncInterval, d
	return nil
}

func intValue(v conf.Value) (int, error) {
	n, err := v.Int()
	return int(n), err
}

func sizeValue(v conf.Value) (int, error) {
	n, err := v.Size()
	return int(n), err
}

// setHostPort reads "host:port" (or a bare port).
func setHostPort(v conf.Value, host *string, port *int) error {
	s := v.Text()
	if n, err := strconv.Atoi(s); err == nil {
		*port = n
		return nil
	}
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("config: line %d: %q is not host:port", v.Line(), s)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		return fmt.Errorf("config: line %d: bad port in %q", v.Line(), s)
	}
	*host, *port = h, n
	return nil
}

func applyAuthorization(v conf.Value, opts *server.Options) error {
	m, err := v.Map()
	if err != nil {
		return err
	}
	for key, v := range m.All() {
		switch strings.ToLower(key) {
		case "user", "username":
			opts.Username, err = v.Str()
		case "password", "pass":
			opts.Password, err = v.Str()
		case "token":
			opts.Token, err = v.Str()
		case "timeout":
			var d time.Duration
			d, err = v.Duration()
			opts.AuthTimeout = d
		case "users":
			opts.Users, err = users(v)
		default:
			err = fmt.Errorf("config: line %d: unknown authorization key %q", v.Line(), key)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func users(v conf.Value) ([]server.User, error) {
	list, err := v.Array()
	if err != nil {
		return nil, err
	}
	var out []server.User
	for _, item := range list {
		m, err := item.Map()
		if err != nil {
			return nil, err
		}
		var u server.User
		for key, v := range m.All() {
			switch strings.ToLower(key) {
			case "user", "username":
				u.Name, err = v.Str()
			case "password", "pass":
				u.Password, err = v.Str()
			case "permissions":
				u.Permissions, err = permissions(v)
			default:
				err = fmt.Errorf("config: line %d: unknown user key %q", v.Line(), key)
			}
			if err != nil {
				return nil, err
			}
		}
		out = append(out, u)
	}
	return out, nil
}

// permissions reads {publish: P, subscribe: P}, where P is a pattern, a
// list of patterns (the allow list), or {allow: [...], deny: [...]}.
func permissions(v conf.Value) (*server.Permissions, error) {
	m, err := v.Map()
	if err != nil {
		return nil, err
	}
	p := &server.Permissions{}
	for key, v := range m.All() {
		var sp *server.SubjectPermission
		switch strings.ToLower(key) {
		case "publish", "pub":
			sp = &p.Publish
		case "subscribe", "sub":
			sp = &p.Subscribe
		default:
			return nil, fmt.Errorf("config: line %d: unknown permissions key %q", v.Line(), key)
		}
		if err := subjectPermission(v, sp); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func subjectPermission(v conf.Value, sp *server.SubjectPermission) error {
	switch v.Kind() {
	case conf.KindMap:
		m, _ := v.Map()
		for key, v := range m.All() {
			list, err := patterns(v)
			if err != nil {
				return err
			}
			switch strings.ToLower(key) {
			case "allow":
				sp.Allow = list
			case "deny":
				sp.Deny = list
			default:
				return fmt.Errorf("config: line %d: unknown permission key %q", v.Line(), key)
			}
		}
		return nil
	default:
		list, err := patterns(v)
		sp.Allow = list
		return err
	}
}

func patterns(v conf.Value) ([]string, error) {
	if v.Kind() != conf.KindArray {
		s, err := v.Str()
		return []string{s}, err
	}
	list, _ := v.Array()
	out := make([]string, 0, len(list))
	for _, item := range list {
		s, err := item.Str()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// applyTLS reads {cert_file, key_file, ca_file, verify, allow_non_tls}.
// TLS is then required unless allow_non_tls is set.
func applyTLS(v conf.Value, opts *server.Options) error {
	m, err := v.Map()
	if err != nil {
		return err
	}
	var cert, key, ca string
	verify, allowPlain := false, false
	for k, v := range m.All() {
		switch strings.ToLower(k) {
		case "cert_file":
			cert, err = v.Str()
		case "key_file":
			key, err = v.Str()
		case "ca_file":
			ca, err = v.Str()
		case "verify":
			verify, err = v.Bool()
		case "allow_non_tls":
			allowPlain, err = v.Bool()
		case "timeout":
			// the handshake is bounded by the authorization timeout
		default:
			err = fmt.Errorf("config: line %d: unknown tls key %q", v.Line(), k)
		}
		if err != nil {
			return err
		}
	}
	if cert == "" || key == "" {
		return errors.New("config: tls needs cert_file and key_file")
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return fmt.Errorf("config: tls: %w", err)
	}
	tc := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return fmt.Errorf("config: tls: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("config: tls: no certificate in %s", ca)
		}
		tc.ClientCAs = pool
	}
	if verify {
		tc.ClientAuth = tls.RequireAndVerifyClientCert
	}
	opts.TLS, opts.TLSRequired = tc, !allowPlain
	return nil
}
