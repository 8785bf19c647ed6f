package server

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/bufpool"
)

// heapMetrics reads the heap's bytes returned to the operating system and
// its free bytes not returned (HeapReleased, HeapIdle-HeapReleased).
func heapMetrics() (released, free uint64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}, {Name: "/memory/classes/heap/free:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// TestConnectionStormGivesMemoryToOS: 2,000 loopback clients that do not
// read, each with output queued, close at once. The chunk pool drops
// their chunks (keeping at most its bound) and, once that is past
// chunkReleaseMin, has the runtime collect them and return the memory to
// the operating system: the heap's released bytes grow by at least that,
// within seconds, where before the memory waited for a garbage collection
// (up to two minutes in an idle process) and then for the scavenger.
func TestConnectionStormGivesMemoryToOS(t *testing.T) {
	if testing.Short() {
		t.Skip("2,000 connections")
	}
	savedChunks, savedRelease := chunks, chunkRelease
	// Releases may come 100 ms apart here, not chunkReleaseEvery: the
	// pool's trims while 2,000 clients connect can make one before the
	// storm (make test saw it), and the storm's must not wait 30 s for it.
	chunkRelease = &bufpool.Releaser{MinBytes: chunkReleaseMin, Quiet: chunkReleaseQuiet, Every: 100 * time.Millisecond}
	chunks = bufpool.NewFixed(chunkSize, chunkPoolRetained, 50*time.Millisecond).WithReleaser(chunkRelease)
	t.Cleanup(func() { chunks, chunkRelease = savedChunks, savedRelease })

	opts := DefaultOptions()
	opts.Host, opts.Port, opts.HTTPPort = "127.0.0.1", RandomPort, 0
	opts.MaxConnections = 3000
	s, err := New(opts)
	require.NoError(t, err)
	require.NoError(t, s.Start())
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	addr := strings.TrimPrefix(s.ClientURL(), "nats://")

	dial := func() (*net.TCPConn, *bufio.Reader) {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		require.NoError(t, err)
		tc := c.(*net.TCPConn)
		require.NoError(t, tc.SetReadBuffer(4096)) // so that output stays queued in the server
		require.NoError(t, tc.SetDeadline(time.Now().Add(30*time.Second)))
		r := bufio.NewReader(tc)
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(line, "INFO "), line)
		return tc, r
	}
	expectPong := func(c net.Conn, r *bufio.Reader) {
		_, err := c.Write([]byte("PING\r\n"))
		require.NoError(t, err)
		for {
			line, err := r.ReadString('\n')
			require.NoError(t, err)
			if line == "PONG\r\n" {
				return
			}
		}
	}

	const clients = 2000
	conns := make([]*net.TCPConn, 0, clients)
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	for i := range clients {
		c, r := dial()
		conns = append(conns, c)
		_, err := fmt.Fprintf(c, "CONNECT {\"verbose\":false}\r\nSUB storm %d\r\n", i)
		require.NoError(t, err)
		expectPong(c, r)
	}
	pub, pr := dial()
	defer func() { _ = pub.Close() }()
	payload := strings.Repeat("x", 60<<10)
	for range 4 { // about 240 KiB for each client, most of it queued
		_, err := fmt.Fprintf(pub, "CONNECT {\"verbose\":false}\r\nPUB storm %d\r\n%s\r\n", len(payload), payload)
		require.NoError(t, err)
	}
	expectPong(pub, pr)

	releasedBefore, _ := heapMetrics()
	releasesBefore := chunkRelease.Releases()
	for _, c := range conns {
		_ = c.Close()
	}
	conns = nil
	// Polled, not read once after the release: the process's other tests
	// allocate meanwhile, and take released pages back (make test saw the
	// released bytes below their count before the storm, once read).
	var releasedAfter, free uint64
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		releasedAfter, free = heapMetrics()
		if chunkRelease.Releases() > releasesBefore && releasedAfter >= releasedBefore+chunkReleaseMin {
			break
		}
		time.Sleep(time.Millisecond)
	}
	require.Greater(t, chunkRelease.Releases(), releasesBefore, "the dropped chunks are released")
	require.GreaterOrEqual(t, releasedAfter, releasedBefore+chunkReleaseMin,
		"at least %d MiB returned to the operating system (free and not returned: %d MiB)", chunkReleaseMin>>20, free>>20)
}
