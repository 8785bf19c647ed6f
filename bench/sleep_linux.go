package bench

import (
	"syscall"
	"time"
)

// sleep waits d on the calling thread with nanosleep(2), whose wake-up
// is late by the kernel's timer slack (50 µs by default) rather than by
// the Go runtime's timer granularity: an idle Go process waits for its
// timers in epoll_wait, whose timeout is whole milliseconds, so
// time.Sleep ends up to a millisecond late (docs/benchmarks/harness.md).
// The goroutine's thread blocks in the system call; the runtime runs
// other goroutines on its other threads meanwhile.
func sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	ts := syscall.NsecToTimespec(int64(d))
	for {
		// On EINTR ts holds what is left to sleep.
		if err := syscall.Nanosleep(&ts, &ts); err != syscall.EINTR {
			return
		}
	}
}
