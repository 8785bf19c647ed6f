package store

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store/storetest"
)

// tinyHandleCache is a cache that keeps one descriptor open, below the
// bound NewHandleCache allows, so that tests exercise every reopen.
func tinyHandleCache(inner FS) *HandleCache {
	c := NewHandleCache(inner, MinHandleCache)
	c.max = 1
	return c
}

// TestHandleCacheBound: many files written and read in turn through a
// cache stay within its bound of descriptors, and each keeps its offset,
// its contents and its creation flags across the reopens.
func TestHandleCacheBound(t *testing.T) {
	dir := t.TempDir()
	c := NewHandleCache(OSFS, MinHandleCache)
	const n = 5 * MinHandleCache
	files := make([]File, n)
	for i := range files {
		f, err := c.Create(filepath.Join(dir, fmt.Sprint(i)))
		require.NoError(t, err)
		files[i] = f
		require.LessOrEqual(t, c.Stats().Open, MinHandleCache)
	}
	for round := range 3 {
		for i, f := range files {
			_, err := fmt.Fprintf(f, "%d:%d;", i, round)
			require.NoError(t, err)
			require.LessOrEqual(t, c.Stats().Open, MinHandleCache)
		}
	}
	require.Positive(t, c.Stats().Reopens)
	require.Positive(t, c.Stats().Evicted)
	for i, f := range files {
		want := fmt.Sprintf("%d:0;%d:1;%d:2;", i, i, i)
		buf := make([]byte, len(want))
		_, err := f.ReadAt(buf, 0)
		require.NoError(t, err)
		require.Equal(t, want, string(buf))
		_, err = f.Seek(0, io.SeekStart)
		require.NoError(t, err)
		all, err := io.ReadAll(f)
		require.NoError(t, err)
		require.Equal(t, want, string(all), "Read from the restored offset")
		require.NoError(t, f.Truncate(2))
		require.NoError(t, f.Sync())
		require.NoError(t, f.Close())
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprint(i)))
		require.NoError(t, err)
		require.Equal(t, want[:2], string(b), "a reopen does not truncate")
	}
	require.Zero(t, c.Stats().Open)
	require.ErrorIs(t, files[0].Close(), os.ErrClosed)
}

// TestHandleCacheRenameRemove: a file follows its renames; one removed
// while the cache had closed it reports ErrReopenRemoved on use, and
// Sync has nothing to do for it.
func TestHandleCacheRenameRemove(t *testing.T) {
	dir := t.TempDir()
	c := tinyHandleCache(OSFS)
	a, err := c.Create(filepath.Join(dir, "a"))
	require.NoError(t, err)
	_, err = a.Write([]byte("A"))
	require.NoError(t, err)
	b, err := c.Create(filepath.Join(dir, "b")) // closes a
	require.NoError(t, err)
	require.NoError(t, c.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "c")))
	_, err = a.Write([]byte("C"))
	require.NoError(t, err, "reopened under its new name")
	got, err := os.ReadFile(filepath.Join(dir, "c"))
	require.NoError(t, err)
	require.Equal(t, "AC", string(got))

	_, err = b.Write([]byte("B")) // closes a again
	require.NoError(t, err)
	require.NoError(t, c.Remove(filepath.Join(dir, "c")))
	_, err = a.Write([]byte("x"))
	require.ErrorIs(t, err, ErrReopenRemoved)
	require.NoError(t, a.Sync())
	require.NoError(t, a.Close())

	// Removed while open: it stays open, and readable, until closed.
	require.NoError(t, c.Remove(filepath.Join(dir, "b")))
	_, err = c.Create(filepath.Join(dir, "d"))
	require.NoError(t, err)
	buf := make([]byte, 1)
	_, err = b.ReadAt(buf, 0)
	require.NoError(t, err)
	require.Equal(t, "B", string(buf))
	require.NoError(t, b.Close())
}

var errInjectedSync = errors.New("injected fsync error")

// TestHandleCacheEvictSyncs: a file written since its last Sync is fsynced
// before its descriptor is closed, a clean one is not, and a failed
// eviction fsync is reported by the file's next Sync.
func TestHandleCacheEvictSyncs(t *testing.T) {
	dir := t.TempDir()
	inner := storetest.NewFaultFS(OSFS)
	c := tinyHandleCache(inner)
	a, err := c.Create(filepath.Join(dir, "a"))
	require.NoError(t, err)
	_, err = a.Write([]byte("dirty"))
	require.NoError(t, err)
	b, err := c.Create(filepath.Join(dir, "b"))
	require.NoError(t, err)
	require.Equal(t, int64(1), inner.Syncs(), "a was dirty")
	require.NoError(t, a.Sync(), "nothing to do: fsynced when evicted")
	require.Equal(t, int64(1), inner.Syncs())

	_, err = a.ReadAt(make([]byte, 1), 0) // closes b, which is clean
	require.NoError(t, err)
	require.Equal(t, int64(1), inner.Syncs())

	_, err = a.Write([]byte("more"))
	require.NoError(t, err)
	inner.FailSync(errInjectedSync)
	_, err = b.ReadAt(make([]byte, 1), 0) // closes a, dirty: the fsync fails
	require.ErrorIs(t, err, io.EOF)
	inner.FailSync(nil)
	require.ErrorIs(t, a.Sync(), errInjectedSync)
	require.NoError(t, a.Sync(), "reported once")
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
}

// TestHandleCacheOpenErrors: OpenFile reports a missing file at once, as
// the file system under it does.
func TestHandleCacheOpenErrors(t *testing.T) {
	c := NewHandleCache(OSFS, 0)
	require.Equal(t, MinHandleCache, c.Stats().Max)
	_, err := c.OpenFile(filepath.Join(t.TempDir(), "missing"), os.O_RDONLY, 0)
	require.ErrorIs(t, err, os.ErrNotExist)
	require.True(t, strings.Contains(err.Error(), "missing"))
}
