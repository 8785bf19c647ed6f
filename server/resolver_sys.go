package server

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nkeys"
)

// The full resolver takes account JWTs through the system account, as
// nats-server's, so that `nsc push` and `nats` work against Skiff:
//
//	$SYS.REQ.CLAIMS.UPDATE               an account JWT: stored and applied
//	$SYS.REQ.ACCOUNT.<acc>.CLAIMS.UPDATE  the same, for account <acc> only
//	$SYS.ACCOUNT.<acc>.CLAIMS.UPDATE      the same, nats-server's older subject
//	$SYS.REQ.ACCOUNT.<acc>.CLAIMS.LOOKUP  the stored JWT of <acc>, or an empty message
//	$SYS.REQ.CLAIMS.LIST                  the accounts stored
//	$SYS.REQ.CLAIMS.DELETE                a JWT the operator signed listing accounts to delete
//	$SYS.REQ.CLAIMS.PACK                  a peer's hash of its store: the JWTs it lacks, if they differ
//
// Only users of the system account can publish there. Every server of a
// cluster subscribes, so an update reaches them all and each answers,
// as nats-server's do; a server that was away catches up by comparing its
// store with a peer's every ResolverOptions.Interval (PACK). Answers are
// nats-server's: {"server":..., "data":{"account", "code":200,
// "message"}} or {"server":..., "error":{"account", "code":500,
// "description"}}.

// claimUpdateResponse is the answer to an update or a delete,
// nats-server's ServerAPIClaimUpdateResponse.
type claimUpdateResponse struct {
	Server *ServerInfo         `json:"server"`
	Data   *claimUpdateStatus  `json:"data,omitempty"`
	Error  *claimUpdateFailure `json:"error,omitempty"`
}

type claimUpdateStatus struct {
	Account string `json:"account,omitempty"`
	Code    int    `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

type claimUpdateFailure struct {
	Account     string `json:"account,omitempty"`
	Code        int    `json:"code"`
	Description string `json:"description,omitempty"`
}

// claimsListResponse is the answer to a list.
type claimsListResponse struct {
	Server *ServerInfo `json:"server"`
	Data   []string    `json:"data"`
}

// subscribeClaims subscribes the full resolver's requests.
func (sy *sysState) subscribeClaims() {
	st := sy.s.trust.dir
	update := func(in *sysIn, pub string) {
		sy.claimsUpdate(in, pub)
	}
	sy.on("$SYS.REQ.CLAIMS.UPDATE", true, func(in *sysIn) { update(in, "") })
	for _, pattern := range []string{"$SYS.REQ.ACCOUNT.*.CLAIMS.UPDATE", "$SYS.ACCOUNT.*.CLAIMS.UPDATE"} {
		sy.on(pattern, true, func(in *sysIn) {
			toks := strings.Split(in.subject, ".")
			update(in, toks[len(toks)-3])
		})
	}
	sy.on("$SYS.REQ.ACCOUNT.*.CLAIMS.LOOKUP", false, func(in *sysIn) {
		if in.reply == "" || in.self {
			return // a lookup of this server's own asks the others
		}
		raw, err := st.load(strings.Split(in.subject, ".")[3])
		if err != nil {
			// An empty answer tells the asker this server does not have it.
			sy.answer(in, nil, []byte{})
			return
		}
		sy.answer(in, nil, []byte(raw))
	})
	sy.on("$SYS.REQ.CLAIMS.LIST", true, func(in *sysIn) {
		resp := &claimsListResponse{Server: &ServerInfo{}, Data: st.list()}
		sy.answer(in, resp.Server, resp)
	})
	sy.on("$SYS.REQ.CLAIMS.DELETE", true, sy.claimsDelete)
	sy.subscribePack()
}

// claimsUpdate stores and applies the account JWT of a request; pub, if
// set, is the account the subject names.
func (sy *sysState) claimsUpdate(in *sysIn, pub string) {
	s := sy.s
	raw := strings.TrimSpace(string(in.data))
	ac, err := s.verifyUpdate(pub, raw)
	acct := pub
	if ac != nil && (pub == "" || ac.Subject == pub) {
		acct = ac.Subject // a mismatch names the subject's account, as nats-server does
	}
	if err != nil {
		what := "jwt update resulted in error"
		if ac != nil && !errors.Is(err, errAccountUntrusted) && !strings.Contains(err.Error(), "does not match") {
			what = "jwt validation failed"
		}
		if acct == "" {
			acct = "n/a"
		}
		sy.claimsAnswer(in, acct, what, err)
		return
	}
	// The same JWT again changes nothing, and is answered as any update
	// is, as nats-server does.
	if err := s.storeAccountJWT(ac, raw); err != nil {
		sy.claimsAnswer(in, acct, "jwt update resulted in error", err)
		return
	}
	sy.claimsAnswer(in, acct, "jwt updated", nil)
}

// claimsDelete deletes the accounts a request lists: its body is a JWT
// the operator signed itself (by a key trusted to sign accounts), whose
// data lists the accounts ("accounts": [...]), as nats-server's
// handleDeleteRequest. The system account cannot be deleted.
func (sy *sysState) claimsDelete(in *sysIn) {
	s := sy.s
	var accounts []string
	gc, err := jwt.DecodeGeneric(strings.TrimSpace(string(in.data)))
	subj := ""
	if err == nil {
		subj = gc.Subject
		accounts, err = sy.deleteList(gc)
	}
	if err != nil {
		sy.claimsAnswer(in, "", fmt.Sprintf("delete accounts request by %s failed", subj), err)
		return
	}
	var errs []string
	n := 0
	for _, pub := range accounts {
		held, err := s.trust.dir.remove(pub)
		switch {
		case err != nil:
			errs = append(errs, fmt.Sprintf("%s: %v", pub, err))
			continue
		case !held:
			continue
		}
		n++
		if a := s.accounts.lookup(pub); a != nil && a.jwt != nil {
			s.deleteJWTAccount(a)
		}
		s.log.Info("account deleted", "account", pub, "by", subj)
	}
	if len(errs) > 0 {
		sy.claimsAnswer(in, "", fmt.Sprintf("deleted %d accounts, failed for %d", n, len(errs)), errors.New(strings.Join(errs, "\n")))
		return
	}
	sy.claimsAnswer(in, "", fmt.Sprintf("deleted %d accounts", n), nil)
}

// deleteList checks a delete request's JWT and returns the accounts it
// lists.
func (sy *sysState) deleteList(gc *jwt.GenericClaims) ([]string, error) {
	t := sy.s.trust
	switch {
	case !t.dir.allowDel:
		return nil, errResolverNoDel
	case gc.Subject != gc.Issuer:
		return nil, errors.New("not self signed")
	case !t.keys[gc.Issuer]:
		return nil, errors.New("not trusted")
	}
	list, ok := gc.Data["accounts"].([]any)
	if !ok {
		return nil, errors.New("malformed request")
	}
	accounts := make([]string, 0, len(list))
	for _, e := range list {
		pub, ok := e.(string)
		switch {
		case !ok || !nkeys.IsValidPublicAccountKey(pub):
			return nil, errors.New("malformed request")
		case pub == t.sysAccount:
			return nil, errors.New("not allowed to delete system account")
		}
		accounts = append(accounts, pub)
	}
	return accounts, nil
}

// claimsAnswer answers an update or a delete: message, or message and
// err as a failure.
func (sy *sysState) claimsAnswer(in *sysIn, acct, message string, err error) {
	if err != nil {
		sy.s.log.Warn("account claims request refused", "subject", in.subject, "account", acct, "what", message, "err", err)
	}
	if in.reply == "" {
		return
	}
	resp := &claimUpdateResponse{Server: &ServerInfo{}}
	if err == nil {
		resp.Data = &claimUpdateStatus{Account: acct, Code: http.StatusOK, Message: message}
	} else {
		resp.Error = &claimUpdateFailure{Account: acct, Code: http.StatusInternalServerError,
			Description: fmt.Sprintf("%s - %v", message, err)}
	}
	sy.answer(in, resp.Server, resp)
}

// packEnd is the message that ends a PACK answer.
var packEnd = []byte{}

// subscribePack subscribes the store comparison of a cluster: every
// Interval a server sends the hash of its store to $SYS.REQ.CLAIMS.PACK;
// each peer whose hash differs answers with each of its JWTs
// (<account>|<jwt>), then an empty message, and the server stores each
// that is newer than its own, as an update. (nats-server asks one peer,
// a queue group; Skiff asks all, which costs more only while stores
// differ.)
func (sy *sysState) subscribePack() {
	s := sy.s
	st := s.trust.dir
	sy.on("$SYS.REQ.CLAIMS.PACK", false, func(in *sysIn) {
		if in.reply == "" || in.self {
			return
		}
		if ours := st.sum(); !bytes.Equal(in.data, ours[:]) {
			for pub, raw := range st.all() {
				sy.answer(in, nil, []byte(pub+"|"+raw))
			}
		}
		sy.answer(in, nil, packEnd)
	})
	sy.packInbox = "$SYS._INBOX." + s.id + ".pack"
	sy.on(sy.packInbox, false, func(in *sysIn) {
		pub, raw, ok := strings.Cut(string(in.data), "|")
		if !ok {
			return // the end
		}
		ac, err := s.verifyUpdate(pub, raw)
		if err == nil {
			err = s.storeAccountJWT(ac, raw)
		}
		if err != nil && !errors.Is(err, errResolverOlder) {
			s.log.Warn("account JWT from a peer not stored", "account", pub, "err", err)
		}
	})
}

// sendPack asks a peer to compare stores (the worker's timer).
func (sy *sysState) sendPack() {
	sum := sy.s.trust.dir.sum()
	sy.enqueue(&sysOut{subject: "$SYS.REQ.CLAIMS.PACK", reply: sy.packInbox, v: sum[:], pr: ServerPrincipal})
}

// lookupTimeout is how long lookup waits: ResolverOptions.Timeout.
func (sy *sysState) lookupTimeout() time.Duration {
	return cmp.Or(sy.s.opts.Resolver.Timeout, DefaultResolverTimeout)
}

// lookup asks the peers for the JWT of account pub, which this server's
// store does not hold ($SYS.REQ.ACCOUNT.<pub>.CLAIMS.LOOKUP), and waits
// for the first that has it, for every peer to say it has not, or for
// the timeout. It returns the JWT, or errAccountMissing. It blocks: a
// CONNECT's read loop calls it, never a route's.
func (sy *sysState) lookup(pub string) (string, error) {
	peers := sy.activeServers() - 1
	if peers <= 0 || !nkeys.IsValidPublicAccountKey(pub) {
		return "", errAccountMissing
	}
	inbox := fmt.Sprintf("$SYS._INBOX.%s.lookup.%d", sy.s.id, sy.lookups.Add(1))
	answers := make(chan []byte, peers)
	is, err := sy.acc.SubscribeInternal(inbox, "", func(m *Msg) {
		select {
		case answers <- bytes.Clone(m.Data):
		default:
		}
	})
	if err != nil {
		return "", errAccountMissing
	}
	defer func() { _ = is.Unsubscribe() }()
	sy.enqueue(&sysOut{subject: "$SYS.REQ.ACCOUNT." + pub + ".CLAIMS.LOOKUP", reply: inbox, v: []byte{}, pr: ServerPrincipal})
	timeout := time.NewTimer(sy.lookupTimeout())
	defer timeout.Stop()
	for range peers {
		select {
		case raw := <-answers:
			if len(raw) > 0 {
				return string(raw), nil
			}
		case <-timeout.C:
			return "", errAccountMissing
		}
	}
	return "", errAccountMissing
}
