package server

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Defaults of the cluster options.
const (
	// DefaultConnectRetries is how many times a route learned from a peer
	// (not configured) is tried before it is given up, until a peer
	// mentions it again.
	DefaultConnectRetries = 3
	// DefaultRouteAuthTimeout bounds an accepted route's handshake
	// (CONNECT and INFO), as nats-server's cluster auth timeout.
	DefaultRouteAuthTimeout = 2 * time.Second
	// MaxRoutePingInterval is the longest interval between two pings of
	// a route, nats-server's: a longer cluster ping_interval (or a longer
	// top-level one, which routes otherwise use) is shortened to it.
	MaxRoutePingInterval = 30 * time.Second
)

// ClusterOptions join the server to other servers by routes (nats-server's
// cluster block). Port 0 leaves clustering off: the server is alone, as if
// the block were absent.
type ClusterOptions struct {
	// Name is the cluster's name: a route to a server of another cluster
	// is refused. Empty accepts any peer that has no name either.
	Name string
	// Host and Port are the route listener (Host defaults to Options.Host;
	// RandomPort for an ephemeral port).
	Host string
	Port int
	// Routes are the seed URLs (nats-route://[user:pass@]host:port or
	// nats://...) this server connects to and keeps reconnecting to. One
	// seed is enough: the rest of the cluster is learned from it. A URL
	// that turns out to be this server is dropped.
	Routes []string
	// NoAdvertise keeps the cluster's client URLs out of this server's
	// INFO (connect_urls), and this server's client URL out of its peers'.
	NoAdvertise bool
	// Advertise is the host:port peers are told to dial this server's
	// route listener at (in its route INFO, and so in gossip), when that is
	// not the listen address: behind NAT, a proxy or a port mapping
	// (nats-server's cluster advertise). Default: the listen address.
	Advertise string
	// ConnectRetries is how many attempts a route learned from a peer gets
	// (default DefaultConnectRetries). Configured routes are retried
	// forever, with backoff.
	ConnectRetries int
	// Username and Password, if set, are required of peers connecting to
	// this server, and presented to peers whose route URL has none.
	Username string
	Password string
	// AuthTimeout bounds an accepted route's handshake (default 2s).
	AuthTimeout time.Duration
	// PingInterval is how often each route is pinged, busy or not, and
	// MaxPingsOut how many unanswered pings close it as stale, so that a
	// peer that stopped (SIGSTOP, a black-holed network) is noticed in
	// about (MaxPingsOut+1) × PingInterval and its interest dropped.
	// Defaults: Options.PingInterval, at most MaxRoutePingInterval, and
	// Options.MaxPingsOut (nats-server's cluster ping_interval and
	// ping_max).
	PingInterval time.Duration
	MaxPingsOut  int
}

// enabled reports whether the server joins a cluster.
func (o *ClusterOptions) enabled() bool { return o.Port != 0 }

func (o *ClusterOptions) validate(top *Options) error {
	if !o.enabled() {
		if len(o.Routes) > 0 {
			return errors.New("cluster routes need a cluster listen address (cluster { listen: host:port })")
		}
		return nil
	}
	if o.Host == "" {
		o.Host = top.Host
	}
	if o.ConnectRetries == 0 {
		o.ConnectRetries = DefaultConnectRetries
	}
	if o.AuthTimeout == 0 {
		o.AuthTimeout = DefaultRouteAuthTimeout
	}
	if o.PingInterval == 0 {
		o.PingInterval = top.PingInterval
	}
	o.PingInterval = min(o.PingInterval, MaxRoutePingInterval)
	if o.MaxPingsOut == 0 {
		o.MaxPingsOut = top.MaxPingsOut
	}
	switch {
	case o.Port < RandomPort || o.Port > 65535:
		return fmt.Errorf("cluster port %d", o.Port)
	case o.ConnectRetries < 0:
		return errors.New("negative cluster connect_retries")
	case o.AuthTimeout < 0:
		return errors.New("negative cluster authorization timeout")
	case o.PingInterval < 0:
		return errors.New("negative cluster ping_interval")
	case o.MaxPingsOut < 0:
		return errors.New("negative cluster ping_max")
	case strings.ContainsAny(o.Name, " \t\r\n"):
		return fmt.Errorf("cluster name %q contains spaces", o.Name)
	case (o.Username == "") != (o.Password == ""):
		return errors.New("cluster authorization needs both a user and a password")
	}
	for _, r := range o.Routes {
		if _, err := ParseRouteURL(r); err != nil {
			return err
		}
	}
	if o.Advertise != "" {
		if _, err := ParseRouteURL(o.Advertise); err != nil {
			return fmt.Errorf("cluster advertise: %w", err)
		}
	}
	return nil
}

// ErrBadRouteURL is wrapped by ParseRouteURL's errors.
var ErrBadRouteURL = errors.New("server: bad route URL")

// ParseRouteURL checks a route URL: nats-route://, nats:// or a bare
// host:port, with a port, and optional user:password.
func ParseRouteURL(s string) (*url.URL, error) {
	raw := s
	if !strings.Contains(s, "://") {
		raw = "nats-route://" + s
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrBadRouteURL, s, err)
	}
	switch u.Scheme {
	case "nats-route", "nats", "route":
	default:
		return nil, fmt.Errorf("%w: %q: scheme %q (want nats-route:// or nats://)", ErrBadRouteURL, s, u.Scheme)
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || host == "" {
		return nil, fmt.Errorf("%w: %q: want host:port", ErrBadRouteURL, s)
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return nil, fmt.Errorf("%w: %q: bad port", ErrBadRouteURL, s)
	}
	return u, nil
}
