package server

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPingsOrder: a keepalive PING sent before a flush's is answered
// first; its PONG does not release the flush.
func TestPingsOrder(t *testing.T) {
	var p pings
	p.sent++ // the keepalive's
	ch := make(chan error, 1)
	p.sent++
	p.waiters = append(p.waiters, pingWaiter{n: p.sent, ch: ch})
	p.pong()
	require.Empty(t, ch, "the keepalive's PONG")
	p.pong()
	require.NoError(t, <-ch)

	p.sent++
	p.waiters = append(p.waiters, pingWaiter{n: p.sent, ch: ch})
	p.close()
	require.ErrorIs(t, <-ch, ErrNoRoute)
}
