package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nkeys"
)

// Defaults of the Options, as in the reference server where it has one.
const (
	DefaultHost             = "127.0.0.1"
	DefaultPort             = 4222
	DefaultHTTPPort         = 8222 // what `skiff serve` uses; Options' zero value turns monitoring off
	DefaultMaxPayload       = 1 << 20
	DefaultMaxControlLine   = 4096
	DefaultMaxConnections   = 64 * 1024
	DefaultMaxSubscriptions = 1 << 20 // per connection
	DefaultMaxPending       = 64 << 20
	DefaultWriteDeadline    = 10 * time.Second
	DefaultPingInterval     = 2 * time.Minute
	DefaultMaxPingsOut      = 2
	DefaultAuthTimeout      = 2 * time.Second
	DefaultTLSTimeout       = 2 * time.Second
	DefaultShutdownTimeout  = 10 * time.Second
	// Lame duck mode's defaults, nats-server's.
	DefaultLameDuckDuration    = 2 * time.Minute
	DefaultLameDuckGracePeriod = 10 * time.Second

	// MaxPayloadCap is the largest MaxPayload a server accepts.
	MaxPayloadCap = 64 << 20
	// RandomPort asks for an ephemeral port (tests bind 127.0.0.1 this way).
	RandomPort = -1
)

// ErrInvalidOptions wraps every error New returns for bad Options.
var ErrInvalidOptions = errors.New("server: invalid options")

// Options configure a Server. The zero value of every field means its
// default; DefaultOptions returns them filled in.
type Options struct {
	// Host is the address clients connect to (default 127.0.0.1).
	Host string
	// Port is the client port (default 4222; RandomPort for an ephemeral one).
	Port int
	// ServerName is reported in INFO (default: the server ID).
	ServerName string
	// Tags are the server's tags (nats-server's server_tags), lowercased:
	// JetStream places a stream whose placement names tags on a server
	// that has them; a server tagged "!jetstream" gets no streams. Peers
	// learn them from the route INFO; /varz shows them.
	Tags []string

	// HTTPHost and HTTPPort serve monitoring (/healthz, /varz, /connz,
	// /subsz, /metrics, and /jsz with JetStream). HTTPPort 0 turns
	// monitoring off; RandomPort picks an ephemeral port. HTTPHost
	// defaults to Host.
	HTTPHost string
	HTTPPort int

	// Token, if set, is the single token clients must present.
	Token string
	// Username and Password, if set, are a single user with no permission
	// limits. Users adds more; a password may be a bcrypt hash ("$2a$...").
	Username string
	Password string
	Users    []User
	// Nkeys are users identified by an nkey (a public key, "U..."): the
	// server sends a nonce in INFO and the client signs it with the
	// key's seed in CONNECT, so no secret crosses the wire.
	Nkeys []NkeyUser
	// AuthTimeout bounds the wait for CONNECT when auth is required
	// (default 2s).
	AuthTimeout time.Duration
	// Accounts are subject namespaces, each with its own users and limits
	// (see AccountConfig and docs/accounts.md). None: every client is in
	// the global account, "$G".
	Accounts []AccountConfig
	// NoAuthUser, if set, is the user (a name or an nkey, in any account)
	// a client that presents no credentials connects as. INFO then says
	// auth_required: false, as nats-server's does.
	NoAuthUser string

	// TrustedOperators are operator JWTs (bare, or decorated as nsc
	// writes them): with them the server is in operator mode, where every
	// client presents a user JWT signed for an account that one of these
	// operators signed, and the accounts come from Resolver rather than
	// from Accounts (docs/accounts.md). Each must be signed by its own
	// operator key and not expired.
	TrustedOperators []string
	// TrustedKeys are operator public keys ("O...") trusted to sign
	// accounts: operator mode without the operators' JWTs. Not together
	// with TrustedOperators.
	TrustedKeys []string
	// Resolver finds the account JWTs of operator mode (required there).
	Resolver ResolverOptions
	// ResolverPinnedAccounts, if set, are the only accounts (public keys)
	// whose users may connect in operator mode; the system account is
	// always allowed.
	ResolverPinnedAccounts []string
	// SystemAccount names the system account, whose users see the
	// server's $SYS events and requests (`nats server ...`; see
	// docs/accounts.md). Without operators: one of Accounts, or "$SYS"
	// (the default), which the server makes without users unless it is
	// configured. In operator mode: an account public key (default: the
	// operator JWT's system account), which must resolve.
	SystemAccount string
	// NoSystemAccount leaves the server without a system account: no $SYS
	// events, no answers to $SYS requests. Not together with
	// SystemAccount.
	NoSystemAccount bool

	// TLS, if set, makes the server offer TLS; TLSRequired refuses
	// clients that do not upgrade. TLSTimeout bounds the handshake
	// (default 2s, as nats-server's tls timeout).
	TLS         *tls.Config
	TLSRequired bool
	TLSTimeout  time.Duration
	// TLSHandshakeFirst makes clients start TLS before the server sends
	// INFO (nats.go's TLSHandshakeFirst), for proxies and load balancers
	// that speak TLS only. With TLSHandshakeFirstFallback > 0, a client
	// that sends nothing for that long gets INFO in the clear and the
	// usual upgrade instead, so both kinds of client connect.
	TLSHandshakeFirst         bool
	TLSHandshakeFirstFallback time.Duration

	// MaxPayload bounds a message, headers included (default 1 MiB, at most
	// MaxPayloadCap). Past it: -ERR 'Maximum Payload Violation' and close.
	MaxPayload int
	// MaxControlLine bounds a protocol line (default 4 KiB).
	MaxControlLine int
	// MaxConnections bounds concurrent client connections (default 64Ki).
	MaxConnections int
	// MaxSubscriptions bounds the subscriptions of one connection (default
	// 1Mi).
	MaxSubscriptions int
	// MaxPending bounds the bytes queued for one connection, including
	// those being written; past it the client is cut off as a slow
	// consumer (default 64 MiB).
	MaxPending int
	// WriteDeadline bounds one write to a client; a client that cannot
	// take its data in that time is a slow consumer (default 10s).
	WriteDeadline time.Duration
	// PingInterval is how often the server pings an idle client, and
	// MaxPingsOut how many unanswered pings make it stale (defaults 2m, 2).
	PingInterval time.Duration
	MaxPingsOut  int
	// ShutdownTimeout bounds Shutdown when its context has no deadline
	// (default 10s).
	ShutdownTimeout time.Duration
	// LameDuckDuration is how long LameDuck takes to close every client
	// (default 2m), after LameDuckGracePeriod (default 10s, less than
	// the duration) during which clients are told and none is closed.
	LameDuckDuration    time.Duration
	LameDuckGracePeriod time.Duration

	// WebSocket is the WebSocket listener (off unless WebSocket.Port is
	// set).
	WebSocket WebSocketOptions

	// Cluster joins the server to other servers by routes (off unless
	// Cluster.Port is set; see docs/cluster.md).
	Cluster ClusterOptions

	// Logger receives structured logs (default: discard).
	Logger *slog.Logger
}

// User is one user: a name, a password (plain or bcrypt), and optional
// permissions.
type User struct {
	Name        string
	Password    string
	Permissions *Permissions
}

// NkeyUser is a user identified by an nkey: its public key, and optional
// permissions.
type NkeyUser struct {
	PublicKey   string
	Permissions *Permissions
}

// Permissions limit the subjects a user may publish to and subscribe to.
// Empty Allow means everything not denied; Deny always wins.
type Permissions struct {
	Publish   SubjectPermission
	Subscribe SubjectPermission
}

// SubjectPermission is an allow list and a deny list of patterns.
type SubjectPermission struct {
	Allow []string
	Deny  []string
}

// DefaultOptions returns the defaults, with monitoring on DefaultHTTPPort.
func DefaultOptions() Options {
	o := Options{HTTPPort: DefaultHTTPPort}
	o.setDefaults()
	return o
}

func (o *Options) setDefaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if o.Host == "" {
		o.Host = DefaultHost
	}
	def(&o.Port, DefaultPort)
	if o.HTTPHost == "" {
		o.HTTPHost = o.Host
	}
	def(&o.MaxPayload, DefaultMaxPayload)
	def(&o.MaxControlLine, DefaultMaxControlLine)
	def(&o.MaxConnections, DefaultMaxConnections)
	def(&o.MaxSubscriptions, DefaultMaxSubscriptions)
	def(&o.MaxPending, DefaultMaxPending)
	def(&o.MaxPingsOut, DefaultMaxPingsOut)
	defDur(&o.WriteDeadline, DefaultWriteDeadline)
	defDur(&o.PingInterval, DefaultPingInterval)
	defDur(&o.AuthTimeout, DefaultAuthTimeout)
	defDur(&o.TLSTimeout, DefaultTLSTimeout)
	defDur(&o.ShutdownTimeout, DefaultShutdownTimeout)
	defDur(&o.LameDuckDuration, DefaultLameDuckDuration)
	defDur(&o.LameDuckGracePeriod, DefaultLameDuckGracePeriod)
}

// validate checks Options after defaults are set.
func (o *Options) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...)
	}
	switch {
	case o.Port < RandomPort || o.Port > 65535:
		return bad("port %d", o.Port)
	case o.HTTPPort < RandomPort || o.HTTPPort > 65535:
		return bad("http_port %d", o.HTTPPort)
	case o.MaxPayload < 0 || o.MaxPayload > MaxPayloadCap:
		return bad("max_payload %d: must be at most %d", o.MaxPayload, MaxPayloadCap)
	case o.MaxControlLine < 32:
		return bad("max_control_line %d: must be at least 32", o.MaxControlLine)
	case o.MaxPending < o.MaxPayload:
		return bad("max_pending %d is below max_payload %d", o.MaxPending, o.MaxPayload)
	case o.MaxConnections < 0, o.MaxSubscriptions < 0, o.MaxPingsOut < 0:
		return bad("negative limit")
	case o.WriteDeadline < 0, o.PingInterval < 0, o.AuthTimeout < 0, o.TLSTimeout < 0, o.ShutdownTimeout < 0:
		return bad("negative duration")
	case o.Token != "" && (o.Username != "" || len(o.Users) > 0 || len(o.Nkeys) > 0):
		return bad("token and users cannot both be set")
	case o.TLSRequired && o.TLS == nil:
		return bad("tls required without a TLS configuration")
	case o.TLSHandshakeFirst && o.TLS == nil:
		return bad("tls handshake first without a TLS configuration")
	case o.TLSHandshakeFirstFallback < 0:
		return bad("negative tls handshake first fallback")
	case o.LameDuckDuration < 0, o.LameDuckGracePeriod < 0:
		return bad("negative lame duck duration")
	case o.LameDuckGracePeriod >= o.LameDuckDuration:
		return bad("lame duck grace period %v must be less than the lame duck duration %v", o.LameDuckGracePeriod, o.LameDuckDuration)
	}
	if err := o.WebSocket.validate(o); err != nil {
		return bad("%v", err)
	}
	if err := o.Cluster.validate(o); err != nil {
		return bad("%v", err)
	}
	seen := map[string]bool{o.Username: o.Username != ""}
	for _, u := range o.Users {
		if u.Name == "" {
			return bad("a user without a name")
		}
		if seen[u.Name] {
			return bad("user %q defined twice", u.Name)
		}
		seen[u.Name] = true
		if u.Permissions != nil {
			if err := u.Permissions.validate(); err != nil {
				return bad("user %q: %v", u.Name, err)
			}
		}
	}
	for _, u := range o.Nkeys {
		if !nkeys.IsValidPublicUserKey(u.PublicKey) {
			return bad("nkey %q is not a user's public key", u.PublicKey)
		}
		if seen[u.PublicKey] {
			return bad("nkey %q defined twice", u.PublicKey)
		}
		seen[u.PublicKey] = true
		if u.Permissions != nil {
			if err := u.Permissions.validate(); err != nil {
				return bad("nkey %q: %v", u.PublicKey, err)
			}
		}
	}
	if err := o.validateOperatorMode(); err != nil {
		return bad("%v", err)
	}
	if err := o.validateAccounts(seen); err != nil {
		return bad("%v", err)
	}
	return nil
}
