package store

import (
	"time"

	"github.com/skiffmq/skiff/internal/bufpool"
)

// Msg is a stored message. Its byte slices belong to the caller: the store
// copies them out of its buffers and never touches them again.
type Msg struct {
	// Seq is the stream sequence, from 1, strictly increasing.
	Seq uint64
	// Timestamp is when Append stored the message, in Unix nanoseconds.
	// Timestamps never decrease along a stream (see Append).
	Timestamp int64
	// Subject is the literal subject the message was appended on.
	Subject string
	// Header is the raw NATS header block, or nil.
	Header []byte
	// Data is the payload; nil when empty.
	Data []byte

	buf []byte // what Header and Data point into, for Release
}

// Release gives the buffer behind Header and Data back to the store for
// reuse. It is optional: a caller done with a large message (one that
// copied it into a connection's queue, say) saves an allocation per read.
// Neither the Msg nor the slices it held may be used afterwards.
func (m *Msg) Release() {
	if m.buf != nil {
		bufpool.Put(m.buf)
	}
	m.buf, m.Header, m.Data = nil, nil, nil
}

// Time returns Timestamp as a time.Time.
func (m *Msg) Time() time.Time { return time.Unix(0, m.Timestamp) }

// Size is what the message counts against MaxBytes and in State.Bytes: its
// record on disk, subject, headers and data plus 30 bytes of framing. Memory
// storage counts the same so that limits behave alike.
func (m *Msg) Size() uint64 { return uint64(recordSize(m.Subject, m.Header, m.Data)) }

// State summarises a stream, as JetStream's stream info reports it.
type State struct {
	// Msgs and Bytes count the stored messages and their Size.
	Msgs, Bytes uint64
	// FirstSeq is the sequence of the oldest message; when the stream is
	// empty it is LastSeq+1, the sequence the next message will get.
	FirstSeq uint64
	// FirstTime is the oldest message's timestamp; zero when empty.
	FirstTime time.Time
	// LastSeq is the last sequence ever assigned (0 for a new stream). It
	// survives purges and deletes: sequences are never reused.
	LastSeq uint64
	// LastTime is the timestamp of LastSeq's message, even if it has since
	// been removed; zero if no message was ever stored (or none survives a
	// reopen).
	LastTime time.Time
	// NumDeleted counts the gaps between FirstSeq and LastSeq: sequences
	// deleted, purged from the middle, or lost to corruption.
	NumDeleted int
	// NumSubjects counts the distinct subjects of stored messages.
	NumSubjects int
}

// PurgeRequest selects the messages Purge removes, with the semantics of
// JetStream's purge (ADR-10). Seq and Keep are exclusive.
type PurgeRequest struct {
	// Subject is a filter (a pattern with *, > and # wildcards); "" is all
	// subjects.
	Subject string
	// Seq, if not 0, purges only matching messages with a sequence below
	// it. Purging every subject up to a Seq beyond the last sequence moves
	// the stream on: the next message gets Seq.
	Seq uint64
	// Keep, if not 0, keeps the newest Keep matching messages and purges the
	// older ones.
	Keep uint64
}

// RecoveryReport says what Open found and did in a stream's directory.
type RecoveryReport struct {
	// Segments is the number of segment files found.
	Segments int
	// IndexesLoaded counts sealed segments recovered from their index,
	// without reading their records.
	IndexesLoaded int
	// SegmentsScanned counts segments whose records were read and
	// checksummed: always the last one, and any whose index was missing,
	// stale or corrupt.
	SegmentsScanned int
	// IndexesRebuilt counts indexes written by the scan.
	IndexesRebuilt int
	// TruncatedBytes is what was cut from the end of the last segment: a
	// record torn by a crash in the middle of a write, or a corrupt tail.
	TruncatedBytes int64
	// Corrupt lists older segments with a corrupt record; see CorruptSegment.
	Corrupt []CorruptSegment
	// Missing lists sequences between segments that no segment holds and
	// that were not removed: a lost segment file (gone.go).
	Missing []MissingRange
}

// CorruptSegment describes a corrupt record found inside a segment other than
// the last. Recovery serves the segment's records before it and nothing
// from it onwards: without a trustworthy length there is no safe way to find
// the next record boundary, so the rest of the segment is lost (those
// sequences count as deleted). The file is left as it is, for inspection.
type CorruptSegment struct {
	// File is the segment's file name.
	File string
	// Offset is where the corrupt record starts.
	Offset int64
	// FirstLost is the sequence the corrupt record should have held.
	FirstLost uint64
	// LostBytes is the size of the unserved rest of the file.
	LostBytes int64
	// Err says what check failed.
	Err error
}
