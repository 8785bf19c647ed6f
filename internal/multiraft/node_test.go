package multiraft_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/skiffmq/skiff/internal/multiraft"
	"github.com/skiffmq/skiff/internal/multiraft/multiraftest"
)

// elect makes server id campaign for group and stabilizes.
func (h *harness) elect(group, id uint64) {
	h.t.Helper()
	h.stabilize() // the bootstrap's conf changes applied: raft refuses to campaign before
	require.NoError(h.t, h.servers[id].node.Campaign(group))
	h.stabilize()
	lead, _ := h.leaderOf(group)
	require.Equal(h.t, id, lead, "leader of group %d", group)
}

// threeLedBy1 returns three servers hosting group 7, led by server 1.
func threeLedBy1(t *testing.T) *harness {
	h := newHarness(t, 1, 3)
	h.addGroup(7, []uint64{1, 2, 3})
	h.elect(7, 1)
	return h
}

func TestElectProposeApply(t *testing.T) {
	h := newHarness(t, 1, 3)
	h.addGroup(7, []uint64{1, 2, 3})
	h.stabilize()
	h.elect(7, 1)
	for i := range 5 {
		h.propose(1, 7, fmt.Sprintf("m%d", i))
	}
	h.stabilize()
	for _, id := range h.ids {
		require.Equal(t, []string{"m0", "m1", "m2", "m3", "m4"}, h.servers[id].sms[7].datas, "server %d", id)
		require.Equal(t, uint64(1), h.servers[id].sms[7].leader, "server %d", id)
	}
	h.requireConverged()
}

func TestProposeOnFollowerRefused(t *testing.T) {
	h := threeLedBy1(t)
	var got error
	require.NoError(t, h.servers[2].node.ProposeAsync(7, []byte("x"), func(err error) { got = err }))
	h.stabilize()
	require.ErrorIs(t, got, raft.ErrProposalDropped)
	require.Empty(t, h.servers[1].sms[7].datas)

	err := h.servers[1].node.ProposeAsync(7, make([]byte, multiraft.DefaultOptions().MaxEntryBytes+1), func(error) {})
	require.ErrorIs(t, err, multiraft.ErrTooLarge)
	require.ErrorIs(t, h.servers[1].node.ProposeAsync(8, nil, func(error) {}), multiraft.ErrUnknownGroup)
}

// ProposeAsync's data is the caller's again once done has run, which the
// replicated streams rely on to reuse each batch's buffer: raft appends a
// copy of a proposal (its appendEntry clones it). Were that to change,
// the entries applied here would be what done wrote over the buffer.
func TestProposalDataReusableAfterDone(t *testing.T) {
	h := threeLedBy1(t)
	buf := []byte("first")
	var got error
	require.NoError(t, h.servers[1].node.ProposeAsync(7, buf, func(err error) {
		got = err
		copy(buf, "XXXXX")
	}))
	h.stabilize()
	require.NoError(t, got)
	require.Equal(t, "XXXXX", string(buf), "done ran")
	for _, id := range h.ids {
		require.Equal(t, []string{"first"}, h.servers[id].sms[7].datas, "server %d", id)
	}
	h.requireConverged()
}

// A leader holds an append that carries only its commit index (notice.go):
// an append with entries to the same follower replaces it, and it goes
// once the delay has passed. Without the delay (a manual node's default),
// followers apply as soon as the leader does.
func TestCommitNoticesHeld(t *testing.T) {
	h := newHarnessWith(t, 1, 3, multiraft.Options{CommitNoticeDelay: time.Millisecond})
	h.addGroup(7, []uint64{1, 2, 3})
	h.elect(7, 1)
	h.tick() // whatever the election left held goes out
	h.stabilize()
	applied := func(id uint64) []string { return h.servers[id].sms[7].datas }
	leader := h.servers[1].node

	h.propose(1, 7, "first")
	h.stabilize()
	require.Equal(t, []string{"first"}, applied(2), "a group not busy sends its notices at once")
	require.Zero(t, leader.Stats().CommitNoticesHeld)

	// Proposals within the delay of each other: the group is busy.
	before := leader.Stats()
	h.propose(1, 7, "a")
	h.stabilize()
	require.Equal(t, []string{"first", "a"}, applied(1), "the leader applies once a follower has it")
	require.Equal(t, []string{"first"}, applied(2), "the commit index is held")
	require.Equal(t, []string{"first"}, applied(3))
	st := leader.Stats()
	require.Equal(t, uint64(2), st.CommitNoticesHeld-before.CommitNoticesHeld, "one per follower")
	require.Zero(t, st.CommitNoticesSent-before.CommitNoticesSent)

	h.propose(1, 7, "b")
	h.stabilize()
	require.Equal(t, []string{"first", "a", "b"}, applied(1))
	require.Equal(t, []string{"first", "a"}, applied(2), "the append of b carried a's commit")
	require.Equal(t, []string{"first", "a"}, applied(3))
	st = leader.Stats()
	require.Equal(t, uint64(2), st.CommitNoticesReplaced-before.CommitNoticesReplaced, "replaced by b's appends")
	require.Equal(t, uint64(4), st.CommitNoticesHeld-before.CommitNoticesHeld, "b's commit held in turn")
	require.Zero(t, st.CommitNoticesSent-before.CommitNoticesSent)

	for _, id := range h.ids {
		h.servers[id].node.Tick() // the delay passes: only the leader's notices go
	}
	require.Equal(t, uint64(2), leader.Stats().CommitNoticesSent-before.CommitNoticesSent)
	h.stabilize()
	require.Equal(t, []string{"first", "a", "b"}, applied(2))
	require.Equal(t, []string{"first", "a", "b"}, applied(3))

	// A proposal a tick later finds the group quiet again.
	h.propose(1, 7, "c")
	h.stabilize()
	require.Equal(t, []string{"first", "a", "b", "c"}, applied(2), "no longer busy")
	require.Equal(t, uint64(4), leader.Stats().CommitNoticesHeld-before.CommitNoticesHeld)
	h.requireConverged()

	plain := threeLedBy1(t)
	plain.propose(1, 7, "a")
	plain.stabilize()
	require.Equal(t, []string{"a"}, plain.servers[2].sms[7].datas, "no delay, no notice held")
	require.Zero(t, plain.servers[1].node.Stats().CommitNoticesHeld)
}

// Every group ticks on one ticker, so a leader's heartbeats for all its
// groups leave in one round: one batch per follower, one beat per group.
func TestHeartbeatsCoalesced(t *testing.T) {
	const groups = 20
	h := newHarness(t, 1, 3)
	for g := uint64(1); g <= groups; g++ {
		h.addGroup(g, []uint64{1, 2, 3})
		h.elect(g, 1)
	}
	before := h.ft.Stats()
	h.servers[1].node.Tick()
	h.servers[1].node.Process()
	after := h.ft.Stats()
	require.Equal(t, 2, after.Sends-before.Sends, "one batch per follower")
	require.Equal(t, 2*groups, after.Beats-before.Beats, "one beat per group per follower")
	require.Equal(t, 0, after.Msgs-before.Msgs, "no heartbeat travels as a message")

	// The followers answer with beats too, one batch each.
	h.ft.DeliverAll()
	before = h.ft.Stats()
	h.servers[2].node.Process()
	after = h.ft.Stats()
	require.Equal(t, 1, after.Sends-before.Sends)
	require.Equal(t, groups, after.Beats-before.Beats)
	h.stabilize()
	for g := uint64(1); g <= groups; g++ {
		lead, _ := h.leaderOf(g)
		require.Equal(t, uint64(1), lead)
	}
}

// A follower that forgets a live leader and campaigns, as a wrong
// suspicion of fast failover does, disrupts nothing: the other follower
// still hears the leader and refuses its pre-vote.
func TestForgetLeaderOnLiveLeader(t *testing.T) {
	h := threeLedBy1(t)
	_, term := h.leaderOf(7)
	require.NoError(t, h.servers[2].node.ForgetLeader(7))
	require.NoError(t, h.servers[2].node.Campaign(7))
	h.stabilize()
	for range 3 * 10 {
		h.tick()
		h.stabilize()
		lead, tm := h.leaderOf(7)
		require.Equal(t, uint64(1), lead)
		require.Equal(t, term, tm, "the term moved: the leader was disrupted")
	}
	h.propose(1, 7, "after")
	h.stabilize()
	h.requireConverged()
}

// When the leader's server dies, its followers see the links go down,
// forget it after FailoverGrace (one tick on a manual node), and the first
// in rank campaigns at once: a new leader within a few ticks, not an
// election timeout (10 to 20 ticks).
func TestFastFailover(t *testing.T) {
	h := threeLedBy1(t)
	h.propose(1, 7, "before")
	h.stabilize()
	h.crash(1)
	lead, ticks := h.tickUntilLeader(7, 5)
	require.Equal(t, uint64(2), lead, "the first in rank wins")
	require.LessOrEqual(t, ticks, 3)
	h.propose(2, 7, "after")
	h.stabilize()
	require.Equal(t, []string{"before", "after"}, h.servers[3].sms[7].datas)
	h.settle(100)
}

// A link that goes down and comes back within the grace forgets nothing.
func TestLinkFlapWithinGrace(t *testing.T) {
	h := threeLedBy1(t)
	_, term := h.leaderOf(7)
	h.servers[2].node.LinkDown(1)
	h.servers[2].node.LinkUp(1)
	for range 3 {
		h.tick()
		h.stabilize()
	}
	lead, tm := h.leaderOf(7)
	require.Equal(t, uint64(1), lead)
	require.Equal(t, term, tm)
	st, err := h.servers[2].node.Status(7)
	require.NoError(t, err)
	require.Equal(t, uint64(1), st.Lead)
}

// A wiped replica is held: it neither campaigns nor grants votes (the
// harness's observer fails the test if it does), and it is released once
// it has applied an entry of its leader's term.
func TestWipedReplicaHeldUntilCaughtUp(t *testing.T) {
	h := threeLedBy1(t)
	h.propose(1, 7, "a")
	h.stabilize()
	h.wipe(3)
	held, err := h.servers[3].node.Held(7)
	require.NoError(t, err)
	require.Equal(t, multiraft.HoldWiped, held)
	require.ErrorIs(t, h.servers[3].node.Campaign(7), multiraft.ErrHeld)

	// Server 3 cannot help elect anyone while 1 is down: 2 alone is no
	// quorum, since 3 drops the votes it grants.
	h.crash(1)
	for range 40 {
		h.tick()
		h.stabilize()
		lead, _ := h.leaderOf(7)
		require.Zero(t, lead, "a leader elected with a held replica's vote")
	}
	require.NotZero(t, h.servers[3].node.Stats().HeldVotesDropped, "the held replica was asked for votes and dropped its grants")
	held, _ = h.servers[3].node.Held(7)
	require.Equal(t, multiraft.HoldWiped, held)

	// With 1 back, a leader of a new term brings 3 up to date; 3 is
	// released once it applies that leader's first entry.
	h.restart(1)
	h.settle(100)
	require.Equal(t, []string{"a"}, h.servers[3].sms[7].datas)
	held, _ = h.servers[3].node.Held(7)
	require.Equal(t, multiraft.HoldNone, held)
}

// A held replica whose log already holds its leader's entries (restarted
// held with its log, which it replays before it hears from the leader) is
// not released by replaying them: entries of the leader's term it kept
// say nothing of those it may have lost after them. In an idle group it
// asks the leader for an empty entry after an election timeout (nudge),
// which releases it, with no new term.
func TestHeldReplicaReleasedPastWhatItHeld(t *testing.T) {
	h := threeLedBy1(t)
	h.propose(1, 7, "a")
	h.stabilize()
	_, term := h.leaderOf(7)
	h.crash(3)
	h.start(3, multiraft.HoldUnsynced)
	held, err := h.servers[3].node.Held(7)
	require.NoError(t, err)
	require.Equal(t, multiraft.HoldUnsynced, held)
	for range 3 {
		h.tick()
		h.stabilize()
	}
	require.Equal(t, []string{"a"}, h.servers[3].sms[7].datas)
	held, _ = h.servers[3].node.Held(7)
	require.Equal(t, multiraft.HoldUnsynced, held, "released by entries it replayed")
	for range 30 {
		h.tick()
		h.stabilize()
	}
	held, _ = h.servers[3].node.Held(7)
	require.Equal(t, multiraft.HoldNone, held, "released by the leader's empty entry")
	lead, tm := h.leaderOf(7)
	require.Equal(t, uint64(1), lead)
	require.Equal(t, term, tm, "no new term")
	h.propose(1, 7, "b")
	h.settle(100)
	require.Equal(t, []string{"a", "b"}, h.servers[3].sms[7].datas)
}

func TestConfChangeAddVoter(t *testing.T) {
	h := newHarness(t, 1, 4)
	h.addGroup(7, []uint64{1, 2, 3})
	h.elect(7, 1)
	h.propose(1, 7, "a")
	h.stabilize()

	// Server 4 joins with an empty log and no peers, and the leader
	// proposes the change.
	h.groups[7] = []uint64{1, 2, 3, 4}
	sm := &recorder{h: h, server: 4, group: 7}
	h.servers[4].sms[7] = sm
	require.NoError(t, h.servers[4].node.AddGroup(multiraft.GroupConfig{ID: 7, Log: h.servers[4].disk.Log(7), StateMachine: sm}))
	cc := &raftpb.ConfChange{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: new(uint64(4))}
	got := errors.New("not called")
	require.NoError(t, h.servers[1].node.ProposeConfChangeAsync(7, cc, func(err error) { got = err }))
	h.stabilize()
	require.NoError(t, got)
	h.propose(1, 7, "b")
	h.stabilize()
	st, err := h.servers[1].node.Status(7)
	require.NoError(t, err)
	require.Contains(t, st.Progress, uint64(4))
	require.Equal(t, []string{"a", "b"}, h.servers[4].sms[7].datas)
	h.settle(50)
}

func TestAddGroupErrors(t *testing.T) {
	ft := multiraftest.NewFakeTransport(1)
	n, err := multiraft.New(multiraft.Options{ID: 1, Manual: true}, ft.Endpoint(1))
	require.NoError(t, err)
	defer func() { _ = n.Close() }()
	disk := multiraftest.NewMemDisk()
	sm := &recorder{}
	for _, c := range []struct {
		name string
		cfg  multiraft.GroupConfig
		want error
	}{
		{"no id", multiraft.GroupConfig{Log: disk.Log(1), StateMachine: sm, Peers: []uint64{1}}, multiraft.ErrInvalidGroup},
		{"no log", multiraft.GroupConfig{ID: 1, StateMachine: sm, Peers: []uint64{1}}, multiraft.ErrInvalidGroup},
		{"no state machine", multiraft.GroupConfig{ID: 1, Log: disk.Log(1), Peers: []uint64{1}}, multiraft.ErrInvalidGroup},
		{"not a peer", multiraft.GroupConfig{ID: 1, Log: disk.Log(1), StateMachine: sm, Peers: []uint64{2, 3}}, multiraft.ErrInvalidGroup},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.ErrorIs(t, n.AddGroup(c.cfg), c.want)
		})
	}
	require.NoError(t, n.AddGroup(multiraft.GroupConfig{ID: 1, Log: disk.Log(1), StateMachine: sm, Peers: []uint64{1}}))
	require.ErrorIs(t, n.AddGroup(multiraft.GroupConfig{ID: 1, Log: disk.Log(1), StateMachine: sm, Peers: []uint64{1}}), multiraft.ErrGroupExists)
	require.NoError(t, n.RemoveGroup(1))
	require.ErrorIs(t, n.RemoveGroup(1), multiraft.ErrUnknownGroup)
	require.NoError(t, n.Close())
	require.ErrorIs(t, n.Campaign(1), multiraft.ErrClosed)
}

func TestOptionsValidated(t *testing.T) {
	ft := multiraftest.NewFakeTransport(1)
	for _, c := range []struct {
		name string
		opts multiraft.Options
	}{
		{"no id", multiraft.Options{}},
		{"local id", multiraft.Options{ID: raft.LocalAppendThread}},
		{"election not above heartbeat", multiraft.Options{ID: 1, HeartbeatTicks: 5, ElectionTicks: 5}},
		{"inflight below message", multiraft.Options{ID: 1, MaxSizePerMsg: 2 << 20, MaxInflightBytes: 1 << 20}},
		{"entry over a frame", multiraft.Options{ID: 1, MaxEntryBytes: multiraft.MaxFrameBytes}},
		{"negative workers", multiraft.Options{ID: 1, Workers: -1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := multiraft.New(c.opts, ft.Endpoint(1))
			require.ErrorIs(t, err, multiraft.ErrInvalidOptions)
		})
	}
	_, err := multiraft.New(multiraft.Options{ID: 1, Manual: true}, nil)
	require.ErrorIs(t, err, multiraft.ErrInvalidOptions)
}

// A leader that had replicated to a replica before it lost its log keeps
// its old Match for it, and etcd raft never lowers a Match: the leader
// hands its leadership over, and the new leader catches the replica up.
func TestWipedReplicaCaughtUpUnderSameLeader(t *testing.T) {
	h := threeLedBy1(t)
	for i := range 5 {
		h.propose(1, 7, fmt.Sprintf("m%d", i))
	}
	h.stabilize()
	h.wipe(3)
	for range 5 {
		h.tick()
		h.stabilize()
	}
	lead, _ := h.leaderOf(7)
	require.Equal(t, uint64(2), lead, "the leader handed over to the up-to-date follower")
	require.Equal(t, []string{"m0", "m1", "m2", "m3", "m4"}, h.servers[3].sms[7].datas)
	held, err := h.servers[3].node.Held(7)
	require.NoError(t, err)
	require.Equal(t, multiraft.HoldNone, held)
	h.settle(50)
}

// A leader that is held hands its leadership over; released, it may
// campaign again.
func TestHoldLeaderHandsOver(t *testing.T) {
	h := threeLedBy1(t)
	require.NoError(t, h.servers[1].node.Hold(7, multiraft.HoldDamaged))
	h.stabilize()
	lead, _ := h.leaderOf(7)
	require.NotEqual(t, uint64(1), lead)
	require.NotZero(t, lead)
	require.ErrorIs(t, h.servers[1].node.Campaign(7), multiraft.ErrHeld)
	require.ErrorIs(t, h.servers[1].node.Hold(7, multiraft.HoldNone), multiraft.ErrInvalidGroup)
	require.NoError(t, h.servers[1].node.Release(7))
	require.NoError(t, h.servers[1].node.TransferLeadership(7, 1))
	h.stabilize()
	lead, _ = h.leaderOf(7)
	require.Equal(t, uint64(1), lead, "released, it may lead again")
}

// Appends the transport cannot queue (a full bulk lane) are reported to
// raft, which probes and resends: nothing is lost, it only takes longer.
func TestBulkDropsReported(t *testing.T) {
	h := threeLedBy1(t)
	h.ft.SetFaults(multiraftest.Faults{BulkBytes: 64})
	for i := range 30 {
		h.propose(1, 7, fmt.Sprintf("%040d", i))
	}
	h.stabilize()
	require.NotZero(t, h.servers[1].node.Stats().BulkDropped)
	h.settle(100)
	require.Len(t, h.servers[3].sms[7].datas, 30)
}

// A server accepts from a peer only what that peer may send it.
func TestReceiveDropsForeignMessages(t *testing.T) {
	h := threeLedBy1(t)
	n := h.servers[1].node
	env := func(m *raftpb.Message) multiraft.Envelope {
		b, err := proto.Marshal(m)
		require.NoError(t, err)
		return multiraft.Envelope{Group: 7, Data: b}
	}
	before := n.Stats()
	n.Receive(2, multiraft.Batch{Msgs: []multiraft.Envelope{
		env(&raftpb.Message{Type: raftpb.MsgProp.Enum(), From: new(uint64(2)), To: new(uint64(1)),
			Entries: []*raftpb.Entry{{Data: []byte("forwarded")}}}),
		env(&raftpb.Message{Type: raftpb.MsgHeartbeatResp.Enum(), From: new(uint64(3)), To: new(uint64(1))}),
		env(&raftpb.Message{Type: raftpb.MsgHeartbeatResp.Enum(), From: new(uint64(2)), To: new(uint64(3))}),
		env(&raftpb.Message{Type: raftpb.MsgStorageAppendResp.Enum(), From: new(raft.LocalAppendThread), To: new(uint64(1))}),
		{Group: 7, Data: []byte{0xff, 0xff}},
	}})
	n.Receive(2, multiraft.Batch{Beats: []multiraft.Beat{{Group: 99, Term: 1}}})
	after := n.Stats()
	require.Equal(t, uint64(5), after.BadMessages-before.BadMessages)
	require.Equal(t, uint64(1), after.UnknownGroup-before.UnknownGroup)
	h.stabilize()
	require.Empty(t, h.servers[1].sms[7].datas)
}

// The first in rank's pre-vote can reach the other follower before that
// one's grace has run out: refused, it is not the end of fast failover,
// because the next in rank campaigns a stagger later.
func TestFailoverPreVoteBeforeForget(t *testing.T) {
	h := threeLedBy1(t)
	h.crash(1)
	h.servers[2].node.Tick() // 2's grace runs out, not yet 3's
	h.stabilize()
	st, err := h.servers[3].node.Status(7)
	require.NoError(t, err)
	require.Equal(t, uint64(1), st.Lead, "3 still follows 1, and refused 2's pre-vote")
	lead, ticks := h.tickUntilLeader(7, 10)
	require.Contains(t, []uint64{2, 3}, lead)
	require.LessOrEqual(t, ticks, 3, "a stagger or two, not an election timeout")
}

// roomLog is a MemLog with a write queue that is full while full is set.
type roomLog struct {
	*multiraftest.MemLog
	full  bool
	saves int
}

func (l *roomLog) Room() bool { return !l.full }

func (l *roomLog) Save(u multiraft.Update, done func(error)) {
	l.saves++
	l.MemLog.Save(u, done)
}

// While the log has no room, raft keeps the group's Ready: nothing more
// is saved, and proposals wait in raft. The group goes on once there is
// room again, at the next completed save or tick.
func TestLogRoomHoldsReady(t *testing.T) {
	h := newHarness(t, 1, 1)
	disk := multiraftest.NewMemDisk()
	rl := &roomLog{MemLog: disk.Log(9)}
	sm := &recorder{h: h, server: 1, group: 9}
	h.committed[9] = map[uint64]entryID{}
	n := h.servers[1].node
	require.NoError(t, n.AddGroup(multiraft.GroupConfig{ID: 9, Log: rl, StateMachine: sm, Peers: []uint64{1}}))
	run := func() {
		for n.Process() || disk.Flush() > 0 {
		}
	}
	run()
	require.NoError(t, n.Campaign(9))
	run()
	st, err := n.Status(9)
	require.NoError(t, err)
	require.Equal(t, raft.StateLeader, st.RaftState)

	rl.full = true
	saves := rl.saves
	for i := range 3 {
		require.NoError(t, n.ProposeAsync(9, fmt.Appendf(nil, "x%d", i), func(error) {}))
	}
	run()
	require.Equal(t, saves, rl.saves, "no Ready taken while the log is full")
	require.Empty(t, sm.datas)

	rl.full = false
	n.Tick()
	run()
	require.Equal(t, []string{"x0", "x1", "x2"}, sm.datas)
}

// A replica that joins after the log was compacted gets a snapshot: its
// log saves it, its state machine restores it before applying anything
// after it.
func TestJoinFromSnapshot(t *testing.T) {
	h := newHarness(t, 1, 4)
	h.addGroup(7, []uint64{1, 2, 3})
	h.elect(7, 1)
	h.groups[7] = []uint64{1, 2, 3, 4}
	sm := &recorder{h: h, server: 4, group: 7}
	h.servers[4].sms[7] = sm
	require.NoError(t, h.servers[4].node.AddGroup(multiraft.GroupConfig{ID: 7, Log: h.servers[4].disk.Log(7), StateMachine: sm}))
	// 4 is cut off while it is added and while the log moves on and is
	// compacted, so the leader has only a snapshot for it.
	h.ft.Partition([]uint64{4}, []uint64{1, 2, 3})
	cc := &raftpb.ConfChange{Type: raftpb.ConfChangeAddNode.Enum(), NodeId: new(uint64(4))}
	require.NoError(t, h.servers[1].node.ProposeConfChangeAsync(7, cc, func(error) {}))
	h.stabilize()
	for i := range 5 {
		h.propose(1, 7, fmt.Sprintf("m%d", i))
	}
	h.stabilize()
	st, err := h.servers[1].node.Status(7)
	require.NoError(t, err)
	applied := st.Applied
	cs := &raftpb.ConfState{Voters: []uint64{1, 2, 3, 4}}
	for _, id := range []uint64{1, 2, 3} {
		l := h.servers[id].disk.Log(7)
		_, err := l.CreateSnapshot(applied, cs, h.servers[id].sms[7].snapshotData())
		require.NoError(t, err)
		require.NoError(t, l.Compact(applied))
	}
	h.ft.Heal()
	h.propose(1, 7, "after")
	for range 3 {
		h.tick()
		h.stabilize()
	}
	require.Equal(t, applied, sm.restoredFrom, "restored from the leader's snapshot")
	require.Equal(t, []string{"m0", "m1", "m2", "m3", "m4", "after"}, sm.datas,
		"the snapshot's state, then only what follows it")
	first, err := h.servers[4].disk.Log(7).FirstIndex()
	require.NoError(t, err)
	require.Equal(t, applied+1, first)
	h.settle(50)
}

// failingLog is a log whose reads fail once fail is set, as
// store/raftlog's do for a group one of whose writes failed.
type failingLog struct {
	multiraft.Log
	err atomic.Pointer[error]
}

func (l *failingLog) failed() error {
	if p := l.err.Load(); p != nil {
		return *p
	}
	return nil
}

func (l *failingLog) LastIndex() (uint64, error) {
	if err := l.failed(); err != nil {
		return 0, err
	}
	return l.Log.LastIndex()
}

func (l *failingLog) FirstIndex() (uint64, error) {
	if err := l.failed(); err != nil {
		return 0, err
	}
	return l.Log.FirstIndex()
}

// A log whose reads fail (one of its writes failed) before the failed
// write's callback has told the group: raft panics on the read, and the
// group fails, not the server; the others elect a leader and go on.
func TestLogReadFailureFailsGroup(t *testing.T) {
	h := newHarness(t, 1, 3)
	var fl *failingLog
	h.wrap = func(server, _ uint64, l multiraft.Log) multiraft.Log {
		if server != 1 {
			return l
		}
		fl = &failingLog{Log: l}
		return fl
	}
	h.addGroup(7, []uint64{1, 2, 3})
	h.elect(7, 1)
	h.propose(1, 7, "a")
	h.stabilize()
	eio := errors.New("EIO")
	fl.err.Store(&eio)
	var got error
	require.NoError(t, h.servers[1].node.ProposeAsync(7, []byte("b"), func(err error) { got = err }))
	h.stabilize()
	require.ErrorIs(t, got, multiraft.ErrGroupFailed)
	st, err := h.servers[1].node.Status(7)
	require.NoError(t, err)
	require.ErrorIs(t, st.Err, eio)
	require.Equal(t, multiraft.HoldDamaged, st.Held)
	// The two others elect one of them. Their election timeouts are
	// random (raft's) and the ticks discrete, so both may time out on the
	// same tick and split their votes, round after round: 1.5% of runs
	// had no leader after 40 ticks. 400 leave that to chance no more.
	lead := uint64(0)
	for i := 0; i < 400 && lead != 2 && lead != 3; i++ {
		h.tick()
		h.stabilize()
		lead, _ = h.leaderOf(7)
	}
	require.Contains(t, []uint64{2, 3}, lead, "the others go on\n%s", h.dump())
}

// A group bootstrapped on its three servers elects a leader within a tick
// or two rather than an election timeout (10 to 20 ticks): its first
// voter campaigns at once, and again each half tick while its pre-votes
// find servers that have not added the group yet.
// TestLeaderSince: Status's LeaderSince is zero while a replica knows no
// leader, set once it knows one (the leader: when it won), and moved on
// when another server wins a later term.
func TestLeaderSince(t *testing.T) {
	h := newHarness(t, 1, 3)
	h.addGroup(7, []uint64{1, 2, 3})
	for id := uint64(1); id <= 3; id++ {
		st, err := h.servers[id].node.Status(7)
		require.NoError(t, err)
		require.True(t, st.LeaderSince.IsZero(), "server %d knows no leader yet", id)
	}
	before := time.Now()
	h.elect(7, 1)
	since := map[uint64]time.Time{}
	for id := uint64(1); id <= 3; id++ {
		st, err := h.servers[id].node.Status(7)
		require.NoError(t, err)
		require.Equal(t, uint64(1), st.Lead)
		require.False(t, st.LeaderSince.Before(before), "server %d: since %v, elected after %v", id, st.LeaderSince, before)
		require.False(t, st.LeaderSince.After(time.Now()))
		since[id] = st.LeaderSince
	}
	time.Sleep(time.Millisecond) // the clock moves on between the two elections
	require.NoError(t, h.servers[1].node.TransferLeadership(7, 2))
	h.stabilize()
	for id := uint64(1); id <= 3; id++ {
		st, err := h.servers[id].node.Status(7)
		require.NoError(t, err)
		require.Equal(t, uint64(2), st.Lead)
		require.True(t, st.LeaderSince.After(since[id]), "server %d: since %v, not after the first leader's %v", id, st.LeaderSince, since[id])
	}
}

func TestFreshGroupElectsAtOnce(t *testing.T) {
	h := newHarness(t, 1, 3)
	h.addGroup(7, []uint64{3, 1, 2})
	h.stabilize()
	lead, ticks := h.tickUntilLeader(7, 5)
	require.Equal(t, uint64(1), lead, "the first voter by ID")
	require.LessOrEqual(t, ticks, 2)
	h.propose(1, 7, "m")
	h.stabilize()
	require.Equal(t, []string{"m"}, h.servers[3].sms[7].datas)
}
