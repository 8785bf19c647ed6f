package store

import "errors"

// Errors returned by the store. Most are wrapped with detail (a sequence, a
// limit, the file and offset, or the underlying OS error); test for them with
// errors.Is.
var (
	// ErrNotFound is returned for a sequence that was never stored, or was
	// deleted, purged or expired, and when no message matches a lookup.
	ErrNotFound = errors.New("store: message not found")

	// ErrMaxMsgs is returned by Append under DiscardNew when the stream
	// holds Options.MaxMsgs messages.
	ErrMaxMsgs = errors.New("store: maximum messages exceeded")
	// ErrMaxBytes is returned by Append under DiscardNew when the message
	// does not fit in Options.MaxBytes, and under either policy when the
	// message alone is larger than MaxBytes.
	ErrMaxBytes = errors.New("store: maximum bytes exceeded")
	// ErrMaxMsgsPerSubject is returned by Append under DiscardNew and
	// DiscardNewPerSubject when the subject holds MaxMsgsPerSubject
	// messages.
	ErrMaxMsgsPerSubject = errors.New("store: maximum messages per subject exceeded")
	// ErrMaxMsgSize is returned by Append, whatever the discard policy, for a
	// message whose subject, headers and data together exceed
	// Options.MaxMsgSize (or the hard cap, MaxRecordSize less framing).
	ErrMaxMsgSize = errors.New("store: message size exceeds maximum")

	// ErrInvalidSubject is returned by Append for a subject that is not a
	// valid subject (see subject.ValidateSubject; tokens such as * are
	// literal there) or is longer than 65535 bytes.
	ErrInvalidSubject = errors.New("store: invalid subject")
	// ErrInvalidFilter is returned for a filter that is not a valid pattern.
	ErrInvalidFilter = errors.New("store: invalid subject filter")
	// ErrInvalidPurge is returned by Purge for a request with both Seq and
	// Keep.
	ErrInvalidPurge = errors.New("store: invalid purge request")
	// ErrInvalidConfig is returned by Open and UpdateConfig for options that
	// fail validation, and by UpdateConfig for a change it cannot make on a
	// live stream (Storage, Dir).
	ErrInvalidConfig = errors.New("store: invalid configuration")

	// ErrWrite wraps a failed write (a full disk, an I/O error; the OS
	// error is wrapped too, so errors.Is finds both). The operation had no
	// effect: nothing partial remains and no sequence was consumed.
	ErrWrite = errors.New("store: write failed")
	// ErrSync wraps a failed fsync. Messages it should have made durable
	// may be lost in an operating system crash: WaitDurable reports it for
	// each of them, and the caller must not acknowledge them.
	ErrSync = errors.New("store: sync failed")
	// ErrCorrupt is returned when stored bytes fail their checksum or
	// framing checks. A corrupt record is never served: Get and Next return
	// this error for a record that went bad after Open; Open logs
	// corruption it finds and recovers around it (see Recovery in doc.go).
	ErrCorrupt = errors.New("store: corrupt data")
	// ErrClosed is returned by operations on a closed Stream or
	// ConsumerState.
	ErrClosed = errors.New("store: closed")

	// ErrDiverged is returned by AppendAt for a message that does not
	// follow the stream's last sequence, or that the stream's limits
	// refuse: a replica that cannot apply what its leader decided has
	// diverged from it.
	ErrDiverged = errors.New("store: replica diverged")

	// ErrNotStaged is returned by Commit for a sequence with no staged
	// record, and by Stage for a sequence that cannot follow the staged
	// tail (see Stream.Stage): the caller keeps the message where it is
	// and appends it with AppendAt once it commits.
	ErrNotStaged = errors.New("store: sequence not staged")

	// ErrNotPending is returned by ConsumerState.Ack for a stream sequence
	// that is not awaiting an acknowledgement.
	ErrNotPending = errors.New("store: sequence not pending")
)
