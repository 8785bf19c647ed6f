package jetstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/skiffmq/skiff/internal/jscluster"
	"github.com/skiffmq/skiff/server"
)

// The JetStream API in a cluster (design 5, over raft links).
//
// Every server subscribes $JS.API.> for its own clients only
// (SubscribeInternalLocal), so a request reaches one server, which
// answers it or hands it to the server that can (apiRoute.target): the
// meta leader for stream creates, updates, deletes, listings and the
// account's info; the server a stream is placed on for the rest, pull
// requests included. A request goes over the raft link between the two
// servers (jscluster.Call) with its account and the name of its user, and
// the target answers it as it answers its own clients, acting for that
// user (Account.PrincipalOf). The answer comes back over the link and the
// requester's server publishes it to the reply subject, acting for the
// requester: the reply is never routed ahead of the interest in it. Raft
// links join only the servers of one cluster, which authenticated each
// other on the cluster listener, so a forwarded request is always a
// server's, never a client's: a client cannot claim to be another user.
//
// A pull request's messages are published by the consumer's server to the
// request's reply subject, and reach the requester by its interest, as a
// consumer's deliveries do. The interest travels on the route, the request
// on the raft link: the requester's server flushes the route to the
// consumer's (Server.FlushRoute) before it forwards the request, so the
// interest is known there before the first message is published.

// Kinds of forwarded requests.
const (
	// fwdAPI: answer as this server answers its own clients (forwarding
	// again if another server should answer, at most maxHops times).
	fwdAPI = "api"
	// fwdLocal: answer with this server's own streams: the meta leader's
	// order to create, update or delete a stream on the server it placed
	// it on.
	fwdLocal = "local"
	// fwdList: the info of the account's streams on this server.
	fwdList = "list"
	// fwdUsage: what the account's streams on this server hold.
	fwdUsage = "usage"
)

const (
	// forwardTimeout bounds a forwarded request, from the requester's
	// server to the answer.
	forwardTimeout = 10 * time.Second
	// leaderWait is how long a request for the meta leader tries to reach
	// one (none known, or the one known gone) before it is answered 10008.
	leaderWait = 5 * time.Second
	// leaderRetry spaces those tries.
	leaderRetry = 20 * time.Millisecond
	// maxHops bounds how often a request is forwarded again (the target
	// it was sent to learned of another since).
	maxHops = 2
	// maxForwards bounds the requests a server forwards at once; past it
	// requests are refused as too many (503, 10167).
	maxForwards = 1024
	// toMetaLeader is the target of a request for a meta leader this
	// server does not know yet.
	toMetaLeader = "\x00meta"
)

// forwardRequest is a request one server hands another.
type forwardRequest struct {
	Op      string `json:"op"`
	Account string `json:"account"`
	// User is the requester's user ("" without one), a user of
	// UserAccount if set, else of Account.
	User        string `json:"user,omitempty"`
	UserAccount string `json:"user_account,omitempty"`
	Subject     string `json:"subject"` // after $JS.API.
	Reply       string `json:"reply,omitempty"`
	Data        []byte `json:"data,omitempty"`
	Hops        int    `json:"hops,omitempty"`
	// Group is the meta group's for the stream a fwdLocal create makes.
	Group uint64 `json:"group,omitempty"`
	// From is the server that asks, for fwdAdopt.
	From string `json:"from,omitempty"`
	// Client is the requester, for the API audit advisory the server
	// that answers a fwdAPI request sends, if the account has interest.
	Client *server.ClientInfo `json:"client,omitempty"`
}

// forwardAnswer is its answer: what to publish to the reply subject, or
// for fwdList and fwdUsage the data asked for.
type forwardAnswer struct {
	Replies []fwdReply `json:"replies,omitempty"`
	IsErr   bool       `json:"is_err,omitempty"`
	Data    []byte     `json:"data,omitempty"`
}

type fwdReply struct {
	Hdr  []byte `json:"hdr,omitempty"`
	Body []byte `json:"body,omitempty"`
}

// forwarded is another server's answer, published as it is.
type forwarded struct {
	replies []apiReply
	isErr   bool
}

func (a forwardAnswer) forwarded() forwarded {
	f := forwarded{isErr: a.IsErr}
	for _, r := range a.Replies {
		f.replies = append(f.replies, apiReply{hdr: r.Hdr, body: r.Body})
	}
	return f
}

func answerOf(replies []apiReply, isErr bool) forwardAnswer {
	a := forwardAnswer{IsErr: isErr}
	for _, r := range replies {
		a.Replies = append(a.Replies, fwdReply{Hdr: r.hdr, Body: r.body})
	}
	return a
}

func errClusterUnavailable() *APIError {
	return apiErr(503, 10008, "JetStream system temporarily unavailable")
}

// clusterTarget returns the server that answers a request of route in a
// cluster, if it is not this one ("" to answer here; toMetaLeader for a
// meta leader not known yet).
func (ja *jsAccount) clusterTarget(route *apiRoute, args apiArgs) string {
	c := ja.js.raft
	if c == nil || route == nil {
		return ""
	}
	switch route.target {
	case targetMeta:
		if c.IsLeader() {
			return ""
		}
		return toMetaLeader
	case targetStream:
		stream, _, _ := strings.Cut(args[0], ".")
		switch peer := ja.js.placedOn(ja.name, stream); {
		case peer != "" && peer != c.Name():
			return peer
		case peer == "" && route.worker != onRequester && !c.IsLeader() && !ja.hasOwn(stream):
			// This server may not have applied the stream's assignment
			// yet (it was just created through another): the meta
			// leader, which has, answers or hands the request on.
			return toMetaLeader
		}
	}
	return ""
}

// hasOwn reports whether this server has a stream of the account that the
// meta group did not place (one to adopt, or failed at start), which it
// answers for itself.
func (ja *jsAccount) hasOwn(stream string) bool {
	return ja.lookup(stream) != nil || ja.streamFailure(stream) != nil
}

// placedOn returns the server the meta group placed a stream on, "" if it
// placed it nowhere.
func (js *JetStream) placedOn(account, stream string) string {
	peer, _ := js.placement(account, stream)
	return peer
}

// placement returns the server the meta group placed a stream on ("" if
// it placed it nowhere) and the stream's group.
func (js *JetStream) placement(account, stream string) (peer string, group uint64) {
	var replicated bool
	js.raft.View(func(s *jscluster.State) {
		if sa := s.Streams[jscluster.StreamKey{Account: account, Name: stream}]; sa != nil && len(sa.Peers) > 0 {
			peer, group, replicated = sa.Peers[0], sa.Group, sa.HasGroup()
		}
	})
	if replicated {
		// The group's leader answers, if this server, a replica, knows
		// it; else the first peer, which hands the request on to it.
		if ja := js.account(account); ja != nil {
			if st := ja.lookup(stream); st != nil && st.repl != nil {
				if l := st.repl.leaderName(); l != "" {
					peer = l
				}
			}
		}
	}
	return peer, group
}

// forward hands a client's request to the server `to` and publishes its
// answer, on a goroutine of its own.
func (ja *jsAccount) forward(m *server.Msg, to string) {
	js := ja.js
	pr := m.Principal()
	req := forwardRequest{Op: fwdAPI, Account: ja.name, User: pr.User(),
		Subject: strings.Clone(strings.TrimPrefix(m.Subject, apiPrefix)), Reply: strings.Clone(m.Reply), Data: bytes.Clone(m.Data)}
	if a := pr.Account(); a != nil && a != ja.acc {
		req.UserAccount = a.Name()
	}
	if ja.wants(advAPI) {
		req.Client = m.Client()
	}
	route, _ := routeAPI(req.Subject)
	select {
	case js.forwards <- struct{}{}:
	default:
		ja.apiTotal.Add(1)
		ja.apiErrs.Add(1)
		reply, body := req.Reply, errorResponse("system_overloaded", apiErr(503, 10167, "too many requests"))
		m.AfterRead(func(p *server.Publisher) { p.ActFor(pr); p.Publish(reply, "", nil, body) })
		return
	}
	go func() {
		defer func() { <-js.forwards }()
		if route != nil && route.worker == onRequester && to != toMetaLeader {
			// The target publishes a pull request's messages to its reply
			// subject itself: it must know of the interest in it first.
			ctx, cancel := context.WithTimeout(context.Background(), forwardTimeout)
			if err := js.srv.FlushRoute(ctx, to); err != nil {
				js.log.Debug("route flush before a forwarded pull request", "to", to, "err", err)
			}
			cancel()
		}
		ans, aerr := js.call(to, req)
		pub := ja.acc.NewPublisher()
		if aerr != nil {
			// No server answered: this one does, and audits its answer.
			ja.apiTotal.Add(1)
			ja.apiErrs.Add(1)
			ans = failedAnswer(route, aerr)
			if req.Client != nil && len(ans.Replies) == 1 && ans.Replies[0].Hdr == nil {
				ja.audit(&apiRequest{subject: req.Subject, data: req.Data, client: req.Client}, ans.Replies[0].Body)
				ja.publishAdvisories(pub)
			}
		}
		pub.ActFor(pr)
		for _, r := range ans.Replies {
			pub.Publish(req.Reply, "", r.Hdr, r.Body)
		}
		pub.Flush()
	}()
}

// failedAnswer is the answer to a request no server could answer: the
// route's error response, or no responders where it answers no JSON.
func failedAnswer(route *apiRoute, aerr *APIError) forwardAnswer {
	switch {
	case route == nil || route.kind == "" || route.worker == onRequester:
		hb := headerBuilder{}
		return forwardAnswer{Replies: []fwdReply{{Hdr: hb.status(503, "").bytes()}}, IsErr: true}
	case route.kind == unanswered:
		return forwardAnswer{IsErr: true}
	}
	return forwardAnswer{Replies: []fwdReply{{Body: errorResponse(route.kind+"_response", aerr)}}, IsErr: true}
}

// call has the server `to` (toMetaLeader: the meta leader) answer req,
// this one included.
func (js *JetStream) call(to string, req forwardRequest) (forwardAnswer, *APIError) {
	ctx, cancel := context.WithTimeout(context.Background(), forwardTimeout)
	defer cancel()
	if to == toMetaLeader {
		return js.callMetaLeader(ctx, req)
	}
	return js.callServer(ctx, to, req)
}

// callMetaLeader has the meta leader answer req: the one this server
// knows, tried again while none is known, or the one known is gone or no
// longer leads, for up to leaderWait.
func (js *JetStream) callMetaLeader(ctx context.Context, req forwardRequest) (forwardAnswer, *APIError) {
	ctx, cancel := context.WithTimeout(ctx, leaderWait)
	defer cancel()
	t := time.NewTicker(leaderRetry)
	defer t.Stop()
	for {
		if name, _ := js.raft.Leader(); name != "" {
			if ans, aerr := js.callServer(ctx, name, req); aerr == nil {
				return ans, nil
			}
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return forwardAnswer{}, errClusterUnavailable()
		case <-js.stop:
			return forwardAnswer{}, errClusterUnavailable()
		}
	}
}

// callServer has the server `to` answer req.
func (js *JetStream) callServer(ctx context.Context, to string, req forwardRequest) (forwardAnswer, *APIError) {
	if to == js.raft.Name() {
		ans, err := js.answerForward(req)
		if err != nil {
			return forwardAnswer{}, errClusterUnavailable()
		}
		return ans, nil
	}
	body, err := json.Marshal(&req)
	if err != nil {
		return forwardAnswer{}, errStreamGeneral(err)
	}
	out, err := js.callRetrying(ctx, to, body)
	if err != nil {
		js.log.Debug("forwarded API request failed", "to", to, "subject", req.Subject, "err", err)
		return forwardAnswer{}, errClusterUnavailable()
	}
	var ans forwardAnswer
	if err := json.Unmarshal(out, &ans); err != nil {
		return forwardAnswer{}, errClusterUnavailable()
	}
	return ans, nil
}

// callRetrying calls the server `to`, sending again while the request
// could not be sent but the server's route is up (its raft link is still
// being dialled after a restart), for up to leaderWait. A request that
// was sent is never sent twice; a server with no route is down: the call
// fails at once.
func (js *JetStream) callRetrying(ctx context.Context, to string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, leaderWait)
	defer cancel()
	for {
		out, err := js.raft.Call(ctx, to, body)
		if err == nil || !errors.Is(err, jscluster.ErrNotSent) || !js.routeUp(to) {
			return out, err
		}
		select {
		case <-time.After(leaderRetry):
		case <-ctx.Done():
			return nil, err
		case <-js.stop:
			return nil, err
		}
	}
}

// routeUp reports whether this server has a route to the server `name`.
func (js *JetStream) routeUp(name string) bool {
	for _, r := range js.srv.Routes() {
		if r.Name == name {
			return true
		}
	}
	return false
}

// handleCall answers a peer's forwarded request (jscluster.CallHandler).
func (js *JetStream) handleCall(from string, body []byte) ([]byte, error) {
	if len(body) > 0 && body[0] == catchupMagic {
		return js.answerCatchup(body)
	}
	var req forwardRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, err
	}
	if req.Op == fwdUsageReport {
		return nil, js.usageReported(from, req.Data)
	}
	ans, err := js.answerForward(req)
	if err != nil {
		return nil, err
	}
	return json.Marshal(&ans)
}

// Errors of forwarded requests, told back to the server that forwarded
// them.
var (
	// errNoAccount: the request's account has no JetStream here (the
	// servers' configurations differ).
	errNoAccount = errors.New("jetstream: no such JetStream account on this server")
	// errNotMetaLeader: a request for the meta leader reached a server
	// that no longer leads; the sender tries the one it learns of next.
	errNotMetaLeader = errors.New("jetstream: not the meta leader")
)

// answerForward answers a forwarded request as this server answers its
// clients', acting for the requester's user.
func (js *JetStream) answerForward(req forwardRequest) (forwardAnswer, error) {
	if req.Op == fwdMetaStepdown {
		return js.metaStepdown(req)
	}
	ja := js.account(req.Account)
	if ja == nil {
		return forwardAnswer{}, errNoAccount
	}
	switch req.Op {
	case fwdMembers:
		return ja.localMembers(req.Subject)
	case fwdList:
		return ja.localList(string(req.Data))
	case fwdUsage:
		return ja.localUsage()
	case fwdAdopt:
		return ja.adoptOnLeader(req)
	}
	acc := ja.acc
	if req.UserAccount != "" {
		a, ok := js.srv.LookupAccount(req.UserAccount)
		if !ok {
			return forwardAnswer{}, errNoAccount
		}
		acc = a
	}
	pr := acc.PrincipalOf(req.User)
	route, args := routeAPI(req.Subject)
	if req.Op == fwdAPI && route != nil && route.target == targetMeta && !js.raft.IsLeader() {
		return forwardAnswer{}, errNotMetaLeader
	}
	if req.Op == fwdAPI && req.Hops < maxHops {
		if to := ja.clusterTarget(route, args); to != "" {
			req.Hops++
			ans, aerr := js.call(to, req)
			if aerr != nil {
				return failedAnswer(route, aerr), nil
			}
			return ans, nil
		}
	}
	if route != nil && route.worker == onRequester {
		if ja.pull(args[0], req.Reply, req.Data, pr) {
			return forwardAnswer{}, nil
		}
		return failedAnswer(route, nil), nil
	}
	ch := make(chan forwardAnswer, 1)
	areq := apiRequest{ja: ja, subject: req.Subject, reply: req.Reply, data: req.Data, principal: pr,
		local: req.Op == fwdLocal, group: req.Group, done: func(replies []apiReply, isErr bool) { ch <- answerOf(replies, isErr) }}
	if req.Op == fwdAPI {
		areq.client = req.Client // audited here, where it is answered
	}
	if !js.enqueue(areq, route, args) {
		ja.apiTotal.Add(1)
		ja.apiErrs.Add(1)
		return failedAnswer(route, apiErr(503, 10167, "too many requests")), nil
	}
	select {
	case a := <-ch:
		return a, nil
	case <-time.After(forwardTimeout):
		return forwardAnswer{}, errors.New("jetstream: no answer in time")
	case <-js.stop:
		return forwardAnswer{}, ErrClosed
	}
}

// runOn answers req with the plain (single server) handler of its route on
// the server `on`: this one, on this goroutine (the stream's worker), or a
// peer, through its queues.
func (ja *jsAccount) runOn(on string, req apiRequest) any {
	js := ja.js
	route, args := routeAPI(req.subject)
	if on == js.raft.Name() {
		if route == nil || route.answer == nil {
			return nil
		}
		return route.answer(ja, req, args)
	}
	fr := forwardRequest{Op: fwdLocal, Account: ja.name, User: req.principal.User(), Subject: req.subject,
		Reply: req.reply, Data: req.data, Group: req.group}
	if a := req.principal.Account(); a != nil && a != ja.acc {
		fr.UserAccount = a.Name()
	}
	ans, aerr := js.call(on, fr)
	if aerr != nil {
		return failedAnswer(route, aerr).forwarded()
	}
	return ans.forwarded()
}

// answerIsErr reports whether an answer (a response or another server's)
// is an error.
func answerIsErr(v any) bool {
	if f, ok := v.(forwarded); ok {
		return f.isErr
	}
	return hasError(v)
}

// assignmentOf returns a copy of a stream's assignment in the meta state
// (nil if it has none).
func (js *JetStream) assignmentOf(account, stream string) *jscluster.StreamAssignment {
	var out *jscluster.StreamAssignment
	js.raft.View(func(s *jscluster.State) {
		if sa := s.Streams[jscluster.StreamKey{Account: account, Name: stream}]; sa != nil {
			c := *sa
			c.Peers = slices.Clone(sa.Peers)
			c.Config = slices.Clone(sa.Config)
			out = &c
		}
	})
	return out
}

// peersOf returns the servers the meta group placed a stream on, the
// preferred leader first (nil if it placed it nowhere).
func (js *JetStream) peersOf(account, stream string) []string {
	var peers []string
	js.raft.View(func(s *jscluster.State) {
		if sa := s.Streams[jscluster.StreamKey{Account: account, Name: stream}]; sa != nil {
			peers = append(peers, sa.Peers...)
		}
	})
	return peers
}
