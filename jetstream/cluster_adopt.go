package jetstream

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/skiffmq/skiff/internal/jscluster"
)

// Adopting a single server's streams (design 4.1, adoptStreams). A server
// that had streams before it joined a cluster (a store directory of a
// single server) has them without a group: the meta group did not make
// them. Once it runs in the cluster it asks the meta leader to adopt each
// (fwdAdopt): the leader assigns it to this server, as an R1 stream with
// its configuration, unless the cluster has a stream of that name on
// another server or one whose subjects overlap it. Adopted, the stream
// records its group (meta.json) and is the cluster's like any other: any
// server answers for it. Refused, it is closed and marked failed (kept on
// disk, reported, not served: failedstream.go) with the reason; deleting
// it removes its files. While no meta leader answers, this server asks
// again every adoptRetry.

// fwdAdopt: the meta leader adopts a stream of the server From (Data:
// adoptRequest; Subject: the stream's name).
const fwdAdopt = "adopt"

// adoptRetry spaces the tries to reach a meta leader for adoptions.
const adoptRetry = time.Second

// adoptRequest is a stream to adopt: its configuration and creation time.
type adoptRequest struct {
	Config  json.RawMessage `json:"config"`
	Created time.Time       `json:"created"`
}

// adoptAnswer is the leader's answer: the stream's group, or why it was
// refused.
type adoptAnswer struct {
	Group   uint64 `json:"group,omitempty"`
	Refused string `json:"refused,omitempty"`
}

// groupOf returns a stream's group, 0 for none or no stream.
func groupOf(st *stream) uint64 {
	if st == nil {
		return 0
	}
	return st.group.Load()
}

// adoptLoop has the meta leader adopt this server's streams without a
// group, until each is adopted or refused.
func (js *JetStream) adoptLoop() {
	defer js.wg.Done()
	var pending []*stream
	for _, ja := range js.sortedAccounts() {
		for _, st := range ja.streams() {
			if st.group.Load() == 0 {
				pending = append(pending, st)
			}
		}
	}
	for len(pending) > 0 {
		var left []*stream
		for _, st := range pending {
			if !js.adopt(st) {
				left = append(left, st)
			}
		}
		pending = left
		if len(pending) == 0 {
			return
		}
		select {
		case <-js.stop:
			return
		case <-time.After(adoptRetry):
		}
	}
}

// adopt asks the meta leader to adopt st and acts on its answer; it
// reports false if no leader answered.
func (js *JetStream) adopt(st *stream) bool {
	cfg := st.config()
	b, err := json.Marshal(&cfg)
	if err != nil {
		return true // cannot happen: the configuration was read from JSON
	}
	data, err := json.Marshal(adoptRequest{Config: b, Created: st.created})
	if err != nil {
		return true
	}
	ja := st.ja
	ans, aerr := js.call(toMetaLeader, forwardRequest{Op: fwdAdopt, Account: ja.name, Subject: st.name, Data: data, From: js.raft.Name()})
	var a adoptAnswer
	if aerr != nil || json.Unmarshal(ans.Data, &a) != nil {
		js.log.Debug("stream adoption: no meta leader answered; trying again", "account", ja.name, "stream", st.name)
		return false
	}
	if a.Refused != "" {
		ja.refuseAdoption(st, a.Refused)
		return true
	}
	if err := st.setGroup(a.Group); err != nil {
		// Adopted, but not recorded here: the next start asks again and
		// the leader answers with the same group.
		js.log.Warn("adopted stream's group not recorded", "account", ja.name, "stream", st.name, "err", err)
		return true
	}
	js.log.Info("stream adopted by the cluster", "account", ja.name, "stream", st.name, "group", a.Group)
	return true
}

// setGroup records the group of an adopted stream, in meta.json too.
func (st *stream) setGroup(group uint64) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.group.Store(group)
	return writeMeta(filepath.Join(st.dir, metaFile), streamMeta{Config: st.config(), Created: st.created, Group: group, Raft: st.repl != nil})
}

// refuseAdoption closes a stream the cluster would not adopt and marks it
// failed, its files kept.
func (ja *jsAccount) refuseAdoption(st *stream, why string) {
	ja.mu.Lock()
	if ja.mu.streams[st.name] == st {
		delete(ja.mu.streams, st.name)
		ja.unindexSubjectsLocked(st.config().Subjects)
	}
	ja.mu.Unlock()
	if err := st.close(false); err != nil {
		ja.js.log.Warn("stream close", "account", ja.name, "stream", st.name, "err", err)
	}
	ja.failStream(st.name, fmt.Errorf("%w: %s", errNotAdopted, why))
}

// errNotAdopted is why a stream of this server's from before it joined a
// cluster is not served.
var errNotAdopted = errors.New("the cluster did not adopt this server's stream")

// adoptOnLeader answers fwdAdopt on the meta leader: the stream's group,
// assigned to the server that asks if the cluster has no stream of that
// name nor one its subjects overlap.
func (ja *jsAccount) adoptOnLeader(req forwardRequest) (forwardAnswer, error) {
	js, name := ja.js, req.Subject
	if !js.raft.IsLeader() {
		return forwardAnswer{}, errNotMetaLeader
	}
	var ar adoptRequest
	var cfg StreamConfig
	if err := json.Unmarshal(req.Data, &ar); err != nil {
		return forwardAnswer{}, err
	}
	if err := json.Unmarshal(ar.Config, &cfg); err != nil {
		return forwardAnswer{}, err
	}
	answer := func(a adoptAnswer) (forwardAnswer, error) {
		b, err := json.Marshal(a)
		return forwardAnswer{Data: b}, err
	}
	// placed is the answer when the meta state has the stream already.
	placed := func() (adoptAnswer, bool) {
		switch peer, group := js.placement(ja.name, name); {
		case peer == req.From:
			return adoptAnswer{Group: group}, true
		case peer != "":
			return adoptAnswer{Refused: "the cluster has a stream of this name on " + peer}, true
		}
		return adoptAnswer{}, false
	}
	js.assignMu.Lock() // the checks and the assignment are one step (assignNew)
	defer js.assignMu.Unlock()
	if a, ok := placed(); ok {
		return answer(a)
	}
	if ja.overlapsAssigned(name, cfg.Subjects) {
		return answer(adoptAnswer{Refused: "its subjects overlap those of another stream of the cluster"})
	}
	sa := &jscluster.StreamAssignment{Account: ja.name, Name: name, Config: ar.Config, Peers: []string{req.From}, Created: ar.Created}
	if err := js.propose(jscluster.Entry{Op: jscluster.OpAssignStream, Stream: sa}); err != nil && !errors.Is(err, jscluster.ErrStreamExists) {
		return forwardAnswer{}, err
	}
	if a, ok := placed(); ok {
		return answer(a)
	}
	return forwardAnswer{}, errors.New("jetstream: adopted stream not in the meta state")
}
