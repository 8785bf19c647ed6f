package multiraft

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// stallLeader is a raft leader (1, with follower 2) over a memory log,
// driven synchronously.
type stallLeader struct {
	t   *testing.T
	rn  *raft.RawNode
	log *raft.MemoryStorage
	out []*raftpb.Message
}

func newStallLeader(t *testing.T) *stallLeader {
	ms := raft.NewMemoryStorage()
	require.NoError(t, ms.ApplySnapshot(&raftpb.Snapshot{Metadata: &raftpb.SnapshotMetadata{
		Index: new(uint64(1)), Term: new(uint64(1)), ConfState: &raftpb.ConfState{Voters: []uint64{1, 2}}}}))
	rn, err := raft.NewRawNode(&raft.Config{ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: ms,
		MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 256, Logger: quietLogger{&raft.DefaultLogger{Logger: stdLogger()}}})
	require.NoError(t, err)
	l := &stallLeader{t: t, rn: rn, log: ms}
	require.NoError(t, rn.Campaign())
	l.ready()
	l.step(&raftpb.Message{Type: raftpb.MsgVoteResp.Enum(), From: new(uint64(2)), To: new(uint64(1)),
		Term: new(rn.BasicStatus().GetTerm())})
	l.ready()
	require.Equal(t, raft.StateLeader, rn.BasicStatus().RaftState)
	return l
}

func (l *stallLeader) step(m *raftpb.Message) { require.NoError(l.t, l.rn.Step(m)) }

// ready persists and applies what raft hands over, and keeps its
// messages.
func (l *stallLeader) ready() {
	for l.rn.HasReady() {
		rd := l.rn.Ready()
		require.NoError(l.t, l.log.Append(rd.Entries))
		if !raft.IsEmptyHardState(rd.HardState) {
			require.NoError(l.t, l.log.SetHardState(rd.HardState))
		}
		l.out = append(l.out, rd.Messages...)
		l.rn.Advance(rd)
	}
}

// appResp steps follower 2's acknowledgement (or rejection) of index.
func (l *stallLeader) appResp(index uint64, reject bool) {
	l.step(&raftpb.Message{Type: raftpb.MsgAppResp.Enum(), From: new(uint64(2)), To: new(uint64(1)),
		Term: new(l.rn.BasicStatus().GetTerm()), Index: new(index), Reject: new(reject), RejectHint: new(index - 1)})
	l.ready()
}

// compact snapshots and compacts the log at index.
func (l *stallLeader) compact(index uint64) {
	_, err := l.log.CreateSnapshot(index, &raftpb.ConfState{Voters: []uint64{1, 2}}, nil)
	require.NoError(l.t, err)
	require.NoError(l.t, l.log.Compact(index))
}

func (l *stallLeader) progress() tracker.Progress { return l.rn.Status().Progress[2] }

// lastSnap returns the index of the last snapshot sent to 2, 0 if none.
func (l *stallLeader) lastSnap() uint64 {
	var i uint64
	for _, m := range l.out {
		if m.GetType() == raftpb.MsgSnap {
			i = m.GetSnapshot().GetMetadata().GetIndex()
		}
	}
	return i
}

// TestSnapshotCaughtUp: a leader that sent a snapshot older than what
// the follower then acknowledged (appends in flight before it), and
// compacted past that, waits for ever in raft's StateSnapshot; once a
// heartbeat response comes, snapshotCaughtUp ends the wait and the leader
// sends its current snapshot.
func TestSnapshotCaughtUp(t *testing.T) {
	l := newStallLeader(t)
	for range 30 {
		require.NoError(t, l.rn.Propose([]byte("x")))
		l.ready()
	}
	l.appResp(5, false) // Match 5
	l.compact(10)       // the log starts after 10
	l.appResp(20, true) // a rejection: probe from 6, compacted: a snapshot at 10
	require.Equal(t, uint64(10), l.lastSnap())
	require.Equal(t, tracker.StateSnapshot, l.progress().State)
	l.compact(25)        // the leader moves on
	l.appResp(15, false) // an append in flight before the snapshot: Match 15 > 10
	l.appResp(15, false) // the follower ignores the old snapshot: its commit, 15
	pr := l.progress()
	require.Equal(t, tracker.StateSnapshot, pr.State, "raft alone waits")
	require.Equal(t, uint64(15), pr.Match)

	snapshotCaughtUp(l.rn, 2)
	l.ready()
	l.step(&raftpb.Message{Type: raftpb.MsgHeartbeatResp.Enum(), From: new(uint64(2)), To: new(uint64(1)),
		Term: new(l.rn.BasicStatus().GetTerm())})
	l.ready()
	require.Equal(t, uint64(25), l.lastSnap(), "the current snapshot sent")
	require.Equal(t, uint64(25), l.progress().PendingSnapshot)
}
