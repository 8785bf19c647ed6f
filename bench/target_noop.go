package bench

import (
	"context"
	"net/url"
)

func init() {
	Register("noop", func(*url.URL) (Target, error) { return Noop{}, nil })
}

// Noop is a target without a broker: Send hands the payload straight back
// to deliver. Its latencies are the harness's own overhead: how late the
// scheduler wakes a sender, plus stamping and recording a sample.
type Noop struct{}

func (Noop) Name() string { return "noop" }

func (Noop) Open(_ context.Context, _ string, deliver func([]byte)) (Conn, error) {
	return noopConn{deliver: deliver}, nil
}

type noopConn struct{ deliver func([]byte) }

func (c noopConn) Send(p []byte) error {
	if c.deliver != nil {
		c.deliver(p)
	}
	return nil
}

func (noopConn) Close() error { return nil }
