//go:build unix

package jetstream

import (
	"os"
	"syscall"
)

// flock takes an exclusive, non-blocking advisory lock on f. Locks from
// flock(2) belong to the open file description, so a second open of the
// same file in this process is refused too.
func flock(f *os.File) error {
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
}
