package jscluster

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store/storetest"
	"github.com/skiffmq/skiff/store/vfs"
)

// TestSnapFiles: a snapshot's data round-trips through its file and
// descriptor; a file that changed or went missing is refused; prune keeps
// the snapshot named and those after it.
func TestSnapFiles(t *testing.T) {
	fs := storetest.NewMemFS()
	f := snapFiles{fs: fs, dir: "/raft/meta", prefix: "meta"}
	d5, err := f.write(5, []byte("five"))
	require.NoError(t, err)
	d9, err := f.write(9, []byte("nine"))
	require.NoError(t, err)
	require.Less(t, len(d9), 4<<10, "a descriptor fits in the WAL's snapshot record")
	b, err := f.read(d9)
	require.NoError(t, err)
	require.Equal(t, "nine", string(b))

	require.NoError(t, vfs.WriteFile(fs, filepath.Join(f.dir, f.name(5)), []byte("fivE")))
	_, err = f.read(d5)
	require.ErrorIs(t, err, ErrBadEntry, "a changed file fails its checksum")
	_, err = f.read([]byte(`{"file":"../node","size":1}`))
	require.ErrorIs(t, err, ErrBadEntry, "a descriptor names a file of the directory")

	require.NoError(t, vfs.WriteFile(fs, filepath.Join(f.dir, "meta-00000000000000000012.snap.tmp"), nil))
	f.prune(9, false)
	names, err := fs.ReadDir(f.dir)
	require.NoError(t, err)
	require.Equal(t, []string{f.name(9), "meta-00000000000000000012.snap.tmp"}, names)
	f.prune(9, true)
	names, err = fs.ReadDir(f.dir)
	require.NoError(t, err)
	require.Equal(t, []string{f.name(9)}, names)
	_, err = f.read(d5)
	require.Error(t, err)
}
