package jetstream

import (
	"cmp"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/skiffmq/skiff/internal/jscluster"
	"github.com/skiffmq/skiff/server"
)

// raftDir is the raft layer's directory under StoreDir: the node file, the
// raft WAL and the meta group's snapshots (internal/jscluster).
const raftDir = "raft"

// clustered is what a JetStream in a cluster keeps besides its raft layer.
type clustered struct {
	// forwards bounds the requests forwarded at once (cluster_api.go).
	forwards chan struct{}
	// peerUsage is what the other servers' streams hold, by account
	// (cluster_usage.go).
	peerUsage peerUsage
	// assignMu makes the meta leader's checks of a new stream against the
	// meta state and its assignment one step (assignNew).
	assignMu sync.Mutex
	// recon is the work of the reconciler: the streams whose assignment
	// changed since it last ran.
	recon struct {
		sync.Mutex
		keys map[jscluster.StreamKey]bool
		all  bool
		wake chan struct{}
	}
}

// startCluster starts the raft layer of a clustered server, if
// Options.Cluster asks for it.
func (js *JetStream) startCluster() error {
	if js.opts.Cluster == nil {
		return nil
	}
	js.forwards = make(chan struct{}, maxForwards)
	js.recon.keys = map[jscluster.StreamKey]bool{}
	js.recon.wake = make(chan struct{}, 1)
	o := *js.opts.Cluster
	o.Dir = cmp.Or(o.Dir, filepath.Join(js.opts.StoreDir, raftDir))
	o.Logger = cmp.Or(o.Logger, js.log)
	o.OnStreams = js.streamsChanged
	c, err := jscluster.Start(js.srv, o)
	if err != nil {
		return err
	}
	js.raft = c
	return nil
}

// runCluster starts what serves the cluster once the accounts are
// enabled: peers' forwarded requests and the reconciler.
func (js *JetStream) runCluster() {
	if js.raft == nil {
		return
	}
	js.raft.HandleCalls(js.handleCall)
	if err := js.subscribeMetaAPI(); err != nil {
		js.log.Error("meta API not subscribed", "err", err)
	}
	js.srv.HandleHealth(js.health)
	js.wg.Add(2)
	go js.reconcileLoop()
	go js.adoptLoop()
	js.streamsChanged(nil, true)
}

// clusterInfo is the cluster part of a stream's (or its consumers') info
// on a clustered server, nil on a single server: this server serves it;
// for a replicated stream, its group's leader and the other replicas as
// this server's replica sees them (their lag known on the leader only).
func (st *stream) clusterInfo() *ClusterInfo {
	js := st.js
	if js.raft == nil {
		return nil
	}
	ci := &ClusterInfo{Name: js.srv.ClusterName(), Leader: js.srv.Name()}
	if st.repl == nil {
		return ci
	}
	ci.RaftGroup = st.raftGroupName()
	gs, err := js.raft.GroupState(st.repl.group)
	if err != nil {
		return ci
	}
	ci.Leader = gs.Leader
	if !gs.LeaderSince.IsZero() {
		since := gs.LeaderSince.UTC()
		ci.LeaderSince = &since
	}
	if sys := js.srv.SystemAccount(); sys != nil {
		ci.SystemAcc, ci.TrafficAcc = true, sys.Name()
	}
	var top uint64
	if gs.State == "LEADER" {
		top = gs.Committed
	}
	for _, name := range slices.Sorted(maps.Keys(gs.Peers)) {
		if name == gs.Leader {
			continue
		}
		p := gs.Peers[name]
		pi := &PeerInfo{Name: name, Offline: !p.Known, Active: p.LastSeen, Peer: nodeHash(name)}
		if top > p.Match {
			pi.Lag = top - p.Match
		}
		pi.Current = p.Known && pi.Lag == 0
		ci.Replicas = append(ci.Replicas, pi)
	}
	if gs.Leader != js.raft.Name() {
		// This server is a follower: it is among the replicas, current
		// unless held (it may have lost state and has not caught up).
		ci.Replicas = append(ci.Replicas, &PeerInfo{Name: js.raft.Name(), Current: gs.Held == "", Peer: nodeHash(js.raft.Name())})
		slices.SortFunc(ci.Replicas, func(a, b *PeerInfo) int { return strings.Compare(a.Name, b.Name) })
	}
	return ci
}

// health is JetStream's part of /healthz in a cluster: the meta replica
// is current, and so is this server's replica of every replicated stream
// (it knows a leader and is not catching up from a peer), as nats-server
// reports them.
func (js *JetStream) health() error {
	if err := js.raft.Health(); err != nil {
		return err
	}
	for _, ja := range js.sortedAccounts() {
		for _, st := range ja.streams() {
			if st.repl == nil {
				continue
			}
			if err := st.repl.health(); err != nil {
				return fmt.Errorf("JetStream stream '%s > %s' is not current: %w", ja.name, st.name, err)
			}
		}
	}
	return nil
}

// subscribeAPI subscribes h to an account's API: in a cluster, for this
// server's clients only, since each request is answered once, by the
// server that can (cluster_api.go).
func (js *JetStream) subscribeAPI(acc *server.Account, h server.InternalHandler) (*server.InternalSub, error) {
	if js.opts.Cluster != nil {
		return acc.SubscribeInternalLocal("$JS.API.>", "", h)
	}
	return acc.SubscribeInternal("$JS.API.>", "", h)
}

// streamsChanged hears the meta group's changes of stream assignments
// (jscluster.Options.OnStreams), on its apply goroutine.
func (js *JetStream) streamsChanged(keys []jscluster.StreamKey, all bool) {
	r := &js.recon
	r.Lock()
	for _, k := range keys {
		r.keys[k] = true
	}
	r.all = r.all || all
	r.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// reconcileLoop makes this server's streams what the meta state says: a
// stream placed here and missing is created; a stream the meta group made
// here (its group in its meta.json) and no longer places here, or placed
// again under another group since (deleted and made anew while this server
// was down), is removed. Streams the meta group did not make (this
// server's before it joined a cluster) are left alone: adoptLoop has the
// meta group adopt them (cluster_adopt.go).
func (js *JetStream) reconcileLoop() {
	defer js.wg.Done()
	r := &js.recon
	for {
		select {
		case <-r.wake:
		case <-js.stop:
			return
		}
		r.Lock()
		keys, all := r.keys, r.all
		r.keys, r.all = map[jscluster.StreamKey]bool{}, false
		r.Unlock()
		if all {
			js.raft.View(func(s *jscluster.State) {
				for k := range s.Streams {
					keys[k] = true
				}
			})
			for _, ja := range js.sortedAccounts() {
				for _, st := range ja.streams() {
					if st.group.Load() != 0 {
						keys[jscluster.StreamKey{Account: ja.name, Name: st.name}] = true
					}
				}
			}
		}
		for k := range keys {
			js.reconcile(k)
		}
	}
}

// reconcile makes one stream here what the meta state says.
func (js *JetStream) reconcile(k jscluster.StreamKey) {
	ja := js.account(k.Account)
	if ja == nil {
		return
	}
	var here, hasGroup bool
	var group, applied uint64
	var config []byte
	me := js.raft.Name()
	js.raft.ViewAt(func(s *jscluster.State, at uint64) {
		applied = at
		if sa := s.Streams[k]; sa != nil {
			here, group, config, hasGroup = slices.Contains(sa.Peers, me), sa.Group, sa.Config, sa.HasGroup()
		}
	})
	st := ja.lookup(k.Name)
	// A stream of the meta group's making goes once the state has moved
	// past the entry that made it (its group) and no longer places it
	// here under that group. While the state is behind it (replaying the
	// log at start), the stream is newer than what the state says, and
	// stays.
	if sg := groupOf(st); sg != 0 && sg <= applied && (!here || sg != group) {
		if sg == group && st.repl != nil && st.repl.keepRemoved() {
			return // its group still counts this server (replica_members.go)
		}
		js.runLocal(ja, "STREAM.DELETE."+k.Name, nil, 0)
		st = nil
	}
	if st != nil && st.repl == nil && here && hasGroup && groupOf(st) == group {
		// Scaled up from one replica: turned replicated here
		// (replica_convert.go), if the update (on its way from the meta
		// leader) has not done it within convertWait.
		now := time.Now().UnixNano()
		if !st.convertSeen.CompareAndSwap(0, now) && time.Duration(now-st.convertSeen.Load()) >= convertWait {
			js.runLocal(ja, "STREAM.UPDATE."+k.Name, config, 0)
			return
		}
		time.AfterFunc(convertWait, func() { js.streamsChanged([]jscluster.StreamKey{k}, false) })
		return
	}
	if st != nil && st.repl != nil && here {
		st.repl.unplaced.Store(0)
		if st.repl.isLeader() {
			st.repl.kickMembers() // the peers may have changed
		}
	}
	if here && st == nil {
		js.runLocal(ja, "STREAM.CREATE."+k.Name, config, group)
	}
}

// runLocal answers a request with this server's own streams, through the
// stream's worker, and logs an error answer.
func (js *JetStream) runLocal(ja *jsAccount, subject string, data []byte, group uint64) {
	ans, err := js.answerForward(forwardRequest{Op: fwdLocal, Account: ja.name, Subject: subject, Data: data, Group: group})
	if err != nil || ans.IsErr {
		var body []byte
		if len(ans.Replies) > 0 {
			body = ans.Replies[0].Body
		}
		js.log.Warn("stream not made what the meta group says", "account", ja.name, "request", subject,
			"err", err, "answer", string(body))
	}
}
