package jetstream

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/skiffmq/skiff/server"
)

// Advisories are JSON events JetStream publishes on $JS.EVENT.ADVISORY.>
// as the reference server does, with its subjects, types and fields:
// streams and consumers created, updated and deleted, API requests
// (audit), and messages that reached max_deliver, were nacked or were
// terminated. A dead-letter queue is a stream on
// $JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.> and MSG_TERMINATED.>.
//
// An advisory is built only when something subscribes to its subject (a
// client or a stream). It is queued where it happens, possibly under a
// consumer's lock, and published later by whoever drains the queue (the
// API worker, a consumer's goroutine) with no lock held: a stream that
// captures advisories takes them like any publish.

const (
	advisoryPrefix      = "$JS.EVENT.ADVISORY."
	advAPI              = advisoryPrefix + "API"
	advStreamCreated    = advisoryPrefix + "STREAM.CREATED."
	advStreamUpdated    = advisoryPrefix + "STREAM.UPDATED."
	advStreamDeleted    = advisoryPrefix + "STREAM.DELETED."
	advConsumerCreated  = advisoryPrefix + "CONSUMER.CREATED."
	advConsumerDeleted  = advisoryPrefix + "CONSUMER.DELETED."
	advMaxDeliveries    = advisoryPrefix + "CONSUMER.MAX_DELIVERIES."
	advMsgNaked         = advisoryPrefix + "CONSUMER.MSG_NAKED."
	advMsgTerminated    = advisoryPrefix + "CONSUMER.MSG_TERMINATED."
	advLeaderElected    = advisoryPrefix + "STREAM.LEADER_ELECTED."
	advQuorumLost       = advisoryPrefix + "STREAM.QUORUM_LOST."
	advisoryTypePrefix  = "io.nats.jetstream.advisory.v1."
	advisoryQueueLength = 10_000 // past this, advisories are dropped (and counted)
)

// typedEvent starts every advisory.
type typedEvent struct {
	Type string    `json:"type"`
	ID   string    `json:"id"`
	Time time.Time `json:"timestamp"`
}

// newEvent starts an advisory of a kind; its ID is 22 random characters,
// as long as the reference server's NUIDs.
func newEvent(kind string) typedEvent {
	return typedEvent{Type: advisoryTypePrefix + kind, ID: randomID(22), Time: time.Now().UTC()}
}

type apiAudit struct {
	typedEvent
	Server   string             `json:"server"`
	Client   *server.ClientInfo `json:"client"`
	Subject  string             `json:"subject"`
	Request  string             `json:"request,omitempty"`
	Response string             `json:"response"`
}

type streamAction struct {
	typedEvent
	Stream string `json:"stream"`
	Action string `json:"action"` // create, modify or delete
}

// streamLeaderElected is a replicated stream's new leader, once it takes
// publishes (nats-server's JSStreamLeaderElectedAdvisory).
type streamLeaderElected struct {
	typedEvent
	Account  string      `json:"account,omitempty"`
	Stream   string      `json:"stream"`
	Leader   string      `json:"leader"`
	Replicas []*PeerInfo `json:"replicas"`
}

// streamQuorumLost is a replicated stream's leader that stepped down
// because it no longer heard from a quorum of its replicas
// (JSStreamQuorumLostAdvisory).
type streamQuorumLost struct {
	typedEvent
	Account  string      `json:"account,omitempty"`
	Stream   string      `json:"stream"`
	Replicas []*PeerInfo `json:"replicas"`
}

type consumerAction struct {
	typedEvent
	Stream   string `json:"stream"`
	Consumer string `json:"consumer"`
	Action   string `json:"action"`
}

type maxDeliveries struct {
	typedEvent
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

// delivery is the advisory of what a client did with a delivery: a nak,
// and (with msgTerminated's reason) a +TERM.
type delivery struct {
	typedEvent
	Stream      string `json:"stream"`
	Consumer    string `json:"consumer"`
	ConsumerSeq uint64 `json:"consumer_seq"`
	StreamSeq   uint64 `json:"stream_seq"`
	Deliveries  uint64 `json:"deliveries"`
}

type msgTerminated struct {
	delivery
	Reason string `json:"reason,omitempty"`
}

// advisories is the queue of built advisories waiting to be published.
type advisories struct {
	waiting atomic.Bool // the queue is not empty: a cheap look for drainers
	dropped atomic.Uint64
	mu      struct {
		sync.Mutex
		queue []advisory
	}
}

type advisory struct {
	subject string
	body    []byte
}

// wants reports whether anything in the account subscribes to an advisory
// subject.
func (ja *jsAccount) wants(subject string) bool { return ja.acc.HasSubscribers(subject) }

// advise queues an advisory of the account if anything in it subscribes
// to its subject; build makes it. Any goroutine may call it, with any lock
// held.
func (ja *jsAccount) advise(subject string, build func() any) {
	if !ja.wants(subject) {
		return
	}
	body, err := jsonMarshal(build())
	if err != nil {
		ja.js.log.Warn("advisory not encoded", "account", ja.name, "subject", subject, "err", err)
		return
	}
	a := &ja.adv
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.mu.queue) >= advisoryQueueLength {
		a.dropped.Add(1)
		return
	}
	a.mu.queue = append(a.mu.queue, advisory{subject: subject, body: body})
	a.waiting.Store(true)
}

// publishAdvisories publishes the account's queued advisories with p, a
// publisher in the account. Call it with no lock held; the caller flushes
// p.
func (ja *jsAccount) publishAdvisories(p *server.Publisher) {
	a := &ja.adv
	if !a.waiting.Load() {
		return
	}
	a.mu.Lock()
	q := a.mu.queue
	a.mu.queue = nil
	a.waiting.Store(false)
	a.mu.Unlock()
	p.ActFor(server.ServerPrincipal)
	for _, adv := range q {
		p.Publish(adv.subject, "", nil, adv.body)
	}
	p.ActFor(server.Principal{})
}

func (ja *jsAccount) adviseStream(prefix, stream, action string) {
	ja.advise(prefix+stream, func() any {
		return streamAction{typedEvent: newEvent("stream_action"), Stream: stream, Action: action}
	})
}

func (ja *jsAccount) adviseConsumer(prefix, stream, consumer, action string) {
	ja.advise(prefix+stream+"."+consumer, func() any {
		return consumerAction{typedEvent: newEvent("consumer_action"), Stream: stream, Consumer: consumer, Action: action}
	})
}
