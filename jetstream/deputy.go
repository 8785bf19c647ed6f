package jetstream

import (
	"math/bits"

	"github.com/skiffmq/skiff/server"
)

// JetStream never acts for a client beyond that client's permissions (see
// server/principal.go). What the server publishes itself (a consumer's
// delivery, a reply, an advisory) is never taken as an API request, an
// acknowledgement or a flow control answer, and a stream stores it only if
// the client it was published for may publish on its subject. A push
// consumer delivers for its owner (the user who created it or last set its
// configuration), who must be allowed to publish on the deliver subject.

// refuseInternal drops m, and reports true, if the server published it (a
// consumer's delivery, a reply) and it is addressed to the API, an ack or
// a flow control subject: acting on it would let a client reach
// JetStream through the server, past its permissions.
func (js *JetStream) refuseInternal(m *server.Msg) bool {
	if !m.Internal() {
		return false
	}
	js.dropInternal(m)
	return true
}

// dropInternal counts a server-published message that was refused, and
// logs the 1st, 2nd, 4th, 8th... so that a client repeating the attempt
// cannot flood the log.
func (js *JetStream) dropInternal(m *server.Msg, attrs ...any) {
	n := js.internalDropped.Add(1)
	if bits.OnesCount64(n) != 1 {
		return
	}
	attrs = append(attrs, "subject", m.Subject, "for_user", m.Principal().User(), "dropped", n)
	js.log.Warn("server-published message refused: it would act past its client's permissions", attrs...)
}
