package jetstream

import (
	"strings"

	"github.com/skiffmq/skiff/server"
)

// apiWorker says which goroutine handles a route's requests.
type apiWorker uint8

const (
	// onAPIWorker: the API worker, in arrival order.
	onAPIWorker apiWorker = iota
	// onStreamWorker: the stream worker chosen by the stream's name (the
	// route's first capture), so that the requests about one stream are
	// answered in order and a slow one (a create on a slow disk, a purge
	// of a large stream) holds up only the streams that share its worker,
	// never the account-wide APIs.
	onStreamWorker
	// onRequester: at once, on the requester's goroutine, unqueued and
	// not counted as an API request (pull requests, which must be quick).
	onRequester
)

// apiArgs are what a route's pattern captured: the token each "*" matched,
// in order, then the tokens ">" matched, joined by dots; "" where there
// is nothing.
type apiArgs [3]string

// apiRoute is one API: the subjects it answers, the goroutine that
// answers them and how.
type apiRoute struct {
	toks   []string // the subject pattern after $JS.API., by token
	worker apiWorker
	// kind names the route's response type (kind + "_response"), for
	// the answer of an account without JetStream; "" where nats-server
	// has no subscription there (the requester sees no responders), and
	// unanswered where nats-server leaves the request without an answer.
	kind string
	// answer builds the answer of a queued request (onAPIWorker,
	// onStreamWorker): a JSON response, noAnswer, or, for DIRECT.GET,
	// the []apiReply to publish.
	answer func(ja *jsAccount, req apiRequest, a apiArgs) any
	// direct handles a request onRequester.
	direct func(ja *jsAccount, m *server.Msg, a apiArgs)
	// target is the server of a cluster that answers the route
	// (cluster_api.go), and meta, if set, the meta leader's answer in a
	// cluster, in place of answer.
	target apiTarget
	meta   func(ja *jsAccount, req apiRequest, a apiArgs) any
}

// apiTarget says which server of a cluster answers a route; the others
// forward its requests there (cluster_api.go). Outside a cluster every
// server answers its own.
type apiTarget uint8

const (
	// targetHere: the server the request reached.
	targetHere apiTarget = iota
	// targetMeta: the meta leader (stream creates, updates, deletes and
	// listings, the account's info).
	targetMeta
	// targetStream: the server the stream is placed on (the route's first
	// capture, up to its first dot).
	targetStream
)

// on sets the route's target.
func (r apiRoute) on(t apiTarget) apiRoute {
	r.target = t
	return r
}

// metaAnswers are the meta leader's answers in a cluster, by route
// pattern: apiRoutes gets them at init, since they forward requests
// through apiRoutes themselves.
var metaAnswers = map[string]func(*jsAccount, apiRequest, apiArgs) any{
	"INFO":            (*jsAccount).clusterAccountInfo,
	"STREAM.CREATE.*": (*jsAccount).clusterStreamCreate,
	"STREAM.UPDATE.*": (*jsAccount).clusterStreamUpdate,
	"STREAM.DELETE.*": (*jsAccount).clusterStreamDelete,
	"STREAM.NAMES":    (*jsAccount).clusterStreamNames,
	"STREAM.LIST":     (*jsAccount).clusterStreamList,

	"STREAM.PEER.REMOVE.*": (*jsAccount).clusterStreamPeerRemove,
}

func init() {
	for i := range apiRoutes {
		if f := metaAnswers[strings.Join(apiRoutes[i].toks, ".")]; f != nil {
			apiRoutes[i].meta = f
		}
	}
}

// apiRoutes are the APIs the server answers, by subject after $JS.API.:
// "*" is any one token (an empty one too) and a final ">" one or more. No
// subject matches two routes; one that matches none is not an API the
// reference server has, and is answered with no responders.
var apiRoutes = []apiRoute{
	requester("CONSUMER.MSG.NEXT.>", func(ja *jsAccount, m *server.Msg, a apiArgs) { ja.handleNext(a[0], m) }).on(targetStream),

	queued("INFO", "account_info", onAPIWorker, func(ja *jsAccount, _ apiRequest, _ apiArgs) any { return ja.accountInfo() }).on(targetMeta),

	queued("STREAM.CREATE.*", "stream_create", onStreamWorker, func(ja *jsAccount, r apiRequest, a apiArgs) any { return ja.streamCreate(a[0], r.data, r.group) }).on(targetMeta),
	queued("STREAM.UPDATE.*", "stream_update", onStreamWorker, func(ja *jsAccount, r apiRequest, a apiArgs) any { return ja.streamUpdate(a[0], r.data) }).on(targetMeta),
	queued("STREAM.DELETE.*", "stream_delete", onStreamWorker, func(ja *jsAccount, _ apiRequest, a apiArgs) any { return ja.streamDelete(a[0]) }).on(targetMeta),
	queued("STREAM.INFO.*", "stream_info", onStreamWorker, func(ja *jsAccount, r apiRequest, a apiArgs) any { return ja.streamInfo(a[0], r.data) }).on(targetStream),
	queued("STREAM.PURGE.*", "stream_purge", onStreamWorker, func(ja *jsAccount, r apiRequest, a apiArgs) any { return ja.streamPurge(a[0], r.data) }).on(targetStream),
	queued("STREAM.NAMES", "stream_names", onAPIWorker, func(ja *jsAccount, r apiRequest, _ apiArgs) any { return ja.streamNames(r.data) }).on(targetMeta),
	queued("STREAM.LIST", "stream_list", onAPIWorker, func(ja *jsAccount, r apiRequest, _ apiArgs) any { return ja.streamList(r.data) }).on(targetMeta),
	queued("STREAM.MSG.GET.*", "stream_msg_get", onStreamWorker, func(ja *jsAccount, r apiRequest, a apiArgs) any { return ja.msgGet(a[0], r.data) }).on(targetStream),
	queued("STREAM.MSG.DELETE.*", "stream_msg_delete", onStreamWorker, func(ja *jsAccount, r apiRequest, a apiArgs) any { return ja.msgDelete(a[0], r.data) }).on(targetStream),
	queued("STREAM.LEADER.STEPDOWN.*", "stream_leader_stepdown", onStreamWorker, func(ja *jsAccount, r apiRequest, a apiArgs) any { return ja.streamStepdown(a[0], r.data) }).on(targetStream),
	queued("STREAM.PEER.REMOVE.*", "stream_remove_peer", onStreamWorker, func(ja *jsAccount, r apiRequest, a apiArgs) any { return ja.streamPeerRemove(a[0]) }).on(targetMeta),

	// DIRECT.GET.<stream>[.<subject>]
	queued("DIRECT.GET.*", "", onStreamWorker, directGetRoute).on(targetStream),
	queued("DIRECT.GET.*.>", "", onStreamWorker, directGetRoute).on(targetStream),

	// The three create forms (see consumerCreate): CREATE.<stream>,
	// CREATE.<stream>.<consumer>[.<filter>] and
	// DURABLE.CREATE.<stream>.<consumer>.
	queued("CONSUMER.CREATE.*", "consumer_create", onStreamWorker, func(ja *jsAccount, r apiRequest, a apiArgs) any {
		return ja.consumerCreate(a[0], "", "", true, false, r.data, r.principal)
	}).on(targetStream),
	queued("CONSUMER.CREATE.*.*", "consumer_create", onStreamWorker, consumerCreateRoute).on(targetStream),
	queued("CONSUMER.CREATE.*.*.>", "consumer_create", onStreamWorker, consumerCreateRoute).on(targetStream),
	queued("CONSUMER.DURABLE.CREATE.*.*", "consumer_create", onStreamWorker, func(ja *jsAccount, r apiRequest, a apiArgs) any {
		return ja.consumerCreate(a[0], a[1], "", false, true, r.data, r.principal)
	}).on(targetStream),
	queued("CONSUMER.INFO.*.*", "consumer_info", onStreamWorker, func(ja *jsAccount, _ apiRequest, a apiArgs) any { return ja.consumerInfo(a[0], a[1]) }).on(targetStream),
	queued("CONSUMER.DELETE.*.*", "consumer_delete", onStreamWorker, func(ja *jsAccount, _ apiRequest, a apiArgs) any { return ja.consumerDelete(a[0], a[1]) }).on(targetStream),
	queued("CONSUMER.PAUSE.*.*", "consumer_pause", onStreamWorker, func(ja *jsAccount, r apiRequest, a apiArgs) any { return ja.consumerPause(a[0], a[1], r.data) }).on(targetStream),
	queued("CONSUMER.RESET.*.*", unanswered, onStreamWorker, func(ja *jsAccount, r apiRequest, a apiArgs) any { return ja.consumerReset(a[0], a[1], r.data) }).on(targetStream),
	queued("CONSUMER.LEADER.STEPDOWN.*.*", "consumer_leader_stepdown", onStreamWorker, func(ja *jsAccount, r apiRequest, a apiArgs) any {
		return ja.consumerStepdown(a[0], a[1], r.data)
	}).on(targetStream),
	queued("CONSUMER.NAMES.*", "consumer_names", onStreamWorker, func(ja *jsAccount, r apiRequest, a apiArgs) any { return ja.consumerNames(a[0], r.data) }).on(targetStream),
	queued("CONSUMER.LIST.*", "consumer_list", onStreamWorker, func(ja *jsAccount, r apiRequest, a apiArgs) any { return ja.consumerList(a[0], r.data) }).on(targetStream),
}

func directGetRoute(ja *jsAccount, r apiRequest, a apiArgs) any {
	return ja.directGet(a[0], a[1], r.data)
}

func consumerCreateRoute(ja *jsAccount, r apiRequest, a apiArgs) any {
	return ja.consumerCreate(a[0], a[1], a[2], false, false, r.data, r.principal)
}

// unanswered is the kind of a route an account without JetStream leaves
// unanswered, as nats-server's, whose subscription for it is each
// consumer's own: the requester times out.
const unanswered = "-"

func queued(pattern, kind string, w apiWorker, answer func(*jsAccount, apiRequest, apiArgs) any) apiRoute {
	return apiRoute{toks: strings.Split(pattern, "."), kind: kind, worker: w, answer: answer, target: targetHere}
}

func requester(pattern string, direct func(*jsAccount, *server.Msg, apiArgs)) apiRoute {
	return apiRoute{toks: strings.Split(pattern, "."), worker: onRequester, direct: direct}
}

// routeAPI returns the route of an API subject (after $JS.API.) and what
// it captured; nil if there is none. The captures share subj's memory.
func routeAPI(subj string) (*apiRoute, apiArgs) {
	for i := range apiRoutes {
		if a, ok := apiRoutes[i].match(subj); ok {
			return &apiRoutes[i], a
		}
	}
	return nil, apiArgs{}
}

// match reports whether subj matches the route's pattern, and what it
// captured. It allocates nothing: it runs for every pull request.
func (r *apiRoute) match(subj string) (a apiArgs, ok bool) {
	n, rest, left := 0, subj, true // left: rest still holds a token
	for _, p := range r.toks {
		if !left {
			return a, false
		}
		if p == ">" {
			a[n] = rest
			return a, true
		}
		var tok string
		tok, rest, left = strings.Cut(rest, ".")
		switch {
		case p == "*":
			a[n] = tok
			n++
		case tok != p:
			return a, false
		}
	}
	return a, !left
}
