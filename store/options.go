package store

import (
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Storage selects where a stream keeps its messages.
type Storage uint8

const (
	// FileStorage keeps messages in segment files under Options.Dir and
	// recovers them on Open. It is the zero value.
	FileStorage Storage = iota
	// MemoryStorage keeps messages in memory only; they are lost on Close.
	MemoryStorage
)

// String returns "file" or "memory".
func (s Storage) String() string {
	switch s {
	case FileStorage:
		return "file"
	case MemoryStorage:
		return "memory"
	}
	return fmt.Sprintf("Storage(%d)", uint8(s))
}

// SyncPolicy says when file storage calls fsync, and so what an operating
// system crash or power loss can take away. A process crash (kill -9) loses
// nothing that Append returned under any policy: every Append is written to
// the operating system before it returns.
type SyncPolicy uint8

const (
	// SyncAlways makes WaitDurable fsync before it returns, so a message is
	// on stable storage before the layer above acknowledges it. Concurrent
	// waiters share one fsync (group commit). It is the zero value.
	SyncAlways SyncPolicy = iota
	// SyncInterval fsyncs in the background every Durability.Interval. An
	// operating system crash loses at most the messages appended in the
	// last interval (plus the time one fsync takes), even though they were
	// acknowledged.
	SyncInterval
	// SyncNever leaves flushing to the operating system (typically within
	// 30 s on Linux). An operating system crash may lose any message not
	// yet flushed, acknowledged or not.
	SyncNever
)

// String returns "always", "interval" or "never".
func (p SyncPolicy) String() string {
	switch p {
	case SyncAlways:
		return "always"
	case SyncInterval:
		return "interval"
	case SyncNever:
		return "never"
	}
	return fmt.Sprintf("SyncPolicy(%d)", uint8(p))
}

// Durability says when file storage calls fsync: one policy for a
// Stream's messages and for a ConsumerState alike, and the store runs
// every fsync it implies, background ones included. The zero value is
// SyncAlways with the default interval.
type Durability struct {
	// Sync is the fsync policy (default SyncAlways).
	Sync SyncPolicy
	// Interval is the period of background fsyncs under SyncInterval
	// (default DefaultSyncInterval). A Stream also flushes its delete
	// records and indexes at this period, under every policy.
	Interval time.Duration
}

// fill replaces a zero Interval with the default.
func (d *Durability) fill() {
	if d.Interval == 0 {
		d.Interval = DefaultSyncInterval
	}
}

// validate reports an invalid policy or interval.
func (d *Durability) validate() error {
	switch {
	case d.Sync > SyncNever:
		return fmt.Errorf("%w: unknown sync policy %d", ErrInvalidConfig, d.Sync)
	case d.Interval < 0:
		return fmt.Errorf("%w: negative sync interval %v", ErrInvalidConfig, d.Interval)
	}
	return nil
}

// Discard says what Append does when a new message would break a limit.
type Discard uint8

const (
	// DiscardOld removes the oldest messages (the oldest on the subject, for
	// MaxMsgsPerSubject) to make room. It is the zero value.
	DiscardOld Discard = iota
	// DiscardNew refuses the new message with ErrMaxMsgs, ErrMaxBytes or
	// ErrMaxMsgsPerSubject.
	DiscardNew
)

// String returns "old" or "new".
func (d Discard) String() string {
	switch d {
	case DiscardOld:
		return "old"
	case DiscardNew:
		return "new"
	}
	return fmt.Sprintf("Discard(%d)", uint8(d))
}

// Defaults applied by Open to zero fields.
const (
	DefaultSyncInterval = 100 * time.Millisecond
	DefaultSegmentBytes = 64 << 20
	DefaultSegmentAge   = 24 * time.Hour
)

// Hard bounds, independent of Options.
const (
	// MaxRecordSize bounds one record on disk (framing plus subject,
	// headers and data). Recovery rejects a record length above it before
	// allocating, so a corrupt length cannot exhaust memory.
	MaxRecordSize = 64 << 20
	// MaxSegmentBytes bounds Options.SegmentBytes so that record offsets
	// fit in 32 bits.
	MaxSegmentBytes = 1 << 30
)

// Options configures a Stream. The zero value of every field means its
// default, so Options{Dir: dir} is a durable, unlimited stream with SyncAlways.
type Options struct {
	// Dir is the stream's directory for FileStorage, created if missing. It
	// holds only this stream's files. Ignored for MemoryStorage.
	Dir string
	// Storage selects file (default) or memory storage.
	Storage Storage

	// MaxMsgs bounds the number of messages; 0 is unlimited.
	MaxMsgs int64
	// MaxBytes bounds the stored bytes, counted as State.Bytes counts them
	// (see Msg.Size); 0 is unlimited.
	MaxBytes int64
	// MaxMsgsPerSubject bounds the messages on each subject; 0 is unlimited.
	MaxMsgsPerSubject int64
	// MaxAge removes messages older than this, but those appended with
	// TTLNever; 0 keeps them forever. See "Expiry" in the package
	// documentation.
	MaxAge time.Duration
	// MaxMsgSize bounds len(subject)+len(headers)+len(data) of one message;
	// 0 means the hard cap (MaxRecordSize less framing).
	MaxMsgSize int
	// Discard is the policy when a new message breaks MaxMsgs or MaxBytes
	// (default DiscardOld). MaxMsgsPerSubject always removes the subject's
	// oldest message, unless DiscardNewPerSubject is set too, when
	// DiscardNew refuses the new one.
	Discard              Discard
	DiscardNewPerSubject bool

	// Durability is when file storage fsyncs (default SyncAlways, every
	// 100ms in the background under SyncInterval).
	Durability Durability
	// WriteBuffer, if not 0, buffers file storage's appends in memory, up
	// to this many bytes, and writes them with one write system call: when
	// the buffer would overflow, by Flush, by a sync round (so WaitDurable
	// and Sync cover them), and before a segment rolls or the stream
	// closes. Reads see buffered messages. A process crash loses what is
	// buffered, so it is for a store rebuilt from another log after one (a
	// replica of a replicated stream, from its raft log), never for one
	// whose appends are acknowledged as they are written. Default 0: every
	// append is written at once.
	WriteBuffer int

	// AllowMsgTTL lets Append give a message a TTL, after which the
	// store removes it whatever the limits say, and makes Open rebuild
	// the TTLs of the stored messages from their TTLHeader headers.
	AllowMsgTTL bool
	// SubjectDeleteMarkerTTL, if not 0 (then at least a second), leaves a
	// delete marker, with this TTL, where MaxAge or a TTL removes the last
	// message of a subject; see "Expiry" in the package documentation. It
	// allows TTLs as AllowMsgTTL does.
	SubjectDeleteMarkerTTL time.Duration

	// OnExpire, if set, hears what each expiry round removed and which
	// markers it appended. It is called from the stream's background
	// goroutine, one round at a time, after the round, with no lock of
	// the store held and with AppendLock held (if set). It may call any
	// method of the Stream but Close and Destroy (which wait for that
	// goroutine), and must not take AppendLock.
	OnExpire func(Expired)
	// OnCorrupt, if set, hears of the records that reads found corrupt
	// (once each), instead of their being removed as deletions: the reads
	// that meet one fail with ErrCorrupt rather than step over it. It is
	// called with no lock of the store held. A replica of a replicated
	// stream sets it: its peers hold the records, and it rebuilds rather
	// than drop what they keep.
	OnCorrupt func(seqs []uint64)
	// AppendLock, if set, is a lock the caller holds around its reads of
	// the stream and the Append that depends on them (an expected last
	// sequence, a rollup's purge after its Append): an expiry round holds
	// it while it runs and while OnExpire runs, so that a delete marker
	// never comes in between. A round takes it before any lock of the
	// store, so the caller may call the Stream's methods while holding
	// it, but not Close or Destroy.
	AppendLock sync.Locker
	// HoldExpiry makes Open leave expiry rounds (TTLs, and MaxAge on a
	// stream with markers) to StartExpiry, for a caller that must get
	// ready for OnExpire first. MaxAge without markers applies at once.
	HoldExpiry bool

	// SegmentBytes rolls to a new segment file once the current one would
	// grow past it (default 64 MiB, at most MaxSegmentBytes). A larger
	// message gets a segment of its own.
	SegmentBytes int64
	// SegmentAge rolls to a new segment once the current one's first
	// message is older than this (default 24h), so that MaxAge can remove
	// whole files.
	SegmentAge time.Duration

	// FS is the file system for FileStorage (default the operating
	// system's, OSFS). Tests inject faults through it.
	FS FS
	// Now is the clock that timestamps messages and drives MaxAge, TTLs
	// and SegmentAge (default time.Now). Tests inject a fake clock.
	Now func() time.Time
	// LogClock runs the stream on the time of its log instead of Now
	// (logclock.go): the time of the last message appended with AppendAt,
	// or given to AdvanceTime or ApplyExpiry. MaxAge and TTLs expire only
	// as that time moves, inside those calls, so that replicas applying
	// the same log expire the same messages at the same place in it. The
	// background goroutine runs no expiry (StartExpiry does nothing). With
	// SubjectDeleteMarkerTTL, only planned rounds (PlanExpiry, then
	// ApplyExpiry; expiryplan.go) expire messages, since a marker takes a
	// sequence that the log's leader gives out. Fixed at Open.
	LogClock bool
	// Staging lets the stream's writer write a message's record before it
	// is committed (Stage) and index it once it is (Commit); see stage.go.
	// A replica of a replicated stream stages a message when its raft log
	// takes the entry, so that the message is written once, not once to
	// the log and once more to the store. At Open, the records after
	// CommitThrough come back staged, not indexed, for the log's replay to
	// commit or to cut (Unstage). File storage only. Fixed at Open.
	Staging bool
	// CommitThrough is, with Staging, the last sequence known committed
	// (a replica's checkpoint): Open indexes the records up to it and
	// stages the others. 0 stages every record found.
	CommitThrough uint64
	// Logger receives recovery reports and background errors (default
	// slog.Default()).
	Logger *slog.Logger
}

// DefaultOptions returns durable file storage in dir with every default
// filled in.
func DefaultOptions(dir string) Options {
	o := Options{Dir: dir}
	o.fill()
	return o
}

// fill replaces zero fields with their defaults.
func (o *Options) fill() {
	o.Durability.fill()
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.SegmentAge == 0 {
		o.SegmentAge = DefaultSegmentAge
	}
	if o.FS == nil {
		o.FS = OSFS
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// validate reports the first invalid field of filled-in options.
func (o *Options) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case o.Storage > MemoryStorage:
		return bad("unknown storage %d", o.Storage)
	case o.Storage == FileStorage && o.Dir == "":
		return bad("file storage needs a Dir")
	case o.MaxMsgs < 0, o.MaxBytes < 0, o.MaxMsgsPerSubject < 0:
		return bad("negative limit (MaxMsgs %d, MaxBytes %d, MaxMsgsPerSubject %d)",
			o.MaxMsgs, o.MaxBytes, o.MaxMsgsPerSubject)
	case o.MaxAge < 0:
		return bad("negative MaxAge %v", o.MaxAge)
	case o.MaxMsgSize < 0 || o.MaxMsgSize > maxMsgSize:
		return bad("MaxMsgSize %d outside [0, %d]", o.MaxMsgSize, maxMsgSize)
	case o.Discard > DiscardNew:
		return bad("unknown discard policy %d", o.Discard)
	case o.SegmentBytes < 0 || o.SegmentBytes > MaxSegmentBytes:
		return bad("SegmentBytes %d outside [0, %d]", o.SegmentBytes, MaxSegmentBytes)
	case o.SegmentAge < 0:
		return bad("negative SegmentAge %v", o.SegmentAge)
	case o.SubjectDeleteMarkerTTL < 0 || (o.SubjectDeleteMarkerTTL > 0 && o.SubjectDeleteMarkerTTL < time.Second):
		return bad("SubjectDeleteMarkerTTL %v is neither 0 nor at least a second", o.SubjectDeleteMarkerTTL)
	case o.WriteBuffer < 0:
		return bad("negative WriteBuffer %d", o.WriteBuffer)
	case o.Staging && o.Storage != FileStorage:
		return bad("staging needs file storage")
	}
	return o.Durability.validate()
}

// ttls reports whether messages may have TTLs.
func (o *Options) ttls() bool { return o.AllowMsgTTL || o.SubjectDeleteMarkerTTL > 0 }

// inlineAge is the MaxAge that Append and the reads apply as they go:
// MaxAge, unless markers make it the expiry rounds' (which may append).
func (o *Options) inlineAge() int64 {
	if o.SubjectDeleteMarkerTTL > 0 {
		return 0
	}
	return int64(o.MaxAge)
}

// msgSizeLimit is the effective bound on subject+headers+data.
func (o *Options) msgSizeLimit() int {
	if o.MaxMsgSize > 0 {
		return o.MaxMsgSize
	}
	return maxMsgSize
}
