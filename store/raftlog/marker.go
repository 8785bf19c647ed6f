package raftlog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/skiffmq/skiff/store/vfs"
)

// Two small files beside the segments tell the layer above whether the
// last run may have lost acknowledged writes (issue 13's held replicas,
// "unsynced"): under SyncInterval and SyncNever, writes are acknowledged
// before they are fsynced, so they are lost only if the operating system
// stopped too, not merely the process.
//
//	clean     written by Close once everything is fsynced; removed by Open
//	boot_id   the operating system's boot ID when the log was last opened
const (
	cleanFile  = "clean"
	bootIDFile = "boot_id"
)

// DefaultBootID returns the running kernel's boot ID
// (/proc/sys/kernel/random/boot_id), or "" where there is none.
func DefaultBootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// readMarkers reports what the last run left: whether it closed cleanly,
// and the boot ID it ran under.
func (l *Log) readMarkers() (clean bool, bootID string, err error) {
	_, err = l.opts.FS.Stat(filepath.Join(l.opts.Dir, cleanFile))
	switch {
	case err == nil:
		clean = true
	case !errors.Is(err, fs.ErrNotExist):
		return false, "", fmt.Errorf("raftlog: %s: %w", cleanFile, err)
	}
	f, err := l.opts.FS.OpenFile(filepath.Join(l.opts.Dir, bootIDFile), os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return clean, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("raftlog: %s: %w", bootIDFile, err)
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return false, "", fmt.Errorf("raftlog: %s: %w", bootIDFile, err)
	}
	return clean, strings.TrimSpace(string(b)), nil
}

// markOpen records this run: the clean marker goes (a crash from now on is
// unclean) and the boot ID is this one. Both are durable before Open
// returns.
func (l *Log) markOpen(bootID string) error {
	if err := l.opts.FS.Remove(filepath.Join(l.opts.Dir, cleanFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("raftlog: remove %s: %w", cleanFile, err)
	}
	return l.writeMarker(bootIDFile, bootID+"\n")
}

// writeMarker replaces a marker file: a temporary file, fsynced, renamed
// over it, and the directory fsynced.
func (l *Log) writeMarker(name, content string) error {
	path := filepath.Join(l.opts.Dir, name)
	tmp := path + ".tmp"
	f, err := l.opts.FS.Create(tmp)
	if err != nil {
		return fmt.Errorf("raftlog: create %s: %w", tmp, err)
	}
	_, err = io.WriteString(f, content)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = l.opts.FS.Rename(tmp, path)
	}
	if err == nil {
		err = vfs.SyncDir(l.opts.FS, l.opts.Dir)
	}
	if err != nil {
		return fmt.Errorf("raftlog: write %s: %w", name, err)
	}
	return nil
}
