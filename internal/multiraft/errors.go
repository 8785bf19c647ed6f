package multiraft

import "errors"

// Errors returned by a Node. They are wrapped with the group and detail;
// test for them with errors.Is. A proposal raft refuses (not the leader,
// too many uncommitted bytes) wraps raft.ErrProposalDropped.
var (
	// ErrInvalidOptions is returned by New for Options it cannot run with.
	ErrInvalidOptions = errors.New("multiraft: invalid options")
	// ErrClosed is returned by every call on a closed Node.
	ErrClosed = errors.New("multiraft: node closed")
	// ErrUnknownGroup is returned for a group this Node does not host.
	ErrUnknownGroup = errors.New("multiraft: unknown group")
	// ErrGroupExists is returned by AddGroup for a group already hosted.
	ErrGroupExists = errors.New("multiraft: group exists")
	// ErrInvalidGroup is returned by AddGroup for a configuration it cannot
	// start a group from.
	ErrInvalidGroup = errors.New("multiraft: invalid group")
	// ErrHeld is returned by Campaign and TransferLeadership for a held
	// replica, which may neither campaign nor lead (see HoldReason).
	ErrHeld = errors.New("multiraft: replica held")
	// ErrTooLarge is returned by Propose for data over
	// Options.MaxEntryBytes.
	ErrTooLarge = errors.New("multiraft: proposal too large")
	// ErrGroupFailed is returned for a group whose log or state machine
	// failed: it stopped, and serves nothing until it is added again.
	ErrGroupFailed = errors.New("multiraft: group failed")
	// ErrDiverged is why a group failed whose committed log disagrees
	// with its leader's: a quorum lost entries it had acknowledged, and
	// this replica applied them (diverged.go). It fails wrapped in
	// ErrGroupFailed; the layer above wipes it.
	ErrDiverged = errors.New("multiraft: replica diverged from its group")
	// ErrFrame is returned by the frame decoder for bytes that are not a
	// well-formed frame; a link that reads one is closed.
	ErrFrame = errors.New("multiraft: bad frame")
	// ErrNoLink is returned by TCP.SendApp when there is no link to the
	// peer.
	ErrNoLink = errors.New("multiraft: no link to the peer")
	// ErrLaneFull is returned by TCP.SendApp when the link's queue of
	// messages of the layer above is full (TCPOptions.BulkBytes).
	ErrLaneFull = errors.New("multiraft: link queue full")
)
