package jetstream

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/skiffmq/skiff/server"
)

// The store directory keeps each account's streams apart:
//
//	StoreDir/
//	    LOCK                          held by the running server (dirlock.go)
//	    LAYOUT                        "accounts-v1\n": the layout below
//	    accounts/
//	        $G/streams/ORDERS/...     a stream of the global account
//	        TEAM_A/streams/ORDERS/... another of the same name, in TEAM_A
//
// Below accounts/<account>/streams/ a stream's files are as they always
// were (doc.go). Before it, Skiff kept one account's streams in
// StoreDir/streams/; the first start of a version with accounts moves that
// directory to accounts/$G/streams with one rename (migrateLayout), which
// a crash cannot leave half done.

const (
	accountsDir = "accounts"
	streamsDir  = "streams"
	layoutFile  = "LAYOUT"
	layoutV1    = "accounts-v1\n"
)

// migrateHook, when set (tests), runs at each step of a migration: the
// crash test kills the process between the new directory and the rename.
var migrateHook func(step string)

// prepareLayout makes StoreDir hold the accounts layout, migrating the
// layout of versions before accounts. It runs under the directory's lock.
//
// The migration: accounts/$G is made and fsynced into accounts, then
// streams/ is renamed to accounts/$G/streams (atomic on one file system),
// accounts/$G and StoreDir are fsynced, and LAYOUT is written. A crash
// before the rename leaves an empty accounts/$G and streams/ as it was,
// and the next start migrates again; after it, the streams are in place
// and only LAYOUT is left to write.
func prepareLayout(storeDir string, log *slog.Logger) error {
	layout := filepath.Join(storeDir, layoutFile)
	switch b, err := os.ReadFile(layout); {
	case err == nil && !bytes.Equal(b, []byte(layoutV1)):
		return fmt.Errorf("%w: %s says %q: a layout this version does not know (written by a newer Skiff?)",
			ErrInvalidOptions, layout, bytes.TrimSpace(b))
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("%w: %v", ErrInvalidOptions, err)
	}
	accounts := filepath.Join(storeDir, accountsDir)
	global := filepath.Join(accounts, server.GlobalAccountName)
	old, target := filepath.Join(storeDir, streamsDir), filepath.Join(global, streamsDir)
	oldExists, targetExists := isDir(old), isDir(target)
	if oldExists && targetExists {
		return fmt.Errorf("%w: both %s and %s exist: a Skiff without accounts ran on this directory after it was migrated; "+
			"move the streams of %s into %s (or remove it if empty) and start again (docs/streams.md)",
			ErrInvalidOptions, old, target, old, target)
	}
	if err := os.MkdirAll(accounts, 0o755); err != nil {
		return fmt.Errorf("%w: store_dir %s: %v", ErrInvalidOptions, storeDir, err)
	}
	if oldExists {
		if err := os.MkdirAll(global, 0o755); err != nil {
			return fmt.Errorf("migrating %s: %w", old, err)
		}
		step("mkdir")
		if err := errors.Join(syncDir(accounts), syncDir(storeDir)); err != nil {
			return fmt.Errorf("migrating %s: %w", old, err)
		}
		step("rename")
		if err := os.Rename(old, target); err != nil {
			return fmt.Errorf("migrating %s: %w", old, err)
		}
		if err := errors.Join(syncDir(global), syncDir(storeDir)); err != nil {
			return fmt.Errorf("migrating %s: %w", old, err)
		}
		step("renamed")
		log.Info("migrated streams to accounts/$G", "from", old, "to", target)
	}
	if _, err := os.Stat(layout); errors.Is(err, os.ErrNotExist) {
		if err := writeFileAtomic(layout, []byte(layoutV1)); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidOptions, err)
		}
	}
	return nil
}

func step(name string) {
	if migrateHook != nil {
		migrateHook(name)
	}
}

func isDir(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// syncDir fsyncs a directory: its entries (made, renamed, removed) are
// durable once it returns.
func syncDir(path string) error {
	d, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}
