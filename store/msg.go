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
