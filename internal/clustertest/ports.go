package clustertest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/portlock"
)

// FreePorts reserves n distinct ports of 127.0.0.1 for the rest of the
// test: for a process or a proxy whose address must be known before it
// starts, and may be restarted on it (portlock says how they are kept
// from other processes).
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	r, err := portlock.Reserve(n)
	require.NoError(t, err)
	t.Cleanup(r.Release)
	return r.Ports
}
