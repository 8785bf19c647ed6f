package proto

import (
	"bytes"
	"strconv"

	"github.com/skiffmq/skiff/internal/bufpool"
)

// The route protocol joins two servers of a cluster. It is modelled on
// nats-server's, and carries an account name in every interest and
// message operation (Skiff has one account, "$G", for now):
//
//	CONNECT {json}                          the dialing server: credentials, cluster, its ID
//	INFO {json}                             both: identity, route URL, client URLs, known peers
//	RS+ <acct> <subject>                    interest in subject appeared
//	RS+ <acct> <subject> <queue> <weight>   a queue group's member count on subject is now weight
//	RS- <acct> <subject> [<queue>]          that interest is gone
//	RMSG <acct> <subject> [<reply>] <size>  a message for the peer's plain subscribers
//	RMSG <acct> <subject> + <reply> <q>... <size>
//	RMSG <acct> <subject> | <q>... <size>   ... and for one member of each queue group q
//	HMSG <acct> <subject> [...] <hdr> <size>  the same with headers
//	IMSG <acct> <subject> <+p|-p> [...] <size>  RMSG for a message the sender's server published
//	IHMSG <acct> <subject> <+p|-p> [...] <hdr> <size>  ... and HMSG
//	PING, PONG, -ERR '...'
//
// The payload follows RMSG/HMSG/IMSG/IHMSG as it follows PUB. IMSG and
// IHMSG carry a message the sending server published itself, for a client
// (a JetStream delivery, a reply): +p if that client may publish on the
// subject, -p if not. The receiver treats it as a server's message with
// that verdict (server/principal.go), as the sender's own receivers do.

// RouteHandler receives the operations a route's Parser decodes, from the
// goroutine that calls Parse. Arguments are valid only during the call.
type RouteHandler interface {
	Connect(arg []byte) error
	Info(arg []byte) error
	// RouteSub receives RS+; queue is nil and weight 0 for plain interest.
	RouteSub(account, subject, queue []byte, weight int) error
	// RouteUnsub receives RS-; queue is nil for plain interest.
	RouteUnsub(account, subject, queue []byte) error
	// RouteMsg receives RMSG and HMSG.
	RouteMsg(m *RouteMsg) error
	Ping() error
	Pong() error
	// Err receives -ERR's text.
	Err(text []byte) error
}

// RouteMsg is a message from a peer. Its slices are valid only during the
// RouteMsg call.
type RouteMsg struct {
	Account, Subject, Reply []byte
	// Queues are the queue groups the sender chose this server for: one
	// member of each gets the message.
	Queues [][]byte
	// Hdr is the length of the headers at the start of Msg, -1 for none.
	Hdr int
	Msg []byte
	// Internal is set for IMSG and IHMSG: the sender's server published
	// the message; Permitted is its +p (the client it was published for
	// may publish on Subject) or -p.
	Internal, Permitted bool
}

// routeFlags are an IMSG's Internal and Permitted, kept while its payload
// is read.
type routeFlags struct{ internal, permitted bool }

// The permission field of IMSG and IHMSG.
const (
	permitYes = "+p"
	permitNo  = "-p"
)

// routeOps lists every operation name a route may send.
var routeOps = []string{"RS+", "RS-", "RMSG", "HMSG", "IMSG", "IHMSG", "PING", "PONG", "CONNECT", "INFO", "-ERR", "+OK"}

// NewRouteParser returns a parser for a route, calling h.
func NewRouteParser(h RouteHandler, l Limits) *Parser {
	p := NewParser(nil, l)
	p.rh = h
	return p
}

// routeFields splits a route line's arguments; a line can have no more
// fields than half its length, so nothing valid is cut.
func (p *Parser) routeFields(args []byte) [][]byte {
	if p.fields == nil {
		p.fields = make([][]byte, 0, p.limits.MaxControlLine/2+4)
	}
	return fields(args, p.fields[:0])
}

func (p *Parser) routeDispatch(line, rest []byte) ([]byte, error) {
	op, args := cutOp(line)
	switch {
	case opIs(op, "RMSG"):
		return p.routeMsg(args, false, false, rest)
	case opIs(op, "HMSG"):
		return p.routeMsg(args, true, false, rest)
	case opIs(op, "IMSG"):
		return p.routeMsg(args, false, true, rest)
	case opIs(op, "IHMSG"):
		return p.routeMsg(args, true, true, rest)
	case opIs(op, "RS+"):
		f := p.routeFields(args)
		switch len(f) {
		case 2:
			return rest, p.rh.RouteSub(f[0], f[1], nil, 0)
		case 4:
			w, ok := parseSize(f[3])
			if !ok || w == 0 {
				return rest, ErrUnknownOp.withDetail("RS+ bad queue weight: %q", snippet(line))
			}
			return rest, p.rh.RouteSub(f[0], f[1], f[2], w)
		}
		return rest, ErrUnknownOp.withDetail("RS+ takes 2 or 4 arguments: %q", snippet(line))
	case opIs(op, "RS-"):
		f := p.routeFields(args)
		switch len(f) {
		case 2:
			return rest, p.rh.RouteUnsub(f[0], f[1], nil)
		case 3:
			return rest, p.rh.RouteUnsub(f[0], f[1], f[2])
		}
		return rest, ErrUnknownOp.withDetail("RS- takes 2 or 3 arguments: %q", snippet(line))
	case opIs(op, "PING"):
		return rest, p.rh.Ping()
	case opIs(op, "PONG"):
		return rest, p.rh.Pong()
	case opIs(op, "CONNECT"):
		return rest, p.rh.Connect(bytes.TrimSpace(args))
	case opIs(op, "INFO"):
		return rest, p.rh.Info(bytes.TrimSpace(args))
	case opIs(op, "+OK"):
		return rest, nil
	case opIs(op, "-ERR"):
		return rest, p.rh.Err(bytes.TrimSpace(args))
	}
	return rest, ErrUnknownOp.withDetail("%q", snippet(line))
}

// routeMsg parses RMSG/HMSG (IMSG/IHMSG if internal) arguments and
// delivers the message if its payload is in rest, or starts buffering it
// as pub does.
func (p *Parser) routeMsg(args []byte, headers, internal bool, rest []byte) ([]byte, error) {
	f := p.routeFields(args)
	nums := 1
	if headers {
		nums = 2
	}
	first := 2 // the first field after the subject
	if internal {
		first = 3
	}
	if len(f) < first+nums {
		return rest, ErrUnknownOp.withDetail("wrong number of arguments: %q", snippet(args))
	}
	// The handler may not keep m (its slices alias the read buffer
	// anyway): one per parser saves an allocation per message.
	m := &p.rmsg
	*m = RouteMsg{Account: f[0], Subject: f[1], Hdr: -1, Internal: internal}
	if internal {
		switch string(f[2]) {
		case permitYes:
			m.Permitted = true
		case permitNo:
		default:
			return rest, ErrUnknownOp.withDetail("bad permission field (+p or -p): %q", snippet(args))
		}
	}
	mid := f[first : len(f)-nums]
	switch {
	case len(mid) == 0:
	case len(mid) >= 2 && string(mid[0]) == "+":
		m.Reply, m.Queues = mid[1], mid[2:]
	case len(mid) >= 2 && string(mid[0]) == "|":
		m.Queues = mid[1:]
	case len(mid) == 1 && string(mid[0]) != "+" && string(mid[0]) != "|":
		m.Reply = mid[0]
	default:
		return rest, ErrUnknownOp.withDetail("bad reply or queues: %q", snippet(args))
	}
	size, ok := parseSize(f[len(f)-1])
	if !ok {
		return rest, ErrUnknownOp.withDetail("bad or missing size: %q", snippet(args))
	}
	if headers {
		if m.Hdr, ok = parseSize(f[len(f)-2]); !ok || m.Hdr > size {
			return rest, ErrUnknownOp.withDetail("bad header size: %q", snippet(args))
		}
	}
	if size > p.limits.MaxPayload {
		return rest, ErrMaxPayload.withDetail("%d bytes, limit %d", size, p.limits.MaxPayload)
	}
	if len(rest) >= size+2 {
		if rest[size] != '\r' || rest[size+1] != '\n' {
			return rest, ErrUnknownOp.withDetail("payload not followed by CRLF (wrong length?)")
		}
		m.Msg = rest[:size]
		return rest[size+2:], p.rh.RouteMsg(m)
	}
	// Split: keep the arguments (account, subject, reply, queues) and
	// what there is of the payload.
	p.args, p.rlens = p.args[:0], p.rlens[:0]
	for _, a := range [][]byte{m.Account, m.Subject, m.Reply} {
		p.args = append(p.args, a...)
		p.rlens = append(p.rlens, len(a))
	}
	for _, q := range m.Queues {
		p.args = append(p.args, q...)
		p.rlens = append(p.rlens, len(q))
	}
	p.hdr, p.size = m.Hdr, size
	p.rflags = routeFlags{internal: m.Internal, permitted: m.Permitted}
	if cap(p.msg) < size+2 {
		p.msg = bufpool.Get(max(size+2, 512))
	}
	p.msg = append(p.msg[:0], rest...)
	p.state = statePayload
	return nil, nil
}

// finishRouteMsg delivers a split RMSG/HMSG whose payload is complete.
func (p *Parser) finishRouteMsg(payload []byte) error {
	a := p.args
	cut := func(n int) []byte {
		b := a[:n:n]
		a = a[n:]
		return b
	}
	m := RouteMsg{Account: cut(p.rlens[0]), Subject: cut(p.rlens[1]), Reply: cut(p.rlens[2]), Hdr: p.hdr, Msg: payload,
		Internal: p.rflags.internal, Permitted: p.rflags.permitted}
	if len(m.Reply) == 0 {
		m.Reply = nil
	}
	m.Queues = p.fields[:0]
	for _, n := range p.rlens[3:] {
		m.Queues = append(m.Queues, cut(n))
	}
	if len(m.Queues) == 0 {
		m.Queues = nil
	}
	return p.rh.RouteMsg(&m)
}

// AppendRouteSub appends RS+ for plain interest (queue "") or a queue
// group's weight.
func AppendRouteSub(dst []byte, account, subject, queue string, weight int) []byte {
	dst = appendRouteInterest(dst, "RS+ ", account, subject, queue)
	if queue != "" {
		dst = append(dst, ' ')
		dst = strconv.AppendInt(dst, int64(weight), 10)
	}
	return append(dst, "\r\n"...)
}

// AppendRouteUnsub appends RS-.
func AppendRouteUnsub(dst []byte, account, subject, queue string) []byte {
	return append(appendRouteInterest(dst, "RS- ", account, subject, queue), "\r\n"...)
}

// appendRouteInterest appends the verb, account, subject and queue (if
// any) that RS+ and RS- share.
func appendRouteInterest(dst []byte, verb, account, subject, queue string) []byte {
	dst = append(dst, verb...)
	dst = append(dst, account...)
	dst = append(dst, ' ')
	dst = append(dst, subject...)
	if queue != "" {
		dst = append(dst, ' ')
		dst = append(dst, queue...)
	}
	return dst
}

// RouteMsgKind says which of the message operations a line is.
type RouteMsgKind uint8

const (
	// ClientMsg is RMSG/HMSG: a client's message.
	ClientMsg RouteMsgKind = iota
	// ServerMsgPermitted is IMSG/IHMSG +p: the server's, for a client
	// that may publish on the subject.
	ServerMsgPermitted
	// ServerMsgDenied is IMSG/IHMSG -p: the server's, for a client that
	// may not (or for nobody).
	ServerMsgDenied
)

// AppendRouteMsgLine appends the control line of an RMSG (hdr < 0) or
// HMSG, or for a server's message IMSG or IHMSG, through its CRLF.
func AppendRouteMsgLine(dst []byte, kind RouteMsgKind, account string, subject, reply []byte, queues []string, hdr, size int) []byte {
	if kind != ClientMsg {
		dst = append(dst, 'I')
	}
	switch {
	case hdr < 0 && kind == ClientMsg:
		dst = append(dst, "RMSG "...)
	case hdr < 0:
		dst = append(dst, "MSG "...)
	default:
		dst = append(dst, "HMSG "...)
	}
	dst = append(dst, account...)
	dst = append(dst, ' ')
	dst = append(dst, subject...)
	dst = append(dst, ' ')
	switch kind {
	case ServerMsgPermitted:
		dst = append(dst, permitYes+" "...)
	case ServerMsgDenied:
		dst = append(dst, permitNo+" "...)
	}
	switch {
	case len(queues) > 0 && len(reply) > 0:
		dst = append(dst, "+ "...)
		dst = append(dst, reply...)
		dst = append(dst, ' ')
	case len(queues) > 0:
		dst = append(dst, "| "...)
	case len(reply) > 0:
		dst = append(dst, reply...)
		dst = append(dst, ' ')
	}
	for _, q := range queues {
		dst = append(dst, q...)
		dst = append(dst, ' ')
	}
	if hdr >= 0 {
		dst = strconv.AppendInt(dst, int64(hdr), 10)
		dst = append(dst, ' ')
	}
	dst = strconv.AppendInt(dst, int64(size), 10)
	return append(dst, "\r\n"...)
}
