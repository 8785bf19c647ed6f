package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/nats-io/jwt/v2"
)

// ErrUnknownAccount is returned for a request about an account this server
// does not have.
var ErrUnknownAccount = errors.New("server: unknown account")

// AccountzOptions select what Accountz describes. The JSON names are
// nats-server's, for the $SYS request that carries them in its body.
type AccountzOptions struct {
	// Account names the account to describe in detail; "": list the
	// accounts' names only.
	Account string `json:"account"`
}

// Accountz is the body of /accountz: the names of the accounts or, for
// one account, its details. Field names are nats-server's.
type Accountz struct {
	ID  string    `json:"server_id"`
	Now time.Time `json:"now"`
	// SystemAccount names the system account (omitted without one).
	SystemAccount string       `json:"system_account,omitempty"`
	Accounts      []string     `json:"accounts,omitempty"`
	Account       *AccountInfo `json:"account_detail,omitempty"`
}

// AccountInfo describes one account, with nats-server's field names. The
// fields only an account JWT gives (jwt, issuer_key, tags, decoded_jwt,
// validation_result_jwt, revoked_user) are absent for a configured account;
// nats-server omits them too. Subject mappings (mappings) are not
// implemented, so never present.
type AccountInfo struct {
	AccountName string    `json:"account_name"`
	LastUpdate  time.Time `json:"update_time,omitempty"` // when the account was registered
	IsSystem    bool      `json:"is_system,omitempty"`   // the system account
	// Expired is set once an account JWT's expiry passed. Complete is
	// false for an account of operator mode whose JWT asks for what Skiff
	// does not implement for it yet (exports, imports, ...): its users
	// are refused. A configured account's imports are checked when the
	// server starts (New refuses a bad one), so it is always complete.
	Expired   bool `json:"expired"`
	Complete  bool `json:"complete"`
	JetStream bool `json:"jetstream_enabled"`
	// LeafCnt is always 0: Skiff has no leaf nodes.
	LeafCnt   int    `json:"leafnode_connections"`
	ClientCnt int    `json:"client_connections"`
	SubCnt    uint32 `json:"subscriptions"`
	// Exports lists the service exports, then the stream exports, each in
	// configuration order; Imports the stream imports, then the service
	// imports.
	Exports []ExtExport `json:"exports,omitempty"`
	Imports []ExtImport `json:"imports,omitempty"`
	// Jwt is an account of operator mode's JWT, IssuerKey the operator
	// key that signed it, Claim its claims decoded, Vr what validating
	// them now finds, and RevokedUser the users it revokes (jwt.All, "*",
	// for every user), from when.
	Jwt         string               `json:"jwt,omitempty"`
	IssuerKey   string               `json:"issuer_key,omitempty"`
	NameTag     string               `json:"name_tag,omitempty"`
	Tags        jwt.TagList          `json:"tags,omitempty"`
	Claim       *jwt.AccountClaims   `json:"decoded_jwt,omitempty"`
	Vr          []ExtVrIssues        `json:"validation_result_jwt,omitempty"`
	RevokedUser map[string]time.Time `json:"revoked_user,omitempty"`
	Sublist     *SublistStats        `json:"sublist_stats,omitempty"`
	// Responses are the open requests to the account's service exports
	// made through this server, by the reply subject the responder
	// answers on (at most 64 Ki, the bound of the response table).
	Responses map[string]ExtImport `json:"responses,omitempty"`
}

// ExtExport is an export, as nats-server's /accountz shows it: the fields
// of a JWT export that a configured one has.
type ExtExport struct {
	Subject string `json:"subject,omitempty"`
	Type    string `json:"type,omitempty"` // "stream" or "service"
	// ResponseType is a service's: Singleton, Streamed or Chunked.
	ResponseType string `json:"response_type,omitempty"`
	// ApprovedAccounts are the accounts a restricted export lists,
	// sorted; absent for a public export or one restricted by
	// account_token_position.
	ApprovedAccounts []string `json:"approved_accounts,omitempty"`
}

// ExtImport is an import, or the way back of one open request
// (AccountInfo.Responses), as nats-server's /accountz shows it.
type ExtImport struct {
	// Subject is the subject in the exporting account (of a response: the
	// requester's reply subject); Account the exporting account (of a
	// response: the requester's).
	Subject string `json:"subject,omitempty"`
	Account string `json:"account,omitempty"`
	// To is, for a service import, the local subject again (a field JWTs
	// keep for old readers).
	To string `json:"to,omitempty"`
	// LocalSubject is the subject in the importing account (of a
	// response: the reply subject in the exporting account).
	LocalSubject string `json:"local_subject,omitempty"`
	Type         string `json:"type,omitempty"` // "stream" or "service"
	// Invalid is true for an import whose export is gone; a configured
	// import cannot be (New refuses it).
	Invalid bool `json:"invalid"`
	Share   bool `json:"share"`
	// Tracking is service latency tracking, which is not implemented.
	Tracking bool `json:"tracking"`
}

// ExtVrIssues is one issue validating an account JWT found, as nats-server
// shows it.
type ExtVrIssues struct {
	Description string `json:"description"`
	Blocking    bool   `json:"blocking"`
	Time        bool   `json:"time_check"`
}

// SublistStats are the statistics of an account's subscription index, as
// /subsz reports them for every account (see Subsz for how Skiff computes
// them): num_cache and cache_hit_rate are 0, and num_matches counts the
// messages the account's clients published.
type SublistStats struct {
	NumSubs      uint32  `json:"num_subscriptions"`
	NumCache     uint32  `json:"num_cache"`
	NumInserts   uint64  `json:"num_inserts"`
	NumRemoves   uint64  `json:"num_removes"`
	NumMatches   uint64  `json:"num_matches"`
	CacheHitRate float64 `json:"cache_hit_rate"`
	MaxFanout    uint32  `json:"max_fanout"`
	AvgFanout    float64 `json:"avg_fanout"`
}

func (m *monitor) handleAccountz(w http.ResponseWriter, r *http.Request) {
	az, err := m.s.Accountz(AccountzOptions{Account: r.URL.Query().Get("acc")})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, az)
}

// Accountz answers /accountz and the $SYS ACCOUNTZ request: the
// accounts' names, sorted ("$G" first), or the details of
// opts.Account. An account the server does not have is ErrUnknownAccount.
func (s *Server) Accountz(opts AccountzOptions) (*Accountz, error) {
	az := &Accountz{ID: s.id, Now: time.Now().UTC()}
	if sys := s.SystemAccount(); sys != nil {
		az.SystemAccount = sys.name
	}
	if opts.Account == "" {
		for _, a := range s.Accounts() {
			az.Accounts = append(az.Accounts, a.name)
		}
		return az, nil
	}
	a, ok := s.LookupAccount(opts.Account)
	if !ok {
		return nil, fmt.Errorf("%w: Account %s does not exist", ErrUnknownAccount, opts.Account)
	}
	az.Account = a.info()
	return az, nil
}

// info describes the account now.
func (a *Account) info() *AccountInfo {
	u := a.usage()
	st := a.sublistStats(u)
	ai := &AccountInfo{
		AccountName: a.name,
		LastUpdate:  time.Unix(0, a.updated.Load()).UTC(),
		Complete:    true,
		JetStream:   a.jetStreamEnabled(),
		ClientCnt:   u.conns,
		SubCnt:      st.NumSubs, // of the same snapshot
		Exports:     a.ports.Load().extExports(),
		Imports:     a.ports.Load().extImports(),
		Sublist:     st,
		Responses:   a.resp.Load().extResponses(),
	}
	if sy := a.srv.sys; sy != nil {
		ai.IsSystem = a == sy.acc
		sy.extPorts(a, ai)
	}
	a.identity(ai)
	return ai
}

// identity fills what AccountInfo says of where the account's definition
// comes from: its name tag and, for an account of operator mode, what its
// JWT says, as nats-server does. A configured account has no JWT: those
// fields stay absent.
func (a *Account) identity(ai *AccountInfo) {
	ai.NameTag = a.nameTag()
	if a.jwt == nil {
		return
	}
	aj := a.jwt.state()
	ai.Jwt, ai.IssuerKey, ai.Tags, ai.Claim = aj.raw, aj.claims.Issuer, aj.claims.Tags, aj.claims
	ai.Expired = a.jwtExpired()
	ai.Complete = aj.refused == ""
	var vr jwt.ValidationResults
	aj.claims.Validate(&vr)
	for _, is := range vr.Issues {
		ai.Vr = append(ai.Vr, ExtVrIssues{Description: is.Description, Blocking: is.Blocking, Time: is.TimeCheck})
	}
	if len(aj.claims.Revocations) > 0 {
		ai.RevokedUser = make(map[string]time.Time, len(aj.claims.Revocations))
		for k, at := range aj.claims.Revocations {
			ai.RevokedUser[k] = time.Unix(at, 0)
		}
	}
}

// nameTag is the account's name for people (nats-server's name tag): the
// name in an account JWT's claims, or the account's name.
func (a *Account) nameTag() string {
	if a.jwt != nil && a.jwt.state().claims.Name != "" {
		return a.jwt.state().claims.Name
	}
	return a.name
}

// jetStreamEnabled reports whether the account has JetStream, by the rule
// the jetstream package enables accounts with (its enabledAccounts,
// nats-server's): on a server running JetStream, the global account when
// it is the only account besides the system account; otherwise each
// account with JetStream limits (configured, or from its JWT), never the
// system account.
func (a *Account) jetStreamEnabled() bool {
	s := a.srv
	sys := s.SystemAccount()
	if !s.jetstream || a == sys {
		return false
	}
	if !slices.ContainsFunc(s.Accounts(), func(b *Account) bool { return b != s.gacc && b != sys }) {
		return a == s.gacc
	}
	_, configured := a.JetStreamLimits()
	return configured
}

func (p *accountPorts) extExports() []ExtExport {
	var out []ExtExport
	add := func(service bool) {
		for _, e := range p.exports {
			if e.Service != service {
				continue
			}
			x := ExtExport{Subject: e.Subject, Type: kindName(e.Service)}
			if e.Service {
				x.ResponseType = e.Response.String()
			}
			if len(e.Accounts) > 0 {
				x.ApprovedAccounts = slices.Sorted(slices.Values(e.Accounts))
			}
			out = append(out, x)
		}
	}
	add(true)
	add(false)
	return out
}

func (p *accountPorts) extImports() []ExtImport {
	var out []ExtImport
	for _, si := range p.streams {
		out = append(out, ExtImport{Subject: si.from, Account: si.acc, LocalSubject: si.to, Type: kindName(false)})
	}
	for _, si := range p.svcs {
		out = append(out, ExtImport{Subject: si.to, Account: si.acc, To: si.from, LocalSubject: si.from, Type: kindName(true), Share: si.share})
	}
	return out
}

// extResponses lists the table's open requests; nil for no table.
func (t *respTable) extResponses() map[string]ExtImport {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.mu.m) == 0 {
		return nil
	}
	out := make(map[string]ExtImport, len(t.mu.m))
	for key, e := range t.mu.m {
		out[key] = ExtImport{Subject: e.reply, Account: e.to.name, To: key, LocalSubject: key, Type: kindName(true), Share: e.share}
	}
	return out
}

// sublistStats computes the account's index statistics from a snapshot
// of it, u being its usage at about the same instant.
func (a *Account) sublistStats(u accountUsage) *SublistStats {
	entries := a.subs.ReadOnlySnapshot().Snapshot()
	st := &SublistStats{
		NumSubs:    uint32(len(entries)),
		NumInserts: uint64(a.subInserts.Load()),
		NumRemoves: uint64(a.subRemoves.Load()),
		NumMatches: uint64(u.traffic.inMsgs),
	}
	st.MaxFanout, st.AvgFanout = fanout(entries)
	return st
}
