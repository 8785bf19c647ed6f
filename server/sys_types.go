package server

import "time"

// The bodies of $SYS events and requests. Their JSON is nats-server's
// (its events.go and monitor.go), field for field where Skiff has the
// data: the nats CLI and other tools decode them with nats-server's
// types. docs/monitoring.md lists the fields Skiff leaves out.

// ServerInfo identifies the server that sent an event or an answer. Seq
// grows by one with every message the server's system account sends.
type ServerInfo struct {
	Name    string   `json:"name"`
	Host    string   `json:"host"`
	ID      string   `json:"id"`
	Cluster string   `json:"cluster,omitempty"`
	Domain  string   `json:"domain,omitempty"`
	Version string   `json:"ver"`
	Tags    []string `json:"tags,omitempty"` // server_tags
	// JetStream and the JetStreamEnabled flag say whether the server has
	// JetStream.
	JetStream bool      `json:"jetstream"`
	Flags     uint64    `json:"flags"`
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
}

// JetStreamEnabled is ServerInfo.Flags' bit for a server with JetStream,
// nats-server's.
const JetStreamEnabled = 1

// ServerID is the answer to $SYS.REQ.SERVER.PING.IDZ.
type ServerID struct {
	Name string `json:"name"`
	Host string `json:"host"`
	ID   string `json:"id"`
}

// ServerStatsMsg is the STATSZ event, and the answer to
// $SYS.REQ.SERVER.PING (which `nats server list` and `ping` send).
type ServerStatsMsg struct {
	Server ServerInfo  `json:"server"`
	Stats  ServerStats `json:"statsz"`
}

// ServerStats are the server's statistics. Sent and Received count client
// traffic only, as /varz's totals do, so they equal SentToClients and
// ReceivedFromClients; a route's traffic is in Routes.
type ServerStats struct {
	Start               time.Time           `json:"start"`
	Mem                 int64               `json:"mem"`
	Cores               int                 `json:"cores"`
	CPU                 float64             `json:"cpu"`
	Connections         int                 `json:"connections"`
	TotalConnections    uint64              `json:"total_connections"`
	ActiveAccounts      int                 `json:"active_accounts"` // accounts with a client connected here
	NumSubs             uint32              `json:"subscriptions"`
	Sent                DataStats           `json:"sent"`
	SentToClients       DataStats           `json:"sent_to_clients"`
	Received            DataStats           `json:"received"`
	ReceivedFromClients DataStats           `json:"received_from_clients"`
	SlowConsumers       int64               `json:"slow_consumers"`
	SlowConsumersStats  *SlowConsumersStats `json:"slow_consumer_stats,omitempty"`
	StalledClients      int64               `json:"stalled_clients,omitempty"`
	Routes              []*RouteStat        `json:"routes,omitempty"`
	// ActiveServers counts the servers of the cluster this one knows of,
	// itself included: the CLI waits for that many answers.
	ActiveServers int `json:"active_servers,omitempty"`
	MaxProcs      int `json:"gomaxprocs,omitempty"`
}

// RouteStat is one route's traffic in STATSZ.
type RouteStat struct {
	ID       uint64    `json:"rid"`
	Name     string    `json:"name,omitempty"`
	Sent     DataStats `json:"sent"`
	Received DataStats `json:"received"`
	Pending  int       `json:"pending"`
}

// TypedEvent is the header of an advisory: its schema type, a unique ID
// and when it happened.
type TypedEvent struct {
	Type string    `json:"type"`
	ID   string    `json:"id"`
	Time time.Time `json:"timestamp"`
}

// The schema types of the events, nats-server's.
const (
	ConnectEventMsgType    = "io.nats.server.advisory.v1.client_connect"
	DisconnectEventMsgType = "io.nats.server.advisory.v1.client_disconnect"
	AccountNumConnsMsgType = "io.nats.server.advisory.v1.account_connections"
)

// ConnectEventMsg is $SYS.ACCOUNT.<account>.CONNECT: a client connected.
type ConnectEventMsg struct {
	TypedEvent
	Server ServerInfo `json:"server"`
	Client ClientInfo `json:"client"`
}

// DisconnectEventMsg is $SYS.ACCOUNT.<account>.DISCONNECT (a client
// connected earlier closed) and $SYS.SERVER.<id>.CLIENT.AUTH.ERR (a
// client failed to authenticate). Sent is what the client sent, Received
// what it was sent.
type DisconnectEventMsg struct {
	TypedEvent
	Server   ServerInfo `json:"server"`
	Client   ClientInfo `json:"client"`
	Sent     DataStats  `json:"sent"`
	Received DataStats  `json:"received"`
	Reason   string     `json:"reason"`
}

// AccountNumConns is $SYS.ACCOUNT.<account>.SERVER.CONNS: the account's
// clients on the sending server, and their traffic. Peers add it to their
// own count to enforce the account's max_connections across the cluster.
type AccountNumConns struct {
	TypedEvent
	Server ServerInfo `json:"server"`
	AccountStat
}

// ServerAPIResponse is the answer to a $SYS request for monitoring data:
// the answering server, and the data or an error.
type ServerAPIResponse struct {
	Server *ServerInfo `json:"server"`
	Data   any         `json:"data,omitempty"`
	Error  *APIError   `json:"error,omitempty"`
}

// APIError is the error of a ServerAPIResponse: an HTTP-like status code
// and a description.
type APIError struct {
	Code        int    `json:"code"`
	Description string `json:"description,omitempty"`
}

// EventFilterOptions select the servers that answer a $SYS request sent to
// all of them: each one that does not match stays silent. Name, Host and
// Cluster match if contained in the server's (exactly, with ExactMatch);
// every one of Tags must be among the server's server_tags. Skiff servers
// have no JetStream domain: a request naming one gets no answer.
type EventFilterOptions struct {
	Name       string   `json:"server_name,omitempty"`
	Cluster    string   `json:"cluster,omitempty"`
	Host       string   `json:"host,omitempty"`
	ExactMatch bool     `json:"exact_match,omitempty"`
	Tags       []string `json:"tags,omitempty"`
	Domain     string   `json:"domain,omitempty"`
}

// UserInfo answers $SYS.REQ.USER.INFO: whom the requester is connected
// as, and its permissions.
type UserInfo struct {
	UserID  string `json:"user"`
	Account string `json:"account"`
	// AccountName is the account's name as its JWT gives it, or its name.
	AccountName string        `json:"account_name,omitempty"`
	Permissions *UserPerms    `json:"permissions,omitempty"`
	Expires     time.Duration `json:"expires,omitempty"`
}

// UserPerms are a user's permissions as nats-server shows them.
type UserPerms struct {
	Publish   *SubjectPerm `json:"publish,omitempty"`
	Subscribe *SubjectPerm `json:"subscribe,omitempty"`
}

// SubjectPerm is an allow list and a deny list.
type SubjectPerm struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// ClientIDReq is the body of $SYS.REQ.SERVER.<id>.KICK and .LDM: the
// connection to act on.
type ClientIDReq struct {
	CID uint64 `json:"cid"`
}
