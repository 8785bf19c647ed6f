package bench

import (
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// sleep waits d on a Linux timerfd read through the Go runtime's network
// poller. time.Sleep is late by up to a millisecond: an otherwise idle Go
// process waits for its timers in epoll_wait, whose timeout is whole
// milliseconds (docs/benchmarks/harness.md). A timerfd is a file
// descriptor that becomes readable at its expiry, with the kernel's
// high-resolution timers; the poller's epoll_wait returns for it at once,
// and the goroutine is parked meanwhile, holding no thread and no P (a
// blocking nanosleep would hold both, and with many senders on few CPUs
// the woken ones wait for a P). When no timerfd can be had, sleep falls
// back to time.Sleep.
func sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	tf, ok := timerfds.Get().(*timerFD)
	if !ok || tf == nil {
		fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
		if err != nil {
			time.Sleep(d)
			return
		}
		// A non-blocking descriptor: os.File reads it through the poller.
		// (os.File.Fd would make it blocking, so the number is kept.)
		tf = &timerFD{f: os.NewFile(uintptr(fd), "timerfd"), fd: fd}
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	var buf [8]byte // the expiry count
	if unix.TimerfdSettime(tf.fd, 0, &spec, nil) != nil {
		_ = tf.f.Close()
		time.Sleep(d)
		return
	}
	if _, err := tf.f.Read(buf[:]); err != nil {
		_ = tf.f.Close()
		time.Sleep(d)
		return
	}
	// A pooled descriptor the pool drops is closed by os.File's finalizer.
	timerfds.Put(tf)
}

// timerFD is a timerfd and its descriptor number.
type timerFD struct {
	f  *os.File
	fd int
}

// timerfds holds idle timerfds, one per concurrent sleeper at most.
var timerfds sync.Pool
