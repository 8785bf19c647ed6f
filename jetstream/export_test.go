package jetstream

import (
	"testing"

	"github.com/skiffmq/skiff/internal/jscluster"
	"github.com/skiffmq/skiff/server"
	"github.com/skiffmq/skiff/store"
)

// HandleStats returns the counters of the streams' handle cache (tests
// only).
func (js *JetStream) HandleStats() store.HandleStats { return js.handles.Stats() }

// StreamWorkerOf returns the stream worker that answers the requests about
// the named stream of the global account (tests only).
func StreamWorkerOf(name string) uint32 { return streamWorker(server.GlobalAccountName, name) }

// AccountStreamWorkerOf returns the stream worker that answers the
// requests about the named stream of the named account (tests only).
func AccountStreamWorkerOf(account, name string) uint32 { return streamWorker(account, name) }

// SetMigrateHook sets a function run at each step of a store migration
// (tests only: the crash test kills the process there).
func SetMigrateHook(f func(step string)) { migrateHook = f }

// RaftOf returns the raft layer of a clustered JetStream (tests only).
func RaftOf(js *JetStream) *jscluster.Cluster { return js.raft }

// PeerFileUsed returns what the other servers of a cluster last reported
// the named account's file streams hold (tests only).
func PeerFileUsed(js *JetStream, account string) int64 {
	if ja := js.account(account); ja != nil {
		return ja.peerUsed(FileStorage)
	}
	return -1
}

// FailedStreams returns the named account's failed streams and why
// (tests only).
func FailedStreams(js *JetStream, account string) map[string]string {
	if ja := js.account(account); ja != nil {
		return ja.failedStreams()
	}
	return nil
}

// WithReplicas returns o letting streams of more than one replica be
// created in a cluster (tests only: replicated streams are being built).
func WithReplicas(o Options) Options {
	o.replicas = true
	return o
}

// LocalStream returns what this server's replica of a stream holds: its
// messages' data by sequence, and whether it leads the stream's group
// (tests only). ok is false if the server has no such stream.
func LocalStream(js *JetStream, account, name string) (msgs map[uint64]string, leads, ok bool) {
	ja := js.account(account)
	if ja == nil {
		return nil, false, false
	}
	st := ja.lookup(name)
	if st == nil {
		return nil, false, false
	}
	msgs = map[uint64]string{}
	for seq := uint64(1); ; seq++ {
		m, err := st.store.Next(seq, "")
		if err != nil {
			break
		}
		msgs[m.Seq] = string(m.Data)
		seq = m.Seq
	}
	return msgs, st.repl != nil && st.repl.isLeader(), true
}

// ReplicaCheckpoints returns a replicated stream's checkpoints on this
// server: the one it opened from, and the last one written (tests only).
func ReplicaCheckpoints(js *JetStream, account, name string) (opened, saved uint64) {
	if ja := js.account(account); ja != nil {
		if st := ja.lookup(name); st != nil && st.repl != nil {
			return st.repl.fsm.checkpoint, st.repl.saved.Load()
		}
	}
	return 0, 0
}

// SetReplicaLog sets, for one test, the entries a replica keeps behind
// its snapshot and the bytes of messages of a catch-up answer.
func SetReplicaLog(t testing.TB, keep uint64, chunkBytes int) {
	oldKeep, oldChunk := replicaLogKeep, catchupChunkBytes
	replicaLogKeep, catchupChunkBytes = keep, chunkBytes
	t.Cleanup(func() { replicaLogKeep, catchupChunkBytes = oldKeep, oldChunk })
}

// ReplicaLog returns the index a replicated stream's replica on this
// server applied, the first index of the group's log here, the index of its last snapshot
// taken here, and the catch-up answers it applied (tests only).
func ReplicaLog(js *JetStream, account, name string) (applied, first, snapped, chunks uint64) {
	if ja := js.account(account); ja != nil {
		if st := ja.lookup(name); st != nil && st.repl != nil {
			r := st.repl
			first, _ = r.c.GroupFirstIndex(r.group)
			return r.fsm.applied.Load(), first, r.snapped.Load(), r.chunks.Load()
		}
	}
	return 0, 0, 0, 0
}

// StreamDir returns the directory of a stream's store on this server ("" if
// it has none).
func StreamDir(js *JetStream, account, name string) string {
	if ja := js.account(account); ja != nil {
		if st := ja.lookup(name); st != nil {
			return st.dir
		}
	}
	return ""
}

// SetRestoring marks a replicated stream's replica on this server as
// catching up from a peer, or not (tests only: what /healthz reports).
func SetRestoring(js *JetStream, account, name string, on bool) {
	if ja := js.account(account); ja != nil {
		if st := ja.lookup(name); st != nil && st.repl != nil {
			st.repl.fsm.restore.busy.Store(on)
		}
	}
}

// ReplicaConsumer returns a durable consumer of a replicated stream as
// this server's replica applied it: the stream sequences of its last
// delivery and its ack floor, and how many messages wait for an ack
// (tests only).
func ReplicaConsumer(js *JetStream, account, stream, name string) (delivered, floor uint64, pending int, ok bool) {
	ja := js.account(account)
	if ja == nil {
		return 0, 0, 0, false
	}
	st := ja.lookup(stream)
	if st == nil || st.repl == nil {
		return 0, 0, 0, false
	}
	rc := st.repl.fsm.cons
	rc.mu.Lock()
	ac := rc.byName[name]
	rc.mu.Unlock()
	if ac == nil {
		return 0, 0, 0, false
	}
	s, err := ac.state.Load()
	if err != nil {
		return 0, 0, 0, false
	}
	return s.Delivered.Stream, s.AckFloor.Stream, len(s.Pending), true
}
