package storetest

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/skiffmq/skiff/store/vfs"
)

// MemFS is an in-memory file system. It remembers what each file held at
// its last Sync, so that CrashClone can model an operating system crash:
// every file keeps only what was synced. Directory entries are durable at
// once (the store's directory fsyncs are exercised against the real file
// system). Paths are cleaned with path.Clean; "/" and "." exist from the
// start.
type MemFS struct {
	mu    sync.Mutex
	files map[string]*memNode
	dirs  map[string]bool
}

type memNode struct {
	data   []byte
	synced []byte
}

// NewMemFS returns an empty in-memory file system.
func NewMemFS() *MemFS {
	return &MemFS{files: map[string]*memNode{}, dirs: map[string]bool{"/": true, ".": true}}
}

var _ vfs.FS = (*MemFS)(nil)

// OpenFile opens a file or a directory; O_CREATE creates a file in an
// existing directory and O_TRUNC empties it. Other flags are ignored.
func (m *MemFS) OpenFile(name string, flag int, _ os.FileMode) (vfs.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = path.Clean(name)
	if m.dirs[name] {
		return &memFile{fs: m, name: name, dir: true}, nil
	}
	n, ok := m.files[name]
	if !ok {
		if flag&os.O_CREATE == 0 || !m.dirs[path.Dir(name)] {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		n = &memNode{}
		m.files[name] = n
	}
	if flag&os.O_TRUNC != 0 {
		n.data = nil
	}
	return &memFile{fs: m, name: name, n: n}, nil
}

// Create creates or truncates a file.
func (m *MemFS) Create(name string) (vfs.File, error) {
	return m.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
}

// Remove removes a file or an empty directory.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = path.Clean(name)
	if _, ok := m.files[name]; ok {
		delete(m.files, name)
		return nil
	}
	if m.dirs[name] {
		for f := range m.files {
			if path.Dir(f) == name {
				return &fs.PathError{Op: "remove", Path: name, Err: errors.New("directory not empty")}
			}
		}
		delete(m.dirs, name)
		return nil
	}
	return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
}

// Rename replaces newname with the file oldname.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.files[path.Clean(oldname)]
	if !ok {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	delete(m.files, path.Clean(oldname))
	m.files[path.Clean(newname)] = n
	return nil
}

// ReadDir returns the names of a directory's files and subdirectories,
// sorted.
func (m *MemFS) ReadDir(name string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = path.Clean(name)
	if !m.dirs[name] {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	var out []string
	for f := range m.files {
		if path.Dir(f) == name {
			out = append(out, path.Base(f))
		}
	}
	for d := range m.dirs {
		if d != name && path.Dir(d) == name {
			out = append(out, path.Base(d))
		}
	}
	sort.Strings(out)
	return out, nil
}

// MkdirAll creates a directory and its missing parents.
func (m *MemFS) MkdirAll(p string, _ os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p = path.Clean(p); !m.dirs[p]; p = path.Dir(p) {
		m.dirs[p] = true
	}
	return nil
}

// Stat describes a file or directory: its name, size and whether it is a
// directory.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = path.Clean(name)
	if m.dirs[name] {
		return memInfo{name: path.Base(name), dir: true}, nil
	}
	n, ok := m.files[name]
	if !ok {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return memInfo{name: path.Base(name), size: int64(len(n.data))}, nil
}

// CrashClone returns the file system as an operating system crash would
// leave it: each file holds what its last Sync saw.
func (m *MemFS) CrashClone() *MemFS {
	return m.cloneWith(func(n *memNode) []byte { return n.synced })
}

// Clone returns a copy of the file system as it is, as a process crash
// (kill -9) leaves it: everything written survives.
func (m *MemFS) Clone() *MemFS {
	return m.cloneWith(func(n *memNode) []byte { return n.data })
}

// cloneWith copies the file system, each file holding (as written and as
// synced) what keep returns of it.
func (m *MemFS) cloneWith(keep func(*memNode) []byte) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := NewMemFS()
	for d := range m.dirs {
		c.dirs[d] = true
	}
	for name, n := range m.files {
		b := keep(n)
		c.files[name] = &memNode{data: append([]byte(nil), b...), synced: append([]byte(nil), b...)}
	}
	return c
}

// Contents returns a copy of a file's contents (nil if it is missing).
func (m *MemFS) Contents(name string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n, ok := m.files[path.Clean(name)]; ok {
		return append([]byte(nil), n.data...)
	}
	return nil
}

// SetContents replaces a file's contents, or creates it, as if synced:
// for tests that damage or plant files.
func (m *MemFS) SetContents(name string, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[path.Clean(name)] = &memNode{data: append([]byte(nil), b...), synced: append([]byte(nil), b...)}
}

// Names lists, sorted, the entries of dir whose name contains substr.
func (m *MemFS) Names(dir, substr string) []string {
	all, _ := m.ReadDir(dir)
	var out []string
	for _, n := range all {
		if strings.Contains(n, substr) {
			out = append(out, n)
		}
	}
	return out
}

// FileOf returns an open file holding b, in a file system of its own: for
// tests of code that reads a File.
func FileOf(b []byte) vfs.File {
	return &memFile{fs: NewMemFS(), name: "/file", n: &memNode{data: b}}
}

type memInfo struct {
	name string
	size int64
	dir  bool
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() os.FileMode {
	if i.dir {
		return os.ModeDir | 0o755
	}
	return 0o644
}
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }

type memFile struct {
	fs     *MemFS
	name   string
	n      *memNode
	dir    bool
	off    int64
	closed bool
}

// lock takes the file system's lock, unless the file is closed.
func (f *memFile) lock() error {
	f.fs.mu.Lock()
	if f.closed {
		f.fs.mu.Unlock()
		return os.ErrClosed
	}
	return nil
}

func (f *memFile) Read(p []byte) (int, error) {
	if err := f.lock(); err != nil {
		return 0, err
	}
	defer f.fs.mu.Unlock()
	if f.dir || f.off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[f.off:])
	f.off += int64(n)
	return n, nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.lock(); err != nil {
		return 0, err
	}
	defer f.fs.mu.Unlock()
	if f.dir || off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	if err := f.lock(); err != nil {
		return 0, err
	}
	defer f.fs.mu.Unlock()
	if end := f.off + int64(len(p)); end > int64(len(f.n.data)) {
		f.n.data = append(f.n.data, make([]byte, end-int64(len(f.n.data)))...)
	}
	copy(f.n.data[f.off:], p)
	f.off += int64(len(p))
	return len(p), nil
}

func (f *memFile) Seek(off int64, whence int) (int64, error) {
	if err := f.lock(); err != nil {
		return 0, err
	}
	defer f.fs.mu.Unlock()
	switch whence {
	case io.SeekStart:
		f.off = off
	case io.SeekCurrent:
		f.off += off
	case io.SeekEnd:
		f.off = int64(len(f.n.data)) + off
	}
	return f.off, nil
}

func (f *memFile) Truncate(size int64) error {
	if err := f.lock(); err != nil {
		return err
	}
	defer f.fs.mu.Unlock()
	if size <= int64(len(f.n.data)) {
		f.n.data = f.n.data[:size]
	} else {
		f.n.data = append(f.n.data, make([]byte, size-int64(len(f.n.data)))...)
	}
	return nil
}

func (f *memFile) Sync() error {
	if err := f.lock(); err != nil {
		return err
	}
	defer f.fs.mu.Unlock()
	if !f.dir {
		f.n.synced = append(f.n.synced[:0], f.n.data...)
	}
	return nil
}

func (f *memFile) Close() error {
	if err := f.lock(); err != nil {
		return err
	}
	f.closed = true
	f.fs.mu.Unlock()
	return nil
}
