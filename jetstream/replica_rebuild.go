package jetstream

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/skiffmq/skiff/store"
)

// Rebuilding a damaged replica (design 2.5). A single server's store that
// fails its checksums at open steps over the damaged records and counts
// them lost (store.RecoveryReport). A replica's store is a copy of what
// its group committed, and every other replica holds those records: so
// rather than serve, or hand a peer catching up from it, a stream with
// holes, the replica is rebuilt. Its damaged store is set aside
// (msgs.damaged, replacing an earlier one, for inspection), its
// checkpoint dropped, and the store opened empty; raft then replays the
// group's log from its start, or installs the log's snapshot, whose
// messages the replica takes from a peer (replica_catchup.go). Meanwhile
// the replica is held (multiraft.HoldWiped): it neither campaigns nor
// votes until it has caught up with the leader, so it is never elected
// with a partial store.

// damagedDir is where a rebuilt replica's damaged store is kept, in its
// stream's directory.
const damagedDir = "msgs.damaged"

// damaged reports whether a replica's store, just opened, found records
// it lost to damage.
func damaged(s *store.Stream) bool {
	return s.Recovery().LostRecords() > 0
}

// rebuildStore sets a replica's damaged store s aside and returns the
// store opened anew, empty, with the same options. The replica's
// checkpoint goes too: nothing of the old store is trusted.
func (st *stream) rebuildStore(s *store.Stream, so store.Options) (*store.Stream, error) {
	rep := s.Recovery()
	st.js.log.Error("replica store damaged: it is set aside and rebuilt from the group's log and its peers",
		"account", st.ja.name, "stream", st.name, "lost_records", rep.LostRecords(),
		"damaged_ranges", len(rep.Damaged), "corrupt_segments", len(rep.Corrupt),
		"kept_in", filepath.Join(st.dir, damagedDir))
	if err := s.Close(); err != nil {
		return nil, fmt.Errorf("closing the damaged store: %w", err)
	}
	aside := filepath.Join(st.dir, damagedDir)
	if err := os.RemoveAll(aside); err != nil {
		return nil, fmt.Errorf("removing the earlier damaged store: %w", err)
	}
	if err := os.Rename(so.Dir, aside); err != nil {
		return nil, fmt.Errorf("setting the damaged store aside: %w", err)
	}
	for _, name := range []string{checkpointFile, consumersFile} {
		if err := os.Remove(filepath.Join(st.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("removing the replica's %s: %w", name, err)
		}
	}
	if err := syncDir(st.dir); err != nil {
		return nil, err
	}
	return store.Open(so)
}
