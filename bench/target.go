package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"sync"
)

// Target is a system under test: it opens connections that publish to a
// topic and, if asked, receive what is published there.
type Target interface {
	// Name says what the target is, for reports ("nats", "redis", ...).
	Name() string
	// Open sets up one connection for topic (a subject, a channel, a
	// routing key). With deliver set, the connection also receives every
	// message published on topic: deliver is called with each payload,
	// from a goroutine of the connection's, and the payload is only valid
	// during the call. Open returns once a message published from now on
	// would be delivered. The latency benchmark gives each connection its
	// own topic, so that a request comes back to its sender.
	Open(ctx context.Context, topic string, deliver func(payload []byte)) (Conn, error)
}

// Conn is one connection of a Target.
type Conn interface {
	// Send publishes one payload on the connection's topic. It may return
	// before the broker has it, and must not wait for it to be delivered.
	// It is called from one goroutine at a time.
	Send(payload []byte) error
	// Close tears the connection down.
	Close() error
}

// Flusher is a Conn whose publishes the broker acknowledges: Flush returns
// when everything sent so far is acknowledged, has failed, or ctx is done.
// Throughput runs count a publisher done only after Flush, which their
// Timeout bounds.
type Flusher interface {
	Flush(ctx context.Context) error
}

// Failer is a Conn that can tell that the broker dropped it (a slow
// consumer cut off, a broken connection): Failed is closed then, and Err
// says why. Throughput runs stop waiting for a subscriber that failed
// instead of waiting out their timeout. Both are safe for concurrent use.
type Failer interface {
	Failed() <-chan struct{}
	Err() error
}

// ErrUnknownScheme is returned by Open for a URL no target handles.
var ErrUnknownScheme = errors.New("bench: no target for this URL scheme")

// Opener builds a Target from a URL.
type Opener func(u *url.URL) (Target, error)

var registry = struct {
	sync.Mutex
	m map[string]Opener
}{m: map[string]Opener{}}

// Register makes a URL scheme open a target. Target files call it from
// init.
func Register(scheme string, open Opener) {
	registry.Lock()
	defer registry.Unlock()
	registry.m[scheme] = open
}

// Schemes lists the registered URL schemes.
func Schemes() []string {
	registry.Lock()
	defer registry.Unlock()
	var s []string
	for k := range registry.m {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}

// OpenTarget returns the target for a URL such as nats://127.0.0.1:4222,
// redis://127.0.0.1:6379 or amqp://guest:guest@127.0.0.1:5672/.
func OpenTarget(rawURL string) (Target, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("bench: target %q: %w", rawURL, err)
	}
	registry.Lock()
	open := registry.m[u.Scheme]
	registry.Unlock()
	if open == nil {
		return nil, fmt.Errorf("%w: %q (known: %v)", ErrUnknownScheme, u.Scheme, Schemes())
	}
	return open(u)
}
