package jetstream

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

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

// SetStripMinAvg makes replicas stage the messages of entries of at
// least n bytes a message on average (replica_payloads.go), until t ends.
func SetStripMinAvg(t testing.TB, n int) {
	old := stripMinAvg
	stripMinAvg = n
	t.Cleanup(func() { stripMinAvg = old })
}

// SetSegmentBytes makes the file streams opened from now on roll their
// segments at n bytes, until t ends.
func SetSegmentBytes(t testing.TB, n int64) {
	old := segmentBytes
	segmentBytes = n
	t.Cleanup(func() { segmentBytes = old })
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

// OwnConsumerGroups gives each named durable consumer of a replicated
// stream, once created, a raft group of its own over the servers all, led
// by the stream's leader, in which it records its progress instead of in
// its stream's group: design 3.5's alternative, a prototype for
// BenchmarkReplicatedConsume (no failover: the benchmark has none).
func OwnConsumerGroups(tb testing.TB, all []*JetStream, account, stream string, consumers ...string) {
	o := &ownGroups{groups: map[string]uint64{}, waiters: map[uint64]func(opResult){}}
	var peers []string
	for _, js := range all {
		peers = append(peers, js.raft.Name())
	}
	leader := ""
	for _, js := range all {
		if ja := js.account(account); ja != nil {
			if st := ja.lookup(stream); st != nil && st.repl != nil && st.repl.isLeader() {
				leader = js.raft.Name()
			}
		}
	}
	if leader == "" {
		tb.Fatalf("no leader of %s", stream)
	}
	for k, name := range consumers {
		g := uint64(1<<30 + k) // far above the meta log indexes the streams' groups get
		o.groups[stream+"/"+name] = g
		for _, js := range all {
			if err := js.raft.AddGroup(g, peers, &ownFSM{o: o, me: js.raft.ID()}); err != nil {
				tb.Fatal(err)
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			lead, _ := all[0].raft.GroupLeader(g)
			if lead == leader {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("group of %s led by %q, not %s", name, lead, leader)
			}
			for _, js := range all {
				if lead != "" && js.raft.Name() == lead {
					_ = js.raft.StepDown(g, leader)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	ownProgressGroup = o.proposer
	tb.Cleanup(func() { ownProgressGroup = nil })
}

type ownGroups struct {
	mu      sync.Mutex
	groups  map[string]uint64 // stream/consumer -> group
	propID  uint64
	waiters map[uint64]func(opResult) // by propID
}

func (o *ownGroups) proposer(r *replica, consumer string) proposeFunc {
	g, ok := o.groups[r.st.name+"/"+consumer]
	if !ok {
		return r.proposeOp
	}
	return func(op *replicaOp, _ uint64, done func(opResult)) uint64 { return o.propose(r, g, op, done) }
}

// propose proposes op in group g, done once it is applied on r's server.
func (o *ownGroups) propose(r *replica, g uint64, op *replicaOp, done func(opResult)) uint64 {
	o.mu.Lock()
	o.propID++
	id := o.propID
	o.waiters[id] = done
	o.mu.Unlock()
	op.proposer, op.propID = r.me, id
	fail := func(err error) {
		if err == nil {
			return
		}
		o.mu.Lock()
		w := o.waiters[id]
		delete(o.waiters, id)
		o.mu.Unlock()
		if w != nil {
			w(opResult{err: err})
		}
	}
	if err := r.c.ProposeGroup(g, appendOp(nil, op), fail); err != nil {
		fail(err)
	}
	return id
}

// ownFSM applies a consumer's progress in its own group, to a state of
// its own, as a stream's replica applies it (replicaConsumers).
type ownFSM struct {
	o     *ownGroups
	me    uint64
	state *store.ConsumerState
}

func (f *ownFSM) Apply(ents []*raftpb.Entry) error {
	if f.state == nil {
		f.state = store.NewMemoryConsumerState()
	}
	for _, e := range ents {
		if e.GetType() != raftpb.EntryNormal || len(e.GetData()) == 0 {
			continue
		}
		op, err := decodeOp(e.GetData())
		if err != nil {
			return err
		}
		for _, rec := range op.recs {
			if err := applyRec(f.state, rec); err != nil {
				return err
			}
		}
		if op.proposer == f.me {
			f.o.mu.Lock()
			w := f.o.waiters[op.propID]
			delete(f.o.waiters, op.propID)
			f.o.mu.Unlock()
			if w != nil {
				w(opResult{op: &op})
			}
		}
	}
	return nil
}

func (f *ownFSM) Restore(*raftpb.Snapshot) error { return nil }
func (f *ownFSM) Checkpoint() uint64             { return 0 }
func (f *ownFSM) LeaderChanged(uint64, uint64)   {}

// DurabilityOf returns the store's durability for a sync policy and
// interval, as a stream's configuration maps them (tests only: the raft
// log a test server runs under the policy of its streams).
func DurabilityOf(p SyncPolicy, interval time.Duration) store.Durability {
	return (&StreamConfig{Sync: p, SyncInterval: interval}).durability()
}

// ReplicaGroupState returns this server's raft state of a replicated
// stream's group (tests only: what a chaos failure reports).
func ReplicaGroupState(js *JetStream, account, name string) (jscluster.GroupState, bool) {
	if ja := js.account(account); ja != nil {
		if st := ja.lookup(name); st != nil && st.repl != nil {
			gs, err := js.raft.GroupState(st.repl.group)
			return gs, err == nil
		}
	}
	return jscluster.GroupState{}, false
}

// StoreDump lists a store's messages, headers and times included, after
// a line with its first and last sequences and its count (tests only:
// two replicas hold the same if their dumps are equal).
func StoreDump(s *store.Stream) []string {
	st := s.State()
	out := []string{fmt.Sprintf("first %d last %d msgs %d", st.FirstSeq, st.LastSeq, st.Msgs)}
	for seq := st.FirstSeq; seq <= st.LastSeq && seq > 0; seq++ {
		m, err := s.Get(seq)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			out = append(out, fmt.Sprintf("%d: %v", seq, err))
		default:
			out = append(out, fmt.Sprintf("%d %s %q %q %d", m.Seq, m.Subject, m.Header, m.Data, m.Timestamp))
		}
	}
	return out
}

// DumpMarkers returns the sequences of a StoreDump's subject delete
// markers, by subject.
func DumpMarkers(dump []string) map[string][]string {
	out := map[string][]string{}
	for _, line := range dump[1:] {
		if strings.Contains(line, "Nats-Marker-Reason") {
			f := strings.Fields(line)
			out[f[1]] = append(out[f[1]], f[0])
		}
	}
	return out
}

// LocalStoreDump is StoreDump of this server's store of a stream; ok is
// false if the server has no such stream.
func LocalStoreDump(js *JetStream, account, name string) (dump []string, ok bool) {
	if ja := js.account(account); ja != nil {
		if st := ja.lookup(name); st != nil {
			return StoreDump(st.store), true
		}
	}
	return nil, false
}

// AlterLocalStore runs f on this server's replica's store of a stream,
// behind its group's back (tests only: a store that lost its consistency
// with its group's log).
func AlterLocalStore(js *JetStream, account, name string, f func(*store.Stream) error) error {
	ja := js.account(account)
	if ja == nil {
		return errors.New("no such account here")
	}
	st := ja.lookup(name)
	if st == nil {
		return errors.New("no such stream here")
	}
	return f(st.store)
}

// SetRemoveHook makes retention removals fail before they are proposed
// while f says so, until t ends.
func SetRemoveHook(t testing.TB, f func(seqs []uint64) error) {
	removeHook.Store(&f)
	t.Cleanup(func() { removeHook.Store(nil) })
}

// ProposeStale has this server's replica of a stream, its leader,
// propose a batch of one message as if decided in the term before its
// own: raft appends it in this term, and every replica skips it as stale
// (tests only). The publisher's reply subject is reply.
func ProposeStale(js *JetStream, account, name, subj, msgID, data, reply string) error {
	ja := js.account(account)
	if ja == nil {
		return errors.New("no such account here")
	}
	st := ja.lookup(name)
	if st == nil || st.repl == nil {
		return errors.New("no such replicated stream here")
	}
	r := st.repl
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.mu.ready || r.mu.inFlight || r.mu.open != nil || r.mu.term == 0 {
		return errors.New("not a leader at rest")
	}
	b := &replicaBatch{}
	m := replicaMsg{seq: r.mu.next, ts: time.Now().UnixNano(), subj: subj, msgID: msgID}
	r.mu.next++
	r.inflightLocked(b, &m, store.RecordSize(subj, nil, []byte(data)))
	r.encodeLocked(b, m, nil, []byte(data))
	b.msgs, b.replies = append(b.msgs, m), append(b.replies, reply)
	r.mu.term--
	failed := r.submitLocked(b, &replicaOp{kind: opMsgs})
	r.mu.term++
	if len(failed) > 0 {
		return errors.New("raft did not take it")
	}
	return nil
}
