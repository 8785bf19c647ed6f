package jetstream

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/skiffmq/skiff/internal/jscluster"
	"github.com/skiffmq/skiff/subject"
)

// Streams in a cluster (design 4.2, R1 only): the meta leader checks a
// create, places the stream on one server (cluster_placement.go), has the
// meta group assign it there, then orders that server to create it and
// answers with its answer. Every server applies the assignment too, and
// the server it names creates the stream if it has not (reconcile): a
// create whose leader failed after the commit is completed there. An
// update goes to the stream's server first, and the meta state takes the
// configuration it answers with; a delete is unassigned, then removed on
// its server. The stream itself is today's single-server stream.

// metaProposeTimeout bounds a meta proposal of the API.
const metaProposeTimeout = 5 * time.Second

// propose proposes a meta entry, bounded in time.
func (js *JetStream) propose(e jscluster.Entry) error {
	ctx, cancel := context.WithTimeout(context.Background(), metaProposeTimeout)
	defer cancel()
	return js.raft.Propose(ctx, e)
}

// replicasRequested returns the num_replicas a stream configuration asks
// for.
func replicasRequested(data []byte) int {
	var r struct {
		Replicas int `json:"num_replicas"`
	}
	_ = json.Unmarshal(data, &r)
	return r.Replicas
}

// clusterStreamCreate answers STREAM.CREATE on the meta leader.
func (ja *jsAccount) clusterStreamCreate(req apiRequest, a apiArgs) any {
	js, name := ja.js, a[0]
	r := &streamChangeResponse{apiResponse: newResponse("stream_create")}
	cfg, aerr := ja.createConfig(name, req.data)
	if aerr != nil {
		r.Error = aerr
		return r
	}
	sa, existing, aerr := ja.assignNew(name, cfg, req.data)
	switch {
	case existing != "":
		// Its server answers: the stream's info for the same
		// configuration, 10058 for another.
		_, req.group = js.placement(ja.name, name)
		return ja.runOn(existing, req)
	case aerr != nil:
		r.Error = aerr
		return r
	}
	peers := sa.Peers
	_, req.group = js.placement(ja.name, name)
	// Every peer opens the stream (a replicated one with its raft group);
	// the first answers.
	var ans any
	for i, peer := range peers {
		a := ja.runOn(peer, req)
		if i == 0 || answerIsErr(a) {
			ans = a
		}
		if answerIsErr(a) {
			break
		}
	}
	if !answerIsErr(ans) && sa.HasGroup() {
		ja.awaitLeader(sa, req)
	}
	if answerIsErr(ans) {
		// The server refused what the meta leader placed there: undo the
		// assignment, so that the stream is not left half made.
		if err := js.propose(jscluster.Entry{Op: jscluster.OpRemoveStream, Stream: sa}); err != nil {
			js.log.Warn("failed stream create not unassigned", "account", ja.name, "stream", name, "err", err)
		}
	}
	return ans
}

// awaitLeader waits, at most leaderWait, until a replica of the new
// replicated stream sa knows its group's leader, as nats-server answers a
// create once the stream's leader is elected: a client's next request
// (its info, a publish) then finds the leader, and the info lists the
// replicas other than it.
func (ja *jsAccount) awaitLeader(sa *jscluster.StreamAssignment, req apiRequest) {
	info := req
	info.subject, info.data = "STREAM.INFO."+sa.Name, nil
	for deadline := time.Now().Add(leaderWait); time.Now().Before(deadline); {
		for _, p := range sa.Peers {
			if leaderOfAnswer(ja.runOn(p, info)) != "" {
				return
			}
		}
		select {
		case <-time.After(leaderRetry):
		case <-ja.js.stop:
			return
		}
	}
}

// leaderOfAnswer returns the cluster leader a stream info answer (this
// server's or another's) names, "" for none.
func leaderOfAnswer(v any) string {
	var b []byte
	if f, ok := v.(forwarded); ok {
		if f.isErr || len(f.replies) == 0 {
			return ""
		}
		b = f.replies[0].body
	} else if hasError(v) {
		return ""
	} else {
		var err error
		if b, err = json.Marshal(v); err != nil {
			return ""
		}
	}
	var r struct {
		Cluster *struct {
			Leader string `json:"leader"`
		} `json:"cluster"`
	}
	if json.Unmarshal(b, &r) != nil || r.Cluster == nil {
		return ""
	}
	return r.Cluster.Leader
}

// assignNew has the meta group assign a new stream, after the checks
// that read the meta state (the account's max_streams and quota, subject
// overlap, placement). The checks and the assignment are one step for
// every create, adoption and update on this leader (js.assignMu): two
// creates of overlapping subjects can never both pass. It returns the
// assignment, or the server a stream of that name is placed on already,
// or why not.
func (ja *jsAccount) assignNew(name string, cfg StreamConfig, data []byte) (*jscluster.StreamAssignment, string, *APIError) {
	js := ja.js
	js.assignMu.Lock()
	defer js.assignMu.Unlock()
	if peer, _ := js.placement(ja.name, name); peer != "" {
		return nil, peer, nil
	}
	if names, _ := ja.assignedNames(""); ja.lim().maxStreams != noLimit && len(names) >= ja.lim().maxStreams {
		// The account's limit holds over the cluster: each server alone
		// sees only the streams placed on it.
		return nil, "", errMaxStreams()
	}
	if ja.overlapsAssigned(name, cfg.Subjects) {
		return nil, "", errSubjectOverlap()
	}
	if aerr := ja.checkClusterReserve(&cfg); aerr != nil {
		return nil, "", aerr
	}
	peers, aerr := js.selectPeers(placementOf(data), cfg.Replicas, nil)
	if aerr != nil {
		return nil, "", aerr
	}
	b, err := json.Marshal(&cfg)
	if err != nil {
		return nil, "", errStreamGeneral(err)
	}
	sa := &jscluster.StreamAssignment{Account: ja.name, Name: name, Config: b, Peers: peers, Created: time.Now().UTC(),
		Raft: cfg.Replicas > 1}
	switch err := js.propose(jscluster.Entry{Op: jscluster.OpAssignStream, Stream: sa}); {
	case errors.Is(err, jscluster.ErrStreamExists):
		if peer, _ := js.placement(ja.name, name); peer != "" {
			return nil, peer, nil
		}
		return nil, "", errClusterUnavailable()
	case err != nil:
		js.log.Warn("stream assignment failed", "account", ja.name, "stream", name, "err", err)
		return nil, "", errClusterUnavailable()
	}
	return sa, "", nil
}

// overlapsAssigned reports whether subjects overlap those of another stream
// of the account in the meta state.
func (ja *jsAccount) overlapsAssigned(name string, subjects []string) bool {
	overlap := false
	ja.js.raft.View(func(s *jscluster.State) {
		for k, sa := range s.Streams {
			if k.Account != ja.name || k.Name == name || overlap {
				continue
			}
			for _, o := range assignedSubjects(sa) {
				if slices.ContainsFunc(subjects, func(x string) bool { return subject.Intersects(x, o) }) {
					overlap = true
					break
				}
			}
		}
	})
	return overlap
}

// assignedSubjects returns the subjects of an assigned stream's
// configuration.
func assignedSubjects(sa *jscluster.StreamAssignment) []string {
	var cfg struct {
		Subjects []string `json:"subjects"`
	}
	_ = json.Unmarshal(sa.Config, &cfg)
	return cfg.Subjects
}

// clusterStreamUpdate answers STREAM.UPDATE on the meta leader: the
// stream's server updates it, and the meta state takes the configuration
// it answers with.
func (ja *jsAccount) clusterStreamUpdate(req apiRequest, a apiArgs) any {
	js, name := ja.js, a[0]
	r := &streamChangeResponse{apiResponse: newResponse("stream_update")}
	var sa *jscluster.StreamAssignment
	js.raft.View(func(s *jscluster.State) {
		if x := s.Streams[jscluster.StreamKey{Account: ja.name, Name: name}]; x != nil {
			c := *x
			sa = &c
		}
	})
	if sa == nil || len(sa.Peers) == 0 {
		r.Error = errStreamNotFound()
		return r
	}
	// The overlap check and the new configuration in the meta state are one
	// step with creates' (assignNew).
	js.assignMu.Lock()
	defer js.assignMu.Unlock()
	var cfg StreamConfig
	if ja.js.decode(req.data, &cfg) == nil {
		if ja.overlapsAssigned(name, cfg.Subjects) {
			r.Error = errSubjectOverlap()
			return r
		}
		cfg.Name = name
		if aerr := ja.checkClusterReserve(&cfg); aerr != nil {
			r.Error = aerr
			return r
		}
	}
	if want := max(replicasRequested(req.data), 1); want != len(sa.Peers) {
		// A scale: the meta state places the stream on its new peers
		// first; the stream's leader then makes its group's members
		// follow (replica_members.go).
		if sa, r.Error = ja.rescale(sa, want, req.data); r.Error != nil {
			return r
		}
	}
	// A replicated stream's leader updates it.
	ans := ja.runOnLeader(sa, req)
	if answerIsErr(ans) {
		return ans
	}
	if b, ok := configOf(ans); ok {
		sa.Config = b
		if err := js.propose(jscluster.Entry{Op: jscluster.OpUpdateStream, Stream: sa}); err != nil {
			js.log.Warn("stream update not recorded in the meta group", "account", ja.name, "stream", name, "err", err)
		}
	}
	return ans
}

// rescale has the meta group place a stream on want peers: the servers
// it is on (its leader first) and more, or the leader and the first of the
// others. The assignment keeps its configuration but num_replicas, which
// the update then sets. It returns the new assignment. js.assignMu held.
func (ja *jsAccount) rescale(sa *jscluster.StreamAssignment, want int, data []byte) (*jscluster.StreamAssignment, *APIError) {
	js := ja.js
	// (A stream made with one replica has no group: its server turns it
	// into a replicated one, replica_convert.go.)
	if want > maxReplicas {
		return nil, errStreamConfig(fmt.Errorf("maximum replicas is %d", maxReplicas))
	}
	peers := slices.Clone(sa.Peers)
	if l := js.placedOn(ja.name, sa.Name); l != "" {
		if i := slices.Index(peers, l); i > 0 {
			peers = append([]string{l}, slices.Delete(peers, i, i+1)...)
		}
	}
	if want > len(peers) {
		more, aerr := js.selectPeers(placementOf(data), want-len(peers), peers)
		if aerr != nil {
			return nil, aerr
		}
		peers = append(peers, more...)
	} else {
		peers = peers[:want]
	}
	var cfg map[string]any
	if err := json.Unmarshal(sa.Config, &cfg); err != nil {
		return nil, errStreamGeneral(err)
	}
	cfg["num_replicas"] = want
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, errStreamGeneral(err)
	}
	sa.Peers, sa.Config, sa.Raft, sa.Join = peers, b, true, true
	if err := js.propose(jscluster.Entry{Op: jscluster.OpUpdateStream, Stream: sa}); err != nil {
		js.log.Warn("stream scale not recorded in the meta group", "account", ja.name, "stream", sa.Name, "err", err)
		return nil, errClusterUnavailable()
	}
	js.log.Info("stream placed anew", "account", ja.name, "stream", sa.Name, "peers", peers)
	return sa, nil
}

// clusterStreamPeerRemove answers STREAM.PEER.REMOVE on the meta leader:
// the peer named is replaced, in the meta state, by a server that holds
// no replica of the stream (10075 if none qualifies, as in nats-server,
// which keeps the stream's replica count); the stream's leader then makes
// its group's members follow (replica_members.go).
func (ja *jsAccount) clusterStreamPeerRemove(req apiRequest, a apiArgs) any {
	js, name := ja.js, a[0]
	r := &successResponse{apiResponse: newResponse("stream_remove_peer")}
	var body struct {
		Peer string `json:"peer"`
	}
	if len(bytes.TrimSpace(req.data)) == 0 {
		r.Error = errBadRequest()
		return r
	}
	if err := json.Unmarshal(req.data, &body); err != nil {
		r.Error = errInvalidJSON(err)
		return r
	}
	if body.Peer == "" {
		r.Error = errBadRequest()
		return r
	}
	js.assignMu.Lock()
	defer js.assignMu.Unlock()
	sa := js.assignmentOf(ja.name, name)
	if sa == nil || len(sa.Peers) == 0 {
		r.Error = errStreamNotFound()
		return r
	}
	i := slices.Index(sa.Peers, body.Peer)
	switch {
	case i < 0:
		r.Error = apiErr(400, 10040, "peer not a member")
		return r
	case !sa.HasGroup():
		// A stream of one replica made without a raft group: moving its
		// store is not built yet.
		r.Error = apiErr(503, 10036, "not currently supported in clustered mode: moving a stream created with one replica")
		return r
	}
	var cfg struct {
		Placement *placement `json:"placement"`
	}
	_ = json.Unmarshal(sa.Config, &cfg)
	var p placement
	if cfg.Placement != nil {
		p = *cfg.Placement
		p.Preferred = ""
	}
	more, aerr := js.selectPeers(p, 1, sa.Peers)
	if aerr != nil {
		r.Error = apiErr(503, 10075, "peer remap failed")
		return r
	}
	sa.Peers = append(slices.Delete(slices.Clone(sa.Peers), i, i+1), more...)
	sa.Raft, sa.Join = true, true
	if err := js.propose(jscluster.Entry{Op: jscluster.OpUpdateStream, Stream: sa}); err != nil {
		js.log.Warn("stream peer removal not recorded in the meta group", "account", ja.name, "stream", name, "err", err)
		r.Error = errClusterUnavailable()
		return r
	}
	js.log.Info("stream peer replaced", "account", ja.name, "stream", name, "removed", body.Peer, "added", more[0])
	r.Success = true
	return r
}

// runOnLeader answers req on a stream's server: for a replicated stream,
// its leader. This server (the meta leader) knows the leader only if it
// holds a replica; else it asks the peers in turn, and again while an
// election leaves none leading (10008), for at most leaderWait.
func (ja *jsAccount) runOnLeader(sa *jscluster.StreamAssignment, req apiRequest) any {
	js := ja.js
	if !sa.HasGroup() {
		return ja.runOn(sa.Peers[0], req)
	}
	var ans any
	for deadline := time.Now().Add(leaderWait); ; {
		tried := map[string]bool{}
		for _, p := range append([]string{js.placedOn(ja.name, sa.Name)}, sa.Peers...) {
			if p == "" || tried[p] {
				continue
			}
			tried[p] = true
			if ans = ja.runOn(p, req); answerErrCode(ans) != 10008 {
				return ans
			}
		}
		if time.Now().After(deadline) {
			return ans
		}
		select {
		case <-time.After(10 * leaderRetry):
		case <-js.stop:
			return ans
		}
	}
}

// answerErrCode returns the err_code of an error answer (a response or
// another server's), 0 for none.
func answerErrCode(v any) int {
	switch a := v.(type) {
	case forwarded:
		if !a.isErr || len(a.replies) == 0 {
			return 0
		}
		var r apiResponse
		if json.Unmarshal(a.replies[0].body, &r) != nil || r.Error == nil {
			return 0
		}
		return int(r.Error.ErrCode)
	case errorer:
		if e := a.apiError(); e != nil {
			return int(e.ErrCode)
		}
	}
	return 0
}

// configOf returns the stream configuration a STREAM.UPDATE's answer
// carries.
func configOf(ans any) (json.RawMessage, bool) {
	switch v := ans.(type) {
	case *streamChangeResponse:
		if v.StreamInfo == nil {
			return nil, false
		}
		b, err := json.Marshal(&v.Config)
		return b, err == nil
	case forwarded:
		if len(v.replies) != 1 {
			return nil, false
		}
		var info struct {
			Config json.RawMessage `json:"config"`
		}
		if json.Unmarshal(v.replies[0].body, &info) != nil || len(info.Config) == 0 {
			return nil, false
		}
		return info.Config, true
	}
	return nil, false
}

// clusterStreamDelete answers STREAM.DELETE on the meta leader.
func (ja *jsAccount) clusterStreamDelete(req apiRequest, a apiArgs) any {
	js, name := ja.js, a[0]
	r := &successResponse{apiResponse: newResponse("stream_delete")}
	peer := js.placedOn(ja.name, name)
	if peer == "" {
		r.Error = errStreamNotFound()
		return r
	}
	sa := &jscluster.StreamAssignment{Account: ja.name, Name: name}
	switch err := js.propose(jscluster.Entry{Op: jscluster.OpRemoveStream, Stream: sa}); {
	case errors.Is(err, jscluster.ErrStreamNotFound):
		r.Error = errStreamNotFound()
		return r
	case err != nil:
		r.Error = errClusterUnavailable()
		return r
	}
	// Its server removes it once it applies the entry (reconcile), or
	// now: whichever comes first, the other finds nothing to do.
	if ans := ja.runOn(peer, req); answerIsErr(ans) {
		js.log.Debug("stream delete on its server", "account", ja.name, "stream", name, "answer", ans)
	}
	r.Success = true
	return r
}

// assignedNames returns the sorted names of the account's assigned
// streams with a subject that can overlap filter ("" for all), and the
// servers they are placed on.
func (ja *jsAccount) assignedNames(filter string) ([]string, map[string]string) {
	var names []string
	placed := map[string]string{}
	ja.js.raft.View(func(s *jscluster.State) {
		for k, sa := range s.Streams {
			if k.Account != ja.name {
				continue
			}
			if filter != "" && !slices.ContainsFunc(assignedSubjects(sa), func(x string) bool { return subject.Intersects(x, filter) }) {
				continue
			}
			names = append(names, k.Name)
			if len(sa.Peers) > 0 {
				placed[k.Name] = sa.Peers[0]
			}
		}
	})
	slices.Sort(names)
	return names, placed
}

// clusterStreamNames answers STREAM.NAMES from the meta state.
func (ja *jsAccount) clusterStreamNames(req apiRequest, _ apiArgs) any {
	r := &streamNamesResponse{apiResponse: newResponse("stream_names")}
	var pr pagedRequest
	if r.Error = ja.js.decode(req.data, &pr); r.Error != nil {
		return r
	}
	names, _ := ja.assignedNames(pr.Subject)
	r.paged, r.Streams = page(names, pr.Offset, namesLimit)
	return r
}

// clusterStreamListResponse is STREAM.LIST's answer in a cluster: the
// streams whose server did not answer are missing.
type clusterStreamListResponse struct {
	streamListResponse
	Missing []string `json:"missing,omitempty"`
}

// clusterStreamList answers STREAM.LIST: the info of each stream from its
// server, asked at once.
func (ja *jsAccount) clusterStreamList(req apiRequest, _ apiArgs) any {
	r := &clusterStreamListResponse{streamListResponse: streamListResponse{apiResponse: newResponse("stream_list"), Streams: []*StreamInfo{}}}
	var pr pagedRequest
	if r.Error = ja.js.decode(req.data, &pr); r.Error != nil {
		return r
	}
	names, placed := ja.assignedNames(pr.Subject)
	r.paged, names = page(names, pr.Offset, listLimit)
	servers := map[string]bool{}
	for _, n := range names {
		servers[placed[n]] = true
	}
	infos := map[string]*StreamInfo{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for srv := range servers {
		wg.Go(func() {
			ans, aerr := ja.js.call(srv, forwardRequest{Op: fwdList, Account: ja.name, Data: []byte(pr.Subject)})
			var list []*StreamInfo
			if aerr != nil || json.Unmarshal(ans.Data, &list) != nil {
				return
			}
			mu.Lock()
			for _, si := range list {
				infos[si.Config.Name] = si
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, n := range names {
		if si := infos[n]; si != nil {
			r.Streams = append(r.Streams, si)
		} else {
			r.Missing = append(r.Missing, n)
		}
	}
	return r
}

// localList answers fwdList: the info of the account's streams here with a
// subject that can overlap filter.
func (ja *jsAccount) localList(filter string) (forwardAnswer, error) {
	var out []*StreamInfo
	for _, n := range ja.namesMatching(filter) {
		if st := ja.lookup(n); st != nil {
			out = append(out, st.info())
		}
	}
	b, err := json.Marshal(out)
	return forwardAnswer{Data: b}, err
}

// usageJSON is usage as servers tell each other.
type usageJSON struct {
	Memory, Storage, Msgs           uint64
	ReservedMemory, ReservedStorage uint64
	Streams, Consumers              int
}

// localUsage answers fwdUsage.
func (ja *jsAccount) localUsage() (forwardAnswer, error) {
	u := ja.usage()
	b, err := json.Marshal(usageJSON{Memory: u.memory, Storage: u.storage, Msgs: u.msgs, ReservedMemory: u.reservedMemory,
		ReservedStorage: u.reservedStorage, Streams: u.streams, Consumers: u.consumers})
	return forwardAnswer{Data: b}, err
}

// clusterAccountInfo answers $JS.API.INFO on the meta leader: the
// account's usage summed over every server of the meta group.
func (ja *jsAccount) clusterAccountInfo(_ apiRequest, _ apiArgs) any {
	r := ja.accountInfo()
	var servers []string
	ja.js.raft.View(func(s *jscluster.State) {
		for name := range s.Servers {
			servers = append(servers, name)
		}
	})
	var total usage
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, srv := range servers {
		wg.Go(func() {
			ans, aerr := ja.js.call(srv, forwardRequest{Op: fwdUsage, Account: ja.name})
			var u usageJSON
			if aerr != nil || json.Unmarshal(ans.Data, &u) != nil {
				return
			}
			mu.Lock()
			total.add(usage{memory: u.Memory, storage: u.Storage, msgs: u.Msgs, reservedMemory: u.ReservedMemory,
				reservedStorage: u.ReservedStorage, streams: u.Streams, consumers: u.Consumers})
			mu.Unlock()
		})
	}
	wg.Wait()
	names, _ := ja.assignedNames("")
	r.Memory, r.Storage, r.Streams, r.Consumers = total.memory, total.storage, len(names), total.consumers
	r.ReservedMemory, r.ReservedStorage = total.reservedMemory, total.reservedStorage
	return r
}

// placement is a stream configuration's placement.
type placement struct {
	Cluster   string   `json:"cluster"`
	Tags      []string `json:"tags"`
	Preferred string   `json:"preferred"`
}

func placementOf(data []byte) placement {
	var cfg struct {
		Placement *placement `json:"placement"`
	}
	_ = json.Unmarshal(data, &cfg)
	if cfg.Placement == nil {
		return placement{}
	}
	return *cfg.Placement
}

func errNoPeers(why string) *APIError {
	return apiErr(400, 10005, "no suitable peers for placement"+why)
}

// excludePlacement is the server tag that keeps streams off a server,
// nats-server's.
const excludePlacement = "!jetstream"

// selectPeers places a new stream of n replicas (or n more replicas of a
// stream, on servers not in exclude): on servers of the meta
// group that this one (the meta leader) has a link to, or this one, that
// match the placement (its tags: each tag required, or with "!" excluded, from the
// server's server_tags; never a server tagged "!jetstream"); the
// preferred one first if it qualifies, then those with the fewest streams,
// then the first by name. Under a unique tag (Options.UniqueTag) it takes
// at most one server per tag of that prefix, none of the tags of the
// servers in exclude, and no server without one. Refused, the error says
// why, in nats-server's words.
func (js *JetStream) selectPeers(p placement, n int, exclude []string) ([]string, *APIError) {
	if p.Cluster != "" && p.Cluster != js.srv.ClusterName() {
		return nil, errNoPeers("")
	}
	up := map[string]bool{js.raft.Name(): true}
	for _, n := range js.raft.Stats().LinksUp {
		up[n] = true
	}
	// A server's tags come with its route (this one's are its own).
	tags := map[string][]string{js.raft.Name(): js.srv.Tags()}
	for _, r := range js.srv.Routes() {
		tags[r.Name] = r.Tags
	}
	var why selectError
	load := map[string]int{}
	js.raft.View(func(s *jscluster.State) {
		for name := range s.Servers {
			switch {
			case slices.Contains(exclude, name):
			case !up[name]:
				why.offline = true
			case why.admits(p.Tags, tags[name]):
				load[name] = 0
			}
		}
		for _, sa := range s.Streams {
			for _, p := range sa.Peers {
				if _, ok := load[p]; ok {
					load[p]++
				}
			}
		}
	})
	// The servers that qualify, by load then name; the preferred one
	// first if it qualifies.
	names := slices.SortedFunc(maps.Keys(load), func(a, b string) int {
		return cmp.Or(cmp.Compare(load[a], load[b]), strings.Compare(a, b))
	})
	if p.Preferred != "" {
		i := slices.Index(names, p.Preferred)
		if i < 0 {
			if !up[p.Preferred] {
				why.offline = true
			}
			return nil, errNoPeers(why.String())
		}
		names = append([]string{p.Preferred}, slices.Delete(names, i, i+1)...)
	}
	names = js.uniqueByTag(names, p, exclude, tags, &why)
	if len(names) == 0 || len(names) < n {
		// Too few qualify: why names the servers that are down or whose
		// tags do not match; more replicas than servers gets nats-server's
		// bare 10005.
		return nil, errNoPeers(why.String())
	}
	return names[:max(n, 1)], nil
}

// uniqueByTag keeps, of the servers names in order of preference, the
// first with each value of the unique tag (Options.UniqueTag) that no
// server of exclude (a stream's peers) has, dropping those without one.
// A placement that names a tag of the prefix turns it off, as in
// nats-server.
func (js *JetStream) uniqueByTag(names []string, p placement, exclude []string, tags map[string][]string, why *selectError) []string {
	prefix := js.opts.UniqueTag
	if prefix == "" || slices.ContainsFunc(p.Tags, func(t string) bool {
		return strings.HasPrefix(strings.ToLower(strings.TrimSpace(t)), prefix)
	}) {
		return names
	}
	uniqueOf := func(name string) string {
		for _, t := range tags[name] {
			if strings.HasPrefix(t, prefix) {
				return t
			}
		}
		return ""
	}
	taken := map[string]bool{}
	for _, name := range exclude {
		if u := uniqueOf(name); u != "" {
			taken[u] = true
		}
	}
	kept := names[:0:0]
	for _, name := range names {
		u := uniqueOf(name)
		if u == "" || taken[u] {
			why.unique = true
			continue
		}
		taken[u] = true
		kept = append(kept, name)
	}
	return kept
}

// selectError gathers why servers were passed over, for the error of a
// placement none qualifies for.
type selectError struct {
	offline, excludeTag, unique bool
	missing, excluded           []string
}

// admits reports whether a server with tags qualifies for a placement's
// tags, noting why not.
func (e *selectError) admits(want, tags []string) bool {
	if slices.Contains(tags, excludePlacement) {
		e.excludeTag = true
		return false
	}
	for _, t := range want {
		t = strings.ToLower(strings.TrimSpace(t))
		if x, ok := strings.CutPrefix(t, "!"); ok {
			if slices.Contains(tags, x) {
				e.excluded = appendNew(e.excluded, x)
				return false
			}
		} else if !slices.Contains(tags, t) {
			e.missing = appendNew(e.missing, t)
			return false
		}
	}
	return true
}

func appendNew(list []string, s string) []string {
	if slices.Contains(list, s) {
		return list
	}
	return append(list, s)
}

// String is the reasons part of nats-server's error, in its order.
func (e *selectError) String() string {
	var b strings.Builder
	if e.offline {
		b.WriteString(", peer offline")
	}
	if e.excludeTag {
		b.WriteString(", exclude tag set")
	}
	if e.unique {
		b.WriteString(", server tag not unique")
	}
	for _, l := range []struct {
		what string
		tags []string
	}{{"tags not matched", e.missing}, {"tags excluded", e.excluded}} {
		if len(l.tags) == 0 {
			continue
		}
		quoted := make([]string, len(l.tags))
		for i, t := range slices.Sorted(slices.Values(l.tags)) {
			quoted[i] = "'" + t + "'"
		}
		b.WriteString(", " + l.what + " [" + strings.Join(quoted, ", ") + "]")
	}
	return b.String()
}
