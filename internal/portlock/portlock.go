// Package portlock reserves TCP ports of 127.0.0.1 for processes that
// must be told their port before they start: the servers of a test
// cluster, whose routes name each other, and the peers of a benchmark.
//
// A port that was merely free when looked at (listen on :0, close) is not
// enough: the kernel hands the same range to every connection's local end
// and to every other listener on :0, so a route dialled by a sibling
// process can take the port before the server meant for it binds it
// ("bind: address already in use", seen in CI and in `skiff bench
// cluster`). Reserve therefore takes ports below the kernel's ephemeral
// range, which neither of those ever uses, and holds a lock file per port
// (flock, which the kernel drops if the process dies) until Release, so
// that concurrent processes picking from the same range never hand out
// the same port twice.
//
//	r, err := portlock.Reserve(3)
//	defer r.Release()
//	// start servers on r.Ports
package portlock

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ErrNoPort is returned when no free port was found in the range.
var ErrNoPort = errors.New("portlock: no free port")

// Reservation is a set of reserved ports, held until Release.
type Reservation struct {
	Ports []int
	locks []*os.File
}

// Reserve reserves n distinct ports. The lock files live in
// os.TempDir()/skiff-test-ports and are left there (removing one another
// process may be locking would break the exclusion).
func Reserve(n int) (*Reservation, error) {
	lo, hi := span()
	dir := lockDir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("portlock: %w", err)
	}
	r := &Reservation{}
	for tries := 0; len(r.Ports) < n; tries++ {
		if tries >= 100*n {
			r.Release()
			return nil, fmt.Errorf("%w in [%d, %d)", ErrNoPort, lo, hi)
		}
		port := lo + rand.IntN(hi-lo)
		f, ok := lock(dir, port)
		if !ok {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			_ = f.Close()
			continue
		}
		_ = ln.Close()
		r.Ports = append(r.Ports, port)
		r.locks = append(r.locks, f)
	}
	return r, nil
}

// Release drops the reservation; closing a lock file drops its lock.
func (r *Reservation) Release() {
	for _, f := range r.locks {
		_ = f.Close()
	}
	r.locks = nil
}

// lockDir holds the lock files.
func lockDir() string { return filepath.Join(os.TempDir(), "skiff-test-ports") }

// lock takes dir/port's exclusive lock without waiting; ok is false if
// another process (or reservation) holds it.
func lock(dir string, port int) (f *os.File, ok bool) {
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

// span is the range Reserve picks from: above the well-known and
// registered ports most services use, below the ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range, 32768 by default), or above it
// if it reaches low.
func span() (lo, hi int) {
	lo, hi = 20000, 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var first, last int
		if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &first, &last); err == nil {
			switch {
			case first-lo >= 2000:
				hi = first
			case 65535-last >= 2000:
				lo, hi = last+1, 65536
			}
		}
	}
	return lo, hi
}
