package jetstream

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"

	"github.com/skiffmq/skiff/server"
)

// The JetStream API is request/reply on $JS.API.> with JSON bodies
// (ADR-1). Requests are copied off the requester's goroutine into a
// bounded queue and answered, in order, by one worker goroutine; pull
// requests, which must be quick, go straight to their consumer. Stream
// creates, updates and deletes, which may take long (a subscription per
// subject, files and fsyncs), go to one of streamWorkers other workers,
// chosen by the stream's name: those of one stream are answered in order,
// and one slow create does not hold up the other requests. Which
// handler and which goroutine answer a subject is one table, apiRoutes
// (api_routes.go).

const apiPrefix = "$JS.API."

// streamWorkers is how many requests about streams (creates, purges,
// consumer creates, ...) may run at once, each worker taking the streams
// whose names hash to it.
const streamWorkers = 4

// apiRequest is a queued API request.
type apiRequest struct {
	ja      *jsAccount // the account it was made in
	subject string     // without the $JS.API. prefix
	reply   string
	data    []byte
	client  *server.ClientInfo // the requester, if the API is audited
	// principal is the requester, whose permissions bound what the
	// server publishes for it (a consumer's deliver subject).
	principal server.Principal
	// local asks for this server's own answer in a cluster, never the
	// meta leader's (cluster_api.go): the meta leader's order to create,
	// update or delete a stream on the server it placed it on.
	local bool
	// done, if set, takes the answer instead of the requester: a request
	// a peer forwarded, whose answer goes back to it.
	done func(replies []apiReply, isErr bool)
	// group is the meta group's for a stream a local create makes.
	group uint64
	// run, if set, is work to do on the stream's worker, in order with
	// its requests, rather than a request (onStreamWorker).
	run func()
}

// apiResponse is the envelope of every API response.
type apiResponse struct {
	Type  string    `json:"type"`
	Error *APIError `json:"error,omitempty"`
}

const typePrefix = "io.nats.jetstream.api.v1."

// handleAPI receives $JS.API.> of the account on the requester's
// goroutine.
func (ja *jsAccount) handleAPI(m *server.Msg) {
	if m.Reply == "" {
		return // nobody to answer, as the reference server
	}
	js := ja.js
	if js.refuseInternal(m) {
		return
	}
	subj := strings.TrimPrefix(m.Subject, apiPrefix)
	route, args := routeAPI(subj)
	if ja.refuseForeign(m, route) {
		return
	}
	if to := ja.clusterTarget(route, args); to != "" {
		ja.forward(m, to)
		return
	}
	if route != nil && route.worker == onRequester {
		route.direct(ja, m, args)
		return
	}
	req := apiRequest{ja: ja, subject: strings.Clone(subj), reply: strings.Clone(m.Reply), data: bytes.Clone(m.Data), principal: m.Principal()}
	if ja.wants(advAPI) {
		req.client = m.Client()
	}
	if !js.enqueue(req, route, args) {
		ja.apiTotal.Add(1)
		ja.apiErrs.Add(1)
		reply := req.reply
		body := errorResponse("system_overloaded", apiErr(503, 10167, "too many requests"))
		pr := req.principal
		m.AfterRead(func(p *server.Publisher) { p.ActFor(pr); p.Publish(reply, "", nil, body) })
	}
}

// enqueue queues req for the worker of its route, and reports whether
// the queue had room.
func (js *JetStream) enqueue(req apiRequest, route *apiRoute, args apiArgs) bool {
	queue := js.apiQueue // an unknown API too: the worker answers no responders
	if route != nil && route.worker == onStreamWorker {
		queue = js.streamQueues[streamWorker(req.ja.name, args[0])]
	}
	select {
	case queue <- req:
		return true
	default:
		return false
	}
}

// onStreamWorker runs f on the worker of a stream's requests, in order
// with them; a second later if its queue is full.
func (js *JetStream) onStreamWorker(ja *jsAccount, name string, f func()) {
	select {
	case js.streamQueues[streamWorker(ja.name, name)] <- apiRequest{ja: ja, run: f}:
	default:
		time.AfterFunc(time.Second, func() {
			if !js.closed.Load() {
				js.onStreamWorker(ja, name, f)
			}
		})
	}
}

// handleNext queues a pull request on its consumer.
func (ja *jsAccount) handleNext(rest string, m *server.Msg) {
	if ja.pull(rest, strings.Clone(m.Reply), bytes.Clone(m.Data), m.Principal()) {
		return
	}
	// The reference server has no subscription for a missing consumer:
	// the requester sees no responders.
	reply := strings.Clone(m.Reply)
	m.AfterRead(func(p *server.Publisher) { status(p, reply, 503, "") })
}

// pull queues a pull request (rest: <stream>.<consumer>) on its consumer,
// and reports whether the consumer exists.
func (ja *jsAccount) pull(rest, reply string, body []byte, pr server.Principal) bool {
	stream, name, ok := strings.Cut(rest, ".")
	return ok && !strings.Contains(name, ".") && ja.toConsumer(stream, name, func(c *consumer) {
		c.in.reqs = append(c.in.reqs, pullMsg{reply: reply, body: body, at: time.Now(), principal: pr})
	})
}

// streamWorker returns the stream worker of a stream: its account's and
// its name's hash, so that the requests about one stream (account,
// stream) are answered in order.
func streamWorker(account, stream string) uint32 {
	h := nameHash(2166136261, account)
	h *= 16777619 // the separator, byte 0, which no name has (its xor leaves h)
	return nameHash(h, stream) % streamWorkers
}

// nameHash is FNV-1a from h over name.
func nameHash(h uint32, name string) uint32 {
	for i := 0; i < len(name); i++ {
		h = (h ^ uint32(name[i])) * 16777619
	}
	return h
}

// apiWorker answers the API requests of queue until Close.
func (js *JetStream) apiWorker(queue chan apiRequest) {
	defer js.wg.Done()
	// A publisher per account: answers and advisories go into the
	// account of the request.
	pubs := map[*jsAccount]*server.Publisher{}
	for {
		select {
		case <-js.stop:
			return
		case req := <-queue:
			if req.run != nil {
				req.run()
				continue
			}
			ja := req.ja
			pub := pubs[ja]
			if pub == nil {
				pub = ja.acc.NewPublisher()
				pubs[ja] = pub
			}
			replies, isErr := ja.dispatch(&req)
			// Counted once answered, as the reference server: INFO's
			// api.total counts the requests before it. Pull requests
			// (CONSUMER.MSG.NEXT) go to their consumer and are not API
			// requests there either.
			ja.apiTotal.Add(1)
			if isErr {
				ja.apiErrs.Add(1)
			}
			if req.client != nil && audited(&req, replies, isErr) {
				ja.audit(&req, replies[0].body)
			}
			if req.done != nil {
				req.done(replies, isErr)
				ja.publishAdvisories(pub)
				pub.Flush()
				continue
			}
			pub.ActFor(req.principal)
			for _, r := range replies {
				pub.Publish(req.reply, "", r.hdr, r.body)
			}
			ja.publishAdvisories(pub)
			pub.Flush()
		}
	}
}

// audited says whether an answered request has an audit advisory: every
// JSON answer but a message read (STREAM.MSG.GET that found its message;
// DIRECT.GET answers with messages), which the reference server leaves
// out, reads being frequent.
func audited(req *apiRequest, replies []apiReply, isErr bool) bool {
	if len(replies) != 1 || replies[0].hdr != nil {
		return false
	}
	return isErr || !strings.HasPrefix(req.subject, "STREAM.MSG.GET.")
}

// audit queues the API audit advisory of an answered request.
func (ja *jsAccount) audit(req *apiRequest, response []byte) {
	js := ja.js
	ja.advise(advAPI, func() any {
		return apiAudit{
			typedEvent: newEvent("api_audit"), Server: js.srv.Name(), Client: req.client,
			Subject: apiPrefix + req.subject, Request: string(req.data), Response: string(response),
		}
	})
}

// apiReply is an answer: JSON, or for DIRECT.GET messages with headers.
type apiReply struct {
	hdr  []byte
	body []byte
}

// dispatch answers a request with its route's handler.
func (ja *jsAccount) dispatch(req *apiRequest) ([]apiReply, bool) {
	var v any
	if route, args := routeAPI(req.subject); route != nil && route.answer != nil {
		if route.meta != nil && ja.js.raft != nil && !req.local {
			v = route.meta(ja, *req, args)
		} else {
			v = route.answer(ja, *req, args)
		}
	}
	if replies, ok := v.([]apiReply); ok {
		return replies, false // DIRECT.GET's messages
	}
	if f, ok := v.(forwarded); ok {
		return f.replies, f.isErr // another server's answer
	}
	if _, ok := v.(noAnswer); ok {
		return nil, false
	}
	if v == nil {
		// Not an API the reference server has: it would not answer, so
		// the requester sees no responders.
		hb := headerBuilder{}
		return []apiReply{{hdr: hb.status(503, "").bytes()}}, true
	}
	if e, ok := v.(errorer); ok && e.apiError() != nil {
		// Only the type and the error: the published schemas have an
		// answer be either a success or an error, never both, so an
		// error answer carries none of the success fields (not even a
		// false "success").
		r := e.response()
		v = &r
	}
	body, err := jsonMarshal(v)
	if err != nil {
		body = errorResponse("system_response", errStreamGeneral(err))
	}
	return []apiReply{{body: body}}, hasError(v)
}

// noAnswer is the answer to a request the reference server leaves
// unanswered (its subscription for it does not exist).
type noAnswer struct{}

// errorer is every response: its envelope, and its error if any.
type errorer interface {
	apiError() *APIError
	response() apiResponse
}

// hasError reports whether a response carries an error.
func hasError(v any) bool {
	if e, ok := v.(errorer); ok {
		return e.apiError() != nil
	}
	return false
}

func (r *apiResponse) apiError() *APIError { return r.Error }

func (r *apiResponse) response() apiResponse { return *r }

// errorResponse is a response with only an error.
func errorResponse(kind string, e *APIError) []byte {
	b, _ := jsonMarshal(apiResponse{Type: typePrefix + kind, Error: e})
	return b
}

func newResponse(kind string) apiResponse { return apiResponse{Type: typePrefix + kind + "_response"} }

// streamRequest decodes a request about the stream name into req and
// returns the stream.
func (ja *jsAccount) streamRequest(name string, data []byte, req any) (*stream, *APIError) {
	if err := ja.js.decode(data, req); err != nil {
		return nil, err
	}
	st := ja.lookup(name)
	if st == nil {
		return nil, ja.errNoStream(name)
	}
	return st, nil
}

// decode reads a request body into v; an empty body leaves v as it is.
// Strict (the default, as nats-server's `strict: true`), a field the
// request type does not have is an error, unless it is one of the
// reference server's that Skiff refuses by name when it is set (see
// unsupported.go), which the caller checks next.
func (js *JetStream) decode(data []byte, v any) *APIError {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	// A decoder, as the reference server uses: its errors read the same.
	dec := json.NewDecoder(bytes.NewReader(data))
	if !js.opts.Lenient {
		dec.DisallowUnknownFields()
	}
	err := dec.Decode(v)
	if err != nil && !js.opts.Lenient {
		if f, ok := unknownField(err); ok && passStrict[f] {
			err = json.NewDecoder(bytes.NewReader(data)).Decode(v)
		}
	}
	if err != nil {
		return errInvalidJSON(err)
	}
	return nil
}

// unknownField returns the field an encoding/json unknown-field error
// names.
func unknownField(err error) (string, bool) {
	rest, ok := strings.CutPrefix(err.Error(), `json: unknown field "`)
	if !ok {
		return "", false
	}
	f, _, ok := strings.Cut(rest, `"`)
	return f, ok
}

// accountInfoResponse answers $JS.API.INFO.
type accountInfoResponse struct {
	apiResponse
	Memory          uint64        `json:"memory"`
	Storage         uint64        `json:"storage"`
	ReservedMemory  uint64        `json:"reserved_memory"`
	ReservedStorage uint64        `json:"reserved_storage"`
	Streams         int           `json:"streams"`
	Consumers       int           `json:"consumers"`
	Limits          accountLimits `json:"limits"`
	API             apiStats      `json:"api"`
}

type accountLimits struct {
	MaxMemory            int64 `json:"max_memory"`
	MaxStorage           int64 `json:"max_storage"`
	MaxStreams           int   `json:"max_streams"`
	MaxConsumers         int   `json:"max_consumers"`
	MaxAckPending        int   `json:"max_ack_pending"`
	MemoryMaxStreamBytes int64 `json:"memory_max_stream_bytes"`
	StorageMaxStreamByte int64 `json:"storage_max_stream_bytes"`
	MaxBytesRequired     bool  `json:"max_bytes_required"`
}

type apiStats struct {
	Level  int    `json:"level"`
	Total  uint64 `json:"total"`
	Errors uint64 `json:"errors"`
}

// APILevel is the JetStream API level Skiff claims (ADR-44): clients gate
// features on it. Level 1 is nats-server 2.11's: per-message TTLs, subject
// delete markers and consumer pauses, which Skiff has, and priority groups,
// which it refuses by name. Level 2 (counters, batches, schedules) it does
// not have.
const APILevel = 1

// usage sums what streams hold, for $JS.API.INFO and /jsz.
type usage struct {
	memory, storage, msgs uint64 // bytes in memory and file streams; messages
	// reserved: the max_bytes memory and file streams reserve.
	reservedMemory, reservedStorage uint64
	streams, consumers              int
}

func (u *usage) add(o usage) {
	u.memory += o.memory
	u.storage += o.storage
	u.msgs += o.msgs
	u.reservedMemory += o.reservedMemory
	u.reservedStorage += o.reservedStorage
	u.streams += o.streams
	u.consumers += o.consumers
}

// usage sums what the account's streams hold.
func (ja *jsAccount) usage() usage {
	streams := ja.streams()
	u := usage{streams: len(streams)}
	for _, st := range streams {
		s := st.store.State()
		cfg := st.config()
		if cfg.Storage == MemoryStorage {
			u.memory += s.Bytes
		} else {
			u.storage += s.Bytes
		}
		if cfg.MaxBytes > 0 {
			if cfg.Storage == MemoryStorage {
				u.reservedMemory += uint64(cfg.MaxBytes)
			} else {
				u.reservedStorage += uint64(cfg.MaxBytes)
			}
		}
		u.msgs += s.Msgs
		u.consumers += st.numConsumers()
	}
	return u
}

func (ja *jsAccount) apiStats() apiStats {
	return apiStats{Level: APILevel, Total: ja.apiTotal.Load(), Errors: ja.apiErrs.Load()}
}

// apiStats sums every account's API counters.
func (js *JetStream) apiStats() apiStats {
	s := apiStats{Level: APILevel}
	for _, ja := range js.sortedAccounts() {
		s.Total += ja.apiTotal.Load()
		s.Errors += ja.apiErrs.Load()
	}
	return s
}

// accountInfo answers $JS.API.INFO: the account's usage, limits and API
// counters. A limit the account does not set is -1 (none), as in
// nats-server, but for the number of streams, of consumers and the
// max_ack_pending a consumer may ask for, where the server's bound is
// given: Skiff has those bounds server-wide and nats-server does not.
func (ja *jsAccount) accountInfo() *accountInfoResponse {
	r := &accountInfoResponse{apiResponse: newResponse("account_info")}
	u := ja.usage()
	r.Memory, r.Storage, r.Streams, r.Consumers = u.memory, u.storage, u.streams, u.consumers
	r.ReservedMemory, r.ReservedStorage = u.reservedMemory, u.reservedStorage
	l, o := *ja.lim(), ja.js.opts
	or := func(n, server int) int {
		if n == noLimit {
			return server
		}
		return n
	}
	r.Limits = accountLimits{
		MaxMemory: l.maxMemory, MaxStorage: l.maxStore,
		MaxStreams: or(l.maxStreams, o.MaxStreams), MaxConsumers: or(l.maxConsumers, o.MaxConsumers),
		MaxAckPending: or(l.maxAckPend, MaxAckPendingLimit), MemoryMaxStreamBytes: l.memMaxStreamBytes,
		StorageMaxStreamByte: l.storeMaxStreamBytes, MaxBytesRequired: l.maxBytesRequired,
	}
	r.API = ja.apiStats()
	return r
}
