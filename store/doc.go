// Package store is the durable storage engine of Skiff's streams: an
// append-only log of messages per stream, with JetStream's limits (max
// messages, bytes, age, messages per subject, message size; discard old or
// new), a per-subject index for filtered reads, purge and delete, and crash
// recovery; plus ConsumerState, which persists a consumer's delivery and
// acknowledgement state. It can be used on its own:
//
//	s, err := store.Open(store.Options{Dir: dir, MaxAge: time.Hour})
//	if err != nil { ... }
//	defer s.Close()
//	seq, _, err := s.Append("orders.eu.created", nil, payload)
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
// periodic syncs and MaxAge expiry; Close stops it. Messages returned are
// copies the caller owns.
//
// # Memory
//
// Every stored message costs about 32 bytes of memory besides its subject
// string, which is shared: an entry in a slice indexed by sequence
// (subject, timestamp, size, file offset) and its sequence in its subject's
// list. Get is one slice lookup and one read; Next with a literal filter is a
// binary search in the subject's list; with a wildcard filter, a search in
// the list of each matching subject (the set is cached per filter and kept
// current as subjects come and go). Payloads of file storage are not kept in
// memory: reads go to the operating system's page cache.
//
// # Durability
//
// File storage writes every Append to the operating system before it
// returns, so a process crash loses nothing Append returned. What an
// operating system crash or power loss may take depends on the SyncPolicy:
// with SyncAlways nothing that WaitDurable confirmed; with SyncInterval up
// to one SyncInterval of messages (acknowledged or not); with SyncNever
// whatever the operating system had not flushed. When a write fails (a full
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
// message is older than Options.SegmentAge. Retention removes a segment's
// files once none of its messages are left, leaving a .gone marker so that
// the gap is not taken for a lost file (gone.go); until then, removals inside a
// segment are recorded in its .del file (explicit deletes and purges at
// once, removals by limits at the next sync point), and removals from the
// front of the stream by raising the floor. Recovery re-applies the limits,
// so a removal by limits lost in a crash is redone.
//
// # Record
//
// A log file is a sequence of records; integers are little-endian.
//
//	0        4        8                16               24     26       30
//	+--------+--------+----------------+----------------+------+--------+---------+---------+------+
//	| length | crc32c | sequence       | timestamp (ns) | subj | header | subject | headers | data |
//	| uint32 | uint32 | uint64         | int64          | len  | len    |         |         |      |
//	|        |        |                |                | u16  | u32    |         |         |      |
//	+--------+--------+----------------+----------------+------+--------+---------+---------+------+
//	|<------------------------------------ length ------------------------------------------------>|
//
// length counts the whole record. The CRC32C (Castagnoli) covers the length
// field and everything after the checksum field. Before allocating, a
// reader checks that length is at least the 30-byte framing plus a
// one-byte subject, at most MaxRecordSize (64 MiB) and within the file.
// Records of a segment hold consecutive sequences from the segment's first.
// A record's size is what a message counts against MaxBytes.
//
// # Index
//
// A sealed segment's index lets Open rebuild the in-memory index of the
// segment (sequence to offset, timestamp, size and subject, which the
// per-subject index and the limits need) without reading the log. It is
// dense, one entry per record, because Open needs every record's subject
// and timestamp anyway: a sparse index would force a scan of the log.
//
//	+----------+-------+-------+-------+---------+------------+------------------+-----------------+--------+
//	| SKIFFIX1 | first | count | nsubj | logSize | validSize  | subject table    | entries         | crc32c |
//	| 8 bytes  | u64   | u32   | u32   | u64     | u64        | nsubj x          | count x         | u32    |
//	|          |       |       |       |         |            | (u16 len, bytes) | (u32 offset,    |        |
//	|          |       |       |       |         |            |                  |  u32 size,      |        |
//	|          |       |       |       |         |            |                  |  i64 timestamp, |        |
//	|          |       |       |       |         |            |                  |  u32 subject)   |        |
//	+----------+-------+-------+-------+---------+------------+------------------+-----------------+--------+
//
// Entry i is sequence first+i. logSize is the log file's size when the
// index was written; an index whose logSize differs from the log's is
// stale. validSize is the bytes of good records (less than logSize only for
// a segment with a corrupt record, so that it is not rescanned at every
// Open). An index is trusted only if its checksum matches, it is not stale,
// its entries tile [0, validSize) with plausible sizes and non-decreasing
// timestamps, its subjects are valid, and the last record it points at
// decodes with the right sequence; otherwise the segment is scanned and the
// index rewritten. A segment's index is written by the first sync round
// after it is sealed, once the segment is fsynced (under SyncNever, without
// waiting for one), and is not fsynced itself: a torn or lost index is
// simply rebuilt. Under SyncNever an operating system crash can leave an
// index on disk for a log whose data was not; recovery's checks then catch
// it, or Get reports the damaged records as ErrCorrupt.
//
// # Delete file and meta file
//
//	.del: batches   +-------+--------+---------------------+
//	                | count | crc32c | count x u64 sequence |
//	                | u32   | u32    |                      |
//	                +-------+--------+---------------------+
//
//	meta: two slots +------+---------+-----+------------+-------+--------+-----+
//	 at 0 and 32    | SKMT | version | pad | generation | floor | crc32c | pad |
//	                | 4    | u8      | 3   | u64        | u64   | u32    | 4   |
//	                +------+---------+-----+------------+-------+--------+-----+
//	then two slots  +------+--------+------------+------+--------------+
//	 at 64 and 96   | SKHW | crc32c | generation | high | active first |
//	                | 4    | u32    | u64        | u64  | u64          |
//	                +------+--------+------------+------+--------------+
//
// A .del batch's CRC32C covers its count and sequences; a torn last batch is
// truncated on Open. The meta file's slots are written alternately in
// place, so a torn write damages only the slot being written; Open uses the
// good slot with the highest generation. The floor also carries the last
// sequence across a purge of everything. The high water slots (hwm.go)
// hold the last sequence written and the first sequence of the segment
// taking appends; a meta file without them (64 bytes) is read as before.
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
// # Consumer state
//
// OpenConsumerState keeps two files in its directory. consumer.log is an
// append-only log of changes, each a record framed like a stream record:
//
//	+--------+--------+-----------+----+-----------------------------------------+
//	| length | crc32c | lsn       | op | operands                                |
//	| u32    | u32    | u64       | u8 | Delivered: dseq, sseq, dc u64, ts i64   |
//	|        |        |           |    | Ack, AckAll: dseq, sseq u64             |
//	|        |        |           |    | Start: ack floor dseq, sseq u64         |
//	+--------+--------+-----------+----+-----------------------------------------+
//
// consumer.snap is the whole state as of an LSN, written to a temporary
// file, fsynced and renamed into place when the consumer is created and
// when the log grows past 1 MiB and four times the last snapshot; then the
// log starts over with one Start record, whose LSN is the snapshot's. Open
// loads the snapshot and replays the log records with a higher LSN,
// truncating a torn tail, stepping over damage (consumerresync.go) and
// reporting a log emptied or cut at its start (consumerlost.go).
//
//	+------------------------+-----------------------------------------+
//	| SKIFFCS2               | magic, 8 bytes (SKIFFCS1: an older      |
//	|                        | version's, whose log has no Start)      |
//	| lsn                    | u64: the last change it includes        |
//	| delivered              | u64 consumer seq, u64 stream seq        |
//	| ack floor              | u64 consumer seq, u64 stream seq        |
//	| npending, pending      | u32, then (sseq, cseq u64, ts i64) each |
//	| nredelivered, entries  | u32, then (sseq, count u64) each        |
//	| crc32c                 | u32 over everything before              |
//	+------------------------+-----------------------------------------+
package store
