package chaosfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/skiffmq/skiff/store/vfs"
)

// ErrPowerOff is what every change through an FS returns after PowerOff.
var ErrPowerOff = errors.New("chaosfs: the power is off")

// FS is a vfs.FS that journals what each change made durable (see the
// package documentation). Safe for concurrent use.
type FS struct {
	inner vfs.FS
	boots int64

	// mu orders the journal and the changes to directory entries, so that
	// the journal lists them in the order they happened.
	mu      sync.Mutex
	journal *os.File
	off     atomic.Bool // PowerOff was called: changes fail
}

var _ vfs.FS = (*FS)(nil)

// Open returns an FS over inner that appends to the journal at path
// (created if missing), as the boot the journal says: a machine that
// booted once more at every Cut.
func Open(inner vfs.FS, path string) (*FS, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("chaosfs: %w", err)
	}
	j, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("chaosfs: %w", err)
	}
	st, err := openJournal(j)
	if err != nil {
		_ = j.Close()
		return nil, fmt.Errorf("chaosfs: %s: %w", path, err)
	}
	return &FS{inner: inner, boots: st.boots, journal: j}, nil
}

// openJournal replays an open journal and cuts off a line a kill tore,
// so that the next record starts a line of its own.
func openJournal(j *os.File) (state, error) {
	st, err := replay(j)
	if err != nil {
		return st, err
	}
	return st, j.Truncate(st.end)
}

// BootID is the simulated machine's boot ID, which changes at every Cut
// (raftlog.Machine).
func (f *FS) BootID() string { return "chaosfs-boot-" + strconv.FormatInt(f.boots, 10) }

// PowerOff stops the machine as a power loss does, in process: from now
// on every change through the FS fails with ErrPowerOff, and nothing more
// is journaled. Reads go on (the process still runs until it is shut
// down; it can no longer change what the cut keeps).
func (f *FS) PowerOff() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.off.Store(true)
}

// Close closes the journal.
func (f *FS) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.journal.Close()
}

// change runs do, a change to directory entries, and journals what
// record returns of it, unless the power is off.
func (f *FS) change(name string, do func() (*record, error)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.off.Load() {
		return &fs.PathError{Op: "change", Path: name, Err: ErrPowerOff}
	}
	rec, err := do()
	if err != nil || rec == nil {
		return err
	}
	return f.writeLocked(*rec)
}

// log journals rec, unless the power is off.
func (f *FS) log(rec record) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.off.Load() {
		return &fs.PathError{Op: string(rec.op), Path: rec.path, Err: ErrPowerOff}
	}
	return f.writeLocked(rec)
}

func (f *FS) writeLocked(rec record) error {
	if _, err := f.journal.WriteString(rec.String() + "\n"); err != nil {
		return fmt.Errorf("chaosfs: journal: %w", err)
	}
	return nil
}

func abs(name string) string {
	if p, err := filepath.Abs(name); err == nil {
		return p
	}
	return filepath.Clean(name)
}

// writes reports whether OpenFile flags change the file.
func writes(flag int) bool {
	return flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND) != 0
}

// OpenFile opens a file; one made, or created over, is journaled.
func (f *FS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if !writes(flag) {
		inner, err := f.inner.OpenFile(name, flag, perm)
		if err != nil {
			return nil, err
		}
		return &file{File: inner, fs: f, name: abs(name)}, nil
	}
	var inner vfs.File
	err := f.change(name, func() (*record, error) {
		_, statErr := f.inner.Stat(name)
		existed := statErr == nil
		var err error
		if inner, err = f.inner.OpenFile(name, flag, perm); err != nil {
			return nil, err
		}
		switch {
		case !existed && flag&os.O_CREATE != 0:
			return &record{op: opCreate, path: abs(name)}, nil
		case existed && flag&os.O_TRUNC != 0:
			return &record{op: opTrunc, path: abs(name)}, nil
		}
		return nil, nil
	})
	if err != nil {
		if inner != nil {
			_ = inner.Close()
		}
		return nil, err
	}
	return &file{File: inner, fs: f, name: abs(name)}, nil
}

// Create creates or truncates a file.
func (f *FS) Create(name string) (vfs.File, error) {
	return f.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
}

// Remove removes a file or an empty directory.
func (f *FS) Remove(name string) error {
	return f.change(name, func() (*record, error) {
		if err := f.inner.Remove(name); err != nil {
			return nil, err
		}
		return &record{op: opRemove, path: abs(name)}, nil
	})
}

// Rename replaces newname with oldname.
func (f *FS) Rename(oldname, newname string) error {
	return f.change(oldname, func() (*record, error) {
		if err := f.inner.Rename(oldname, newname); err != nil {
			return nil, err
		}
		return &record{op: opRename, path: abs(oldname), to: abs(newname)}, nil
	})
}

// MkdirAll makes a directory and its parents: durable at once, as in the
// model.
func (f *FS) MkdirAll(path string, perm os.FileMode) error {
	return f.change(path, func() (*record, error) { return nil, f.inner.MkdirAll(path, perm) })
}

// ReadDir lists a directory.
func (f *FS) ReadDir(name string) ([]string, error) { return f.inner.ReadDir(name) }

// Stat describes a file.
func (f *FS) Stat(name string) (os.FileInfo, error) { return f.inner.Stat(name) }

// file is an open file of an FS: its writes fail once the power is off,
// and its syncs and truncations are journaled.
type file struct {
	vfs.File
	fs   *FS
	name string // absolute
}

func (f *file) Write(p []byte) (int, error) {
	if f.fs.off.Load() {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: ErrPowerOff}
	}
	return f.File.Write(p)
}

// Preallocate reserves space on the file underneath (vfs.Preallocate).
// It changes neither the file's size nor its bytes, so the journal has
// nothing to keep of it.
func (f *file) Preallocate(off, n int64) error {
	if f.fs.off.Load() {
		return &fs.PathError{Op: "fallocate", Path: f.name, Err: ErrPowerOff}
	}
	return vfs.Preallocate(f.File, off, n)
}

// Sync syncs the file and journals its size as it was before the sync
// began (what was written after it began may not be in it), or, for a
// directory, that its entries are durable.
func (f *file) Sync() error {
	if f.fs.off.Load() {
		return &fs.PathError{Op: "sync", Path: f.name, Err: ErrPowerOff}
	}
	fi, err := f.stat()
	if err != nil {
		return err
	}
	if err := f.File.Sync(); err != nil {
		return err
	}
	if fi.IsDir() {
		return f.fs.log(record{op: opSyncDir, path: f.name})
	}
	return f.fs.log(record{op: opSync, n: fi.Size(), path: f.name})
}

func (f *file) stat() (os.FileInfo, error) {
	if s, ok := f.File.(interface{ Stat() (os.FileInfo, error) }); ok {
		return s.Stat()
	}
	return f.fs.inner.Stat(f.name)
}

// Truncate truncates the file, durably at once (see the model).
func (f *file) Truncate(size int64) error {
	return f.fs.change(f.name, func() (*record, error) {
		if err := f.File.Truncate(size); err != nil {
			return nil, err
		}
		return &record{op: opTrunc, n: size, path: f.name}, nil
	})
}
