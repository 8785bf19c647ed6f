package jscluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/internal/multiraft"
)

// Membership of the meta group (design 4.1).
//
// A server whose WAL holds the meta group restarts its replica from it. A
// server with no meta state either founds the group or joins it:
//
//   - it joins (its replica starts empty, held until it has caught up, so
//     that a server that lost its disk never votes with what it lost) as
//     soon as a peer it has a link to belongs to a meta group, or a
//     server it has a route to has a lower name;
//   - it founds the group when it has the lowest name of the servers it
//     has routes to, every configured route is up, every one of those
//     servers has a link up and none belongs to a meta group, and
//     Options.BootstrapWait has passed since Start. It writes a snapshot
//     at index 1 with itself as the only voter and an ID for the group,
//     and campaigns.
//
// The leader then adds every server it has a link to and that is not a
// member: first as a learner, with the server's addServer entry as the
// conf change's context, so that the state's servers and raft's members
// change together; then, once the learner has caught up to the leader's
// commit, as a voter, while there are fewer than Options.MaxVoters. One
// change at a time, each waited for.

// loop runs the membership rules and dials links, at every tick and when
// woken (routes or links changed, an entry applied, a leader elected).
func (c *Cluster) loop() {
	defer c.wg.Done()
	t := time.NewTicker(c.opts.Tick)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-c.wakeCh:
		case <-c.stop:
			return
		}
		c.dialPeers()
		if !c.joined.Load() {
			c.maybeJoin()
			continue
		}
		if err := c.grow(); err != nil && !c.closed.Load() {
			c.log.Debug("meta membership change", "err", err)
		}
	}
}

// maybeJoin founds or joins the meta group, if the rules say so.
func (c *Cluster) maybeJoin() {
	routes := c.srv.Routes()
	lowest, linked, member := true, true, false
	c.mu.Lock()
	for _, r := range routes {
		if lower(r.Name, c.name) {
			lowest = false
		}
		p := c.mu.peers[RaftID(r.Name)]
		linked = linked && p != nil && p.up
	}
	for _, p := range c.mu.peers {
		member = member || (p.up && p.meta != "")
	}
	c.mu.Unlock()
	switch {
	case member || !lowest:
		// With no meta state: held wiped, or lost if a power loss may
		// have taken it (unsynced.go).
		if err := c.addMeta(multiraft.HoldLost); err != nil {
			c.log.Error("joining the meta group", "err", err)
			return
		}
		c.log.Info("joining the meta group")
	case linked && time.Since(c.start) >= c.opts.BootstrapWait && c.srv.ConfiguredRoutesUp():
		if err := c.bootstrap(); err != nil {
			c.log.Error("founding the meta group", "err", err)
		}
	}
}

// bootstrap founds the meta group: a snapshot at index 1 with this server
// as its only voter, then a campaign.
func (c *Cluster) bootstrap() error {
	now := time.Now().UTC()
	st := newState()
	st.ID = fmt.Sprintf("%s-%d", c.name, now.UnixNano())
	st.Servers[c.name] = ServerInfo{Name: c.name, ID: c.id, Joined: now}
	data, err := encodeState(&st)
	if err != nil {
		return err
	}
	snap := &raftpb.Snapshot{Data: data, Metadata: &raftpb.SnapshotMetadata{Index: new(uint64(1)), Term: new(uint64(1)),
		ConfState: &raftpb.ConfState{Voters: []uint64{c.id}}}}
	hs := &raftpb.HardState{Term: new(uint64(1)), Vote: new(uint64(0)), Commit: new(uint64(1))}
	done := make(chan error, 1)
	c.metaLog.Save(multiraft.Update{Snapshot: snap, HardState: hs}, func(err error) { done <- err })
	if err := <-done; err != nil {
		return err
	}
	if err := c.addMeta(multiraft.HoldNone); err != nil {
		return err
	}
	c.log.Info("founded the meta group", "meta", st.ID)
	return c.node.Campaign(MetaGroup)
}

// grow makes one membership change, if this server leads and one is due,
// and waits for it to apply.
func (c *Cluster) grow() error {
	st, err := c.node.Status(MetaGroup)
	if err != nil || st.RaftState != raft.StateLeader {
		return err
	}
	voters, learners := st.Config.Voters.IDs(), st.Config.Learners
	c.mu.Lock()
	var joiners []*peer
	for id, p := range c.mu.peers {
		_, v := voters[id]
		_, l := learners[id]
		if p.up && !v && !l {
			joiners = append(joiners, p)
		}
	}
	c.mu.Unlock()
	slices.SortFunc(joiners, func(a, b *peer) int { return strings.Compare(a.name, b.name) })
	for _, p := range joiners {
		if err := c.checkPeer(p.name, p.meta); err != nil {
			continue
		}
		si := ServerInfo{Name: p.name, ID: RaftID(p.name), Joined: time.Now().UTC()}
		return c.changeMember(raftpb.ConfChangeAddLearnerNode, si)
	}
	if len(voters) >= c.opts.MaxVoters {
		return nil
	}
	var ready []ServerInfo
	c.meta.view(func(s *State, _ uint64) {
		for id := range learners {
			pr := st.Progress[id]
			si, ok := s.serverByID(id)
			if ok && pr.RecentActive && pr.Match >= st.GetCommit() {
				ready = append(ready, si)
			}
		}
	})
	if len(ready) == 0 {
		return nil
	}
	slices.SortFunc(ready, func(a, b ServerInfo) int { return strings.Compare(a.Name, b.Name) })
	// The server's addServer entry again, which changes nothing, so that
	// the promotion is waited for as any proposal.
	return c.changeMember(raftpb.ConfChangeAddNode, ready[0])
}

// changeMember proposes one membership change of si, with its addServer
// entry as context, and waits for it to apply.
func (c *Cluster) changeMember(t raftpb.ConfChangeType, si ServerInfo) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.opts.Tick*20)
	defer cancel()
	go func() {
		select {
		case <-c.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	cc := &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: &t, NodeId: new(si.ID)}}}
	if err := c.proposeConfChange(ctx, cc, Entry{Op: OpAddServer, Server: &si}); err != nil {
		return fmt.Errorf("%s %s: %w", t, si.Name, err)
	}
	c.log.Info("meta group member changed", "change", t.String(), "server", si.Name)
	// The state machine applied the entry; raft applies the change right
	// after. Until it has, the next round would see the change still to
	// make and propose it again, which raft drops while one is pending
	// (the proposal then waits out its timeout).
	for {
		st, err := c.node.Status(MetaGroup)
		if err != nil {
			return err
		}
		_, voter := st.Config.Voters.IDs()[si.ID]
		_, learner := st.Config.Learners[si.ID]
		if (t == raftpb.ConfChangeAddNode && voter) || (t == raftpb.ConfChangeAddLearnerNode && (learner || voter)) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil // applied; the next round sees it
		case <-time.After(c.opts.Tick / 10):
		}
	}
}
