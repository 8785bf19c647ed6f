package store

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
)

// memFS is an in-memory FS for tests. It remembers what each file held at
// its last Sync, so crashClone can model an operating system crash: every
// file keeps only what was synced. (Directory entries are treated as
// durable at once; the store's directory fsyncs are exercised against the
// real file system.)
type memFS struct {
	mu    sync.Mutex
	files map[string]*memNode
	dirs  map[string]bool
}

type memNode struct {
	data   []byte
	synced []byte
}

func newMemFS() *memFS {
	return &memFS{files: map[string]*memNode{}, dirs: map[string]bool{"/": true, ".": true}}
}

var _ FS = (*memFS)(nil)

func clean(name string) string { return path.Clean(name) }

func (m *memFS) OpenFile(name string, flag int, _ os.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = clean(name)
	if m.dirs[name] {
		return &memFile{fs: m, name: name, dir: true}, nil
	}
	n, ok := m.files[name]
	if !ok {
		if flag&os.O_CREATE == 0 {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		if !m.dirs[path.Dir(name)] {
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

func (m *memFS) Create(name string) (File, error) {
	return m.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
}

func (m *memFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = clean(name)
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

func (m *memFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.files[clean(oldname)]
	if !ok {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	delete(m.files, clean(oldname))
	m.files[clean(newname)] = n
	return nil
}

func (m *memFS) ReadDir(name string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = clean(name)
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

func (m *memFS) MkdirAll(p string, _ os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for p = clean(p); !m.dirs[p]; p = path.Dir(p) {
		m.dirs[p] = true
	}
	return nil
}

func (m *memFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = clean(name)
	if m.dirs[name] {
		return memInfo{name: path.Base(name), dir: true}, nil
	}
	n, ok := m.files[name]
	if !ok {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return memInfo{name: path.Base(name), size: int64(len(n.data))}, nil
}

// crashClone returns the file system as an operating system crash would
// leave it: each file holds what its last Sync saw.
func (m *memFS) crashClone() *memFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := newMemFS()
	for d := range m.dirs {
		c.dirs[d] = true
	}
	for name, n := range m.files {
		s := append([]byte(nil), n.synced...)
		c.files[name] = &memNode{data: s, synced: append([]byte(nil), s...)}
	}
	return c
}

// clone returns a copy of the file system as it is, as a process crash
// (kill -9) leaves it: everything written survives.
func (m *memFS) clone() *memFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := newMemFS()
	for d := range m.dirs {
		c.dirs[d] = true
	}
	for name, n := range m.files {
		c.files[name] = &memNode{data: append([]byte(nil), n.data...), synced: append([]byte(nil), n.data...)}
	}
	return c
}

// bytes returns a copy of a file's contents ("" if missing).
func (m *memFS) bytes(name string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n, ok := m.files[clean(name)]; ok {
		return append([]byte(nil), n.data...)
	}
	return nil
}

// setBytes replaces a file's contents, as if synced.
func (m *memFS) setBytes(name string, b []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[clean(name)] = &memNode{data: append([]byte(nil), b...), synced: append([]byte(nil), b...)}
}

// names lists the files under dir whose name contains substr.
func (m *memFS) names(dir, substr string) []string {
	all, _ := m.ReadDir(dir)
	var out []string
	for _, n := range all {
		if strings.Contains(n, substr) {
			out = append(out, n)
		}
	}
	return out
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
	fs     *memFS
	name   string
	n      *memNode
	dir    bool
	off    int64
	closed bool
}

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
