package jetstream

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/skiffmq/skiff/internal/jscluster"
	"github.com/skiffmq/skiff/server"
)

// $JS.API.META.LEADER.STEPDOWN: a user of the system account has the meta
// leader hand its leadership to another server (`nats server cluster
// step-down`), optionally a preferred one ({"placement":{"preferred":
// NAME}}), as nats-server does. Every server subscribes it in the system
// account, for its own clients; the request goes to the meta leader.

const metaStepdownSubject = apiPrefix + "META.LEADER.STEPDOWN"

// fwdMetaStepdown: the meta leader steps down (Data: the request).
const fwdMetaStepdown = "meta_stepdown"

// subscribeMetaAPI subscribes the system account to the meta group's
// API, on a clustered server with a system account.
func (js *JetStream) subscribeMetaAPI() error {
	sys := js.srv.SystemAccount()
	if js.raft == nil || sys == nil {
		return nil
	}
	_, err := sys.SubscribeInternalLocal(metaStepdownSubject, "", js.handleMetaStepdown)
	return err
}

// handleMetaStepdown hands a stepdown request to the meta leader and
// answers with its answer, off the requester's goroutine.
func (js *JetStream) handleMetaStepdown(m *server.Msg) {
	if m.Reply == "" {
		return
	}
	req := forwardRequest{Op: fwdMetaStepdown, Subject: strings.Clone(strings.TrimPrefix(m.Subject, apiPrefix)), Data: bytes.Clone(m.Data)}
	reply, pr := strings.Clone(m.Reply), m.Principal()
	sys := js.srv.SystemAccount()
	js.wg.Add(1)
	go func() {
		defer js.wg.Done()
		ans, aerr := js.call(toMetaLeader, req)
		body := ans.Data
		if aerr != nil {
			body = errorResponse("meta_leader_stepdown_response", aerr)
		}
		p := sys.NewPublisher()
		p.ActFor(pr)
		p.Publish(reply, "", nil, body)
		p.Flush()
	}()
}

// metaStepdown answers fwdMetaStepdown on the meta leader.
func (js *JetStream) metaStepdown(req forwardRequest) (forwardAnswer, error) {
	if !js.raft.IsLeader() {
		return forwardAnswer{}, errNotMetaLeader
	}
	var body struct {
		Placement *placement `json:"placement"`
	}
	r := &successResponse{apiResponse: newResponse("meta_leader_stepdown")}
	if len(bytes.TrimSpace(req.Data)) > 0 && json.Unmarshal(req.Data, &body) != nil {
		r.Error = apiErr(400, 10025, "invalid JSON")
	} else {
		var preferred string
		if body.Placement != nil {
			preferred = body.Placement.Preferred
		}
		if err := js.raft.StepDown(jscluster.MetaGroup, preferred); err != nil {
			r.Error = apiErr(500, 10041, err.Error())
		} else {
			r.Success = true
		}
	}
	b, err := json.Marshal(r)
	return forwardAnswer{Data: b}, err
}
