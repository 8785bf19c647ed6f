// Package vfs is the file system interface of Skiff's store, in the style
// of pebble's vfs: small enough that a test can wrap it to inject faults
// (a full disk, an I/O error on fsync) or replace it with an in-memory
// file system. The store re-exports its types (store.FS, store.File,
// store.OSFS); they live here, below the store, so that the test file
// systems of package store/storetest implement them without importing the
// store, and the store's own tests can use them.
//
// The store calls an FS from the goroutines of its callers and from its
// own background goroutines; an implementation must be safe for
// concurrent use on different files. The store never uses one File from
// two goroutines at once except for ReadAt and Sync, which must be safe
// alongside each other and alongside Write.
package vfs

import (
	"io"
	"os"
	"path/filepath"
	"sort"
)

// FS is a file system.
type FS interface {
	// OpenFile opens a file (or, read-only, a directory, so that its Sync
	// persists the directory's entries) with os.OpenFile flags.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Create creates or truncates a file for reading and writing.
	Create(name string) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	// ReadDir returns the names of the entries of a directory, sorted.
	ReadDir(name string) ([]string, error)
	// MkdirAll creates a directory and its missing parents.
	MkdirAll(path string, perm os.FileMode) error
	// Stat describes a file.
	Stat(name string) (os.FileInfo, error)
}

// File is an open file of an FS. An *os.File satisfies it.
type File interface {
	io.Reader
	io.Writer
	io.ReaderAt
	io.Seeker
	io.Closer
	// Sync commits the file's contents (for a directory, its entries) to
	// stable storage.
	Sync() error
	// Truncate changes the size of the file; it does not move the offset.
	Truncate(size int64) error
}

// OS is the operating system's file system.
var OS FS = osFS{}

type osFS struct{}

var _ File = (*os.File)(nil)

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFS) Remove(name string) error                     { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error         { return os.Rename(oldname, newname) }
func (osFS) MkdirAll(path string, perm os.FileMode) error { return os.MkdirAll(path, perm) }
func (osFS) Stat(name string) (os.FileInfo, error)        { return os.Stat(name) }

func (osFS) ReadDir(name string) ([]string, error) {
	ents, err := os.ReadDir(name)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

// SyncDir fsyncs directory dir of fsys, so that the files created, renamed
// or removed in it survive a crash.
func SyncDir(fsys FS, dir string) error {
	d, err := fsys.OpenFile(dir, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// WriteFile replaces file name of fsys with b, atomically and durably: b
// goes to name+".tmp", which is fsynced and renamed over name, and then
// the directory is fsynced. A crash leaves the old file or the new one,
// never a mix; a failure leaves no temporary file behind.
func WriteFile(fsys FS, name string, b []byte) error {
	tmp := name + ".tmp"
	err := writeSynced(fsys, tmp, b)
	if err == nil {
		err = fsys.Rename(tmp, name)
	}
	if err != nil {
		_ = fsys.Remove(tmp)
		return err
	}
	return SyncDir(fsys, filepath.Dir(name))
}

// writeSynced creates name with b and fsyncs it.
func writeSynced(fsys FS, name string, b []byte) error {
	f, err := fsys.Create(name)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ReadFile returns the contents of file name of fsys.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return b, err
}
