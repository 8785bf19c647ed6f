// Package multiraft drives many raft groups (go.etcd.io/raft/v3) on one
// server: the consensus engine of replicated streams. It knows nothing of
// streams: a group is a Log, a StateMachine and a set of replicas, each
// replica a server, named by the server's raft ID.
//
//	tr, _ := multiraft.NewTCP(multiraft.TCPOptions{})
//	n, _ := multiraft.New(multiraft.Options{ID: id}, tr)
//	tr.SetHandler(n)
//	tr.Add(peerID, conn)                  // one link per peer server
//	n.AddGroup(multiraft.GroupConfig{ID: 7, Log: log, StateMachine: sm, Peers: []uint64{1, 2, 3}})
//	n.Propose(ctx, 7, data)               // on the leader; sm.Apply sees it once committed
//
// # Goroutines
//
// One Node per server runs every group it hosts:
//
//	               ticker (Options.Tick): one tick to every group
//	                         |
//	Transport --Receive--> group inbox --schedule--> run queue --> workers (Options.Workers)
//	                                                                 | a group on one worker at a time:
//	                                                                 | step inbox, RawNode.Ready
//	        +--------------------------------------------------------+-------------------------+
//	        | MsgStorageAppend                  | MsgStorageApply           | other messages
//	        v                                   v                           v
//	   Log.Save (the WAL writer)      the group's apply goroutine      outbox: one Batch per peer
//	        | done: responses             StateMachine.Apply,           per round, heartbeats
//	        | (local: inbox,              ApplyConfChange,              as Beats --> Transport.Send
//	        |  remote: Transport)         responses to the inbox
//
// Raft runs with AsyncStorageWrites: no Ready waits for a disk, appends of
// every group meet in the one WAL writer, and a slow state machine stalls
// only its own group (raft bounds what is queued for it). A follower's
// acknowledgement leaves only once its log says the entry is as durable as
// the policy asks.
//
// # Transport and frames
//
// The TCP transport keeps one link per peer server: a writer that writes
// control traffic before bulk traffic (a bulk message that does not fit
// the capped bulk lane is dropped and reported to raft), and a reader.
// Frames (frame.go):
//
//	| len u32 | crc32c u32 | kind u8 | payload |
//	msgs:  repeated | group uvarint | n uvarint | marshaled raftpb.Message |
//	beats: repeated | group u64 | term u64 | commit u64 | flags u8 |
//	ping, pong: empty
//	app:   one message of the layer above (TCP.SendApp, AppHandler)
//
// Every group ticks on one ticker, so a leader's heartbeats for all its
// groups leave in the same round and travel as 25-byte Beats, one beats
// frame per peer and tick.
//
// # Failover, held replicas, lost logs
//
// When a link to a leader's server goes down and stays down for
// Options.FailoverGrace, the followers forget that leader and the first in
// rank campaigns at once (failover.go): PreVote and CheckQuorum keep a
// wrong suspicion from disrupting a live leader. A replica that may have
// lost state it acknowledged is held (HoldReason): not ticked, refused as
// a candidate, its granted votes dropped, until it has caught up; one
// whose loss its fsync policy allows is released by time too (held.go).
// Replica IDs are server IDs and survive a wiped disk, which etcd raft
// does not expect; lostlog.go makes it work, down to a leader that steps
// down when its lost followers leave it no quorum.
//
// # Tests
//
// Options.Manual makes a Node run nothing by itself: the caller drives it
// with Tick and Process. Package multiraftest has an in-memory log whose
// saves complete when the test says and an in-memory network with seeded
// faults, for deterministic tests.
//
// Node, TCP and their methods are safe for concurrent use, except Process
// and Tick on a manual Node, which one goroutine calls.
package multiraft
