package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/internal/jscluster"
)

// The members of a replicated stream's group follow the stream's peers in
// the meta state (design 3.8): a scale by update, or STREAM.PEER.REMOVE,
// changes only the meta state, and the group's ready leader makes raft's
// membership match, one change at a time, each waited for:
//
//  1. a wanted server that is no member becomes a learner: it opens the
//     stream empty, joining the group (StreamAssignment.Join), and takes
//     the log, or a snapshot and then the messages from a peer
//     (replica_catchup.go), without voting;
//  2. a learner that holds the leader's log becomes a voter;
//  3. once every wanted server votes, a voter no longer wanted is removed;
//     if that is the leader itself, it hands the leadership to a wanted
//     voter first, which removes it.
//
// So a group never loses a voter before its replacement votes, and a
// scale down from three to one removes one voter, then the other, each
// change committed by the members it leaves. A removed server closes its
// replica and drops its copy once it applied its removal, or once it has
// been out of the meta state for removedGrace (it may never hear of a
// removal made while it was cut off): before, its vote may still count.
//
// The leader runs the changes when it becomes ready, when the stream's
// assignment changes, and every checkpoint round (once a second), so a
// change lost with a leader is made by the next.

// memberChangeWait bounds one membership change.
const memberChangeWait = 5 * time.Second

// removedGrace is how long a server keeps its replica of a stream the
// meta state no longer places on it while its group still counts it a
// member.
var removedGrace = 30 * time.Second

// replicaMembers is a replica's state of its membership changes.
type replicaMembers struct {
	busy atomic.Bool // syncMembers runs
	// confIndex is the index of the last membership change applied here:
	// a snapshot below it would carry the wrong members.
	confIndex atomic.Uint64
}

// kickMembers runs syncMembers on a goroutine of its own, unless it runs.
func (r *replica) kickMembers() {
	if r.members.busy.CompareAndSwap(false, true) {
		go func() {
			defer r.members.busy.Store(false)
			r.syncMembers()
		}()
	}
}

// syncMembers makes changes until the group's members are the stream's
// peers, while this replica is the ready leader.
func (r *replica) syncMembers() {
	for range 4 * maxReplicas {
		changed, err := r.memberStep()
		if err != nil {
			if !errors.Is(err, jscluster.ErrNotLeader) && !errors.Is(err, errReplicaStopped) {
				r.st.js.log.Warn("replicated stream membership change", "stream", r.st.name, "err", err)
			}
			return
		}
		if !changed {
			return
		}
	}
}

// memberStep makes the next membership change due, if any, and reports
// whether it made one.
func (r *replica) memberStep() (bool, error) {
	r.mu.Lock()
	ready, closed := r.mu.ready, r.mu.closed
	r.mu.Unlock()
	if closed {
		return false, errReplicaStopped
	}
	if !ready {
		return false, nil
	}
	if r.st.js.raft.Health() != nil {
		// The meta state here may be behind (replayed at start, cut
		// off): what it says the peers are may be old.
		return false, nil
	}
	want := r.st.js.peersOf(r.st.ja.name, r.st.name)
	if len(want) == 0 {
		return false, nil // not assigned (being deleted)
	}
	m, err := r.c.GroupMembers(r.group)
	if err != nil || !m.Leader {
		return false, err
	}
	me := r.st.js.raft.Name()
	t, who := nextMemberChange(m, want, me)
	switch who {
	case "":
		return false, nil
	case me:
		// Not wanted here: a wanted voter takes over and removes this one.
		return true, r.c.StepDown(r.group, "")
	}
	if t == jscluster.AddLearner && !r.logCompacted() {
		return false, nil // the next round
	}
	ctx, cancel := context.WithTimeout(context.Background(), memberChangeWait)
	defer cancel()
	go func() {
		select {
		case <-r.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := r.c.ChangeGroupMember(ctx, r.group, t, who); err != nil {
		return false, err
	}
	if t == jscluster.AddLearner {
		r.snapshotFor(ctx, who)
	}
	r.st.js.log.Info("replicated stream member changed", "stream", r.st.name, "change", t.String(), "server", who)
	return true, nil
}

// logCompacted makes sure a new member will take a snapshot rather than
// the group's log from its first entry (which, for a stream turned
// replicated, does not hold what its store held before: replica_convert.go),
// snapshotting and compacting the whole log if need be, and reports
// whether it is so.
func (r *replica) logCompacted() bool {
	if first, err := r.c.GroupFirstIndex(r.group); err == nil && first > 1 {
		return true
	}
	r.checkpoint()
	r.compactKeep(0)
	first, err := r.c.GroupFirstIndex(r.group)
	return err == nil && first > 1
}

// snapshotFor gives a learner just added a snapshot it can install: one
// taken after its addition (raft refuses one whose members lack it), with
// the whole log compacted, and has raft send it again if it sent an older
// one meanwhile.
func (r *replica) snapshotFor(ctx context.Context, learner string) {
	for r.snapped.Load() < r.members.confIndex.Load() {
		r.checkpoint()
		r.compactKeep(0)
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := r.c.ResendSnapshot(r.group, learner); err != nil {
		r.st.js.log.Warn("snapshot for a new replica not sent again", "stream", r.st.name, "server", learner, "err", err)
	}
}

// nextMemberChange returns the next change that brings the members m
// toward want, as seen by me, the leader: the change and the server it
// changes ("" for none; me: this leader must hand over first).
func nextMemberChange(m jscluster.GroupMembers, want []string, me string) (raftpb.ConfChangeType, string) {
	for _, w := range slices.Sorted(slices.Values(want)) {
		if !m.IsMember(w) {
			return jscluster.AddLearner, w
		}
	}
	for _, l := range m.CaughtUp {
		if slices.Contains(want, l) {
			return jscluster.AddVoter, l
		}
	}
	for _, l := range m.Learners {
		if !slices.Contains(want, l) {
			return jscluster.RemoveNode, l
		}
	}
	for _, w := range want {
		if !slices.Contains(m.Voters, w) {
			return 0, "" // a replacement does not vote yet
		}
	}
	for _, v := range m.Voters {
		if v != me && !slices.Contains(want, v) {
			return jscluster.RemoveNode, v
		}
	}
	if !slices.Contains(want, me) {
		return 0, me
	}
	return 0, ""
}

// memberApplied hears a membership change applied here (on the apply
// goroutine): the leader goes on with the next; a replica it removed has
// the stream reconciled, which drops its copy.
func (r *replica) memberApplied(e *raftpb.Entry) {
	r.members.confIndex.Store(e.GetIndex())
	if jscluster.RemovesMember(e, r.st.js.raft.Name()) {
		r.st.js.streamsChanged([]jscluster.StreamKey{{Account: r.st.ja.name, Name: r.st.name}}, false)
		return
	}
	if r.isLeader() {
		r.kickMembers()
	}
}

// fwdMembers asks a server for its replica's view of a stream group's
// members (Subject: the stream's name; the answer's Data: a
// membersAnswer).
const fwdMembers = "members"

// membersAnswer is a server's answer to fwdMembers.
type membersAnswer struct {
	Leader  bool     `json:"leader"`
	Members []string `json:"members"` // voters and learners
}

// localMembers answers fwdMembers.
func (ja *jsAccount) localMembers(name string) (forwardAnswer, error) {
	st := ja.lookup(name)
	if st == nil || st.repl == nil {
		return forwardAnswer{}, fmt.Errorf("%w: no replica of %q here", errNoReplica, name)
	}
	m, err := st.repl.c.GroupMembers(st.repl.group)
	if err != nil {
		return forwardAnswer{}, err
	}
	b, err := json.Marshal(membersAnswer{Leader: m.Leader, Members: append(m.Voters, m.Learners...)})
	return forwardAnswer{Data: b}, err
}

// errNoReplica: a server asked about a stream's group holds no replica.
var errNoReplica = errors.New("jetstream: no replica of the stream")

// keepRemoved reports whether this server keeps its replica of a stream
// the meta state no longer places here: while its group counts it a
// member, as far as it knows, for at most removedGrace since it was first
// seen unplaced. A removed member often never hears that the removal
// committed (its leader stops sending to it once it applied it), so it
// asks the other members: once the leader among them says it is no
// member, it goes at once. It asks for the stream to be reconciled again
// then, or once the grace is over.
func (r *replica) keepRemoved() bool {
	me := r.st.js.raft.Name()
	m, err := r.c.GroupMembers(r.group)
	if err != nil || !m.IsMember(me) || r.removed.Load() {
		return false
	}
	now := time.Now().UnixNano()
	r.unplaced.CompareAndSwap(0, now)
	since := time.Duration(now - r.unplaced.Load())
	if since >= removedGrace {
		return false
	}
	k := jscluster.StreamKey{Account: r.st.ja.name, Name: r.st.name}
	again := func() { r.st.js.streamsChanged([]jscluster.StreamKey{k}, false) }
	time.AfterFunc(removedGrace-since, again)
	if r.asking.CompareAndSwap(false, true) {
		go func() {
			defer r.asking.Store(false)
			if r.leaderRemoved(append(m.Voters, m.Learners...), me) {
				r.removed.Store(true)
				again()
			}
		}()
	}
	return true
}

// leaderRemoved asks the members for their view of the group, every
// quarter second for five seconds, and reports whether one that leads it
// said me is no member.
func (r *replica) leaderRemoved(members []string, me string) bool {
	js := r.st.js
	for range 20 {
		for _, peer := range members {
			if peer == me {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			ans, aerr := js.callServer(ctx, peer, forwardRequest{Op: fwdMembers, Account: r.st.ja.name, Subject: r.st.name})
			cancel()
			var ma membersAnswer
			if aerr != nil || json.Unmarshal(ans.Data, &ma) != nil || !ma.Leader {
				continue
			}
			if !slices.Contains(ma.Members, me) {
				return true
			}
			break // a member still: the removal may be on its way
		}
		select {
		case <-r.stop:
			return false
		case <-time.After(250 * time.Millisecond):
		}
	}
	return false
}
