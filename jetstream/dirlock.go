package jetstream

import (
	"fmt"
	"os"
	"path/filepath"
)

// lockFile is the file in the store directory that a running JetStream
// holds an exclusive lock on, so that two servers never write the same
// streams. The lock goes with the process: a crashed server leaves the
// file behind but not the lock.
const lockFile = "LOCK"

// dirLock is a held lock on a store directory.
type dirLock struct{ f *os.File }

// lockStoreDir takes the store directory's lock without waiting; it fails
// with ErrStoreDirLocked if someone holds it.
func lockStoreDir(dir string) (*dirLock, error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: store_dir %s: %v", ErrInvalidOptions, dir, err)
	}
	if err := flock(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%w: %s: %v (is another server using it?)", ErrStoreDirLocked, dir, err)
	}
	// The holder's process id, for whoever finds the directory locked.
	if err := f.Truncate(0); err == nil {
		_, _ = fmt.Fprintf(f, "%d\n", os.Getpid())
	}
	return &dirLock{f: f}, nil
}

// release gives the lock up.
func (l *dirLock) release() error {
	if l == nil {
		return nil
	}
	return l.f.Close() // closing the descriptor drops the lock
}
