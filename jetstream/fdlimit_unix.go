//go:build unix

package jetstream

import "syscall"

// openFileLimits returns the process's soft and hard limits of open files.
func openFileLimits() (soft, hard uint64, ok bool) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, 0, false
	}
	return uint64(lim.Cur), uint64(lim.Max), true //nolint:unconvert // int64 on some platforms
}

// raiseOpenFileLimit raises the soft limit of open files to the hard
// limit, where it is below. The Go runtime does so when the process
// starts (Go 1.19+); this covers a limit lowered since, by the program
// embedding Skiff. It returns the soft limit before.
func raiseOpenFileLimit() (before uint64, err error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	before = uint64(lim.Cur) //nolint:unconvert // int64 on some platforms
	if lim.Cur >= lim.Max {
		return before, nil
	}
	lim.Cur = lim.Max
	return before, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
}
