// Package raftlog is the raft log of a Skiff server: one write-ahead log
// shared by every raft group the server hosts, with one writer goroutine
// that writes many groups' appends with one write and one fsync, and a
// per-group raft.Storage (go.etcd.io/raft/v3) over it.
//
//	l, err := raftlog.Open(raftlog.Options{Dir: dir, Durability: d})
//	g := l.Group(7)                      // a raft.Storage for group 7's RawNode
//	g.Save(raftlog.UpdateOf(m), func(err error) {
//		// m (a MsgStorageAppend) is as durable as the policy says:
//		// now deliver m.Responses
//	})
//	g.CreateSnapshot(applied, cs, data) // then g.Compact(applied)
//
// The log does not drive raft; package internal/multiraft (to come) does,
// and hands it the MsgStorageAppend messages of every group.
//
// # Files
//
// Dir holds numbered segments, written one after the other:
//
//	00000000000000000007.wal   oldest segment still needed
//	00000000000000000008.wal
//	00000000000000000009.wal   the active segment: every write goes here
//
// Each segment is a sequence of records (record.go), its first a
// checkpoint (checkpoint.go), and starts when the previous one has reached
// Options.SegmentBytes, and at every Open:
//
//	+------------+--------------+-------------+--------------+----
//	| checkpoint | entry g7 i41 | entry g9 i3 | hardstate g7 | ...
//	+------------+--------------+-------------+--------------+----
//
// A checkpoint holds every live group's hard state, snapshot, compaction
// point and damage mark, so a segment is removed (GC) as soon as no group
// has an entry in it: the rest of what it held is in the checkpoints
// after it. Groups keep segments by their oldest entry, until the layer
// above takes a snapshot and calls Compact; Options.OnPressure names the
// groups keeping the oldest segment once the log passes Options.MaxBytes.
// Snapshot data is stored inline in snapshot and checkpoint records, so it
// is at most MaxSnapshotData: a descriptor of the state kept elsewhere.
//
// A group that is no longer written to would keep its segment, and every
// later one, for good; before GC removes segments it copies the entries
// of such a group, when they are few, to the end of the active segment
// (carry.go). A removed segment's file is kept as NNN.free, up to
// Options.RecycleSegments, and a new segment is written over it from its
// start rather than created (segment.go): the records' checksums start
// from a seed made of the segment's number (record.go), so what the file
// held in its previous life fails them, and recovery takes it for a torn
// tail. A recycled segment is cut at its end when it stops being the
// active one, and at Close.
//
// # Durability
//
// The policy is the store's (store.Durability), applied to batches: under
// SyncAlways every batch with entries is fsynced before its callbacks run;
// under SyncInterval the writer fsyncs in the background every Interval,
// and a callback means the write reached the operating system; under
// SyncNever entries are never fsynced. Under every policy, a batch that
// changes a group's term or vote, or installs a received snapshot, is
// fsynced before its callbacks run (raft's MustSync: a vote forgotten in a
// crash could be cast twice). A new segment, the one before it and the
// directory are fsynced when it starts, whatever the policy, and before
// GC removes anything, so that a checkpoint never stands in for records
// that are not durable.
//
// A process crash loses nothing a callback confirmed, under any policy.
// Close fsyncs under every policy and leaves a marker, so that Open can
// tell (Report.Unclean, Report.Rebooted) whether the last run may have
// lost confirmed writes: only if it did not close and the operating
// system restarted since, under SyncInterval or SyncNever (marker.go).
//
// # Recovery
//
// Open replays every segment in order. Its rules are the store's
// (store/recover.go): a record that fails its framing or checksum at the
// end of the last segment, with nothing good after it, is a torn write
// and is cut off. A bad record followed by good ones, in any segment, or a
// bad end of a segment that is not the last, is damage: the scan goes on
// at the next good record. Each record's header has a checksum of its own
// (record.go), so when only the bodies of the bad records went bad, their
// groups are known and only they are marked damaged (Group.Damaged). When
// a header went bad too, the groups cannot be known: every group the log
// knew at that point is marked damaged, and so is every group first seen
// later in that segment. A group whose entries have a hole (a lost record
// or segment) is marked damaged too. A damaged group keeps the entries it
// has from its first without a hole, and a commit index no further; the
// mark is kept in later checkpoints until Group.Reset. Segments before a
// gap in the numbering are left over from a GC the crash interrupted and
// are removed.
//
// A group's entries at index i and after are discarded by a later entry
// record at i (raft's conflicting entries), in memory and on replay alike.
// Replay keeps no entry data in memory: each group's index holds where
// each entry is (segment, offset, size, term), and the scan for the next
// good record after damage reads a window at a time.
//
// # Concurrency
//
// Log and Group are safe for concurrent use. Writes (Save, CreateSnapshot,
// Compact, Reset, Log.Remove, Log.Sync) are queued for the one writer
// goroutine, in order; Save returns at once and calls back on the writer
// goroutine, the others wait. The writer applies each batch to the groups'
// state in memory under each Group's lock, so raft's Storage calls, under
// the same lock, see a write as soon as it is made; entries are read from
// the group's cache of recent entries or, outside the lock, from the
// segment files, which a reader pins against removal. Locks: Log.mu
// guards the group map, the queue and the counters, and is never held
// while a Group's lock is taken, nor the other way around.
//
// A write or fsync that fails fails every write of its batch, and their
// groups (Group.Err): their state in memory is ahead of the disk, so they
// serve nothing more until the log is reopened. The other groups go on,
// but no segment is removed until then.
//
// # Entry cache
//
// Each group caches the entries it appended last, at most
// Options.CacheBytes, so that a leader sends new entries to its followers
// without reading them back; all groups together cache at most
// Options.MaxCacheBytes, evicting from the group that appended least
// recently first (cache.go).
package raftlog
