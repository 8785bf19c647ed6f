package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/clustertest"
	"github.com/skiffmq/skiff/server"
)

// TestFlushRoute: once FlushRoute to a peer returns, the peer knows of
// every subscription made here before the call, without waiting: what a
// request handed over another connection (a raft link) relies on.
func TestFlushRoute(t *testing.T) {
	c := clustertest.Start(t, 2, server.Options{})
	c.WaitFormed(t)
	s0, s1 := c.Servers[0], c.Servers[1]
	nc := c.Connect(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), clustertest.Wait)
	defer cancel()
	for i := range 200 {
		subject := fmt.Sprintf("flush.%d", i)
		_, err := nc.SubscribeSync(subject)
		require.NoError(t, err)
		require.NoError(t, nc.Flush()) // s1 has the SUB, and queued its RS+
		require.NoError(t, s1.FlushRoute(ctx, s0.Name()))
		require.True(t, s0.PeerHasInterest(s1.ID(), subject), "interest in %s known after the flush", subject)
	}

	err := s1.FlushRoute(ctx, "nobody")
	require.ErrorIs(t, err, server.ErrNoRoute)
	alone, err := server.New(server.Options{Host: "127.0.0.1", Port: server.RandomPort})
	require.NoError(t, err)
	require.ErrorIs(t, alone.FlushRoute(ctx, s0.Name()), server.ErrNoRoute)

	// A peer that goes away fails a flush rather than leave it waiting.
	c.Stop(t, 0)
	require.Eventually(t, func() bool {
		return s1.FlushRoute(ctx, s0.Name()) != nil
	}, clustertest.Wait, 10*time.Millisecond)
}
