package jscluster

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/skiffmq/skiff/internal/multiraft"
	"github.com/skiffmq/skiff/store"
	"github.com/skiffmq/skiff/store/raftlog"
	"github.com/skiffmq/skiff/store/vfs"
)

// Replicas that may have lost an unsynced tail (design 2.5, "unsynced").
// Under the interval and never policies the WAL acknowledges writes once
// the operating system has them, before they are fsynced: a replica
// counts towards a commit with entries only its page cache holds. A
// process crash keeps them; a machine that stopped with the process
// (power loss, kernel panic) may not. The WAL tells which: at Start it
// reports that the last run did not close it (Unclean) and that the
// machine restarted since (Rebooted). Then every group whose log was in
// it, the meta group and every stream's, starts held unsynced
// (multiraft.HoldUnsynced): it neither votes nor campaigns until it has
// caught up with a leader of the current term, so it never helps elect a
// replica that lacks what it acknowledged. A group first added in that
// run whose state the layer above found missing (it asks for
// multiraft.HoldLost: its log may have gone with the WAL's tail) starts
// held lost, the same for a replica that may have lost everything; asked
// for outside such a run, HoldLost is HoldWiped, which time never
// releases. A replica held wiped for another cause (a rebuild) stays
// wiped. Under `always`, nothing acknowledged was left unsynced, and
// nothing is held.
//
// A group whose every replica is held (the whole cluster lost power), or
// whose leader kept the log while every other replica lost it, has no one
// to catch up from: Options.HoldTimeout without a leader releases them
// (multiraft), the documented case where acknowledged messages may be
// lost.
//
// Such a replica stays marked until it has caught up
// (multiraft.Options.OnCaughtUp), in the file unsyncedFile, written
// before any of its groups starts: a later restart, clean or not, holds
// it again. Without the mark, a replica that lost its log, was released
// by the timeout and restarted before it caught up would start held wiped,
// never released by time, or, with part of a log, not held at all.

// unsyncedFile lists the groups marked unsynced, one decimal ID a line, in
// the raft directory.
const unsyncedFile = "unsynced"

// unsynced is which groups start held unsynced or lost.
type unsynced struct {
	fs   vfs.FS
	path string

	mu sync.Mutex
	// lostRun: the WAL may have lost an unsynced tail before this run.
	lostRun bool
	// added are the groups added in this run.
	added map[uint64]bool
	// marked are the groups that lost state to an unsynced tail and have
	// not caught up since, as unsyncedFile has them.
	marked map[uint64]bool
}

// lostTail reports whether a WAL may have lost writes it acknowledged: it
// was not closed, the machine restarted since, and its policy
// acknowledges writes before they are fsynced.
func lostTail(rep raftlog.Report, d store.Durability) bool {
	return rep.Unclean && rep.Rebooted && d.Sync != store.SyncAlways
}

// open reads the marks left in dir. After a lost tail (lost) it marks
// every group of wal and writes the marks before it returns. A mark file
// it cannot read or parse marks every group of wal too (logged): each
// loses its mark once it has caught up, where a start that held nothing
// would be a server silently open to electing a replica that lost what it
// acknowledged.
func (u *unsynced) open(fsys vfs.FS, dir string, wal *raftlog.Log, lost bool, log *slog.Logger) error {
	u.fs, u.path = fsys, filepath.Join(dir, unsyncedFile)
	u.added, u.marked = map[uint64]bool{}, map[uint64]bool{}
	u.mu.Lock()
	defer u.mu.Unlock()
	b, err := vfs.ReadFile(fsys, u.path)
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	for line := range strings.FieldsSeq(string(b)) {
		if err != nil {
			break
		}
		var id uint64
		if id, err = strconv.ParseUint(line, 10, 64); err == nil {
			u.marked[id] = true
		}
	}
	if err != nil {
		log.Error("the marks of replicas held after a power loss are unreadable: every group of the raft log is held "+
			"as if it had lost an unsynced tail, until caught up", "file", u.path, "err", err)
	}
	if !lost && err == nil {
		return nil
	}
	u.lostRun = lost
	for _, g := range wal.Groups() {
		u.marked[g] = true
	}
	return u.writeLocked()
}

// hold returns how a group added now starts held, given reason from the
// caller (lost: its state is missing; wiped or damaged; or none): a group
// whose state is missing is held lost if it is marked or first added in a
// run after a lost tail, else wiped; a marked group not held is held
// unsynced; else reason. A group it holds unsynced or lost for the first
// time is marked, on disk before hold returns.
func (u *unsynced) hold(group uint64, reason multiraft.HoldReason) (multiraft.HoldReason, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	first := !u.added[group]
	u.added[group] = true
	marked := u.marked[group]
	switch {
	case reason == multiraft.HoldLost && !marked && !(u.lostRun && first):
		return multiraft.HoldWiped, nil
	case reason == multiraft.HoldLost:
	case reason == multiraft.HoldNone && marked:
		reason = multiraft.HoldUnsynced
	default:
		return reason, nil
	}
	if !marked {
		u.marked[group] = true
		if err := u.writeLocked(); err != nil {
			delete(u.marked, group)
			return reason, err
		}
	}
	return reason, nil
}

// unmark drops group's mark: it caught up, or it is gone from this
// server.
func (u *unsynced) unmark(group uint64) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.marked[group] {
		return nil
	}
	delete(u.marked, group)
	return u.writeLocked()
}

// isMarked reports whether group is marked.
func (u *unsynced) isMarked(group uint64) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.marked[group]
}

// writeLocked writes the marks (atomically, synced), or removes the file
// when there are none. u.mu held.
func (u *unsynced) writeLocked() error {
	if len(u.marked) == 0 {
		if err := u.fs.Remove(u.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing %s: %w", u.path, err)
		}
		return nil
	}
	var b strings.Builder
	for _, id := range slices.Sorted(maps.Keys(u.marked)) {
		b.WriteString(strconv.FormatUint(id, 10))
		b.WriteByte('\n')
	}
	if err := vfs.WriteFile(u.fs, u.path, []byte(b.String())); err != nil {
		return fmt.Errorf("writing %s: %w", u.path, err)
	}
	return nil
}

// caughtUp hears that this server's replica of group caught up
// (multiraft.Options.OnCaughtUp), on its apply goroutine: the mark goes.
// A write of a small file, once a group in a recovery.
func (c *Cluster) caughtUp(group uint64) {
	if err := c.unsynced.unmark(group); err != nil {
		c.log.Error("the mark of a replica held unsynced, caught up since, stays: its next start holds it again",
			"group", group, "err", err)
	}
}

// Unsynced reports whether this server's WAL may have lost an unsynced
// tail before Start (an unclean stop across a restart of the machine,
// under a policy other than always): its groups started held unsynced.
func (c *Cluster) Unsynced() bool { return c.lostTail }

// Marked reports whether this server's replica of group lost state to an
// unsynced tail and has not caught up since: it starts held at every
// start until it has.
func (c *Cluster) Marked(group uint64) bool { return c.unsynced.isMarked(group) }
