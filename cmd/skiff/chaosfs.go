//go:build chaosfs

package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"

	"github.com/skiffmq/skiff/broker"
	"github.com/skiffmq/skiff/internal/chaosfs"
	"github.com/skiffmq/skiff/jetstream"
	"github.com/skiffmq/skiff/store/vfs"
)

// The chaosfs build (go build -tags chaosfs) is for the multi-process
// fault suite (chaos_test.go, design 7.3): JetStream writes its streams
// and its raft log through internal/chaosfs, which journals the size of
// every file at each fsync, so that the suite can cut the power after a
// kill -9 (chaosfs.Cut truncates every file to what it had synced) and
// the next start finds a new boot of its machine. The journal is
// SKIFF_CHAOSFS_JOURNAL, or chaosfs.journal in the store directory.
// Binaries built without the tag have none of this.

// chaosJournalEnv names the journal's path.
const chaosJournalEnv = "SKIFF_CHAOSFS_JOURNAL"

// chaosFS makes JetStream write through a journaling file system.
func chaosFS(cfg *broker.Config) error {
	if !cfg.JetStreamEnabled {
		return nil
	}
	dir := cmp.Or(cfg.JetStream.StoreDir, jetstream.DefaultStoreDir)
	path := cmp.Or(os.Getenv(chaosJournalEnv), filepath.Join(dir, "chaosfs.journal"))
	fsys, err := chaosfs.Open(vfs.OS, path)
	if err != nil {
		return fmt.Errorf("chaosfs: %w", err)
	}
	cfg.JetStream.FS = fsys
	return nil
}
