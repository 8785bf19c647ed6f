package portlock

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReserve: ports are distinct, below the ephemeral range, bindable,
// and not handed out again while held; released, they can be.
func TestReserve(t *testing.T) {
	lo, hi := span()
	r, err := Reserve(20)
	require.NoError(t, err)
	seen := map[int]bool{}
	for _, p := range r.Ports {
		require.False(t, seen[p], "port %d twice", p)
		seen[p] = true
		require.GreaterOrEqual(t, p, lo)
		require.Less(t, p, hi)
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		require.NoError(t, err)
		require.NoError(t, ln.Close())
	}
	for range 5 {
		other, err := Reserve(20)
		require.NoError(t, err)
		for _, p := range other.Ports {
			require.False(t, seen[p], "port %d reserved twice", p)
		}
		other.Release()
	}
	r.Release()
	f, ok := lock(lockDir(), r.Ports[0])
	require.True(t, ok, "a released port can be locked again")
	require.NoError(t, f.Close())
}
