package jetstream

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/skiffmq/skiff/server"
)

// jszPath is JetStream's monitoring endpoint, as in the reference server:
// the Prometheus exporter for NATS and dashboards read it.
const jszPath = "/jsz"

// jsz is the body of /jsz, with the reference server's field names. In a
// cluster it has the meta group (meta_cluster), and each stream detailed
// its cluster info (leader, replicas, their lag) and, replicated, its raft
// group; ha_assets counts the raft groups on this server (the meta group
// and the replicated streams').
type jsz struct {
	jszStats
	ID        string        `json:"server_id"`
	Now       time.Time     `json:"now"`
	Config    jszConfig     `json:"config"`
	Streams   int           `json:"streams"`
	Consumers int           `json:"consumers"`
	Messages  uint64        `json:"messages"`
	Bytes     uint64        `json:"bytes"`
	Meta      *jszMeta      `json:"meta_cluster,omitempty"`
	Accounts  []*jszAccount `json:"account_details,omitempty"`
	Total     int           `json:"total"`
	// FailedStreams is Skiff's: streams that could not be opened at
	// start, by name (prefixed with "<account>/" outside the global
	// account), with the reason (failedstream.go).
	FailedStreams map[string]string `json:"skiff_failed_streams,omitempty"`
	// OrphanedAccounts is Skiff's: the directories under
	// StoreDir/accounts of no JetStream-enabled account, whose streams
	// are kept on disk and not served (account.go).
	OrphanedAccounts []string `json:"skiff_orphaned_accounts,omitempty"`
}

// jszMeta is the meta group as this server sees it, in nats-server's
// MetaClusterInfo shape.
type jszMeta struct {
	Name            string         `json:"name,omitempty"`
	Leader          string         `json:"leader,omitempty"`
	Peer            string         `json:"peer,omitempty"`
	Replicas        []*jszMetaPeer `json:"replicas,omitempty"`
	Size            int            `json:"cluster_size"`
	QuorumNeeded    int            `json:"quorum_needed"`
	Pending         int            `json:"pending"`
	PendingRequests int            `json:"pending_requests"`
	PendingInfos    int            `json:"pending_infos"`
}

// jszMetaPeer is nats-server's PeerInfo.
type jszMetaPeer struct {
	Name    string        `json:"name"`
	Current bool          `json:"current"`
	Offline bool          `json:"offline,omitempty"`
	Active  time.Duration `json:"active"`
	Lag     uint64        `json:"lag,omitempty"`
	Peer    string        `json:"peer"`
}

// metaJsz returns /jsz's meta_cluster, nil outside a cluster or before
// this server joined the meta group.
func (js *JetStream) metaJsz() *jszMeta {
	if js.raft == nil {
		return nil
	}
	mi, err := js.raft.MetaInfo()
	if err != nil {
		return nil
	}
	m := &jszMeta{Name: js.srv.ClusterName(), Leader: mi.Leader, Size: mi.Size, QuorumNeeded: mi.Size/2 + 1,
		PendingRequests: len(js.forwards)}
	m.Pending = m.PendingRequests
	if mi.Leader != "" {
		m.Peer = nodeHash(mi.Leader)
	}
	for _, p := range mi.Replicas {
		m.Replicas = append(m.Replicas, &jszMetaPeer{Name: p.Name, Current: p.Current, Offline: p.Offline,
			Active: p.Active, Lag: p.Lag, Peer: nodeHash(p.Name)})
	}
	return m
}

// nodeHash is a server's peer ID as nats-server shows it: the first 8
// characters of the base-62 digits of its name's SHA-256.
func nodeHash(name string) string {
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	sum := sha256.Sum256([]byte(name))
	b := make([]byte, 8)
	for i := range b {
		b[i] = digits[int(sum[i]%62)]
	}
	return string(b)
}

type jszStats struct {
	Memory          uint64   `json:"memory"`
	Storage         uint64   `json:"storage"`
	ReservedMemory  uint64   `json:"reserved_memory"`
	ReservedStorage uint64   `json:"reserved_storage"`
	AccountCount    int      `json:"accounts"`
	HAAssets        int      `json:"ha_assets"`
	API             apiStats `json:"api"`
}

type jszConfig struct {
	MaxMemory    int64         `json:"max_memory"`
	MaxStorage   int64         `json:"max_storage"`
	StoreDir     string        `json:"store_dir,omitempty"`
	SyncInterval time.Duration `json:"sync_interval,omitempty"`
	SyncAlways   bool          `json:"sync_always,omitempty"`
}

type jszAccount struct {
	Name string `json:"name"`
	ID   string `json:"id"`
	jszStats
	Streams []*jszStream `json:"stream_detail,omitempty"`
}

type jszStream struct {
	Name      string          `json:"name"`
	Created   time.Time       `json:"created"`
	Cluster   *ClusterInfo    `json:"cluster,omitempty"`
	RaftGroup string          `json:"stream_raft_group,omitempty"`
	Config    *StreamConfig   `json:"config,omitempty"`
	State     StreamState     `json:"state"`
	Consumers []*ConsumerInfo `json:"consumer_detail,omitempty"`
	// CorruptRecords is Skiff's: records found corrupt when read since
	// the server started, skipped and removed (store.Stream.CorruptRecords).
	CorruptRecords uint64 `json:"skiff_corrupt_records,omitempty"`
	// LostRecords is Skiff's: sequences recovery found lost when it
	// opened the stream at start (store.RecoveryReport.LostRecords).
	LostRecords uint64 `json:"skiff_lost_records,omitempty"`
	// FailedConsumers is Skiff's: durable consumers whose state could not
	// be recovered at start (failed.go).
	FailedConsumers []string `json:"skiff_failed_consumers,omitempty"`
}

// jszOptions are the query parameters of /jsz that Skiff honours:
// accounts, streams, consumers and config add detail, each implying the
// ones before it, as in the reference server; acc details one account
// only; offset and limit page the streams of each account detailed (at
// most jszStreamsLimit).
type jszOptions struct {
	accounts, streams, consumers, config bool
	acc                                  string
	offset, limit                        int
}

// jszStreamsLimit bounds the streams one /jsz response details.
const jszStreamsLimit = 1024

func parseJszOptions(q url.Values) (jszOptions, error) {
	var o jszOptions
	for _, p := range []struct {
		name string
		v    *bool
	}{{"accounts", &o.accounts}, {"streams", &o.streams}, {"consumers", &o.consumers}, {"config", &o.config}} {
		if s := q.Get(p.name); s != "" {
			b, err := strconv.ParseBool(s)
			if err != nil {
				return o, fmt.Errorf("bad query parameter %s=%q: want true or false", p.name, s)
			}
			*p.v = b
		}
	}
	for _, p := range []struct {
		name string
		v    *int
	}{{"offset", &o.offset}, {"limit", &o.limit}} {
		if s := q.Get(p.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return o, fmt.Errorf("bad query parameter %s=%q: want a non-negative integer", p.name, s)
			}
			*p.v = n
		}
	}
	if o.limit == 0 || o.limit > jszStreamsLimit {
		o.limit = jszStreamsLimit
	}
	// Consumer detail needs stream detail, which needs account detail.
	o.acc = q.Get("acc")
	o.streams = o.streams || o.consumers
	o.accounts = o.accounts || o.streams || o.acc != ""
	return o, nil
}

// jszRequest is the body of a $SYS JSZ request: /jsz's options with
// nats-server's JSON names (its JSzOptions). leader_only, raft,
// stream_leader_only and direct_consumer are about clustered streams,
// which Skiff does not have: a server answers as the leader of its own.
type jszRequest struct {
	Account   string `json:"account"`
	Accounts  bool   `json:"accounts"`
	Streams   bool   `json:"streams"`
	Consumers bool   `json:"consumer"`
	Config    bool   `json:"config"`
	Offset    int    `json:"offset"`
	Limit     int    `json:"limit"`
}

// unmarshalOptional decodes a $SYS request's options from body, which
// may be empty (every option at its default).
func unmarshalOptional(body []byte, v any) error {
	if len(body) == 0 {
		return nil
	}
	return json.Unmarshal(body, v)
}

// sysJsz answers JSZ on $SYS (server.HandleSysRequest): the /jsz report,
// or with acc, the detail of that account, as nats-server's JszAccount.
func (js *JetStream) sysJsz(acc *server.Account, body []byte) (any, error) {
	var req jszRequest
	if err := unmarshalOptional(body, &req); err != nil {
		return nil, err
	}
	if req.Offset < 0 || req.Limit < 0 {
		return nil, fmt.Errorf("offset %d, limit %d: want non-negative numbers", req.Offset, req.Limit)
	}
	o := jszOptions{accounts: req.Accounts, streams: req.Streams || req.Consumers, consumers: req.Consumers,
		config: req.Config, acc: req.Account, offset: req.Offset, limit: req.Limit}
	if o.limit == 0 || o.limit > jszStreamsLimit {
		o.limit = jszStreamsLimit
	}
	if acc != nil {
		o.acc = acc.Name()
	}
	o.accounts = o.accounts || o.streams || o.acc != ""
	r := js.jsz(o)
	if acc == nil {
		return r, nil
	}
	if len(r.Accounts) == 0 {
		return nil, fmt.Errorf("account %q not jetstream enabled", acc.Name())
	}
	return r.Accounts[0], nil
}

// handleJsz serves /jsz.
func (js *JetStream) handleJsz(r *http.Request) (any, error) {
	o, err := parseJszOptions(r.URL.Query())
	if err != nil {
		return nil, err
	}
	return js.jsz(o), nil
}

// jsz builds the /jsz report: totals over every account, and the
// accounts' detail on request.
func (js *JetStream) jsz(o jszOptions) *jsz {
	r := &jsz{ID: js.srv.ID(), Now: time.Now().UTC(), Config: jszConfig{
		MaxMemory: max(js.opts.MaxMemory, -1), MaxStorage: max(js.opts.MaxStore, -1), StoreDir: js.opts.StoreDir,
	}}
	if js.opts.Sync == SyncAlways {
		r.Config.SyncAlways = true
	} else {
		r.Config.SyncInterval = js.opts.SyncInterval
	}
	accounts := js.sortedAccounts()
	r.AccountCount = len(accounts)
	r.API = js.apiStats()
	var total usage
	for _, ja := range accounts {
		u := ja.usage()
		total.add(u)
		ha := ja.haAssets()
		r.HAAssets += ha
		for name, reason := range ja.failedStreams() {
			if r.FailedStreams == nil {
				r.FailedStreams = map[string]string{}
			}
			if ja.name != server.GlobalAccountName {
				name = ja.name + "/" + name
			}
			r.FailedStreams[name] = reason
		}
		if !o.accounts || (o.acc != "" && o.acc != ja.name) {
			continue
		}
		d := &jszAccount{Name: ja.name, ID: ja.name, jszStats: jszStats{
			Memory: u.memory, Storage: u.storage, ReservedMemory: u.reservedMemory, ReservedStorage: u.reservedStorage,
			AccountCount: 1, API: ja.apiStats(), HAAssets: ha,
		}}
		if o.streams {
			d.Streams = ja.jszStreams(o)
		}
		r.Accounts = append(r.Accounts, d)
	}
	r.Memory, r.Storage, r.Streams, r.Consumers = total.memory, total.storage, total.streams, total.consumers
	r.ReservedMemory, r.ReservedStorage = total.reservedMemory, total.reservedStorage
	r.Messages, r.Bytes = total.msgs, total.memory+total.storage
	r.Total = r.Streams
	r.OrphanedAccounts = js.orphans
	r.Meta = js.metaJsz()
	if r.Meta != nil {
		r.HAAssets++ // the meta group, as nats-server counts every raft group
	}
	return r
}

// jszStreams details the page of the account's streams, sorted by name,
// that o asks for.
func (ja *jsAccount) jszStreams(o jszOptions) []*jszStream {
	var details []*jszStream
	_, names := page(ja.sortedStreamNames(), o.offset, o.limit)
	for _, name := range names {
		st := ja.lookup(name)
		if st == nil {
			continue // deleted meanwhile
		}
		info := st.info()
		d := &jszStream{Name: name, Created: info.Created, State: info.State, CorruptRecords: st.store.CorruptRecords(),
			LostRecords: st.store.Recovery().LostRecords(), FailedConsumers: st.failedConsumers(), Cluster: info.Cluster}
		if st.repl != nil {
			d.RaftGroup = st.raftGroupName()
		}
		if o.config {
			d.Config = &info.Config
		}
		if o.consumers {
			for _, c := range *st.clist.Load() { // sorted by name
				d.Consumers = append(d.Consumers, c.info())
			}
		}
		details = append(details, d)
	}
	return details
}

// haAssets counts the account's replicated streams on this server: their
// raft groups, as nats-server's ha_assets counts its groups.
func (ja *jsAccount) haAssets() int {
	n := 0
	for _, st := range ja.streams() {
		if st.repl != nil {
			n++
		}
	}
	return n
}
