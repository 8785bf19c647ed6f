package storetest

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/skiffmq/skiff/store/vfs"
)

// FaultFS wraps a file system and injects the failures of a real disk.
// Each fault is switched on and off while the store runs:
//
//   - SetBudget: the disk fills up after so many more bytes; a write
//     writes what fits and fails with ENOSPC, and Create fails once
//     nothing fits.
//   - SetFull: the disk is full: every write fails with ENOSPC, writing
//     nothing, and so do Create and MkdirAll.
//   - FailSync: every fsync fails with an error (EIO, say), optionally
//     running a hook inside the first (OnFailedSync).
//   - FailReads: every read fails with an error, as a failing device's.
//   - StallMkdir: creating certain directories waits until released.
//
// Syncs counts fsyncs, ReadAts positioned reads, and Injected the failures
// injected. Faults apply
// only to the files whose names Match accepts (every file if Match is
// nil).
type FaultFS struct {
	vfs.FS
	// Match, if set, limits the faults to the files whose names it
	// accepts (IsSegment: a stream's message segments). Set it before
	// the file system is used.
	Match func(name string) bool

	mu       sync.Mutex
	budget   int64 // bytes that may still be written; < 0 for no limit
	full     bool
	syncErr  error
	onSync   func() // runs inside the next failing Sync
	readErr  error
	syncs    int64
	readAts  int64
	injected int
	stalls   []*stall
}

type stall struct {
	substr  string
	entered chan struct{}
	release chan struct{}
	enter   sync.Once
	free    sync.Once
}

var _ vfs.FS = (*FaultFS)(nil)

// NewFaultFS returns inner with no fault switched on.
func NewFaultFS(inner vfs.FS) *FaultFS { return &FaultFS{FS: inner, budget: -1} }

// IsSegment reports whether name is a stream's message segment: a file
// named by its first sequence, 20 digits, with the extension .log (not a
// consumer's consumer.log).
func IsSegment(name string) bool {
	base := filepath.Base(name)
	digits, ok := strings.CutSuffix(base, ".log")
	return ok && len(digits) == 20 && strings.Trim(digits, "0123456789") == ""
}

// ErrNoSpace is the error of a write, Create or MkdirAll refused for want
// of space; errors.Is(err, syscall.ENOSPC) holds.
var ErrNoSpace error = &os.PathError{Op: "write", Path: "storetest", Err: syscall.ENOSPC}

// set changes what is injected, under the lock.
func (f *FaultFS) set(change func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change()
}

// SetBudget lets n more bytes be written to matching files (n < 0: no
// limit). A write past it writes what fits and fails with ENOSPC; once it
// is 0, Create of a matching file fails too.
func (f *FaultFS) SetBudget(n int64) { f.set(func() { f.budget = n }) }

// SetFull switches a full disk on or off: while on, every write to a
// matching file fails with ENOSPC after writing nothing, and Create and
// MkdirAll of matching names fail with ENOSPC.
func (f *FaultFS) SetFull(full bool) { f.set(func() { f.full = full }) }

// FailSync makes every Sync of a matching file return err, without
// syncing (nil to stop).
func (f *FaultFS) FailSync(err error) { f.set(func() { f.syncErr = err }) }

// OnFailedSync sets a hook that the next failing Sync runs, once, before
// it returns: to act while an fsync is in flight.
func (f *FaultFS) OnFailedSync(hook func()) { f.set(func() { f.onSync = hook }) }

// FailReads makes every Read and ReadAt of a matching file return err
// (nil to stop).
func (f *FaultFS) FailReads(err error) { f.set(func() { f.readErr = err }) }

// StallMkdir makes every MkdirAll of a path containing substr wait until
// release is called (release may be called more than once). entered is
// closed when the first such call starts to wait.
func (f *FaultFS) StallMkdir(substr string) (entered <-chan struct{}, release func()) {
	s := &stall{substr: substr, entered: make(chan struct{}), release: make(chan struct{})}
	f.mu.Lock()
	f.stalls = append(f.stalls, s)
	f.mu.Unlock()
	return s.entered, func() { s.free.Do(func() { close(s.release) }) }
}

// Syncs returns how many times Sync was called on matching files,
// failed or not.
func (f *FaultFS) Syncs() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncs
}

// ReadAts returns how many times ReadAt was called on matching files.
func (f *FaultFS) ReadAts() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.readAts
}

// Injected returns how many failures were injected so far.
func (f *FaultFS) Injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

func (f *FaultFS) matches(name string) bool { return f.Match == nil || f.Match(name) }

func (f *FaultFS) wrap(name string, file vfs.File, err error) (vfs.File, error) {
	if err != nil || !f.matches(name) {
		return file, err
	}
	return &faultFile{File: file, fs: f}, nil
}

// OpenFile opens a file of the inner file system.
func (f *FaultFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	file, err := f.FS.OpenFile(name, flag, perm)
	return f.wrap(name, file, err)
}

// Create creates a file, unless the disk is full.
func (f *FaultFS) Create(name string) (vfs.File, error) {
	if f.matches(name) {
		f.mu.Lock()
		full := f.full || f.budget == 0
		if full {
			f.injected++
		}
		f.mu.Unlock()
		if full {
			return nil, &os.PathError{Op: "create", Path: name, Err: syscall.ENOSPC}
		}
	}
	file, err := f.FS.Create(name)
	return f.wrap(name, file, err)
}

// MkdirAll creates a directory, unless the disk is full, after waiting
// for a stall set on it to be released.
func (f *FaultFS) MkdirAll(path string, perm os.FileMode) error {
	f.mu.Lock()
	stalls := f.stalls
	full := f.full && f.matches(path)
	if full {
		f.injected++
	}
	f.mu.Unlock()
	for _, s := range stalls {
		if strings.Contains(path, s.substr) {
			s.enter.Do(func() { close(s.entered) })
			<-s.release
		}
	}
	if full {
		return ErrNoSpace
	}
	return f.FS.MkdirAll(path, perm)
}

type faultFile struct {
	vfs.File
	fs *FaultFS
}

func (f *faultFile) Write(p []byte) (int, error) {
	fs := f.fs
	fs.mu.Lock()
	n := int64(len(p))
	short := fs.full || (fs.budget >= 0 && n > fs.budget)
	switch {
	case fs.full:
		n = 0
	case short:
		n = fs.budget
	}
	if fs.budget >= 0 {
		fs.budget -= n
	}
	if short {
		fs.injected++
	}
	fs.mu.Unlock()
	if short && n == 0 {
		return 0, ErrNoSpace
	}
	w, err := f.File.Write(p[:n])
	if err == nil && short {
		err = ErrNoSpace
	}
	return w, err
}

func (f *faultFile) Sync() error {
	fs := f.fs
	fs.mu.Lock()
	fs.syncs++
	err, hook := fs.syncErr, fs.onSync
	if err != nil {
		fs.onSync = nil
		fs.injected++
	}
	fs.mu.Unlock()
	if err != nil {
		if hook != nil {
			hook()
		}
		return err
	}
	return f.File.Sync()
}

// readErr returns the error reads fail with now, counting it.
func (f *faultFile) readErr() error {
	fs := f.fs
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.readErr != nil {
		fs.injected++
	}
	return fs.readErr
}

func (f *faultFile) Read(p []byte) (int, error) {
	if err := f.readErr(); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	f.fs.readAts++
	f.fs.mu.Unlock()
	if err := f.readErr(); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}
