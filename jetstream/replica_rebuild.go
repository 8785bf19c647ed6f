package jetstream

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/skiffmq/skiff/internal/multiraft"
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

// A record that fails its checksum behind an intact index is found by a
// read, not at open: the replica's store reports it (store
// Options.OnCorrupt) rather than drop it, and the read fails instead of
// stepping over it. The replica is then marked (rebuildFile, so that a
// start rebuilds it too) and reopened on its stream's worker, which
// rebuilds it as above.

// A replica whose committed log disagrees with its group's leader
// (multiraft.ErrDiverged: a quorum lost entries under a policy that does
// not fsync every write, went on without them, and this replica had
// applied them) is rebuilt the same way, its group's log dropped too: the
// log holds the entries the group lost. It opens with no log, held wiped,
// and takes the group's log or snapshot from the leader. The mark says so
// (rebuildLog), so that a restart halfway drops the log as well.

// rebuildFile marks a replica to be rebuilt at its next open, in its
// stream's directory.
const rebuildFile = "REBUILD"

// rebuildLog is rebuildFile's content when the group's log goes too.
const rebuildLog = "log\n"

// damagedDir is where a rebuilt replica's damaged store is kept, in its
// stream's directory.
const damagedDir = "msgs.damaged"

// damaged reports whether a replica's store, just opened, found records
// it lost to damage, or is marked to be rebuilt.
func damaged(s *store.Stream, dir string) bool {
	if s.Recovery().LostRecords() > 0 {
		return true
	}
	_, err := os.Stat(filepath.Join(dir, rebuildFile))
	return err == nil
}

// rebuildsLog reports whether a replica is marked to be rebuilt with its
// group's log dropped: marked so, or its store stages (so), whose log's
// entries point at the messages of the store set aside
// (replica_payloads.go).
func rebuildsLog(dir string, so store.Options) bool {
	if so.Staging {
		return true
	}
	b, err := os.ReadFile(filepath.Join(dir, rebuildFile))
	return err == nil && string(b) == rebuildLog
}

// groupFailed hears that the replica's group failed here
// (replicaFSM.Failed). A replica that diverged from its group is marked
// and reopened on its stream's worker, which rebuilds it and its log.
// Any other failure (its log's disk) holds it damaged, as reported by
// /healthz, until the server restarts.
func (st *stream) groupFailed(err error) {
	if !errors.Is(err, multiraft.ErrDiverged) {
		return
	}
	st.js.log.Error("replica diverged from its group: a quorum lost entries this replica applied; "+
		"it is rebuilt from its group, its log too", "account", st.ja.name, "stream", st.name, "err", err)
	if err := writeFileAtomic(filepath.Join(st.dir, rebuildFile), []byte(rebuildLog)); err != nil {
		st.js.log.Warn("replica store: the mark to rebuild it was not written", "stream", st.name, "err", err)
		return
	}
	if st.rebuilding.CompareAndSwap(false, true) {
		st.js.onStreamWorker(st.ja, st.name, func() { st.ja.rebuildReplica(st) })
	}
}

// corruptFound is a replica store's Options.OnCorrupt: reads met records
// that fail their checksums. The replica is marked and reopened on its
// stream's worker, once.
func (st *stream) corruptFound(seqs []uint64) {
	st.js.log.Error("replica store: reads found corrupt records; the replica is rebuilt from its group",
		"account", st.ja.name, "stream", st.name, "seqs", seqs)
	if err := writeFileAtomic(filepath.Join(st.dir, rebuildFile), nil); err != nil {
		st.js.log.Warn("replica store: the mark to rebuild it was not written", "stream", st.name, "err", err)
	}
	if st.rebuilding.CompareAndSwap(false, true) {
		st.js.onStreamWorker(st.ja, st.name, func() { st.ja.rebuildReplica(st) })
	}
}

// rebuildReplica closes a replica whose reads found damage and opens it
// again, which rebuilds it. On the stream's worker.
func (ja *jsAccount) rebuildReplica(st *stream) {
	if st.closing.Load() {
		return // closed since: the next open sees the mark
	}
	if ja.lookup(st.name) != st {
		// Still opening (a read of openStream's found the damage): once
		// it is served.
		time.AfterFunc(time.Second, func() { ja.js.onStreamWorker(ja, st.name, func() { ja.rebuildReplica(st) }) })
		return
	}
	meta, err := readMeta[streamMeta](filepath.Join(st.dir, metaFile))
	if err == nil {
		err = st.close(false)
	}
	if err == nil && rebuildsLog(st.dir, st.store.Options()) {
		err = ja.js.raft.DropGroupLog(st.group.Load())
	}
	var nst *stream
	if err == nil {
		nst, err = ja.openStream(meta, false, nil)
	}
	if err = ja.replaced(st, nst, st.config().Subjects, err); err != nil {
		ja.js.log.Error("replica not rebuilt", "account", ja.name, "stream", st.name, "err", err)
	}
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
	s, err := store.Open(so)
	if err != nil {
		return nil, err
	}
	if err := os.Remove(filepath.Join(st.dir, rebuildFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		_ = s.Close()
		return nil, fmt.Errorf("removing the mark to rebuild: %w", err)
	}
	return s, nil
}
