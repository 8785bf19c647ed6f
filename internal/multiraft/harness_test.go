package multiraft_test

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/skiffmq/skiff/internal/multiraft"
	"github.com/skiffmq/skiff/internal/multiraft/multiraftest"
)

// harness is a cluster of manual Nodes over a FakeTransport and MemDisks,
// driven from the test goroutine, with the checkers of the deterministic
// tests: committed entries agree across replicas, at most one leader per
// term, held replicas never grant a vote nor campaign, and (at settle)
// every acknowledged proposal is on every replica.
type harness struct {
	t       testing.TB
	ft      *multiraftest.FakeTransport
	rng     *rand.Rand
	opts    multiraft.Options
	ids     []uint64
	servers map[uint64]*server
	groups  map[uint64][]uint64 // group -> voters
	order   []uint64            // groups, in the order they were added
	// heldPeers: a held replica started with no log is given the group's
	// voters, as one made with its stream is (else it learns them from
	// the leader).
	heldPeers bool
	// wrap, if set, wraps the log of each replica started from then on.
	wrap func(server, group uint64, l multiraft.Log) multiraft.Log

	committed map[uint64]map[uint64]entryID // group -> index -> what was applied there
	leaders   map[[2]uint64]uint64          // (group, term) -> leader
	acked     map[uint64][]string           // group -> data applied somewhere, in order
	ackedSet  map[string]bool
	// exempt: servers whose replicas applied entries a quorum's power
	// loss took from the group (allowLoss), not checked until wiped.
	exempt map[uint64]bool
	// checkpoints: what a replica's state machine (server, group) reports
	// as durable when it starts; 0 if absent. A test sets one to what the
	// replica had applied when it crashed, whose data it then keeps.
	checkpoints map[[2]uint64]uint64
	// caughtUp counts Options.OnCaughtUp's calls, by (server, group).
	caughtUp map[[2]uint64]int
	proposed int
	taken    int      // proposals raft took (appended to a leader's log)
	trace    []string // the schedule, for a failure's report
}

type entryID struct {
	term uint64
	data string
}

type server struct {
	id   uint64
	node *multiraft.Node
	disk *multiraftest.MemDisk
	sms  map[uint64]*recorder
	up   bool
	// hadLog marks the groups whose log this server once had; an empty
	// one at restart was lost.
	hadLog map[uint64]bool
	// crashed is what each group's state machine held at the last crash.
	crashed map[uint64][]string
}

// recorder is a StateMachine that records what it applies and checks it
// with the harness.
type recorder struct {
	h              *harness
	server, group  uint64
	applied        uint64
	datas          []string
	leader, term   uint64
	restoredFrom   uint64
	leaderChanges  int
	confChanges    int
	appliedBatches int
	// checkpoint is what Checkpoint reports; entries at or below it are
	// taken again, idempotently.
	checkpoint uint64
}

func (r *recorder) Apply(ents []*raftpb.Entry) error {
	r.appliedBatches++
	for _, e := range ents {
		i := e.GetIndex()
		if i <= r.checkpoint && i <= r.applied {
			continue // applied before the restart
		}
		if i != r.applied+1 {
			r.h.failf("server %d group %d: applied index %d after %d", r.server, r.group, i, r.applied)
		}
		r.applied = i
		if r.h.exempt[r.server] {
			continue
		}
		id := entryID{term: e.GetTerm(), data: string(e.GetData())}
		if e.GetType() != raftpb.EntryNormal {
			r.confChanges++
			id.data = "conf:" + id.data
		}
		r.h.checkCommitted(r.server, r.group, i, id)
		if e.GetType() == raftpb.EntryNormal && len(e.GetData()) > 0 {
			r.datas = append(r.datas, id.data)
			r.h.ack(r.group, id.data)
		}
	}
	return nil
}

// Restore takes a snapshot whose data is the applied proposals, one a
// line (what snapshotData makes).
func (r *recorder) Restore(snap *raftpb.Snapshot) error {
	r.restoredFrom = snap.GetMetadata().GetIndex()
	r.applied = r.restoredFrom
	r.datas = nil
	if d := snap.GetData(); len(d) > 0 {
		r.datas = strings.Split(string(d), "\n")
	}
	return nil
}

// snapshotData is the state of r as Restore takes it.
func (r *recorder) snapshotData() []byte { return []byte(strings.Join(r.datas, "\n")) }

// Checkpoint is the index set by the test for the recorder's server and
// group (harness.checkpoints), 0 by default: the log is replayed whole.
func (r *recorder) Checkpoint() uint64 { return r.checkpoint }

func (r *recorder) LeaderChanged(leader, term uint64) {
	r.leaderChanges++
	r.leader, r.term = leader, term
}

func newHarness(t testing.TB, seed int64, n int) *harness {
	return newHarnessWith(t, seed, n, multiraft.Options{Manual: true})
}

// newHarnessWith is newHarness with the servers' options (Manual set).
func newHarnessWith(t testing.TB, seed int64, n int, opts multiraft.Options) *harness {
	h := &harness{
		t:         t,
		ft:        multiraftest.NewFakeTransport(seed),
		rng:       rand.New(rand.NewSource(seed)),
		servers:   map[uint64]*server{},
		groups:    map[uint64][]uint64{},
		committed: map[uint64]map[uint64]entryID{},
		leaders:   map[[2]uint64]uint64{},
		acked:     map[uint64][]string{},
		ackedSet:  map[string]bool{},
		exempt:    map[uint64]bool{},

		checkpoints: map[[2]uint64]uint64{},
		caughtUp:    map[[2]uint64]int{},
	}
	h.opts = opts
	h.opts.Manual = true
	h.ft.SetObserver(h.observe)
	for i := 1; i <= n; i++ {
		id := uint64(i)
		h.ids = append(h.ids, id)
		h.servers[id] = &server{id: id, disk: multiraftest.NewMemDisk(), hadLog: map[uint64]bool{}}
		h.start(id, multiraft.HoldNone)
	}
	return h
}

func (h *harness) failf(format string, args ...any) {
	h.t.Helper()
	tail := h.trace[max(0, len(h.trace)-40):]
	h.t.Fatalf(format+"\nlast steps:\n  %s", append(args, strings.Join(tail, "\n  "))...)
}

func (h *harness) logf(format string, args ...any) {
	h.trace = append(h.trace, fmt.Sprintf(format, args...))
}

// start (re)starts server id over its disk, hosting every group it is a
// voter of, held for hold.
func (h *harness) start(id uint64, hold multiraft.HoldReason) {
	s := h.servers[id]
	opts := h.opts
	opts.ID = id
	opts.OnLeaderChange = func(group, leader, term uint64) { h.leaderChanged(id, group, leader, term) }
	opts.OnCaughtUp = func(group uint64) { h.caughtUp[[2]uint64{id, group}]++ }
	n, err := multiraft.New(opts, h.ft.Endpoint(id))
	if err != nil {
		h.t.Fatal(err)
	}
	s.node, s.up, s.sms = n, true, map[uint64]*recorder{}
	h.ft.Endpoint(id).SetHandler(n)
	for _, g := range h.order {
		if !slices.Contains(h.groups[g], id) {
			continue
		}
		// A server whose log it once had is empty lost it (a wipe, then a
		// crash before it caught up): it comes back held, as the layer
		// above does for a peer with no state. One that never saved
		// anything never voted nor acknowledged: it starts afresh.
		gh := hold
		if last, _ := s.disk.Log(g).LastIndex(); last == 0 && s.hadLog[g] && gh == multiraft.HoldNone {
			gh = multiraft.HoldWiped
		}
		h.addReplica(s, g, gh)
	}
}

// addReplica starts group on server s: a new group's replicas are
// bootstrapped with its voters; a held one (wiped) joins with an empty log
// and learns them from the leader.
func (h *harness) addReplica(s *server, group uint64, hold multiraft.HoldReason) {
	cp := h.checkpoints[[2]uint64{s.id, group}]
	sm := &recorder{h: h, server: s.id, group: group, checkpoint: cp, applied: cp}
	if cp > 0 {
		sm.datas = slices.Clone(s.crashed[group])
	}
	s.sms[group] = sm
	peers := h.groups[group]
	if hold != multiraft.HoldNone && !h.heldPeers {
		peers = nil
	}
	var log multiraft.Log = s.disk.Log(group)
	if h.wrap != nil {
		log = h.wrap(s.id, group, log)
	}
	err := s.node.AddGroup(multiraft.GroupConfig{
		ID: group, Log: log, StateMachine: sm, Peers: peers, Held: hold,
	})
	if err != nil {
		h.t.Fatal(err)
	}
}

// addGroup creates a group with voters on every live one of them.
func (h *harness) addGroup(group uint64, voters []uint64) {
	h.groups[group] = voters
	h.order = append(h.order, group)
	h.committed[group] = map[uint64]entryID{}
	for _, id := range voters {
		if s := h.servers[id]; s.up {
			h.addReplica(s, group, multiraft.HoldNone)
		}
	}
}

// crash kills server id: pending saves lost, messages in flight lost.
func (h *harness) crash(id uint64) {
	s := h.servers[id]
	if !s.up {
		return
	}
	h.logf("crash %d", id)
	_ = s.node.Close()
	s.disk.Crash()
	s.crashed = map[uint64][]string{}
	for g, sm := range s.sms {
		s.crashed[g] = slices.Clone(sm.datas)
	}
	for _, g := range h.order {
		if last, _ := s.disk.Log(g).LastIndex(); last > 0 {
			s.hadLog[g] = true
		}
	}
	h.ft.Crash(id)
	s.up = false
}

// wipe crashes server id and restarts it with an empty disk, held.
func (h *harness) wipe(id uint64) {
	h.crash(id)
	h.logf("wipe %d", id)
	h.servers[id].disk.Wipe()
	h.start(id, multiraft.HoldWiped)
}

func (h *harness) restart(id uint64) {
	if h.servers[id].up {
		return
	}
	h.logf("restart %d", id)
	h.start(id, multiraft.HoldNone)
}

func (h *harness) checkCommitted(server, group, index uint64, id entryID) {
	seen, ok := h.committed[group][index]
	if !ok {
		h.committed[group][index] = id
		return
	}
	if seen != id {
		h.failf("group %d index %d: server %d applied %+v, another server %+v", group, index, server, id, seen)
	}
}

func (h *harness) ack(group uint64, data string) {
	if !h.ackedSet[data] {
		h.ackedSet[data] = true
		h.acked[group] = append(h.acked[group], data)
	}
}

func (h *harness) leaderChanged(server, group, leader, term uint64) {
	if leader != server {
		return
	}
	k := [2]uint64{group, term}
	if other, ok := h.leaders[k]; ok && other != server {
		h.failf("group %d term %d: two leaders, %d and %d", group, term, other, server)
	}
	h.leaders[k] = server
	h.logf("leader group %d term %d: %d", group, term, server)
}

// observe checks every envelope a server sends: a held replica neither
// grants a vote (unless voting) nor asks for one.
func (h *harness) observe(from, to uint64, e multiraft.Envelope) {
	s := h.servers[from]
	if s == nil || !s.up {
		return
	}
	held, err := s.node.Held(e.Group)
	if err != nil || held == multiraft.HoldNone {
		return
	}
	voting := held == multiraft.HoldVoting
	m := &raftpb.Message{}
	if err := proto.Unmarshal(e.Data, m); err != nil {
		h.failf("server %d sent an unreadable message: %v", from, err)
	}
	switch t := m.GetType(); {
	case (t == raftpb.MsgVoteResp || t == raftpb.MsgPreVoteResp) && !m.GetReject() && !voting:
		h.failf("held server %d granted a %s to %d in group %d", from, t, to, e.Group)
	case t == raftpb.MsgVote || t == raftpb.MsgPreVote:
		h.failf("held server %d campaigned (%s) in group %d", from, t, e.Group)
	}
}

// stabilize delivers, saves and processes until nothing moves, without
// ticks.
func (h *harness) stabilize() {
	for range 20000 {
		moved := false
		for _, id := range h.ids {
			s := h.servers[id]
			if !s.up {
				continue
			}
			if s.node.Process() {
				moved = true
			}
			if s.disk.Flush() > 0 {
				moved = true
			}
		}
		if h.ft.DeliverAll() > 0 {
			moved = true
		}
		if !moved {
			return
		}
	}
	// Something ping-pongs without ticks: show what.
	var seen []string
	h.ft.SetObserver(func(from, to uint64, e multiraft.Envelope) {
		m := &raftpb.Message{}
		_ = proto.Unmarshal(e.Data, m)
		seen = append(seen, fmt.Sprintf("%d->%d g%d %s term=%d index=%d reject=%v hint=%d", from, to, e.Group,
			m.GetType(), m.GetTerm(), m.GetIndex(), m.GetReject(), m.GetRejectHint()))
	})
	for range 20 {
		for _, id := range h.live() {
			h.servers[id].node.Process()
			h.servers[id].disk.Flush()
		}
		h.ft.DeliverAll()
	}
	h.failf("stabilize: still moving after 20000 rounds:\n%s\n%s", strings.Join(seen[:min(len(seen), 60)], "\n"), h.dump())
}

// tick ticks every live server and the network once.
func (h *harness) tick() {
	for _, id := range h.ids {
		if s := h.servers[id]; s.up {
			s.node.Tick()
		}
	}
	h.ft.Tick()
}

// tickUntilLeader ticks, stabilizing after each, until group has a
// leader, at most max times; it returns the leader (0 for none) and the
// ticks it took.
func (h *harness) tickUntilLeader(group uint64, max int) (leader uint64, ticks int) {
	for ; ticks < max; ticks++ {
		if leader, _ = h.leaderOf(group); leader != 0 {
			return leader, ticks
		}
		h.tick()
		h.stabilize()
	}
	leader, _ = h.leaderOf(group)
	return leader, ticks
}

// leaderOf returns the leader of group that a majority of live replicas
// agree on (reported by the leader itself), or 0.
func (h *harness) leaderOf(group uint64) (leader, term uint64) {
	for _, id := range h.groups[group] {
		s := h.servers[id]
		if !s.up {
			continue
		}
		st, err := s.node.Status(group)
		if err != nil {
			continue
		}
		if st.RaftState == raft.StateLeader && st.GetTerm() >= term {
			leader, term = id, st.GetTerm()
		}
	}
	return leader, term
}

func (h *harness) propose(server, group uint64, data string) {
	h.logf("propose %s on %d group %d", data, server, group)
	s := h.servers[server]
	if !s.up {
		return
	}
	h.proposed++
	if err := s.node.ProposeAsync(group, []byte(data), func(err error) {
		if err == nil {
			h.taken++
		}
	}); err != nil {
		h.failf("propose: %v", err)
	}
}

// converged reports whether every group has a leader whose committed
// entries every replica has applied, no replica is held, and every
// acknowledged proposal is on every replica.
func (h *harness) converged() (bool, string) {
	for _, g := range h.order {
		lead, _ := h.leaderOf(g)
		if lead == 0 {
			return false, fmt.Sprintf("group %d has no leader", g)
		}
		lst, _ := h.servers[lead].node.Status(g)
		for _, id := range h.groups[g] {
			s := h.servers[id]
			if !s.up {
				return false, fmt.Sprintf("server %d is down", id)
			}
			st, err := s.node.Status(g)
			if err != nil {
				return false, err.Error()
			}
			if st.Held != multiraft.HoldNone {
				return false, fmt.Sprintf("group %d: server %d held (%s)", g, id, st.Held)
			}
			if st.Applied != lst.GetCommit() || s.sms[g].applied != lst.GetCommit() {
				return false, fmt.Sprintf("group %d: server %d applied %d (state machine %d), leader %d committed %d",
					g, id, st.Applied, s.sms[g].applied, lead, lst.GetCommit())
			}
		}
	}
	for _, g := range h.order {
		for _, id := range h.groups[g] {
			have := map[string]bool{}
			for _, d := range h.servers[id].sms[g].datas {
				if have[d] {
					h.failf("group %d: server %d applied %q twice", g, id, d)
				}
				have[d] = true
			}
			for _, d := range h.acked[g] {
				if !have[d] {
					return false, fmt.Sprintf("group %d: server %d misses acknowledged %q", g, id, d)
				}
			}
		}
	}
	return true, ""
}

// requireConverged fails the test unless the cluster has converged.
func (h *harness) requireConverged() {
	h.t.Helper()
	if ok, why := h.converged(); !ok {
		h.failf("not converged: %s", why)
	}
}

// settle heals everything, restarts every server, and ticks until the
// cluster converges, failing after maxTicks.
func (h *harness) settle(maxTicks int) int {
	h.logf("settle")
	h.ft.SetFaults(multiraftest.Faults{})
	h.ft.Heal()
	for _, id := range h.ids {
		h.restart(id)
	}
	why := ""
	for i := range maxTicks {
		h.stabilize()
		ok, w := h.converged()
		if ok {
			return i
		}
		why = w
		h.tick()
	}
	h.failf("not converged after %d ticks: %s\n%s", maxTicks, why, h.dump())
	return maxTicks
}

// dump describes every replica's raft state, for a failure's report.
func (h *harness) dump() string {
	var b strings.Builder
	for _, g := range h.order {
		for _, id := range h.groups[g] {
			s := h.servers[id]
			if !s.up {
				fmt.Fprintf(&b, "group %d server %d: down\n", g, id)
				continue
			}
			st, err := s.node.Status(g)
			if err != nil {
				fmt.Fprintf(&b, "group %d server %d: %v\n", g, id, err)
				continue
			}
			fmt.Fprintf(&b, "group %d server %d: %s term=%d vote=%d lead=%d transferee=%d commit=%d applied=%d held=%s voters=%v progress=%v\n",
				g, id, st.RaftState, st.GetTerm(), st.GetVote(), st.Lead, st.LeadTransferee, st.GetCommit(), st.Applied, st.Held, st.Config.Voters, st.Progress)
		}
	}
	return b.String()
}
