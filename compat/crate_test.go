package main

import (
	"archive/tar"
	"compress/gzip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// writeCrate writes a .crate (gzipped tar) holding files, name to content.
func writeCrate(t *testing.T, files map[string]string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "x.crate")
	f, err := os.Create(path)
	require.NoError(t, err)
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for name, content := range files {
		require.NoError(t, tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)),
			Typeflag: tar.TypeReg, ModTime: time.Unix(1700000000, 0)}))
		_, err := tw.Write([]byte(content))
		require.NoError(t, err)
	}
	require.NoError(t, tw.Close())
	require.NoError(t, gz.Close())
	require.NoError(t, f.Close())
	return path
}

func TestUntarGz(t *testing.T) {
	dir := t.TempDir()
	crate := writeCrate(t, map[string]string{"async-nats-1.0/Cargo.toml": "[package]\n", "async-nats-1.0/tests/a.rs": "fn a() {}\n"})
	require.NoError(t, untarGz(crate, dir, "async-nats-1.0/"))
	got, err := os.ReadFile(filepath.Join(dir, "async-nats-1.0", "tests", "a.rs"))
	require.NoError(t, err)
	require.Equal(t, "fn a() {}\n", string(got))
	st, err := os.Stat(filepath.Join(dir, "async-nats-1.0", "Cargo.toml"))
	require.NoError(t, err)
	require.Equal(t, int64(1700000000), st.ModTime().Unix(), "the archive's times are kept, so cargo rebuilds nothing")

	for name, entry := range map[string]string{
		"outside the prefix": "other-1.0/Cargo.toml",
		"climbing out":       "async-nats-1.0/../../etc/x",
	} {
		t.Run(name, func(t *testing.T) {
			err := untarGz(writeCrate(t, map[string]string{entry: "x"}), t.TempDir(), "async-nats-1.0/")
			require.ErrorContains(t, err, "outside")
		})
	}
}

func TestManifestPatch(t *testing.T) {
	patch := manifestPatch("/src/skiff")
	require.Contains(t, patch, "[dev-dependencies.nats-server]\npath = \"/src/skiff/compat/nats-server\"\n")
	require.Contains(t, patch, "\n[workspace]\n")
}
