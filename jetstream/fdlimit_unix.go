//go:build unix

package jetstream

import "syscall"

// openFileLimit returns the process's soft limit of open files. The Go
// runtime has already raised it to the hard limit at start (Go 1.19+).
func openFileLimit() (uint64, bool) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, false
	}
	return uint64(lim.Cur), true //nolint:unconvert // int64 on some platforms
}
