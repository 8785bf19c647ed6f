// Package store is the durable storage engine of Skiff's streams: an
// append-only log of messages per stream, with JetStream's limits (max
// messages, bytes, age, messages per subject, message size; discard old or
// new), a per-subject index for filtered reads, purge and delete, and crash
// recovery; plus ConsumerState, which persists a consumer's delivery and
// acknowledgement state. It owns expiry (MaxAge, per-message TTLs,
// subject delete markers) and every fsync, so that a stream expires and
// persists alike wherever it is kept. It can be used on its own:
//
//	s, err := store.Open(store.Options{Dir: dir, MaxAge: time.Hour})
//	if err != nil { ... }
//	defer s.Close()
//	seq, _, err := s.Append("orders.eu.created", nil, payload, 0) // 0: no TTL
//	if err == nil {
//		err = s.WaitDurable(seq) // before acknowledging the publisher
//	}
//	m, err := s.Next(1, "orders.*.created") // a consumer reads on
//
// A message has a sequence (from 1, strictly increasing, never reused, even
// after deletes and purges), a timestamp (Unix nanoseconds assigned by
// Append, never decreasing along the stream), a literal subject, an
// optional raw NATS header block and a payload.
//
// # Concurrency
//
// Stream and ConsumerState are safe for concurrent use by many goroutines.
// A Stream's Append, Delete, Purge and UpdateConfig serialise on a write
// lock, held for one write system call and the index update; Get, Next,
// LastBySubject, SeqAtOrAfterTime, Subjects and State share a read lock;
// WaitDurable runs an fsync while holding neither, and concurrent callers
// share it (group commit). Each Stream runs one background goroutine for
// periodic syncs, MaxAge expiry and expiry rounds (see Expiry), which
// calls Options.OnExpire; a file-backed ConsumerState under SyncInterval
// runs one for its fsyncs. Close stops them. Messages returned are copies
// the caller owns.
//
// # Memory
//
// Every stored message costs about 32 bytes of memory besides its subject
// string, which is shared: an entry in a list indexed by sequence
// (subject, timestamp, size, file offset) and its sequence in its subject's
// list. The list by sequence is kept in blocks of 4,096 entries
// (blocklist.go), so that it never moves: a slice of ten million entries
// outgrowing its array would copy 240 MB, and stall the stream for the
// copy (BenchmarkIndexAppend). So is the segment being written's index of
// its records (32 bytes a record, until the segment's index file is
// written). Get is one list lookup and one read; Next with a literal filter is a
// binary search in the subject's list; with a wildcard filter, a search in
// the list of each matching subject (the set is cached per filter and kept
// current as subjects come and go). Payloads of file storage are not kept in
// memory: reads go to the operating system's page cache.
//
// # Expiry
//
// Three things remove messages by time, all applied here:
//
//   - MaxAge removes the messages older than it, but those appended with
//     TTLNever. On a stream without delete markers, Append and the reads
//     apply it as they go: the expired messages are a prefix of the
//     stream (timestamps never decrease), removed once the first is due,
//     and no read returns one. Like removals by the other limits, these
//     are not reported.
//   - A TTL, given to Append (Options.AllowMsgTTL), removes its message
//     that long after its timestamp, whatever the limits say. Expiry
//     rounds apply TTLs: the background goroutine keeps a heap of them and
//     wakes for the earliest.
//   - With Options.SubjectDeleteMarkerTTL, when MaxAge or a TTL removes
//     the only message of a subject (not itself a delete marker or a
//     key-value purge), an empty message takes its place, with the
//     headers Nats-Marker-Reason: MaxAge, Nats-TTL (the marker TTL) and
//     Nats-Rollup: sub, so that watchers see the subject go. On such a
//     stream the rounds apply MaxAge too (a marker is an append, which
//     reads must not make), and a TTL shorter than the marker TTL is
//     raised to it unless MaxMsgsPerSubject is 1. A marker is made durable
//     before the message it replaces is deleted.
//
// A round reports what it removed and appended to Options.OnExpire, and
// holds Options.AppendLock while it runs, so that a caller that checks
// the stream (its last sequence, say) and then appends under that lock
// never sees a marker come in between. Options.HoldExpiry defers the
// rounds until StartExpiry.
//
// Under Options.LogClock (a replica of a replicated stream) no round runs
// by itself: the stream's time is its log's, and expiry happens inside
// AppendAt and AdvanceTime. On such a stream with markers, where a marker
// takes a sequence only the log's leader may give, each round is planned
// on the leader (PlanExpiry) and applied by every replica as planned
// (ApplyExpiry).
//
// TTLs are stored nowhere but in the messages' headers: Open reads every
// stored message's TTLHeader back, when TTLs are allowed, to rebuild the
// heap and the exemptions from MaxAge. That keeps the log the one record
// of a TTL, with no second file to keep consistent with it through
// crashes, torn writes and damage, and the files as they were; the price
// is a read of every message at Open, for streams with TTLs only.
//
// # Durability
//
// One policy, Durability, says when a Stream and a ConsumerState fsync,
// and the store runs every fsync it implies, background ones included.
// File storage writes every Append to the operating system before it
// returns, so a process crash loses nothing Append returned. What an
// operating system crash or power loss may take depends on the SyncPolicy:
// with SyncAlways nothing that WaitDurable confirmed; with SyncInterval up
// to one Durability.Interval of messages (acknowledged or not); with
// SyncNever whatever the operating system had not flushed. When a write fails (a full
// disk), Append returns ErrWrite, nothing partial remains, the sequence is
// not consumed, and the stream keeps working once writes succeed again.
// When an fsync fails, WaitDurable returns ErrSync for every sequence it
// covered, and the segment is sealed so that later messages go to a new
// file, away from pages the kernel may have dropped.
//
// # Files
//
// A file-backed stream's directory holds segments named by their first
// sequence, zero-padded to 20 digits so that names sort numerically, each
// with up to two sidecars, and one meta file:
//
//	00000000000000000001.log   records 1..1000
//	00000000000000000001.idx   its index (once sealed)
//	00000000000000000001.del   sequences deleted from its middle (if any)
//	00000000000000001001.log   records 1001.. (the last segment takes appends)
//	00000000000000000001.gone  once segment 1 is removed: its last sequence
//	meta                       the floor (every sequence below it is gone)
//	                           and the high water mark
//
// A segment rolls once it would pass Options.SegmentBytes or its first
// message is older than Options.SegmentAge. The segment being written
// reserves disk space ahead of its records (vfs.Preallocate: fallocate
// with FALLOC_FL_KEEP_SIZE, its size and bytes untouched), by as much as
// it holds, from 64 KiB to 8 MiB and within SegmentBytes, so that ext4
// finds its writes' blocks allocated instead of reserving each page as
// the write dirties it (about a quarter less CPU a byte written, fsyncs
// counted); sealed, it truncates itself to its size, which gives back
// what it did not use. A file system without the call writes as before.
// Retention removes a segment's
// files once none of its messages are left, leaving a .gone marker,
// fsynced with the directory before the files go, so that the gap is not
// taken for a lost file after a crash of the machine (gone.go); until
// then, removals inside a segment are recorded in its .del file (explicit
// deletes and purges at once, removals by limits at the next sync point),
// and removals from the front of the stream by raising the floor. Recovery re-applies the limits,
// so a removal by limits lost in a crash is redone. A Skip past stored
// messages is a delete record of its last sequence in the last segment's
// .del, past that segment's records; the next message starts a new
// segment after the gap, and recovery counts the skipped sequences as the
// earlier segment's (segment.through), as does its .gone marker once it is
// removed (an empty segment a Skip was recorded in too), so the gap is
// never taken for a lost file. Deletes past the last good record of a
// segment cut short by corruption are not read as a Skip: that rest is
// reported lost.
//
// # Formats
//
// Each file format is drawn next to the code that reads and writes it:
//
//	record.go       a segment's records (the .log files)
//	index.go        a sealed segment's index (.idx, SKIFFIX1)
//	delfile.go      the sequences deleted from a segment's middle (.del)
//	meta.go         the floor's two slots in the meta file (SKMT)
//	hwm.go          the high water mark's two slots after them (SKHW)
//	gone.go         the marker a removed segment leaves (.gone)
//	consumerfmt.go  a consumer's log (consumer.log) and snapshot
//	                (consumer.snap, SKIFFCS2)
//
// Integers are little-endian, and every checksum is a CRC32C
// (Castagnoli).
//
// # Recovery
//
// Open lists the segments. Each sealed segment with a trustworthy index is
// recovered from the index alone. The last segment, and any whose index is
// missing, stale or corrupt, is scanned: every record's framing, checksum,
// sequence and timestamp are verified. Recovery time is thus proportional
// to the index sizes plus the last segment (at most SegmentBytes).
//
// A bad record followed by good ones, in any segment, is damage, not a
// torn write: recovery finds the next good record, keeps it and the rest,
// and records the sequences in between as deleted (resync.go). A bad
// record with nothing good after it is truncated away, in the last
// segment, only if it is torn (its length runs past the end of the file,
// or no plausible length is left): that is what a crash in the middle of a
// write leaves, and new appends continue from the last good record, so
// their sequences follow it. A whole record with a bad checksum is
// damage even there: its sequence stays used, as deleted. In an older
// segment, a bad record with nothing good after it and no length to trust
// is reported in Stream.Recovery; the records before it are served,
// nothing from it onwards in that segment, and the file is left untouched
// for inspection. A record found corrupt later, when read, is skipped and
// removed the same way (damage.go). Lost sequences count as deleted and
// are never used again; a lost last segment is caught by the meta file's
// high water mark (hwm.go). Then the .del files and the floor are
// applied, the in-memory and per-subject indexes are built, and the
// limits are enforced.
//
// # Staging
//
// A replica of a replicated stream (Options.Staging) writes a message's
// record when its raft log takes the entry (Stage), outside the index,
// and indexes it when the entry commits: AppendStaged finds the staged
// record, checks that the same write staged it (StageKey) or else its
// checksum against the message, and commits it without writing it again. Staged records are the last of the files; a cut (Unstage, or
// a Stage inside the staged tail, as raft replaces an uncommitted suffix)
// truncates them. Open recovers the records after Options.CommitThrough
// (the replica's checkpoint) staged, for the log's replay to commit or
// cut; see stage.go.
//
// # Consumer state
//
// OpenConsumerState keeps a consumer's state in two files: consumer.log,
// an append-only log of changes (deliveries, acknowledgements), and
// consumer.snap, the whole state as of a point in the log, written when
// the consumer is created and when the log grows past 1 MiB and four
// times the last snapshot, after which the log starts over. Open loads
// the snapshot and replays the log after it, truncating a torn tail,
// stepping over damage (consumerresync.go) and reporting a log emptied or
// cut at its start (consumerlost.go). The formats are in consumerfmt.go.
package store
