package jetstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	njs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/server"
)

// broker is a Skiff server with JetStream, on a random loopback port.
type broker struct {
	srv *server.Server
	js  *jetstream.JetStream
	dir string
}

// startBroker starts a broker on dir (a fresh temporary directory when
// empty) and stops it when the test ends, unless the test stops it first.
func startBroker(t testing.TB, dir string) *broker {
	t.Helper()
	return startBrokerWith(t, jetstream.Options{StoreDir: dir})
}

// startBrokerWith starts a broker with JetStream options (StoreDir: a fresh
// temporary directory when empty).
func startBrokerWith(t testing.TB, jsOpts jetstream.Options) *broker {
	t.Helper()
	return startBrokerMonitored(t, jsOpts, 0)
}

// startMonitoredBroker starts a broker on a fresh directory with the
// monitoring endpoints on a random port (srv.MonitorAddr).
func startMonitoredBroker(t testing.TB) *broker {
	t.Helper()
	return startBrokerMonitored(t, jetstream.Options{}, server.RandomPort)
}

// startBrokerMonitored starts a broker with JetStream options and the
// monitoring port httpPort (0: none).
func startBrokerMonitored(t testing.TB, jsOpts jetstream.Options, httpPort int) *broker {
	t.Helper()
	return startBrokerConfigured(t, jsOpts, func(o *server.Options) { o.HTTPPort = httpPort })
}

// startBrokerConfigured starts a broker on 127.0.0.1 with JetStream
// options (StoreDir: a fresh directory when empty) and the server's
// options changed by with; no monitoring port unless with sets one.
func startBrokerConfigured(t testing.TB, jsOpts jetstream.Options, with func(*server.Options)) *broker {
	t.Helper()
	if jsOpts.StoreDir == "" {
		jsOpts.StoreDir = t.TempDir()
	}
	opts := server.DefaultOptions()
	opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", server.RandomPort, 0
	with(&opts)
	s, err := server.New(opts)
	require.NoError(t, err)
	js, err := jetstream.New(s, jsOpts)
	require.NoError(t, err)
	require.NoError(t, s.Start())
	b := &broker{srv: s, js: js, dir: jsOpts.StoreDir}
	t.Cleanup(b.stop)
	return b
}

// fetchOne fetches one message of a pull consumer, waiting up to 5 s, and
// fails the test if none comes.
func fetchOne(t testing.TB, c njs.Consumer) njs.Msg {
	t.Helper()
	batch, err := c.Fetch(1, njs.FetchMaxWait(5*time.Second))
	require.NoError(t, err)
	var got njs.Msg
	for m := range batch.Messages() {
		got = m
	}
	require.NoError(t, batch.Error())
	require.NotNil(t, got, "no message fetched")
	return got
}

// stop shuts the broker down; calling it again does nothing.
func (b *broker) stop() {
	if b.srv == nil {
		return
	}
	_ = b.srv.Shutdown(context.Background())
	_ = b.js.Close()
	b.srv, b.js = nil, nil
}

// connect returns a client connection and its JetStream context, closed
// when the test ends.
func connect(t testing.TB, url string) (*nats.Conn, njs.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, nats.Timeout(5*time.Second))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := njs.New(nc)
	require.NoError(t, err)
	return nc, js
}

// ctx returns a context that ends with the test, or after 10 seconds.
func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// apiCode returns the err_code of a JetStream API error, or 0.
func apiCode(err error) njs.ErrorCode {
	var apiErr *njs.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode
	}
	var jsErr njs.JetStreamError
	if errors.As(err, &jsErr) && jsErr.APIError() != nil {
		return jsErr.APIError().ErrorCode
	}
	var legacy nats.JetStreamError // the JetStreamContext API's
	if errors.As(err, &legacy) && legacy.APIError() != nil {
		return njs.ErrorCode(legacy.APIError().ErrorCode)
	}
	// Some client calls keep only the error's text.
	if err != nil {
		if m := errCodeText.FindStringSubmatch(err.Error()); m != nil {
			n, _ := strconv.Atoi(m[1])
			return njs.ErrorCode(n)
		}
	}
	return 0
}

var errCodeText = regexp.MustCompile(`err_code=(\d+)`)

// globalStreams is where a store directory keeps the global account's
// streams.
func globalStreams(dir string) string {
	return filepath.Join(dir, "accounts", server.GlobalAccountName, "streams")
}

// requestJSON sends a JetStream API request and returns its answer,
// decoded.
func requestJSON(t testing.TB, nc *nats.Conn, subj string, body []byte, wait time.Duration) map[string]any {
	t.Helper()
	m, err := nc.Request(subj, body, wait)
	require.NoError(t, err)
	var r map[string]any
	require.NoError(t, json.Unmarshal(m.Data, &r))
	return r
}

// errCodeOf returns the err_code of a decoded API answer (0 without an
// error).
func errCodeOf(r map[string]any) float64 {
	e, _ := r["error"].(map[string]any)
	c, _ := e["err_code"].(float64)
	return c
}
