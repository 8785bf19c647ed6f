package server

import "time"

// ClientInfo describes a client, with the reference server's field names:
// the one that published a message (JetStream's API audit advisories carry
// it), or the one a $SYS event is about (sys_events.go).
type ClientInfo struct {
	Start     time.Time     `json:"start,omitempty"`
	Host      string        `json:"host,omitempty"`
	ID        uint64        `json:"id,omitempty"`
	Account   string        `json:"acc,omitempty"`
	User      string        `json:"user,omitempty"`
	Name      string        `json:"name,omitempty"`
	Lang      string        `json:"lang,omitempty"`
	Version   string        `json:"ver,omitempty"`
	RTT       time.Duration `json:"rtt,omitempty"`
	Server    string        `json:"server,omitempty"`
	Cluster   string        `json:"cluster,omitempty"`
	Stop      *time.Time    `json:"stop,omitempty"`
	IssuerKey string        `json:"issuer_key,omitempty"`
	// NameTag is the account's name as its JWT gives it (events only).
	NameTag    string `json:"name_tag,omitempty"`
	Kind       string `json:"kind,omitempty"`
	ClientType string `json:"client_type,omitempty"`
}

// Client describes who published m: nil for a message of an internal
// Publisher. Call it only while handling m.
func (m *Msg) Client() *ClientInfo {
	c := m.pub
	if c == nil || m.internal {
		return nil
	}
	ci := &ClientInfo{
		Start: c.start.UTC(), Host: c.ip, ID: c.cid, Account: m.acc.name,
		Server: c.srv.name, Kind: "Client", ClientType: "nats",
	}
	c.mu.Lock()
	ci.User, ci.Name, ci.Lang, ci.Version = c.mu.user, c.mu.name, c.mu.lang, c.mu.version
	c.mu.Unlock()
	return ci
}
