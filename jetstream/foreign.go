package jetstream

import (
	"math/bits"
	"strings"

	"github.com/skiffmq/skiff/server"
)

// Exports and imports let a client's message cross into another account
// (server/imports.go): a service import of an account's $JS.API.>, or a
// stream import of another account's $JS.API.>, $JS.ACK.> or $JS.FC.>,
// would bring another account's client to this account's JetStream. It
// would then act for a principal of that other account, which nothing
// here can act for (a Publisher refuses it and acts for nobody), and own
// consumers nobody can deliver for. nats-server serves such requests; Skiff
// refuses them until they act for a principal of their own (issue 14,
// design section 6.6): the API answers that it is not supported, and
// acknowledgements and flow control answers are dropped, each counted in
// skiff_jetstream_refused_across_accounts_total and logged (throttled).

// errAcrossAccounts is the API's answer to a request from another
// account: 10039, what nats.go reads as JetStream not enabled for the
// requester's account, with the reason.
func errAcrossAccounts() *APIError {
	return apiErr(503, 10039, "JetStream not enabled for account: the JetStream API of another account, through an import, is not supported by Skiff")
}

// fromAnotherAccount reports whether m, a client's message, was published
// in another account and came here through an import.
func (ja *jsAccount) fromAnotherAccount(m *server.Msg) bool {
	acc := m.Principal().Account()
	return acc != nil && acc != ja.acc
}

// refuseForeign drops m, and reports true, if it came from another
// account (fromAnotherAccount); an API request is answered with
// errAcrossAccounts, in its response type, or a 409 status where its
// answer is a message (pull requests, direct gets).
func (ja *jsAccount) refuseForeign(m *server.Msg, api *apiRoute) bool {
	if !ja.fromAnotherAccount(m) {
		return false
	}
	js := ja.js
	n := js.foreignRefused.Add(1)
	if bits.OnesCount64(n) == 1 {
		js.log.Warn("JetStream message from another account refused: JetStream through an import is not supported",
			"account", ja.name, "from_account", m.Principal().Account().Name(), "user", m.Principal().User(),
			"subject", m.Subject, "refused", n)
	}
	if m.Reply == "" || !strings.HasPrefix(m.Subject, apiPrefix) {
		return true
	}
	ja.apiTotal.Add(1)
	ja.apiErrs.Add(1)
	reply := strings.Clone(m.Reply)
	if api != nil && api.kind != "" && api.kind != unanswered {
		body := errorResponse(api.kind+"_response", errAcrossAccounts())
		m.AfterRead(func(p *server.Publisher) { p.Publish(reply, "", nil, body) })
		return true
	}
	text := errAcrossAccounts().Description
	m.AfterRead(func(p *server.Publisher) { status(p, reply, 409, text) })
	return true
}
