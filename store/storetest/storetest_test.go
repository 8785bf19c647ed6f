package storetest_test

import (
	"errors"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store"
	"github.com/skiffmq/skiff/store/storetest"
	"github.com/skiffmq/skiff/store/vfs"
)

func write(t *testing.T, fsys vfs.FS, name, data string, sync bool) {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	_, err = f.Seek(0, io.SeekEnd)
	require.NoError(t, err)
	_, err = f.Write([]byte(data))
	require.NoError(t, err)
	if sync {
		require.NoError(t, f.Sync())
	}
	require.NoError(t, f.Close())
}

// TestMemFS: files and directories behave as on a disk, and the clones
// keep what a process crash (everything written) and an operating system
// crash (what was synced) keep.
func TestMemFS(t *testing.T) {
	m := storetest.NewMemFS()
	_, err := m.OpenFile("/d/a", os.O_RDWR|os.O_CREATE, 0o644)
	require.ErrorIs(t, err, os.ErrNotExist, "no directory yet")
	require.NoError(t, m.MkdirAll("/d/e", 0o755))
	write(t, m, "/d/a", "synced", true)
	write(t, m, "/d/a", "+lost", false)
	write(t, m, "/d/b.log", "b", true)

	names, err := m.ReadDir("/d")
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b.log", "e"}, names)
	require.Equal(t, []string{"b.log"}, m.Names("/d", ".log"))
	fi, err := m.Stat("/d/a")
	require.NoError(t, err)
	require.EqualValues(t, len("synced+lost"), fi.Size())

	require.Equal(t, "synced+lost", string(m.Clone().Contents("/d/a")))
	crashed := m.CrashClone()
	require.Equal(t, "synced", string(crashed.Contents("/d/a")))
	require.Equal(t, "synced+lost", string(m.Contents("/d/a")), "the original is untouched")

	require.Error(t, m.Remove("/d"), "not empty")
	require.NoError(t, m.Rename("/d/a", "/d/c"))
	require.Nil(t, m.Contents("/d/a"))
	m.SetContents("/d/c", []byte("planted"))
	f, err := m.OpenFile("/d/c", os.O_RDONLY, 0)
	require.NoError(t, err)
	b, err := io.ReadAll(f)
	require.NoError(t, err)
	require.Equal(t, "planted", string(b))
	require.NoError(t, f.Close())
	_, err = f.Read(b)
	require.ErrorIs(t, err, os.ErrClosed)

	b = make([]byte, 3)
	n, err := storetest.FileOf([]byte("abcdef")).ReadAt(b, 2)
	require.NoError(t, err)
	require.Equal(t, "cde", string(b[:n]))
}

// TestFaultFS switches each fault on and off.
func TestFaultFS(t *testing.T) {
	t.Run("budget", func(t *testing.T) {
		m := storetest.NewMemFS()
		f := storetest.NewFaultFS(m)
		f.SetBudget(4)
		file, err := f.Create("/x")
		require.NoError(t, err)
		n, err := file.Write([]byte("abcdef"))
		require.ErrorIs(t, err, syscall.ENOSPC)
		require.Equal(t, 4, n, "what fits is written")
		_, err = f.Create("/y")
		require.ErrorIs(t, err, syscall.ENOSPC)
		f.SetBudget(-1)
		_, err = file.Write([]byte("gh"))
		require.NoError(t, err)
		require.Equal(t, "abcdgh", string(m.Contents("/x")))
		require.Equal(t, 2, f.Injected())
	})
	t.Run("full", func(t *testing.T) {
		f := storetest.NewFaultFS(storetest.NewMemFS())
		file, err := f.Create("/x")
		require.NoError(t, err)
		f.SetFull(true)
		n, err := file.Write([]byte("a"))
		require.ErrorIs(t, err, syscall.ENOSPC)
		require.Zero(t, n)
		_, err = f.Create("/y")
		require.ErrorIs(t, err, syscall.ENOSPC)
		require.ErrorIs(t, f.MkdirAll("/d", 0o755), syscall.ENOSPC)
		f.SetFull(false)
		require.NoError(t, f.MkdirAll("/d", 0o755))
		_, err = file.Write([]byte("a"))
		require.NoError(t, err)
	})
	t.Run("match", func(t *testing.T) {
		require.True(t, storetest.IsSegment("/s/msgs/00000000000000000001.log"))
		require.False(t, storetest.IsSegment("/s/consumers/c/state/consumer.log"))
		require.False(t, storetest.IsSegment("/s/msgs/00000000000000000001.idx"))
		f := storetest.NewFaultFS(storetest.NewMemFS())
		f.Match = storetest.IsSegment
		f.SetFull(true)
		other, err := f.Create("/consumer.log")
		require.NoError(t, err)
		_, err = other.Write([]byte("a"))
		require.NoError(t, err)
		_, err = f.Create("/00000000000000000001.log")
		require.ErrorIs(t, err, syscall.ENOSPC)
	})
	t.Run("sync", func(t *testing.T) {
		m := storetest.NewMemFS()
		f := storetest.NewFaultFS(m)
		write(t, f, "/x", "a", true)
		require.EqualValues(t, 1, f.Syncs())
		file, err := f.OpenFile("/x", os.O_RDWR, 0)
		require.NoError(t, err)
		_, err = file.Write([]byte("b"))
		require.NoError(t, err)
		ran := 0
		f.OnFailedSync(func() { ran++ })
		f.FailSync(syscall.EIO)
		require.ErrorIs(t, file.Sync(), syscall.EIO)
		require.ErrorIs(t, file.Sync(), syscall.EIO)
		require.Equal(t, 1, ran, "the hook runs once")
		require.Equal(t, "a", string(m.CrashClone().Contents("/x")), "a failed Sync syncs nothing")
		f.FailSync(nil)
		require.NoError(t, file.Sync())
		require.EqualValues(t, 4, f.Syncs())
		require.Equal(t, 2, f.Injected())
	})
	t.Run("reads", func(t *testing.T) {
		f := storetest.NewFaultFS(storetest.NewMemFS())
		write(t, f, "/x", "abc", false)
		file, err := f.OpenFile("/x", os.O_RDONLY, 0)
		require.NoError(t, err)
		f.FailReads(syscall.EIO)
		_, err = file.ReadAt(make([]byte, 1), 0)
		require.ErrorIs(t, err, syscall.EIO)
		f.FailReads(nil)
		_, err = file.ReadAt(make([]byte, 1), 0)
		require.NoError(t, err)
	})
	t.Run("stall", func(t *testing.T) {
		f := storetest.NewFaultFS(storetest.NewMemFS())
		entered, release := f.StallMkdir("/slow/")
		done := make(chan error, 1)
		go func() { done <- f.MkdirAll("/s/slow/msgs", 0o755) }()
		<-entered
		require.NoError(t, f.MkdirAll("/s/fast/msgs", 0o755), "other paths do not wait")
		select {
		case err := <-done:
			t.Fatalf("returned before the release: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		release()
		release()
		require.NoError(t, <-done)
	})
}

// TestStoreOnMemFS: a stream runs on MemFS, and an operating system crash
// keeps every message whose fsync WaitDurable confirmed.
func TestStoreOnMemFS(t *testing.T) {
	m := storetest.NewMemFS()
	s, err := store.Open(store.Options{Dir: "/s", FS: m})
	require.NoError(t, err)
	seq, _, err := s.Append("a", nil, []byte("durable"), 0)
	require.NoError(t, err)
	require.NoError(t, s.WaitDurable(seq))
	crashed := m.CrashClone()
	require.NoError(t, s.Close())

	s, err = store.Open(store.Options{Dir: "/s", FS: crashed})
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	msg, err := s.Get(seq)
	require.NoError(t, err)
	require.Equal(t, "durable", string(msg.Data))

	f := storetest.NewFaultFS(storetest.NewMemFS())
	f.SetFull(true)
	_, err = store.Open(store.Options{Dir: "/t", FS: f})
	require.True(t, errors.Is(err, syscall.ENOSPC), "%v", err)
}
