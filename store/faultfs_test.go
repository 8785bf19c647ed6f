package store

import (
	"os"
	"sync"
	"syscall"
)

// faultFS wraps an FS and injects failures: writes fail with ENOSPC once a
// byte budget is spent (after writing what fits, like a real full disk),
// and Sync fails with a set error.
type faultFS struct {
	FS
	mu      sync.Mutex
	budget  int64 // bytes that may still be written; < 0 for no limit
	syncErr error
	onSync  func() // runs inside every failing Sync, once
	writes  int    // successful writes, for picking failure points
	faults  int    // failures injected so far
}

// injected returns how many failures were injected so far.
func (f *faultFS) injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.faults
}

func newFaultFS(inner FS) *faultFS { return &faultFS{FS: inner, budget: -1} }

// setBudget lets n more bytes be written (n < 0: unlimited).
func (f *faultFS) setBudget(n int64) {
	f.mu.Lock()
	f.budget = n
	f.mu.Unlock()
}

// failSync makes every Sync return err (nil to stop).
func (f *faultFS) failSync(err error) {
	f.mu.Lock()
	f.syncErr = err
	f.mu.Unlock()
}

func (f *faultFS) wrap(file File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

func (f *faultFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	return f.wrap(f.FS.OpenFile(name, flag, perm))
}

func (f *faultFS) Create(name string) (File, error) {
	f.mu.Lock()
	full := f.budget == 0
	if full {
		f.faults++
	}
	f.mu.Unlock()
	if full {
		return nil, &os.PathError{Op: "create", Path: name, Err: syscall.ENOSPC}
	}
	return f.wrap(f.FS.Create(name))
}

type faultFile struct {
	File
	fs *faultFS
}

func (f *faultFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	n := int64(len(p))
	short := f.fs.budget >= 0 && n > f.fs.budget
	if short {
		n = f.fs.budget
	}
	if f.fs.budget >= 0 {
		f.fs.budget -= n
	}
	if !short {
		f.fs.writes++
	} else {
		f.fs.faults++
	}
	f.fs.mu.Unlock()
	w, err := f.File.Write(p[:n])
	if err == nil && short {
		err = &os.PathError{Op: "write", Path: "fault", Err: syscall.ENOSPC}
	}
	return w, err
}

func (f *faultFile) Sync() error {
	f.fs.mu.Lock()
	err, hook := f.fs.syncErr, f.fs.onSync
	if err != nil {
		f.fs.onSync = nil
		f.fs.faults++
	}
	f.fs.mu.Unlock()
	if err != nil {
		if hook != nil {
			hook()
		}
		return err
	}
	return f.File.Sync()
}
