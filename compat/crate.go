package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrCrate is returned when the published crate cannot be had or is not
// what compat expects.
var ErrCrate = errors.New("compat: async-nats crate")

// prepareCrate makes BuildDir/async-nats-VERSION: the published crate,
// fetched with cargo and unpacked as published, with one change to its
// manifest (manifestPatch). It returns the crate's directory. An unpacked
// crate whose marker says it carries the same patch is kept as it is, so
// cargo rebuilds nothing.
func prepareCrate(o Options, log io.Writer) (string, error) {
	archive, err := fetchCrate(o, log)
	if err != nil {
		return "", err
	}
	name := "async-nats-" + o.CrateVersion
	dir := filepath.Join(o.BuildDir, name)
	patch := manifestPatch(o.Root)
	marker := filepath.Join(dir, ".skiff-compat")
	if got, err := os.ReadFile(marker); err == nil && string(got) == patch {
		return dir, nil
	}
	fmt.Fprintf(log, "compat: unpacking %s into %s\n", filepath.Base(archive), dir)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := untarGz(archive, o.BuildDir, name+"/"); err != nil {
		return "", fmt.Errorf("%w: unpacking %s: %w", ErrCrate, archive, err)
	}
	manifest := filepath.Join(dir, "Cargo.toml")
	text, err := os.ReadFile(manifest)
	if err != nil {
		return "", err
	}
	for _, table := range []string{"[dev-dependencies.nats-server]", "[workspace]"} {
		if bytes.Contains(text, []byte(table)) {
			return "", fmt.Errorf("%w: %s already has %s; compat's patch needs a new look", ErrCrate, manifest, table)
		}
	}
	if err := os.WriteFile(manifest, append(text, patch...), 0o644); err != nil {
		return "", err
	}
	return dir, os.WriteFile(marker, []byte(patch), 0o644)
}

// manifestPatch is what compat appends to the published Cargo.toml. The
// tests' server helper is a path dependency in nats.rs's repository, which
// cargo strips when publishing; ours takes its place. [workspace] makes the
// crate its own workspace, whatever directories are above it.
func manifestPatch(root string) string {
	helper := filepath.Join(root, "compat", "nats-server")
	return fmt.Sprintf(`
# Added by Skiff's compat (compat/crate.go): the tests' server helper, which
# the published manifest lacks, is Skiff's compat/nats-server.
[dev-dependencies.nats-server]
path = %q

[workspace]
`, helper)
}

// fetchCrate has cargo download async-nats (and everything its build
// needs) into its registry cache, and returns the cached .crate archive.
// A throwaway package that depends on exactly that version is the ordinary
// way to ask cargo for it.
func fetchCrate(o Options, log io.Writer) (string, error) {
	dir := filepath.Join(o.BuildDir, "fetch")
	if err := os.MkdirAll(filepath.Join(dir, "src"), 0o755); err != nil {
		return "", err
	}
	manifest := fmt.Sprintf(`# Written by Skiff's compat (compat/crate.go): only to have cargo fetch async-nats.
[package]
name = "skiff-compat-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
async-nats = "=%s"

[workspace]
`, o.CrateVersion)
	if err := os.WriteFile(filepath.Join(dir, "Cargo.toml"), []byte(manifest), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "src", "lib.rs"), nil, 0o644); err != nil {
		return "", err
	}
	fmt.Fprintf(log, "compat: cargo fetch async-nats %s\n", o.CrateVersion)
	cmd := exec.Command("cargo", "fetch")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: cargo fetch: %w", ErrCrate, err)
	}
	home := os.Getenv("CARGO_HOME")
	if home == "" {
		userHome, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		home = filepath.Join(userHome, ".cargo")
	}
	matches, err := filepath.Glob(filepath.Join(home, "registry", "cache", "*", "async-nats-"+o.CrateVersion+".crate"))
	if err != nil {
		return "", err
	}
	if len(matches) == 0 {
		return "", fmt.Errorf("%w: cargo fetched no async-nats-%s.crate into %s", ErrCrate, o.CrateVersion, home)
	}
	return matches[0], nil
}

// untarGz unpacks a .crate (a gzipped tar) into dir. Every entry must lie
// under prefix; file times are kept, so an unchanged file stays unchanged
// to cargo.
func untarGz(archive, dir, prefix string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		clean := filepath.Clean(h.Name)
		if !strings.HasPrefix(clean+"/", prefix) || strings.Contains(clean, "..") {
			return fmt.Errorf("entry %q outside %s", h.Name, prefix)
		}
		path := filepath.Join(dir, clean)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				return err
			}
			continue
		case tar.TypeReg:
		default:
			return fmt.Errorf("entry %q: unexpected type %c", h.Name, h.Typeflag)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := writeFile(path, tr, os.FileMode(h.Mode)&0o755|0o644); err != nil {
			return err
		}
		if err := os.Chtimes(path, h.ModTime, h.ModTime); err != nil {
			return err
		}
	}
}

func writeFile(path string, r io.Reader, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
