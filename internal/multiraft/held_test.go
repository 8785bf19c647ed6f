package multiraft_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/skiffmq/skiff/internal/multiraft"
	"github.com/skiffmq/skiff/internal/multiraft/multiraftest"
)

// heldOf returns why server id's replica of group is held.
func (h *harness) heldOf(id, group uint64) multiraft.HoldReason {
	h.t.Helper()
	held, err := h.servers[id].node.Held(group)
	require.NoError(h.t, err)
	return held
}

// powerLoss crashes server id and drops its log of group after index
// last (the tail it had written but not synced), then restarts it held
// unsynced, as the layer above does after an unclean stop across a reboot.
func (h *harness) powerLoss(id, group, last uint64) {
	h.t.Helper()
	h.crash(id)
	h.logf("power loss %d: group %d keeps up to %d", id, group, last)
	require.NoError(h.t, h.servers[id].disk.LoseTail(group, last))
	h.start(id, multiraft.HoldUnsynced)
}

// threeWithA is threeLedBy1 with "a" applied everywhere, and the last
// index of server 1's log of group 7 then: what a later power loss keeps.
func threeWithA(t *testing.T) (*harness, uint64) {
	h := threeLedBy1(t)
	h.propose(1, 7, "a")
	h.stabilize()
	synced, err := h.servers[1].disk.Log(7).LastIndex()
	require.NoError(t, err)
	return h, synced
}

// A leader that loses power loses the tail of its log it had not synced,
// although it counted towards the commit of what was there. Restarted
// held, it does not help the follower that lacks the entry win an
// election, so the one follower that has it is elected, and the
// acknowledged entry survives (the harness fails the test on a committed
// entry replaced).
func TestUnsyncedLeaderDoesNotElectFollowerWithoutEntry(t *testing.T) {
	h, synced := threeWithA(t)

	// "b" is committed by 1 and 2 alone.
	h.ft.Partition([]uint64{1, 2}, []uint64{3})
	h.propose(1, 7, "b")
	h.stabilize()
	require.Contains(t, h.acked[7], "b")

	h.powerLoss(1, 7, synced)
	h.ft.Heal()
	require.Equal(t, multiraft.HoldUnsynced, h.heldOf(1, 7))
	// 3 campaigns first: without 1's vote (2 refuses, its log is ahead),
	// it cannot win.
	require.NoError(t, h.servers[3].node.Campaign(7))
	h.stabilize()
	lead, _ := h.leaderOf(7)
	require.NotEqual(t, uint64(3), lead, "elected with the vote of a replica that lost what it acknowledged")
	require.NotZero(t, h.servers[1].node.Stats().HeldVotesDropped)
	h.settle(200)
	require.Equal(t, []string{"a", "b"}, h.servers[1].sms[7].datas)
	require.Equal(t, multiraft.HoldNone, h.heldOf(1, 7), "released once caught up")
}

// Every replica held unsynced (the whole cluster lost power): none
// votes until the hold timeout passes without a leader, and none
// campaigns until it has passed twice; then they are released, one is
// elected, and what every log kept is committed.
func TestUnsyncedHoldTimeout(t *testing.T) {
	h := threeLedBy1(t)
	h.propose(1, 7, "a")
	h.stabilize()
	h.opts.HoldTimeout = 2 * time.Second // 20 ticks of 100 ms
	for _, id := range h.ids {
		h.crash(id)
	}
	for _, id := range h.ids {
		h.start(id, multiraft.HoldUnsynced)
	}
	for range 19 {
		h.tick()
		h.stabilize()
	}
	for _, id := range h.ids {
		require.Equal(t, multiraft.HoldUnsynced, h.heldOf(id, 7), "server %d released before the timeout", id)
	}
	lead, _ := h.leaderOf(7)
	require.Zero(t, lead)
	h.tick()
	for _, id := range h.ids {
		require.Equal(t, multiraft.HoldVoting, h.heldOf(id, 7), "server %d", id)
	}
	for range 20 {
		h.tick()
		h.stabilize()
	}
	for _, id := range h.ids {
		require.Equal(t, multiraft.HoldNone, h.heldOf(id, 7), "server %d", id)
	}
	h.settle(100)
	require.Equal(t, []string{"a"}, h.servers[2].sms[7].datas)
}

// A held replica that hears of a leader is not released by the timeout,
// however long it cannot catch up (here its appends are dropped): only
// once it has applied an entry of the leader's term. A wiped one is never
// released by time.
func TestUnsyncedHoldKeptWhileLeaderKnown(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reason multiraft.HoldReason
	}{
		{"unsynced", multiraft.HoldUnsynced},
		{"wiped", multiraft.HoldWiped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := threeLedBy1(t)
			h.opts.HoldTimeout = time.Second
			h.propose(1, 7, "a")
			h.stabilize()
			h.crash(3)
			if tc.reason == multiraft.HoldWiped {
				h.servers[3].disk.Wipe()
			} else {
				// Its log lost the leader's entries: replaying what is
				// left does not release it.
				require.NoError(t, h.servers[3].disk.LoseTail(7, 0))
			}
			h.ft.SetFaults(multiraftest.Faults{BulkBytes: 1})
			h.start(3, tc.reason)
			for range 50 {
				h.tick()
				h.stabilize()
			}
			require.Equal(t, tc.reason, h.heldOf(3, 7), "released while it could not catch up")
			h.settle(200)
			require.Equal(t, []string{"a"}, h.servers[3].sms[7].datas)
		})
	}
}

// loseLog crashes server id and restarts it with its log of every group
// gone, held lost: a power loss took all of it under a policy that does
// not fsync every write, as the layer above reports it.
func (h *harness) loseLog(id uint64) {
	h.t.Helper()
	h.crash(id)
	h.logf("power loss %d: every log lost", id)
	h.servers[id].disk.Wipe()
	h.start(id, multiraft.HoldLost)
}

// Two followers of three lose their whole log to a power loss. Raft never
// lowers a follower's Match within a term, and there is no other
// follower to hand the leadership to: the leader steps down (it no longer
// hears the lost ones), they forget it, vote once the hold timeout has
// passed without a leader, and elect it again; its new term's progress
// probes them from scratch, and both catch up. Neither empty replica
// campaigns meanwhile, so they never elect each other and replace what
// the leader kept (the harness fails the test on a committed entry
// replaced). With the leader restarted meanwhile, the same; and with the
// lost replicas given the group's voters at their start (a stream's
// replica made before this server started), which lets them campaign.
func TestTwoLostFollowersCaughtUp(t *testing.T) {
	for _, restart := range []bool{false, true} {
		for _, peers := range []bool{false, true} {
			for seed := int64(1); seed <= 4; seed++ {
				t.Run(fmt.Sprintf("restart=%v/peers=%v/seed=%d", restart, peers, seed), func(t *testing.T) {
					h := newHarness(t, seed, 3)
					h.heldPeers = peers
					h.addGroup(7, []uint64{1, 2, 3})
					h.elect(7, 1)
					h.opts.HoldTimeout = 2 * time.Second // 20 ticks of 100 ms
					want := []string{"m0", "m1", "m2", "m3", "m4"}
					for _, d := range want {
						h.propose(1, 7, d)
					}
					h.stabilize()
					h.loseLog(2)
					h.loseLog(3)
					if restart {
						h.crash(1)
						h.restart(1)
					}
					h.tickStable(10)
					require.Equal(t, multiraft.HoldLost, h.heldOf(2, 7))
					h.tickStable(300)
					h.requireReleasedWith(7, want)
					// The layer above hears once that each lost one caught
					// up.
					require.Equal(t, map[[2]uint64]int{{2, 7}: 1, {3, 7}: 1}, h.caughtUp)
					lead, _ := h.leaderOf(7)
					require.Equal(t, uint64(1), lead)
				})
			}
		}
	}
}

// Three followers of five lose their whole log: the leader hands over to
// the one follower that kept it, but the two are no quorum, so neither is
// elected until the lost ones vote, once the hold timeout has passed
// without a leader; then every replica ends with every entry.
func TestThreeLostFollowersOfFiveCaughtUp(t *testing.T) {
	for seed := int64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			h := newHarness(t, seed, 5)
			h.addGroup(7, []uint64{1, 2, 3, 4, 5})
			h.elect(7, 1)
			h.heldPeers = seed%2 == 0
			h.opts.HoldTimeout = 2 * time.Second
			want := []string{"m0", "m1", "m2"}
			for _, d := range want {
				h.propose(1, 7, d)
			}
			h.stabilize()
			for _, id := range []uint64{3, 4, 5} {
				h.loseLog(id)
			}
			h.tickStable(300)
			h.requireReleasedWith(7, want)
			lead, _ := h.leaderOf(7)
			require.Contains(t, []uint64{1, 2}, lead)
		})
	}
}

// Two followers of three lose the tail of their logs to a power loss, in
// the leader's term: entries a quorum acknowledged are on the leader
// alone. Replaying what they kept (entries of the leader's term) does not
// release them; the leader, left without a quorum, steps down; they vote
// for it once the hold timeout has passed, and neither campaigns before
// it has been elected again, so the entries survive and reach both (the
// harness fails the test on a committed entry replaced).
func TestTwoUnsyncedFollowersKeepLeadersEntries(t *testing.T) {
	for seed := int64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			h := newHarness(t, seed, 3)
			h.addGroup(7, []uint64{1, 2, 3})
			h.elect(7, 1)
			h.opts.HoldTimeout = 2 * time.Second
			h.propose(1, 7, "a")
			h.stabilize()
			synced, err := h.servers[2].disk.Log(7).LastIndex()
			require.NoError(t, err)
			want := []string{"a", "b", "c", "d"}
			for _, d := range want[1:] {
				h.propose(1, 7, d)
			}
			h.stabilize()
			h.powerLoss(2, 7, synced)
			h.powerLoss(3, 7, synced)
			h.tick()
			h.stabilize()
			require.Equal(t, multiraft.HoldUnsynced, h.heldOf(2, 7), "released by what it replayed")
			require.Empty(t, h.caughtUp)
			h.tickStable(300)
			h.requireReleasedWith(7, want)
			lead, _ := h.leaderOf(7)
			require.Equal(t, uint64(1), lead)
			require.Equal(t, map[[2]uint64]int{{2, 7}: 1, {3, 7}: 1}, h.caughtUp)
		})
	}
}

// tickStable ticks n times, stabilizing after each.
func (h *harness) tickStable(n int) {
	for range n {
		h.tick()
		h.stabilize()
	}
}

// requireReleasedWith requires every replica of group to hold want and
// not to be held.
func (h *harness) requireReleasedWith(group uint64, want []string) {
	h.t.Helper()
	for _, id := range h.groups[group] {
		require.Equal(h.t, want, h.servers[id].sms[group].datas, "server %d", id)
		require.Equal(h.t, multiraft.HoldNone, h.heldOf(id, group), "server %d", id)
	}
}
