package raftlog

import "errors"

// Errors returned by the log. Most are wrapped with detail (a group, an
// index, the file and offset, or the underlying OS error); test for them
// with errors.Is. A Group's raft.Storage methods also return raft's own
// raft.ErrCompacted and raft.ErrUnavailable, as its contract asks.
var (
	// ErrCorrupt is returned when stored bytes fail their checksum or
	// framing checks: by a read that finds a record gone bad after Open,
	// and in Group.Damaged for a group whose records recovery found
	// damaged (see Recovery in doc.go).
	ErrCorrupt = errors.New("raftlog: corrupt record")
	// ErrWrite wraps a failed write (a full disk, an I/O error; the OS
	// error is wrapped too). Nothing partial is left in the file, but
	// every group of the failed batch is failed (see Group.Err).
	ErrWrite = errors.New("raftlog: write failed")
	// ErrSync wraps a failed fsync. The writes it should have made durable
	// may be lost in an operating system crash; their callbacks get it and
	// their groups are failed.
	ErrSync = errors.New("raftlog: sync failed")
	// ErrFailed is returned by every method of a group after one of its
	// writes failed: its state in memory may be ahead of the disk, so it
	// serves nothing until the log is reopened.
	ErrFailed = errors.New("raftlog: group failed")
	// ErrInvalid is returned for an update that would leave a hole in a
	// group's log or break another rule of raft's storage contract, and
	// for a record larger than MaxRecordSize. A Save refused so fails its
	// group (Group.Err): raft's view of the log and the log differ.
	ErrInvalid = errors.New("raftlog: invalid update")
	// ErrInvalidConfig is returned by Open for options that fail
	// validation.
	ErrInvalidConfig = errors.New("raftlog: invalid configuration")
	// ErrClosed is returned by operations on a closed Log.
	ErrClosed = errors.New("raftlog: closed")
	// ErrRemoved is returned by the methods of a removed group.
	ErrRemoved = errors.New("raftlog: group removed")
)
