package clustertest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// FreePorts reserves n distinct ports of 127.0.0.1 for the rest of the
// test: for a process or a proxy whose address must be known before it
// starts, and may be restarted on it.
//
// A port that was merely free when looked at (listen on :0, close) is
// not enough: the kernel hands the same range to every connection's
// local end and to every other listener on :0, so a route dialled by a
// sibling process could take a port before the server meant for it bound
// it ("bind: address already in use", seen in CI). FreePorts therefore
// takes ports below the kernel's ephemeral range, which neither of those
// ever use, and holds a lock file per port (flock, dropped by the kernel
// if the test process dies) so that concurrent test binaries, which pick
// from the same range, never hand out the same port twice.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	lo, hi := reservedRange()
	dir := filepath.Join(os.TempDir(), "skiff-test-ports")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	ports := make([]int, 0, n)
	for tries := 0; len(ports) < n; tries++ {
		require.Less(t, tries, 100*n, "no free port in [%d, %d)", lo, hi)
		port := lo + rand.IntN(hi-lo)
		f, ok := lockPort(dir, port)
		if !ok {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			_ = f.Close()
			continue
		}
		_ = ln.Close()
		t.Cleanup(func() { _ = f.Close() }) // closing the file drops the lock
		ports = append(ports, port)
	}
	return ports
}

// lockPort takes dir/port's exclusive lock without waiting; ok is false
// if another test holds it.
func lockPort(dir string, port int) (f *os.File, ok bool) {
	f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, false
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		return nil, false
	}
	return f, true
}

// reservedRange is the span FreePorts picks from: above the well-known
// and registered ports most services use, below the ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range, 32768 by default).
func reservedRange() (lo, hi int) {
	lo, hi = 20000, 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var first, last int
		if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &first, &last); err == nil {
			switch {
			case first-lo >= 2000:
				hi = first
			case 65535-last >= 2000: // an ephemeral range reaching low: pick above it
				lo, hi = last+1, 65536
			}
		}
	}
	return lo, hi
}
