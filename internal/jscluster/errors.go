package jscluster

import "errors"

// Errors of the clustered JetStream layer. Most are wrapped with detail;
// test for them with errors.Is.
var (
	// ErrNotClustered is returned by Start for a server without a
	// cluster listener.
	ErrNotClustered = errors.New("jscluster: the server is not in a cluster")
	// ErrNoServerName is returned by Start for a server without a
	// server_name: raft identifies servers by their names, which must
	// outlive restarts.
	ErrNoServerName = errors.New("jscluster: JetStream in a cluster needs a server_name")
	// ErrRenamed is returned by Start when the raft directory belongs to
	// a server of another name.
	ErrRenamed = errors.New("jscluster: the raft directory belongs to another server")
	// ErrInvalidOptions is returned by Start for options that fail
	// validation.
	ErrInvalidOptions = errors.New("jscluster: invalid options")
	// ErrClosed is returned by the methods of a closed Cluster.
	ErrClosed = errors.New("jscluster: closed")
	// ErrNoMeta is returned by Propose before this server has joined the
	// meta group.
	ErrNoMeta = errors.New("jscluster: not in the meta group yet")
	// ErrNotLeader is returned by Propose on a server that is not the
	// meta group's leader.
	ErrNotLeader = errors.New("jscluster: not the meta leader")
	// ErrBadEntry is an entry or a snapshot of the meta group that cannot
	// be read: an unknown version or operation, or bad JSON. Applying one
	// stops the meta group on this server.
	ErrBadEntry = errors.New("jscluster: bad meta entry")
	// ErrStreamExists is the result of assigning a stream that is
	// assigned already.
	ErrStreamExists = errors.New("jscluster: stream assigned already")
	// ErrStreamNotFound is the result of updating or removing a stream
	// that is not assigned.
	ErrStreamNotFound = errors.New("jscluster: stream not assigned")
	// ErrNoPeer is returned by StepDown when no other voter can take the
	// leadership.
	ErrNoPeer = errors.New("jscluster: no peer to take the leadership")
	// ErrNotSent is returned by Call when the request could not be sent
	// (no raft link to the peer): the peer never saw it, so it is safe to
	// send again.
	ErrNotSent = errors.New("jscluster: not sent")
	// ErrNotApplied is returned by SnapshotGroup for an index raft has
	// not applied yet: asked again later, it may succeed.
	ErrNotApplied = errors.New("jscluster: not applied yet")
	// ErrMetaMismatch refuses a raft link from or to a server of another
	// meta group: two groups formed apart are never merged.
	ErrMetaMismatch = errors.New("jscluster: another meta group")
)
