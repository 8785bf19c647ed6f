package broker

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	natsconf "github.com/nats-io/nats-server/v2/conf"

	"github.com/skiffmq/skiff/server"
)

// LoadConfig reads a configuration file in nats-server's syntax
// (docs/config.md) over DefaultConfig. Every key is either applied or
// refused: a key Skiff does not implement is an error wrapping
// ErrUnsupported that names the key and its line, never a warning, so a
// setting the file asks for is never silently missing. All problems of
// the file are reported together.
func LoadConfig(path string) (Config, error) {
	m, err := natsconf.ParseFileWithChecks(path)
	if err != nil {
		if _, statErr := os.Stat(path); statErr != nil {
			return Config{}, fmt.Errorf("config: %w", statErr)
		}
		return Config{}, fmt.Errorf("config: %s: %w", path, err)
	}
	return fromMap(m, path)
}

// ParseConfig is LoadConfig for a configuration given as text (include
// paths are then relative to the working directory).
func ParseConfig(text string) (Config, error) {
	m, err := natsconf.ParseWithChecks(text)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	return fromMap(m, "")
}

// loader is the state of one load: the Config being filled and what is
// settled only once the whole file is read.
type loader struct {
	cfg Config
	// allowNonTLS is the top-level allow_non_tls (nil if absent), which
	// may come before or after the tls block it qualifies.
	allowNonTLS *bool
}

func fromMap(m map[string]any, file string) (Config, error) {
	l := &loader{cfg: DefaultConfig()}
	// A file turns monitoring on (http, http_port), as nats-server's does:
	// a nats-server configuration without it serves none, and three such
	// servers on one machine would otherwise all want port 8222.
	l.cfg.Server.HTTPPort = 0
	root := value{v: m, file: file}
	var errs []error
	if err := topKeys.applyEntries(l, entries(m, "", root)); err != nil {
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			errs = append(errs, joined.Unwrap()...)
		} else {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	if l.allowNonTLS != nil && l.cfg.Server.TLS != nil {
		l.cfg.Server.TLSRequired = !*l.allowNonTLS
	}
	return l.cfg, nil
}

// Reasons given for refused keys.
const (
	whyCluster = "this clustering feature (gateways, leaf nodes, advertised addresses, JetStream domains, cluster_traffic) is not implemented, only routes (the cluster block) and JetStream over them; Skiff refuses to start rather than run without it"
	whyLogging = "this logging option is not implemented"
	whyTLS     = "this TLS option is not implemented; Skiff refuses to start rather than weaken the TLS setup the file asks for"
	whyOther   = "this nats-server setting is not implemented"
)

// topKeys is the table of the file's top level.
var topKeys = func() keys[*loader] {
	k := newKeys[*loader]()
	srv := func(set func(o *server.Options, v value) error) handler[*loader] {
		return func(l *loader, v value) error { return set(&l.cfg.Server, v) }
	}
	k.on(srv(func(o *server.Options, v value) (err error) { o.Host, err = v.str(); return }), "host", "net", "addr")
	k.on(srv(func(o *server.Options, v value) error { return hostPort(v, &o.Host, &o.Port) }), "listen")
	k.on(srv(func(o *server.Options, v value) (err error) {
		o.Port, err = v.intIn(server.RandomPort, 65535)
		return
	}), "port")
	k.on(srv(func(o *server.Options, v value) (err error) {
		if o.ServerName, err = v.str(); err == nil && strings.ContainsAny(o.ServerName, " \t\r\n") {
			err = v.errorf(ErrInvalidValue, "a server name cannot contain spaces")
		}
		return
	}), "server_name", "name")
	k.on(srv(func(o *server.Options, v value) (err error) {
		o.HTTPPort, err = v.intIn(server.RandomPort, 65535)
		return
	}), "http_port", "monitor_port")
	k.on(srv(func(o *server.Options, v value) error { return hostPort(v, &o.HTTPHost, &o.HTTPPort) }), "http", "monitor")
	k.on(srv(func(o *server.Options, v value) (err error) { o.HTTPHost, err = v.str(); return }), "http_host")
	k.on(srv(func(o *server.Options, v value) error { return sizeInt(v, &o.MaxPayload) }), "max_payload")
	k.on(srv(func(o *server.Options, v value) error { return sizeInt(v, &o.MaxControlLine) }), "max_control_line")
	k.on(srv(func(o *server.Options, v value) error { return sizeInt(v, &o.MaxPending) }), "max_pending")
	k.on(srv(func(o *server.Options, v value) (err error) {
		o.MaxConnections, err = v.intIn(0, 1<<31-1)
		return
	}), "max_connections", "max_conn")
	k.on(srv(func(o *server.Options, v value) (err error) {
		o.MaxSubscriptions, err = v.intIn(0, 1<<31-1)
		return
	}), "max_subscriptions", "max_subs")
	k.on(srv(func(o *server.Options, v value) (err error) { o.WriteDeadline, err = v.duration(); return }), "write_deadline")
	k.on(srv(func(o *server.Options, v value) (err error) { o.PingInterval, err = v.duration(); return }), "ping_interval")
	k.on(srv(func(o *server.Options, v value) (err error) {
		o.MaxPingsOut, err = v.intIn(0, 1<<31-1)
		return
	}), "ping_max", "max_pings_out")
	k.on(srv(func(o *server.Options, v value) (err error) { o.ShutdownTimeout, err = v.duration(); return }), "shutdown_timeout")
	k.on(srv(applyAuthorization), "authorization")
	k.on(srv(applyTLS), "tls")
	k.on(func(l *loader, v value) error {
		b, err := v.boolean()
		l.allowNonTLS = &b
		return err
	}, "allow_non_tls")
	k.on(func(l *loader, v value) error { return applyJetStream(&l.cfg, v) }, "jetstream")
	k.on(func(l *loader, v value) (err error) { l.cfg.JetStream.StoreDir, err = v.str(); return }, "store_dir", "storedir")
	k.on(func(l *loader, v value) (err error) { l.cfg.Log.Debug, err = v.boolean(); return }, "debug")
	k.on(func(l *loader, v value) (err error) { l.cfg.Log.Trace, err = v.boolean(); return }, "trace")
	k.on(func(l *loader, v value) error {
		on, err := v.boolean()
		l.cfg.Log.NoTime = !on
		return err
	}, "logtime")
	k.on(func(l *loader, v value) (err error) { l.cfg.Log.UTC, err = v.boolean(); return }, "logtime_utc")
	k.on(func(l *loader, v value) (err error) { l.cfg.Log.File, err = v.str(); return }, "logfile", "log_file")
	k.on(func(l *loader, v value) (err error) { l.cfg.PIDFile, err = v.str(); return }, "pidfile", "pid_file")
	k.on(func(l *loader, v value) (err error) { l.cfg.ProfPort, err = v.intIn(0, 65535); return }, "prof_port")

	k.on(srv(applyAccounts), "accounts")
	k.on(srv(func(o *server.Options, v value) (err error) { o.NoAuthUser, err = v.str(); return }), "no_auth_user")
	operatorKeys(k)
	k.on(srv(func(o *server.Options, v value) (err error) { o.NoSystemAccount, err = v.boolean(); return }),
		"no_system_account", "no_system", "no_sys_acc")
	k.on(srv(applyCluster), "cluster")
	k.refuse(whyCluster, "gateway", "leaf", "leafnodes", "client_advertise",
		"connect_error_reports", "reconnect_error_reports", "default_js_domain")
	k.on(srv(func(o *server.Options, v value) (err error) { o.Tags, err = v.strings(); return }), "server_tags")
	k.on(srv(func(o *server.Options, v value) (err error) { o.LameDuckDuration, err = v.duration(); return }), "lame_duck_duration")
	k.on(srv(func(o *server.Options, v value) (err error) { o.LameDuckGracePeriod, err = v.duration(); return }), "lame_duck_grace_period")
	k.refuse(whyLogging, "trace_verbose", "trace_headers", "logfile_size_limit", "log_size_limit",
		"logfile_max_num", "log_max_num", "syslog", "remote_syslog", "max_traced_msg_len")
	k.refuse(whyTLS, "ocsp", "ocsp_cache")
	k.refuse("monitoring over HTTPS is not implemented", "https", "https_port")
	k.refuse("a monitoring base path is not implemented", "http_base_path")
	k.refuse("subject mappings are not implemented", "mappings", "maps")
	k.refuse("Skiff's subscription index has no result cache to configure", "disable_sublist_cache", "no_sublist_cache")
	k.on(srv(applyWebSocket), "websocket", "ws")
	k.refuse("MQTT clients are not implemented", "mqtt")
	k.refuse(whyOther, "ports_file_dir", "prof_block_rate", "proxy_protocol", "proxies", "max_sub_tokens",
		"max_subscription_tokens", "write_timeout", "no_header_support", "server_metadata", "feature_flags",
		"no_fast_producer_stall", "max_closed_clients")
	return k
}()

// hostPort reads "host:port" or a bare port.
func hostPort(v value, host *string, port *int) error {
	if _, isNum := v.v.(int64); isNum {
		p, err := v.intIn(server.RandomPort, 65535)
		if err == nil {
			*port = p
		}
		return err
	}
	s, err := v.str()
	if err != nil {
		return v.typeError("host:port")
	}
	h, p, err := net.SplitHostPort(s)
	if err != nil {
		return v.errorf(ErrInvalidValue, "%q is not host:port", s)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < server.RandomPort || n > 65535 {
		return v.errorf(ErrInvalidValue, "bad port in %q", s)
	}
	*host, *port = h, n
	return nil
}

// sizeInt reads a size that must fit an int.
func sizeInt(v value, dst *int) error {
	n, err := v.size()
	if err != nil {
		return err
	}
	if n < 0 || n > 1<<40 {
		return v.errorf(ErrInvalidValue, "%d is out of range", n)
	}
	*dst = int(n)
	return nil
}
