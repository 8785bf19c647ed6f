//go:build unix

package storetest

import (
	"os"
	"syscall"
)

// Allocated returns the disk space the blocks of file name take (what du
// counts, space reserved past its end included), or -1 where the system
// does not say.
func Allocated(name string) (int64, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, nil
	}
	return st.Blocks * 512, nil
}
