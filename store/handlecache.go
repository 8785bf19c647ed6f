package store

import (
	"container/list"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"

	"github.com/skiffmq/skiff/store/vfs"
)

// HandleCache is an FS that keeps at most a bounded number of the files
// opened through it open in the operating system, so that thousands of
// streams and consumers, each with files open for as long as they exist,
// do not use up the process's file descriptors and lock out new clients.
//
// A file opened through it is opened at once (so that errors such as a
// missing file are reported by OpenFile), then closed whenever more than
// the bound are open and it is the least recently used one not in use,
// and reopened, at the same offset, by its next operation. Closing a file
// that was written since its last Sync fsyncs it first: an error of
// writing back its pages would otherwise be lost with the descriptor; that
// error is returned by the file's next Sync, or its Close. A file in use
// (an operation running) is never closed, so the bound may be passed for
// a moment.
//
// Files renamed or removed through the cache follow their names; a file
// removed while open stays open until closed, and one removed while
// closed by the cache can no longer be read or written.
//
// Safe for concurrent use; its files keep the concurrency contract of
// File.
type HandleCache struct {
	inner FS
	max   int
	mu    struct {
		sync.Mutex
		lru    list.List // of *cachedFile with an open descriptor, most recent first
		byName map[string]map[*cachedFile]struct{}
	}
	open   atomic.Int64
	reopen atomic.Uint64
	evict  atomic.Uint64
}

// MinHandleCache is the smallest bound NewHandleCache accepts: a stream
// and its consumers need a few files open at once.
const MinHandleCache = 16

var _ FS = (*HandleCache)(nil)

// NewHandleCache returns inner with at most maxOpen files open at once
// (at least MinHandleCache).
func NewHandleCache(inner FS, maxOpen int) *HandleCache {
	c := &HandleCache{inner: inner, max: max(maxOpen, MinHandleCache)}
	c.mu.byName = map[string]map[*cachedFile]struct{}{}
	return c
}

// HandleStats is what a HandleCache holds and did.
type HandleStats struct {
	Max     int    // the bound
	Open    int    // files open in the operating system now
	Reopens uint64 // files opened again after the cache closed them
	Evicted uint64 // files the cache closed to stay within the bound
}

// Stats returns the cache's counters.
func (c *HandleCache) Stats() HandleStats {
	return HandleStats{Max: c.max, Open: int(c.open.Load()), Reopens: c.reopen.Load(), Evicted: c.evict.Load()}
}

// OpenFile opens a file through the cache.
func (c *HandleCache) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := c.inner.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return c.add(name, flag, perm, f), nil
}

// Create creates or truncates a file through the cache.
func (c *HandleCache) Create(name string) (File, error) {
	f, err := c.inner.Create(name)
	if err != nil {
		return nil, err
	}
	return c.add(name, os.O_RDWR, 0o644, f), nil
}

// Remove removes a file; open files of that name stay open until closed.
func (c *HandleCache) Remove(name string) error {
	if err := c.inner.Remove(name); err != nil {
		return err
	}
	c.mu.Lock()
	c.unnameLocked(name)
	c.mu.Unlock()
	return nil
}

// Rename renames a file; its open files follow it.
func (c *HandleCache) Rename(oldname, newname string) error {
	if err := c.inner.Rename(oldname, newname); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unnameLocked(newname) // replaced
	moved := c.mu.byName[oldname]
	delete(c.mu.byName, oldname)
	if len(moved) > 0 {
		c.mu.byName[newname] = moved
		for cf := range moved {
			cf.name = newname
		}
	}
	return nil
}

// unnameLocked marks the files of name as gone from the directory: they
// keep their descriptors until closed (the cache no longer closes them),
// or, already closed by the cache, cannot be reopened. c.mu held.
func (c *HandleCache) unnameLocked(name string) {
	for cf := range c.mu.byName[name] {
		cf.removed = true
		if cf.f != nil {
			c.mu.lru.Remove(cf.elem)
			cf.elem = nil
		}
	}
	delete(c.mu.byName, name)
}

// ReadDir lists a directory, as the file system under the cache does.
func (c *HandleCache) ReadDir(name string) ([]string, error) { return c.inner.ReadDir(name) }

// MkdirAll creates a directory, as the file system under the cache does.
func (c *HandleCache) MkdirAll(path string, perm os.FileMode) error {
	return c.inner.MkdirAll(path, perm)
}

// Stat describes a file, as the file system under the cache does.
func (c *HandleCache) Stat(name string) (os.FileInfo, error) { return c.inner.Stat(name) }

// add registers a freshly opened file.
func (c *HandleCache) add(name string, flag int, perm os.FileMode, f File) *cachedFile {
	// Reopening must neither truncate the file nor fail on it existing.
	cf := &cachedFile{c: c, name: name, flag: flag &^ (os.O_TRUNC | os.O_EXCL | os.O_CREATE), perm: perm}
	c.mu.Lock()
	names := c.mu.byName[name]
	if names == nil {
		names = map[*cachedFile]struct{}{}
		c.mu.byName[name] = names
	}
	names[cf] = struct{}{}
	cf.f = f
	cf.elem = c.mu.lru.PushFront(cf)
	c.open.Add(1)
	victims := c.evictLocked()
	c.mu.Unlock()
	closeVictims(victims)
	return cf
}

// evictLocked takes the descriptors of the least recently used files not
// in use until at most max are open, and returns them to be closed without
// the lock. c.mu held.
func (c *HandleCache) evictLocked() []victim {
	var out []victim
	for e := c.mu.lru.Back(); e != nil && c.open.Load() > int64(c.max); {
		cf := e.Value.(*cachedFile)
		prev := e.Prev()
		if cf.users == 0 {
			c.mu.lru.Remove(e)
			out = append(out, victim{cf: cf, f: cf.f, dirty: cf.dirty.Swap(false)})
			cf.f, cf.elem = nil, nil
			c.open.Add(-1)
			c.evict.Add(1)
		}
		e = prev
	}
	return out
}

type victim struct {
	cf    *cachedFile
	f     File
	dirty bool
}

// closeVictims closes evicted descriptors, fsyncing those written since
// their last Sync; an error waits for the file's next Sync or Close.
func closeVictims(vs []victim) {
	for _, v := range vs {
		var err error
		if v.dirty {
			err = v.f.Sync()
		}
		if cerr := v.f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			v.cf.c.mu.Lock()
			v.cf.evictErr = errors.Join(v.cf.evictErr, err)
			v.cf.c.mu.Unlock()
		}
	}
}

// ErrReopenRemoved is returned by an operation on a file that was removed
// or renamed over while the cache had closed it.
var ErrReopenRemoved = errors.New("store: file removed while its handle was closed")

// cachedFile is a File of a HandleCache.
type cachedFile struct {
	c    *HandleCache
	flag int
	perm os.FileMode
	// off is the offset of Read, Write and Seek, restored on a reopen.
	// Those three are never called concurrently (File's contract).
	off    atomic.Int64
	dirty  atomic.Bool // written since the last Sync
	openMu sync.Mutex  // one reopen at a time

	// Guarded by c.mu.
	name     string
	f        File // nil while closed by the cache
	elem     *list.Element
	users    int // operations running on f
	removed  bool
	closed   bool
	evictErr error // of fsyncing or closing an evicted descriptor
}

var (
	_ File             = (*cachedFile)(nil)
	_ vfs.Preallocator = (*cachedFile)(nil)
)

// acquire returns the open descriptor, reopening it if the cache closed
// it; release it when done.
func (cf *cachedFile) acquire() (File, error) {
	c := cf.c
	c.mu.Lock()
	if f, err := cf.useLocked(); f != nil || err != nil {
		c.mu.Unlock()
		return f, err
	}
	c.mu.Unlock()

	cf.openMu.Lock()
	defer cf.openMu.Unlock()
	c.mu.Lock()
	if f, err := cf.useLocked(); f != nil || err != nil {
		c.mu.Unlock()
		return f, err // opened by another operation meanwhile
	}
	name := cf.name
	c.mu.Unlock()
	f, err := c.inner.OpenFile(name, cf.flag, cf.perm)
	if err != nil {
		return nil, fmt.Errorf("store: reopen %s: %w", name, err)
	}
	if _, err := f.Seek(cf.off.Load(), io.SeekStart); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("store: reopen %s: %w", name, err)
	}
	c.reopen.Add(1)
	c.mu.Lock()
	if cf.closed || cf.removed {
		// Closed, or renamed over, while reopening.
		c.mu.Unlock()
		_ = f.Close()
		return nil, os.ErrClosed
	}
	cf.f, cf.users = f, 1
	cf.elem = c.mu.lru.PushFront(cf)
	c.open.Add(1)
	victims := c.evictLocked()
	c.mu.Unlock()
	closeVictims(victims)
	return f, nil
}

// useLocked takes a use of the open descriptor, if any. c.mu held.
func (cf *cachedFile) useLocked() (File, error) {
	switch {
	case cf.closed:
		return nil, os.ErrClosed
	case cf.f != nil:
		cf.users++
		if cf.elem != nil {
			cf.c.mu.lru.MoveToFront(cf.elem)
		}
		return cf.f, nil
	case cf.removed:
		return nil, fmt.Errorf("%w: %s", ErrReopenRemoved, cf.name)
	}
	return nil, nil
}

func (cf *cachedFile) release() {
	cf.c.mu.Lock()
	cf.users--
	cf.c.mu.Unlock()
}

func (cf *cachedFile) Read(p []byte) (int, error) {
	f, err := cf.acquire()
	if err != nil {
		return 0, err
	}
	defer cf.release()
	n, err := f.Read(p)
	cf.off.Add(int64(n))
	return n, err
}

func (cf *cachedFile) Write(p []byte) (int, error) {
	f, err := cf.acquire()
	if err != nil {
		return 0, err
	}
	defer cf.release()
	cf.dirty.Store(true)
	n, err := f.Write(p)
	cf.off.Add(int64(n))
	return n, err
}

func (cf *cachedFile) ReadAt(p []byte, off int64) (int, error) {
	f, err := cf.acquire()
	if err != nil {
		return 0, err
	}
	defer cf.release()
	return f.ReadAt(p, off)
}

func (cf *cachedFile) Seek(offset int64, whence int) (int64, error) {
	f, err := cf.acquire()
	if err != nil {
		return 0, err
	}
	defer cf.release()
	n, err := f.Seek(offset, whence)
	if err == nil {
		cf.off.Store(n)
	}
	return n, err
}

func (cf *cachedFile) Truncate(size int64) error {
	f, err := cf.acquire()
	if err != nil {
		return err
	}
	defer cf.release()
	cf.dirty.Store(true)
	return f.Truncate(size)
}

// Preallocate reserves space for the n bytes at off (vfs.Preallocate).
// The reservation belongs to the file, not the descriptor: it outlives an
// eviction.
func (cf *cachedFile) Preallocate(off, n int64) error {
	f, err := cf.acquire()
	if err != nil {
		return err
	}
	defer cf.release()
	return vfs.Preallocate(f, off, n)
}

// Sync fsyncs the file. A file the cache closed was fsynced then: Sync
// returns what that fsync returned, without reopening it.
func (cf *cachedFile) Sync() error {
	c := cf.c
	c.mu.Lock()
	evictErr := cf.evictErr
	cf.evictErr = nil
	f, err := cf.useLocked()
	c.mu.Unlock()
	if evictErr != nil {
		if f != nil {
			cf.release()
		}
		return evictErr
	}
	if f == nil {
		if errors.Is(err, ErrReopenRemoved) {
			err = nil // fsynced when evicted; nothing written since
		}
		return err
	}
	defer cf.release()
	cf.dirty.Store(false)
	if err := f.Sync(); err != nil {
		cf.dirty.Store(true)
		return err
	}
	return nil
}

// Close closes the file, returning an error of an eviction not yet
// reported.
func (cf *cachedFile) Close() error {
	c := cf.c
	c.mu.Lock()
	if cf.closed {
		c.mu.Unlock()
		return os.ErrClosed
	}
	cf.closed = true
	f, err := cf.f, cf.evictErr
	cf.f, cf.evictErr = nil, nil
	if f != nil {
		if cf.elem != nil {
			c.mu.lru.Remove(cf.elem)
			cf.elem = nil
		}
		c.open.Add(-1)
	}
	if names := c.mu.byName[cf.name]; names != nil && !cf.removed {
		delete(names, cf)
		if len(names) == 0 {
			delete(c.mu.byName, cf.name)
		}
	}
	c.mu.Unlock()
	if f != nil {
		err = errors.Join(err, f.Close())
	}
	return err
}
