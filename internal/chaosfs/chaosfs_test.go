package chaosfs_test

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/internal/chaosfs"
	"github.com/skiffmq/skiff/store"
	"github.com/skiffmq/skiff/store/raftlog"
	"github.com/skiffmq/skiff/store/vfs"
)

// open opens an FS over the operating system's with its journal in dir,
// closed when the test ends.
func open(t *testing.T, dir string) *chaosfs.FS {
	t.Helper()
	f, err := chaosfs.Open(vfs.OS, filepath.Join(dir, "journal"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// write makes (or opens) name and appends s.
func write(t *testing.T, fsys vfs.FS, name, s string, sync bool) {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	require.NoError(t, err)
	_, err = io.WriteString(f, s)
	require.NoError(t, err)
	if sync {
		require.NoError(t, f.Sync())
	}
	require.NoError(t, f.Close())
}

// missing is what want says of a file the cut removed.
const missing = "<missing>"

// TestCut: what a cut keeps of each file, by what was done to it.
func TestCut(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(t *testing.T, fsys *chaosfs.FS, dir string)
		want map[string]string
	}{
		{"a synced file keeps what its sync saw", func(t *testing.T, fsys *chaosfs.FS, dir string) {
			write(t, fsys, filepath.Join(dir, "f"), "abc", true)
			write(t, fsys, filepath.Join(dir, "f"), "def", false)
		}, map[string]string{"f": "abc"}},
		{"a file never synced goes", func(t *testing.T, fsys *chaosfs.FS, dir string) {
			write(t, fsys, filepath.Join(dir, "f"), "abc", false)
		}, map[string]string{"f": missing}},
		{"a file whose directory was synced stays, empty", func(t *testing.T, fsys *chaosfs.FS, dir string) {
			write(t, fsys, filepath.Join(dir, "f"), "abc", false)
			require.NoError(t, vfs.SyncDir(fsys, dir))
		}, map[string]string{"f": ""}},
		{"a truncation is durable at once", func(t *testing.T, fsys *chaosfs.FS, dir string) {
			write(t, fsys, filepath.Join(dir, "f"), "abcdef", true)
			f, err := fsys.OpenFile(filepath.Join(dir, "f"), os.O_RDWR, 0)
			require.NoError(t, err)
			require.NoError(t, f.Truncate(2))
			require.NoError(t, f.Close())
			write(t, fsys, filepath.Join(dir, "f"), "xyz", false)
		}, map[string]string{"f": "ab"}},
		{"a file created over a synced one is empty", func(t *testing.T, fsys *chaosfs.FS, dir string) {
			write(t, fsys, filepath.Join(dir, "f"), "old", true)
			f, err := fsys.Create(filepath.Join(dir, "f"))
			require.NoError(t, err)
			_, err = io.WriteString(f, "new")
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}, map[string]string{"f": ""}},
		{"an atomic write survives whole", func(t *testing.T, fsys *chaosfs.FS, dir string) {
			require.NoError(t, vfs.WriteFile(fsys, filepath.Join(dir, "f"), []byte("v1")))
			require.NoError(t, vfs.WriteFile(fsys, filepath.Join(dir, "f"), []byte("v2")))
		}, map[string]string{"f": "v2", "f.tmp": missing}},
		{"a rename carries the file's sync", func(t *testing.T, fsys *chaosfs.FS, dir string) {
			write(t, fsys, filepath.Join(dir, "a"), "synced", true)
			write(t, fsys, filepath.Join(dir, "a"), "+not", false)
			require.NoError(t, fsys.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "b")))
			write(t, fsys, filepath.Join(dir, "c"), "unsynced", false)
			require.NoError(t, fsys.Rename(filepath.Join(dir, "c"), filepath.Join(dir, "d")))
		}, map[string]string{"a": missing, "b": "synced", "d": missing}},
		{"a removal is durable at once", func(t *testing.T, fsys *chaosfs.FS, dir string) {
			write(t, fsys, filepath.Join(dir, "f"), "abc", true)
			require.NoError(t, fsys.Remove(filepath.Join(dir, "f")))
		}, map[string]string{"f": missing}},
		{"a file written around the FS is kept", func(t *testing.T, fsys *chaosfs.FS, dir string) {
			write(t, vfs.OS, filepath.Join(dir, "f"), "abc", false)
		}, map[string]string{"f": "abc"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fsys := open(t, dir)
			tc.do(t, fsys, dir)
			_, err := chaosfs.Cut(filepath.Join(dir, "journal"))
			require.NoError(t, err)
			for name, want := range tc.want {
				b, err := os.ReadFile(filepath.Join(dir, name))
				if want == missing {
					require.ErrorIs(t, err, os.ErrNotExist, name)
					continue
				}
				require.NoError(t, err, name)
				require.Equal(t, want, string(b), name)
			}
		})
	}
}

// TestBootID: every cut is a new boot; a restart without one is not.
func TestBootID(t *testing.T) {
	dir := t.TempDir()
	journal := filepath.Join(dir, "journal")
	first := open(t, dir).BootID()
	require.Equal(t, first, open(t, dir).BootID(), "a process restart, same boot")
	rep, err := chaosfs.Cut(journal)
	require.NoError(t, err)
	require.Equal(t, int64(1), rep.Boot)
	second := open(t, dir).BootID()
	require.NotEqual(t, first, second)
	_, err = chaosfs.Cut(journal)
	require.NoError(t, err)
	require.NotEqual(t, second, open(t, dir).BootID())
}

// TestPowerOff: after PowerOff every change fails and none reaches the
// journal; reads go on.
func TestPowerOff(t *testing.T) {
	dir := t.TempDir()
	fsys := open(t, dir)
	name := filepath.Join(dir, "f")
	write(t, fsys, name, "abc", true)
	f, err := fsys.OpenFile(name, os.O_RDWR, 0)
	require.NoError(t, err)
	fsys.PowerOff()
	for what, err := range map[string]error{
		"write":    func() error { _, err := f.Write([]byte("x")); return err }(),
		"sync":     f.Sync(),
		"truncate": f.Truncate(0),
		"create":   func() error { _, err := fsys.Create(filepath.Join(dir, "g")); return err }(),
		"rename":   fsys.Rename(name, filepath.Join(dir, "h")),
		"remove":   fsys.Remove(name),
		"mkdir":    fsys.MkdirAll(filepath.Join(dir, "d"), 0o755),
	} {
		require.ErrorIs(t, err, chaosfs.ErrPowerOff, what)
	}
	b, err := vfs.ReadFile(fsys, name)
	require.NoError(t, err)
	require.Equal(t, "abc", string(b))
	require.NoError(t, f.Close())
	rep, err := chaosfs.Cut(filepath.Join(dir, "journal"))
	require.NoError(t, err)
	require.Equal(t, 1, rep.Files)
}

// TestTornJournal: a journal line a kill tore is ignored and cut off, so
// the records after it are read.
func TestTornJournal(t *testing.T) {
	dir := t.TempDir()
	journal := filepath.Join(dir, "journal")
	name := filepath.Join(dir, "f")
	write(t, open(t, dir), name, "abc", true)
	j, err := os.OpenFile(journal, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = j.WriteString(`sync 999 "` + name)
	require.NoError(t, err)
	require.NoError(t, j.Close())
	write(t, open(t, dir), name, "def", false)
	_, err = chaosfs.Cut(journal)
	require.NoError(t, err)
	b, err := os.ReadFile(name)
	require.NoError(t, err)
	require.Equal(t, "abc", string(b))
	body, err := os.ReadFile(journal)
	require.NoError(t, err)
	require.NotContains(t, string(body), "999")
	require.True(t, strings.HasSuffix(string(body), "boot 1\n"), string(body))
}

// TestRaftLogCut: the raft log through an FS, cut after its process
// stopped: it reports an unclean stop across a reboot, and keeps what it
// fsynced; a process crash without a cut is not a reboot.
func TestRaftLogCut(t *testing.T) {
	for _, tc := range []struct {
		name         string
		cut          bool
		wantRebooted bool
		wantLast     uint64
	}{
		{"process crash", false, false, 6},
		{"power loss", true, true, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fsys := open(t, dir)
			opts := raftlog.DefaultOptions(filepath.Join(dir, "wal"))
			opts.FS, opts.BootID = fsys, nil // the FS's boot ID
			opts.Durability = store.Durability{Sync: store.SyncNever}
			l, err := raftlog.Open(opts)
			require.NoError(t, err)
			g := l.Group(1)
			require.NoError(t, g.SaveWait(raftlog.Update{Entries: entries(1, 3)}))
			require.NoError(t, l.Sync())
			require.NoError(t, g.SaveWait(raftlog.Update{Entries: entries(4, 6)}))
			fsys.PowerOff() // the process stops here: Close can change nothing
			_ = l.Close()
			if tc.cut {
				_, err := chaosfs.Cut(filepath.Join(dir, "journal"))
				require.NoError(t, err)
			}
			// Without a cut, as after a kill: what the process wrote is
			// there; only the clean marker Close could not write is not.
			opts.FS = open(t, dir)
			l, err = raftlog.Open(opts)
			require.NoError(t, err)
			defer func() { _ = l.Close() }()
			rep := l.Recovery()
			require.True(t, rep.Unclean)
			require.Equal(t, tc.wantRebooted, rep.Rebooted)
			last, err := l.Group(1).LastIndex()
			require.NoError(t, err)
			require.Equal(t, tc.wantLast, last)
		})
	}
}

// entries returns entries first..last of term 1.
func entries(first, last uint64) []*raftpb.Entry {
	var out []*raftpb.Entry
	for i := first; i <= last; i++ {
		out = append(out, &raftpb.Entry{Index: new(i), Term: new(uint64(1)), Type: raftpb.EntryNormal.Enum(), Data: []byte("e")})
	}
	return out
}
