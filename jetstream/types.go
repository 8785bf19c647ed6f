package jetstream

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// The JSON of the JetStream API, with the reference server's field names
// (ADR-1, ADR-37). Only what Skiff implements is here; unknown fields in a
// request are ignored, as the reference server does.

// StreamConfig is a stream's configuration.
type StreamConfig struct {
	Name              string          `json:"name"`
	Description       string          `json:"description,omitempty"`
	Subjects          []string        `json:"subjects,omitempty"`
	Retention         RetentionPolicy `json:"retention"`
	MaxConsumers      int             `json:"max_consumers"`
	MaxMsgs           int64           `json:"max_msgs"`
	MaxBytes          int64           `json:"max_bytes"`
	MaxAge            time.Duration   `json:"max_age"`
	MaxMsgsPerSubject int64           `json:"max_msgs_per_subject"`
	MaxMsgSize        int32           `json:"max_msg_size,omitempty"`
	Discard           DiscardPolicy   `json:"discard"`
	// DiscardNewPer refuses a message past max_msgs_per_subject, instead of
	// removing the subject's oldest, under discard new.
	DiscardNewPer bool          `json:"discard_new_per_subject,omitempty"`
	Storage       StorageType   `json:"storage"`
	Replicas      int           `json:"num_replicas"`
	NoAck         bool          `json:"no_ack,omitempty"`
	Duplicates    time.Duration `json:"duplicate_window,omitempty"`
	FirstSeq      uint64        `json:"first_seq,omitempty"`
	Compression   string        `json:"compression"`
	AllowDirect   bool          `json:"allow_direct"`
	MirrorDirect  bool          `json:"mirror_direct"`
	Sealed        bool          `json:"sealed"`
	DenyDelete    bool          `json:"deny_delete"`
	DenyPurge     bool          `json:"deny_purge"`
	AllowRollup   bool          `json:"allow_rollup_hdrs"`
	AllowMsgTTL   bool          `json:"allow_msg_ttl"`
	// SubjectDeleteMarkerTTL, when set, leaves a marker message (with
	// this TTL) where max_age or a TTL removed a subject's last message.
	SubjectDeleteMarkerTTL time.Duration     `json:"subject_delete_marker_ttl,omitempty"`
	ConsumerLimits         ConsumerLimits    `json:"consumer_limits"`
	Metadata               map[string]string `json:"metadata,omitempty"`
	// Sync is Skiff's: when a publish is acknowledged (see SyncPolicy).
	// The API carries it, and SyncInterval, in Metadata under
	// "_skiff.sync" and "_skiff.sync_interval" (see syncmeta.go), so that
	// the configuration has only fields the JetStream API defines.
	Sync SyncPolicy `json:"-"`
	// SyncInterval is how often SyncInterval fsyncs.
	SyncInterval time.Duration `json:"-"`
}

// ConsumerLimits are defaults a stream imposes on its consumers.
type ConsumerLimits struct {
	InactiveThreshold time.Duration `json:"inactive_threshold,omitempty"`
	MaxAckPending     int           `json:"max_ack_pending,omitempty"`
}

// StreamState is a stream's state.
type StreamState struct {
	Msgs        uint64            `json:"messages"`
	Bytes       uint64            `json:"bytes"`
	FirstSeq    uint64            `json:"first_seq"`
	FirstTime   time.Time         `json:"first_ts"`
	LastSeq     uint64            `json:"last_seq"`
	LastTime    time.Time         `json:"last_ts"`
	NumSubjects int               `json:"num_subjects,omitempty"`
	Subjects    map[string]uint64 `json:"subjects,omitempty"`
	NumDeleted  int               `json:"num_deleted,omitempty"`
	Deleted     []uint64          `json:"deleted,omitempty"` // with deleted_details`
	Consumers   int               `json:"consumer_count"`
}

// StreamInfo is a stream's configuration and state.
type StreamInfo struct {
	Config    StreamConfig `json:"config"`
	Created   time.Time    `json:"created"`
	State     StreamState  `json:"state"`
	Cluster   *ClusterInfo `json:"cluster,omitempty"`
	TimeStamp time.Time    `json:"ts"`
}

// ClusterInfo says where a stream or consumer of a clustered server is:
// the cluster's name, the server that serves it (its group's leader), and
// a replicated stream's other replicas as the leader sees them.
//
// For a replicated stream it also carries nats-server 2.12's
// leader_since (when the leader was elected, or, answered by a follower,
// when the follower learned of it) and where the group's replication
// traffic is accounted: Skiff's travels on the raft links between
// servers, never on a tenant's subjects, which nats-server calls the
// system account's traffic (its only mode here: cluster_traffic: owner is
// refused), so system_account is true and traffic_account names the
// system account.
type ClusterInfo struct {
	Name        string      `json:"name,omitempty"`
	RaftGroup   string      `json:"raft_group,omitempty"` // as RAFTZ and /jsz name it
	Leader      string      `json:"leader,omitempty"`
	LeaderSince *time.Time  `json:"leader_since,omitempty"`
	SystemAcc   bool        `json:"system_account,omitempty"`
	TrafficAcc  string      `json:"traffic_account,omitempty"`
	Replicas    []*PeerInfo `json:"replicas,omitempty"`
}

// PeerInfo is a replica of a replicated stream, nats-server's PeerInfo:
// current when it holds every entry the leader does and its link is up,
// active how long since its link last brought anything, lag how many
// entries it is behind; peer is its server's ID as /jsz gives it
// (nodeHash).
type PeerInfo struct {
	Name    string        `json:"name"`
	Current bool          `json:"current"`
	Offline bool          `json:"offline,omitempty"`
	Active  time.Duration `json:"active"`
	Lag     uint64        `json:"lag,omitempty"`
	Peer    string        `json:"peer"`
}

// ConsumerConfig is a consumer's configuration.
type ConsumerConfig struct {
	Durable            string            `json:"durable_name,omitempty"`
	Name               string            `json:"name,omitempty"`
	Description        string            `json:"description,omitempty"`
	DeliverPolicy      DeliverPolicy     `json:"deliver_policy"`
	OptStartSeq        uint64            `json:"opt_start_seq,omitempty"`
	OptStartTime       *time.Time        `json:"opt_start_time,omitempty"`
	AckPolicy          AckPolicy         `json:"ack_policy"`
	AckWait            time.Duration     `json:"ack_wait,omitempty"`
	MaxDeliver         int               `json:"max_deliver,omitempty"`
	BackOff            []time.Duration   `json:"backoff,omitempty"`
	FilterSubject      string            `json:"filter_subject,omitempty"`
	FilterSubjects     []string          `json:"filter_subjects,omitempty"`
	ReplayPolicy       ReplayPolicy      `json:"replay_policy"`
	RateLimit          uint64            `json:"rate_limit_bps,omitempty"`
	SampleFrequency    string            `json:"sample_freq,omitempty"`
	MaxWaiting         int               `json:"max_waiting,omitempty"`
	MaxAckPending      int               `json:"max_ack_pending,omitempty"`
	FlowControl        bool              `json:"flow_control,omitempty"`
	HeadersOnly        bool              `json:"headers_only,omitempty"`
	MaxRequestBatch    int               `json:"max_batch,omitempty"`
	MaxRequestExpires  time.Duration     `json:"max_expires,omitempty"`
	MaxRequestMaxBytes int               `json:"max_bytes,omitempty"`
	DeliverSubject     string            `json:"deliver_subject,omitempty"`
	DeliverGroup       string            `json:"deliver_group,omitempty"`
	Heartbeat          time.Duration     `json:"idle_heartbeat,omitempty"`
	InactiveThreshold  time.Duration     `json:"inactive_threshold,omitempty"`
	Replicas           int               `json:"num_replicas"`
	MemoryStorage      bool              `json:"mem_storage,omitempty"`
	Metadata           map[string]string `json:"metadata,omitempty"`
	PauseUntil         *time.Time        `json:"pause_until,omitempty"`
}

// SequenceInfo is a pair of consumer and stream sequences.
type SequenceInfo struct {
	Consumer uint64     `json:"consumer_seq"`
	Stream   uint64     `json:"stream_seq"`
	Last     *time.Time `json:"last_active,omitempty"`
}

// ConsumerInfo is a consumer's configuration and state.
type ConsumerInfo struct {
	Stream         string          `json:"stream_name"`
	Name           string          `json:"name"`
	Created        time.Time       `json:"created"`
	Config         *ConsumerConfig `json:"config,omitempty"`
	Delivered      SequenceInfo    `json:"delivered"`
	AckFloor       SequenceInfo    `json:"ack_floor"`
	NumAckPending  int             `json:"num_ack_pending"`
	NumRedelivered int             `json:"num_redelivered"`
	NumWaiting     int             `json:"num_waiting"`
	NumPending     uint64          `json:"num_pending"`
	PushBound      bool            `json:"push_bound,omitempty"`
	Paused         bool            `json:"paused,omitempty"`
	PauseRemaining time.Duration   `json:"pause_remaining,omitempty"`
	Cluster        *ClusterInfo    `json:"cluster,omitempty"`
	TimeStamp      time.Time       `json:"ts"`
}

// PubAck answers a publish to a stream.
type PubAck struct {
	Stream    string `json:"stream"`
	Sequence  uint64 `json:"seq"`
	Duplicate bool   `json:"duplicate,omitempty"`
}

// APIError is the error of a failed API call or publish (ADR-7).
type APIError struct {
	Code        int    `json:"code"`
	ErrCode     uint16 `json:"err_code,omitempty"`
	Description string `json:"description,omitempty"`
}

func (e *APIError) Error() string { return fmt.Sprintf("%s (%d)", e.Description, e.ErrCode) }

// The policies are strings on the wire.
type (
	RetentionPolicy int
	DiscardPolicy   int
	StorageType     int
	DeliverPolicy   int
	AckPolicy       int
	ReplayPolicy    int
	SyncPolicy      int
)

const (
	LimitsPolicy RetentionPolicy = iota
	InterestPolicy
	WorkQueuePolicy
)

const (
	DiscardOld DiscardPolicy = iota
	DiscardNew
)

const (
	FileStorage StorageType = iota
	MemoryStorage
)

const (
	DeliverAll DeliverPolicy = iota
	DeliverLast
	DeliverNew
	DeliverByStartSequence
	DeliverByStartTime
	DeliverLastPerSubject
)

const (
	AckNone AckPolicy = iota
	AckAll
	AckExplicit
)

const (
	ReplayInstant ReplayPolicy = iota
	ReplayOriginal
)

// SyncPolicy says when a publish to a file stream is acknowledged.
const (
	// SyncInterval, the default, acknowledges once the message is written
	// and fsyncs every SyncInterval (default 100 ms): a machine crash may
	// lose that long of acknowledged messages; a process crash loses none.
	SyncInterval SyncPolicy = iota
	// SyncAlways acknowledges after an fsync covering the message.
	SyncAlways
	// SyncNever leaves flushing to the operating system.
	SyncNever
)

var enumNames = map[string][]string{
	"retention":      {"limits", "interest", "workqueue"},
	"discard":        {"old", "new"},
	"storage":        {"file", "memory"},
	"deliver_policy": {"all", "last", "new", "by_start_sequence", "by_start_time", "last_per_subject"},
	"ack_policy":     {"none", "all", "explicit"},
	"replay_policy":  {"instant", "original"},
	"sync":           {"interval", "always", "never"},
}

func marshalEnum(kind string, v int) ([]byte, error) {
	names := enumNames[kind]
	if v < 0 || v >= len(names) {
		return nil, fmt.Errorf("jetstream: bad %s %d", kind, v)
	}
	return json.Marshal(names[v])
}

func unmarshalEnum(kind string, b []byte, v *int) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	for i, n := range enumNames[kind] {
		if strings.EqualFold(s, n) {
			*v = i
			return nil
		}
	}
	// The reference server also accepts some aliases.
	switch {
	case kind == "retention" && strings.EqualFold(s, "work_queue"):
		*v = int(WorkQueuePolicy)
		return nil
	case kind == "deliver_policy" && s == "":
		*v = int(DeliverAll)
		return nil
	}
	return fmt.Errorf("can not unmarshal %q as %s", s, kind)
}

func (p RetentionPolicy) MarshalJSON() ([]byte, error) { return marshalEnum("retention", int(p)) }
func (p *RetentionPolicy) UnmarshalJSON(b []byte) error {
	return unmarshalEnum("retention", b, (*int)(p))
}
func (p DiscardPolicy) MarshalJSON() ([]byte, error)  { return marshalEnum("discard", int(p)) }
func (p *DiscardPolicy) UnmarshalJSON(b []byte) error { return unmarshalEnum("discard", b, (*int)(p)) }
func (p StorageType) MarshalJSON() ([]byte, error)    { return marshalEnum("storage", int(p)) }
func (p *StorageType) UnmarshalJSON(b []byte) error   { return unmarshalEnum("storage", b, (*int)(p)) }
func (p DeliverPolicy) MarshalJSON() ([]byte, error)  { return marshalEnum("deliver_policy", int(p)) }
func (p *DeliverPolicy) UnmarshalJSON(b []byte) error {
	return unmarshalEnum("deliver_policy", b, (*int)(p))
}
func (p AckPolicy) MarshalJSON() ([]byte, error)    { return marshalEnum("ack_policy", int(p)) }
func (p *AckPolicy) UnmarshalJSON(b []byte) error   { return unmarshalEnum("ack_policy", b, (*int)(p)) }
func (p ReplayPolicy) MarshalJSON() ([]byte, error) { return marshalEnum("replay_policy", int(p)) }
func (p *ReplayPolicy) UnmarshalJSON(b []byte) error {
	return unmarshalEnum("replay_policy", b, (*int)(p))
}
func (p SyncPolicy) MarshalJSON() ([]byte, error)  { return marshalEnum("sync", int(p)) }
func (p *SyncPolicy) UnmarshalJSON(b []byte) error { return unmarshalEnum("sync", b, (*int)(p)) }
