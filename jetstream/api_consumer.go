package jetstream

import (
	"os"
	"strings"

	"github.com/skiffmq/skiff/server"
)

// The consumer half of the API.

type consumerInfoResponse struct {
	apiResponse
	*ConsumerInfo
}

type consumerNamesResponse struct {
	apiResponse
	paged
	Consumers []string `json:"consumers"`
}

type consumerListResponse struct {
	apiResponse
	paged
	Consumers []*ConsumerInfo `json:"consumers"`
}

type createConsumerRequest struct {
	Stream string         `json:"stream_name"`
	Config ConsumerConfig `json:"config"`
	Action string         `json:"action"`
}

// consumerCreate handles the three create forms: legacy ephemeral
// (CREATE.<stream>), legacy durable (DURABLE.CREATE.<stream>.<name>) and
// the current one (CREATE.<stream>.<name>[.<filter>]), with the reference
// server's checks in its order.
func (ja *jsAccount) consumerCreate(streamName, name, filter string, legacyEphemeral, legacyDurable bool, data []byte, pr server.Principal) any {
	r := &consumerInfoResponse{apiResponse: newResponse("consumer_create")}
	var req createConsumerRequest
	if r.Error = ja.js.decode(data, &req); r.Error != nil {
		return r
	}
	if r.Error = unsupportedConsumer(data); r.Error != nil {
		return r
	}
	if legacyEphemeral {
		name = req.Config.Name
	}
	if streamName != req.Stream {
		r.Error = errStreamMismatch()
		return r
	}
	if strings.ContainsAny(name, `\/`) {
		r.Error = apiErr(400, 10127, "Consumer name can not contain path separators")
		return r
	}
	switch {
	case legacyDurable:
		if req.Config.Durable == "" {
			r.Error = apiErr(400, 10018, "consumer expected to be durable but a durable name was not set")
			return r
		}
		if name != req.Config.Durable {
			r.Error = errConsumerDurableMismatch()
			return r
		}
		req.Config.Name = name
	case legacyEphemeral:
		if req.Config.Durable != "" {
			r.Error = apiErr(400, 10020, "consumer expected to be ephemeral but a durable name was set in request")
			return r
		}
	default:
		if req.Config.Durable != "" && name != req.Config.Durable {
			r.Error = errConsumerDurableMismatch()
			return r
		}
		req.Config.Name = name
	}
	if filter != "" && len(req.Config.FilterSubjects) != 0 {
		r.Error = apiErr(400, 10137, "consumer with multiple subject filters cannot use subject based API")
		return r
	}
	if filter != "" && req.Config.FilterSubject != filter {
		r.Error = errConsumerFilterMismatch()
		return r
	}
	if req.Config.Replicas > 1 && ja.js.raft == nil {
		r.Error = apiErr(500, 10074, "replicas > 1 not supported in non-clustered mode")
		return r
	}
	switch req.Action {
	case actionCreateOrUpdate, actionCreate, actionUpdate:
	default:
		r.Error = errBadRequest()
		return r
	}
	st := ja.lookup(streamName)
	if st == nil {
		r.Error = ja.errNoStream(streamName)
		return r
	}
	if r.Error = st.notLeading(); r.Error != nil {
		return r
	}
	info, aerr := st.addConsumer(req.Config, req.Action, pr)
	if aerr != nil {
		r.Error = aerr
		return r
	}
	r.ConsumerInfo = info
	return r
}

func (ja *jsAccount) consumerInfo(streamName, name string) any {
	r := &consumerInfoResponse{apiResponse: newResponse("consumer_info")}
	st := ja.lookup(streamName)
	if st == nil {
		r.Error = ja.errNoStream(streamName)
		return r
	}
	if r.Error = st.notLeading(); r.Error != nil {
		return r
	}
	c := st.consumer(name)
	if c == nil {
		r.Error = errConsumerNotFound()
		if err := st.failure(name); err != nil {
			r.Error = errConsumerFailed(err)
		}
		return r
	}
	r.ConsumerInfo = c.info()
	return r
}

func (ja *jsAccount) consumerDelete(streamName, name string) any {
	r := &successResponse{apiResponse: newResponse("consumer_delete")}
	st := ja.lookup(streamName)
	if st == nil {
		r.Error = ja.errNoStream(streamName)
		return r
	}
	if r.Error = st.notLeading(); r.Error != nil {
		return r
	}
	if st.repl != nil && st.repl.fsm.cons.has(name) {
		r.Error = st.repl.deleteConsumer(name)
		r.Success = r.Error == nil
		return r
	}
	if !st.deleteConsumer(name) {
		if !st.forgetFailed(name) {
			r.Error = errConsumerNotFound()
			return r
		}
		// A consumer that failed at start: its files go now.
		if err := os.RemoveAll(st.consumerDir(name)); err != nil {
			r.Error = errStreamGeneral(err)
			return r
		}
	}
	r.Success = true
	return r
}

func (ja *jsAccount) consumerNames(streamName string, data []byte) any {
	r := &consumerNamesResponse{apiResponse: newResponse("consumer_names"), Consumers: []string{}}
	var req pagedRequest
	st, aerr := ja.streamRequest(streamName, data, &req)
	if aerr == nil {
		aerr = st.notLeading()
	}
	if aerr != nil {
		r.Error = aerr
		return r
	}
	names := st.consumerNames()
	r.paged, names = page(names, req.Offset, namesLimit)
	r.Consumers = append(r.Consumers, names...)
	return r
}

func (ja *jsAccount) consumerList(streamName string, data []byte) any {
	r := &consumerListResponse{apiResponse: newResponse("consumer_list"), Consumers: []*ConsumerInfo{}}
	var req pagedRequest
	st, aerr := ja.streamRequest(streamName, data, &req)
	if aerr == nil {
		aerr = st.notLeading()
	}
	if aerr != nil {
		r.Error = aerr
		return r
	}
	names := st.consumerNames()
	r.paged, names = page(names, req.Offset, listLimit)
	for _, n := range names {
		if c := st.consumer(n); c != nil {
			r.Consumers = append(r.Consumers, c.info())
		}
	}
	return r
}

// consumerNames returns the stream's consumer names, sorted.
func (st *stream) consumerNames() []string {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return sortedKeys(st.mu.consumers)
}
