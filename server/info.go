package server

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"runtime"
)

// Version is the protocol-level version Skiff reports in INFO: a 2.10+
// style string, because clients switch features on by it (nats.js turns on
// the newer JetStream API from 2.9.0 and multiple filters from 2.10.0).
// Skiff's own version is reported separately as skiff_version.
const Version = "2.11.0-skiff"

// SkiffVersion is Skiff's own release version.
var SkiffVersion = "0.1.0"

// info is the INFO a server sends on accept. Field names are the
// reference server's.
type info struct {
	ServerID     string `json:"server_id"`
	ServerName   string `json:"server_name"`
	Version      string `json:"version"`
	SkiffVersion string `json:"skiff_version"`
	Proto        int    `json:"proto"`
	Go           string `json:"go"`
	Host         string `json:"host"`
	Port         int    `json:"port"`
	Headers      bool   `json:"headers"`
	MaxPayload   int    `json:"max_payload"`
	ClientID     uint64 `json:"client_id,omitempty"`
	ClientIP     string `json:"client_ip,omitempty"`
	AuthRequired bool   `json:"auth_required,omitempty"`
	TLSRequired  bool   `json:"tls_required,omitempty"`
	TLSVerify    bool   `json:"tls_verify,omitempty"`
	TLSAvailable bool   `json:"tls_available,omitempty"`
	Nonce        string `json:"nonce,omitempty"`
	JetStream    bool   `json:"jetstream,omitempty"`
	LameDuckMode bool   `json:"ldm,omitempty"`
	// ConnectURLs are the cluster's client URLs (route_discovery.go).
	ConnectURLs []string `json:"connect_urls,omitempty"`
	// Only in the INFO that answers a client's first PING after CONNECT.
	ConnectInfo   bool   `json:"connect_info,omitempty"`
	RemoteAccount string `json:"remote_account,omitempty"`
}

// connectOpts is a client's CONNECT. Field names are the protocol's.
type connectOpts struct {
	Verbose      bool   `json:"verbose"`
	Pedantic     bool   `json:"pedantic"`
	TLSRequired  bool   `json:"tls_required"`
	AuthToken    string `json:"auth_token"`
	User         string `json:"user"`
	Pass         string `json:"pass"`
	Name         string `json:"name"`
	Lang         string `json:"lang"`
	Version      string `json:"version"`
	Protocol     int    `json:"protocol"`
	Echo         *bool  `json:"echo"`
	Headers      bool   `json:"headers"`
	NoResponders bool   `json:"no_responders"`
	Nkey         string `json:"nkey"`
	Sig          string `json:"sig"`
	JWT          string `json:"jwt"`
}

// appendInfo appends the INFO a client gets on accept.
func (s *Server) appendInfo(dst []byte, c *client) []byte {
	in := s.info
	in.ClientID, in.ClientIP, in.Nonce = c.cid, c.ip, string(c.nonce)
	in.ConnectURLs = s.connectURLs()
	if s.opts.NoAuthUser != "" {
		// A client need not authenticate, and this INFO says so, as
		// nats-server's (the one after CONNECT does not); CONNECT is
		// still required.
		in.AuthRequired = false
	}
	if c.ws {
		// A WebSocket's TLS is its listener's: no upgrade in the protocol.
		in.TLSRequired, in.TLSAvailable, in.TLSVerify = false, false, false
	}
	return appendInfoJSON(dst, &in)
}

// appendConnectInfo appends the INFO a server sends once CONNECT is done:
// the account the client is bound to and the payload bound in force for it
// (its account's, if lower than the server's), as nats-server's does.
func (s *Server) appendConnectInfo(dst []byte, c *client) []byte {
	in := s.info
	in.ClientID, in.ClientIP = c.cid, c.ip
	in.ConnectURLs = s.connectURLs()
	in.ConnectInfo, in.RemoteAccount = true, c.acc.name
	in.MaxPayload = c.maxPay
	return appendInfoJSON(dst, &in)
}

func appendInfoJSON(dst []byte, in *info) []byte {
	b, err := json.Marshal(in)
	if err != nil {
		panic("server: INFO does not marshal: " + err.Error()) // a broken invariant: the struct is fixed
	}
	dst = append(dst, "INFO "...)
	dst = append(dst, b...)
	return append(dst, "\r\n"...)
}

func (s *Server) buildInfo(port int) info {
	tlsRequired := s.opts.TLSRequired || (s.opts.TLSHandshakeFirst && s.opts.TLSHandshakeFirstFallback == 0)
	return info{
		ServerID:     s.id,
		ServerName:   s.name,
		Version:      Version,
		SkiffVersion: SkiffVersion,
		Proto:        1,
		Go:           runtime.Version(),
		Host:         s.opts.Host,
		Port:         port,
		Headers:      true,
		MaxPayload:   s.opts.MaxPayload,
		AuthRequired: s.auth.required(),
		TLSRequired:  tlsRequired,
		TLSVerify:    s.opts.TLS != nil && s.opts.TLS.ClientAuth >= tls.VerifyClientCertIfGiven,
		// As nats-server: available means optional, not also required.
		TLSAvailable: s.opts.TLS != nil && !tlsRequired,
		JetStream:    s.jetstream,
	}
}

// newServerID returns a 56-character upper-case base32 ID beginning with
// N, the shape of a NATS server's public key, which tools display.
func newServerID() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	var b [55]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("server: no randomness: " + err.Error())
	}
	id := make([]byte, 56)
	id[0] = 'N'
	for i, v := range b {
		id[i+1] = alphabet[v%32]
	}
	return string(id)
}
