// Package jscluster is the raft layer of a clustered JetStream server: the
// shared raft WAL (store/raftlog), the multiraft Node (internal/multiraft)
// with its TCP transport carried by raft links over the cluster listener
// (server/raftlink.go), and the meta group: the replicated state of which
// servers form the cluster and which streams are assigned to them.
//
//	c, err := jscluster.Start(srv, jscluster.Options{Dir: storeDir + "/raft"}) // before srv.Start
//	c.Propose(ctx, jscluster.Entry{Op: jscluster.OpAssignStream, Stream: sa})  // on the meta leader
//	st, _ := c.State()                                                       // every server applies it
//
// It is internal: package jetstream starts it on a clustered server
// (jetstream.Options.Cluster tunes it), and nothing else should.
//
// # Identities
//
// A server is known by its server_name, which is required: its raft ID is
// RaftID(name), the same on every server, and Dir's node file records the
// name so that a renamed server is refused rather than taken for another.
// The meta group is group 1 (MetaGroup); its ID (State.ID: the founder's
// name and the time it was founded) travels with every raft link, and
// links between servers of different meta groups are refused.
//
// # Files
//
//	Dir/node                      {"name":"s1","id":...}
//	Dir/wal/*.wal                 the raft WAL of every group of this server
//	Dir/meta/meta-<index>.snap    the meta state at index (JSON), named by a
//	                              descriptor in the WAL's snapshot record
//
// # Links and membership
//
// links.go: the lower name of two servers dials their raft link when a
// route between them comes up. membership.go: the rules by which a server
// founds the meta group, joins it (as a learner, promoted to voter once
// caught up, up to Options.MaxVoters), or restarts its replica from the
// WAL.
//
// # Unsynced replicas
//
// unsynced.go: a server whose WAL was not closed and whose machine has
// restarted since (raftlog.Report.Unclean and Rebooted), under a sync
// policy that acknowledges before fsyncing, may have lost what it
// acknowledged: its groups start held (multiraft.HoldUnsynced, or
// HoldLost for one whose state went entirely) until they catch up with a
// leader, or Options.HoldTimeout passes without one. Each stays marked, in
// a file, until it has caught up, so that a restart before then holds it
// again.
//
// # Calls
//
// calls.go: a server asks another for an answer over their raft link
// (Call, HandleCalls), on the transport's app frames: the JetStream API
// forwarded to the server that answers it. Only servers of the cluster,
// which authenticated each other on the cluster listener, hold raft links.
//
// # Entries and state
//
// Meta entries are versioned JSON (entry.go): addServer, assignStream,
// updateStream, removeStream. Every server applies them to its State
// (state.go) in log order; the proposer waits for its own apply and
// learns the entry's result (ErrStreamExists, ErrStreamNotFound);
// Options.OnStreams hears which assignments changed. The state is
// snapshotted every Options.SnapshotEntries entries and at every
// membership change, and the log compacted behind it.
//
// A Cluster is safe for concurrent use.
package jscluster
