package vfs_test

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/store/storetest"
	"github.com/skiffmq/skiff/store/vfs"
)

// TestWriteFile: WriteFile creates and replaces a file whole, survives a
// crash once it returned, and on a failed fsync leaves the old file and
// no temporary one.
func TestWriteFile(t *testing.T) {
	tests := []struct {
		name     string
		failSync bool
		want     string
	}{
		{name: "replaces", want: "new"},
		{name: "failed fsync keeps the old file", failSync: true, want: "old"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mem := storetest.NewMemFS()
			fs := storetest.NewFaultFS(mem)
			dir := "/d"
			require.NoError(t, fs.MkdirAll(dir, 0o755))
			name := filepath.Join(dir, "f")
			require.NoError(t, vfs.WriteFile(fs, name, []byte("old")))
			if tt.failSync {
				fs.FailSync(errors.New("EIO"))
				require.Error(t, vfs.WriteFile(fs, name, []byte("new")))
				fs.FailSync(nil)
			} else {
				require.NoError(t, vfs.WriteFile(fs, name, []byte("new")))
			}
			for _, f := range []vfs.FS{fs, mem.CrashClone()} {
				b, err := vfs.ReadFile(f, name)
				require.NoError(t, err)
				require.Equal(t, tt.want, string(b))
				names, err := f.ReadDir(dir)
				require.NoError(t, err)
				require.Equal(t, []string{"f"}, names)
			}
		})
	}
}
