package jetstream

import (
	"fmt"
	"time"

	"github.com/skiffmq/skiff/internal/jscluster"
	"github.com/skiffmq/skiff/server"
)

// RAFTZ ($SYS.REQ.SERVER.PING.RAFTZ, `nats server request raft`): the raft
// groups on this server, in nats-server's RaftzStatus shape, by account
// and group: the meta group (_meta_, under the system account) and each
// replicated stream's group (S-R<replicas>-<group>, under its account).

// metaGroupName is the meta group's name in RAFTZ, nats-server's.
const metaGroupName = "_meta_"

// raftzGroup is nats-server's RaftzGroup, with what Skiff knows of it.
type raftzGroup struct {
	ID            string               `json:"id"`
	State         string               `json:"state"`
	Size          int                  `json:"size"`
	QuorumNeeded  int                  `json:"quorum_needed"`
	Committed     uint64               `json:"committed"`
	Applied       uint64               `json:"applied"`
	Leader        string               `json:"leader,omitempty"`
	EverHadLeader bool                 `json:"ever_had_leader"`
	Term          uint64               `json:"term"`
	Vote          string               `json:"voted_for,omitempty"`
	SystemAcc     bool                 `json:"system_account"`
	TrafficAcc    string               `json:"traffic_account"`
	Peers         map[string]raftzPeer `json:"peers"`
	// Held and Error are Skiff's: why the replica is held or stopped.
	Held  string `json:"skiff_held,omitempty"`
	Error string `json:"skiff_error,omitempty"`
}

// raftzPeer is nats-server's RaftzGroupPeer.
type raftzPeer struct {
	Name                string `json:"name"`
	Known               bool   `json:"known"`
	LastReplicatedIndex uint64 `json:"last_replicated_index,omitempty"`
	LastSeen            string `json:"last_seen,omitempty"`
}

// raftzOptions filter the answer: one account, one group.
type raftzOptions struct {
	Account string `json:"account"`
	Group   string `json:"group"`
}

// sysRaftz answers RAFTZ (server.SysFunc).
func (js *JetStream) sysRaftz(_ *server.Account, body []byte) (any, error) {
	var o raftzOptions
	if err := unmarshalOptional(body, &o); err != nil {
		return nil, err
	}
	out := map[string]map[string]raftzGroup{}
	add := func(account, group string, id uint64, system bool) {
		if (o.Account != "" && o.Account != account) || (o.Group != "" && o.Group != group) {
			return
		}
		gs, err := js.raft.GroupState(id)
		if err != nil {
			return // not on this server (any more)
		}
		if out[account] == nil {
			out[account] = map[string]raftzGroup{}
		}
		out[account][group] = raftzOf(js.raft.Name(), gs, system)
	}
	// Every group's traffic travels on the raft links, none on an
	// account's subjects: nats-server's system-account traffic, as the
	// stream and consumer infos say (clusterInfo).
	sysAcc, system := server.GlobalAccountName, false
	if a := js.srv.SystemAccount(); a != nil {
		sysAcc, system = a.Name(), true
	}
	add(sysAcc, metaGroupName, jscluster.MetaGroup, system)
	for _, ja := range js.sortedAccounts() {
		for _, st := range ja.streams() {
			if st.repl != nil {
				add(ja.name, st.raftGroupName(), st.repl.group, system)
			}
		}
	}
	return out, nil
}

// raftGroupName is a replicated stream's group as RAFTZ and /jsz name
// it.
func (st *stream) raftGroupName() string {
	return fmt.Sprintf("S-R%d-%d", st.config().Replicas, st.repl.group)
}

func raftzOf(me string, gs jscluster.GroupState, system bool) raftzGroup {
	g := raftzGroup{ID: me, State: gs.State, Size: gs.Size, QuorumNeeded: gs.QuorumNeeded, Committed: gs.Committed,
		Applied: gs.Applied, Leader: gs.Leader, EverHadLeader: gs.Leader != "" || gs.Term > 1, Term: gs.Term,
		Vote: gs.Vote, SystemAcc: system, Held: gs.Held, Peers: map[string]raftzPeer{}}
	if gs.Err != nil {
		g.Error = gs.Err.Error()
	}
	for name, p := range gs.Peers {
		rp := raftzPeer{Name: name, Known: p.Known, LastReplicatedIndex: p.Match}
		if p.LastSeen > 0 {
			rp.LastSeen = p.LastSeen.Round(time.Millisecond).String()
		}
		g.Peers[name] = rp
	}
	return g
}
