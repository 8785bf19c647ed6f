package vfs_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store/storetest"
	"github.com/skiffmq/skiff/store/vfs"
)

// allocated is the disk space file name's blocks take.
func allocated(t *testing.T, name string) int64 {
	t.Helper()
	n, err := storetest.Allocated(name)
	require.NoError(t, err)
	if n < 0 {
		t.Skip("no block counts on this system")
	}
	return n
}

// TestPreallocate: space reserved past a file's end leaves its size and
// bytes as written, writes into it read back, and a truncate to the size
// gives it back.
func TestPreallocate(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("fallocate is Linux's")
	}
	name := filepath.Join(t.TempDir(), "seg.log")
	f, err := vfs.OS.Create(name)
	require.NoError(t, err)
	defer f.Close()
	data := bytes.Repeat([]byte("skiff"), 2000) // 10,000 bytes
	_, err = f.Write(data)
	require.NoError(t, err)

	err = vfs.Preallocate(f, int64(len(data)), 4<<20)
	if errors.Is(err, vfs.ErrNoPreallocate) {
		t.Skipf("the temporary directory's file system cannot: %v", err)
	}
	require.NoError(t, err)
	fi, err := os.Stat(name)
	require.NoError(t, err)
	require.Equal(t, int64(len(data)), fi.Size(), "the size is what was written")
	require.GreaterOrEqual(t, allocated(t, name), int64(4<<20), "the space is reserved")

	_, err = f.Write([]byte("more"))
	require.NoError(t, err)
	got, err := os.ReadFile(name)
	require.NoError(t, err)
	require.Equal(t, append(data, "more"...), got)

	require.NoError(t, f.Truncate(int64(len(got))))
	require.Less(t, allocated(t, name), int64(1<<20), "a truncate to the size gives the rest back")
}

// TestPreallocateUnsupported: a file that cannot reserve says so with
// ErrNoPreallocate; nothing to reserve is no call at all.
func TestPreallocateUnsupported(t *testing.T) {
	var f struct{ vfs.File } // neither an *os.File nor a Preallocator
	require.ErrorIs(t, vfs.Preallocate(f, 0, 1), vfs.ErrNoPreallocate)
	require.NoError(t, vfs.Preallocate(f, 0, 0))
}
