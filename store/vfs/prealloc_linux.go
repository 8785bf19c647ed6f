package vfs

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// fallocKeepSize is FALLOC_FL_KEEP_SIZE (linux/falloc.h).
const fallocKeepSize = 0x1

func preallocate(f *os.File, off, n int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			ferr = syscall.Fallocate(int(fd), fallocKeepSize, off, n)
			if !errors.Is(ferr, syscall.EINTR) {
				return
			}
		}
	}); err != nil {
		return err
	}
	if errors.Is(ferr, syscall.EOPNOTSUPP) || errors.Is(ferr, syscall.ENOSYS) {
		return fmt.Errorf("%w: %w", ErrNoPreallocate, ferr)
	}
	return ferr
}
