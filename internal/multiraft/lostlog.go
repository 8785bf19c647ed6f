package multiraft

import (
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// A replica that lost its log keeps its raft ID (design 1.2: replica IDs
// are server IDs, and a held replica makes the reuse safe). etcd raft
// assumes a log is never lost, in two places this file works around:
//
//   - A follower panics when a heartbeat commits past its last index, and
//     the leader's heartbeats carry min(commit, Match), with the Match the
//     replica had before it lost its log. The follower's worker clamps a
//     heartbeat's commit to the last index the group has handed to its
//     log, which is never below what the follower acknowledged unless its
//     log was lost.
//   - A leader never lowers a follower's Match: it ignores a rejection
//     below it as stale, and keeps sending appends the follower cannot
//     take, each rejection answered by the same probe at once: a ping-pong
//     at network speed. When a follower rejects with a hint below its
//     Match (its log ends before entries it had acknowledged), the leader
//     does not step the rejection, which ends the ping-pong (the next
//     heartbeat response resumes the probes), and hands its leadership to
//     the most up-to-date other follower, whose fresh progress probes the
//     lost replica from scratch. A stale rejection reordered behind later
//     acknowledgements can look the same and costs one needless
//     leadership change, nothing more.
//
// When those lost leave the leader no quorum (every other voter of three
// lost its log), there is no one to hand over to, and it could not commit
// anyway: it stops hearing them for the rest of its term. Their heartbeat
// responses and rejections are not stepped, so raft's CheckQuorum steps
// it down after an election timeout. Its lost followers then forget it
// (held.go forgetSilent), and the next leader, it or another, probes them
// from scratch. A wiped replica votes for no one, so a group
// with a quorum wiped waits for an operator; one that lost its logs to a
// power loss (HoldLost) votes after the hold timeout.

// clampHeartbeat lowers a heartbeat's commit to the group's last index.
// A heartbeat's commit is min(commit, Match): above the last index, the
// leader counts entries this replica lost. Raft has no answer to a
// heartbeat that says so, and a leader with nothing new to send would
// never learn it (an idle group keeps the replica empty for good), so the
// worker tells it with a rejection, as an append below the leader's
// Match would have: lostLog, on the leader, hands the leadership over.
// Called by the worker, under g.mu.
func (g *group) clampHeartbeat(m *raftpb.Message) {
	if m.GetType() != raftpb.MsgHeartbeat || m.GetCommit() <= g.mu.last {
		return
	}
	g.n.stats.lostLogBeats.Add(1)
	last := g.mu.last
	term, _ := g.log.Term(last)
	g.mu.tell = append(g.mu.tell, &raftpb.Message{
		Type: raftpb.MsgAppResp.Enum(), To: new(m.GetFrom()), From: new(m.GetTo()), Term: new(m.GetTerm()),
		Index: new(m.GetCommit()), Reject: new(true), RejectHint: new(last), LogTerm: new(term),
	})
	m.Commit = new(last)
}

// lostLog reports whether m, an incoming MsgAppResp, shows that its
// sender lost entries it had acknowledged to this leader. Called by the
// worker, under g.mu, before m is stepped.
func lostLog(rn *raft.RawNode, m *raftpb.Message) bool {
	if m.GetType() != raftpb.MsgAppResp || !m.GetReject() {
		return false
	}
	if rn.BasicStatus().RaftState != raft.StateLeader {
		return false
	}
	lost := false
	rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == m.GetFrom() && m.GetRejectHint() < pr.Match {
			lost = true
		}
	})
	return lost
}

// lostPeer reports whether m, an incoming message, is a response from a
// follower this leader found lost in its current term, while those lost
// leave it no quorum: it is not stepped (see above). With lost set it
// records m's sender as lost. A follower that answers an append at or
// past its Match again (a snapshot took it there) is no longer lost.
// Called by the worker, under g.mu.
func (g *group) lostPeer(rn *raft.RawNode, m *raftpb.Message, lost bool) bool {
	if !lost && len(g.mu.lost) == 0 {
		return false
	}
	t := m.GetType()
	if t != raftpb.MsgAppResp && t != raftpb.MsgHeartbeatResp {
		return false
	}
	bs := rn.BasicStatus()
	if bs.RaftState != raft.StateLeader || g.mu.lostTerm != bs.GetTerm() {
		clear(g.mu.lost)
		g.mu.lostTerm, g.mu.deaf = bs.GetTerm(), false
		if bs.RaftState != raft.StateLeader {
			return false
		}
	}
	from := m.GetFrom()
	if lost {
		if g.mu.lost == nil {
			g.mu.lost = map[uint64]bool{}
		}
		if !g.mu.lost[from] {
			g.mu.lost[from] = true
			g.mu.deaf = noQuorumWithout(rn, g.mu.lost)
		}
		return true
	}
	if !g.mu.lost[from] {
		return false
	}
	if t == raftpb.MsgAppResp && !m.GetReject() {
		back := false
		rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
			if id == from && m.GetIndex() >= pr.Match {
				back = true
			}
		})
		if back {
			delete(g.mu.lost, from)
			g.mu.deaf = noQuorumWithout(rn, g.mu.lost)
			return false
		}
	}
	return g.mu.deaf
}

// noQuorumWithout reports whether the voters not in lost fall short of a
// quorum of the group's (incoming) voters.
func noQuorumWithout(rn *raft.RawNode, lost map[uint64]bool) bool {
	voters := rn.Status().Config.Voters[0]
	left := 0
	for id := range voters {
		if !lost[id] {
			left++
		}
	}
	return left < len(voters)/2+1
}

// handOver transfers leadership to the voter with the highest Match that
// is recently active and not one of lost, if there is one, unless a
// transfer to a replica that is not lost is under way.
func handOver(rn *raft.RawNode, self uint64, lost []uint64) {
	st := rn.Status()
	if st.RaftState != raft.StateLeader || st.LeadTransferee != raft.None && !slices.Contains(lost, st.LeadTransferee) {
		return
	}
	voters := st.Config.Voters.IDs()
	var best, match uint64
	for id, pr := range st.Progress {
		if _, ok := voters[id]; !ok || id == self || !pr.RecentActive || slices.Contains(lost, id) {
			continue
		}
		if best == raft.None || pr.Match > match || pr.Match == match && id < best {
			best, match = id, pr.Match
		}
	}
	if best != raft.None {
		rn.TransferLeader(best)
	}
}
