package proto

import (
	"bytes"

	"github.com/skiffmq/skiff/internal/bufpool"
)

// Handler receives the operations a Parser decodes. Arguments are valid
// only during the call. A non-nil error stops the parse and is returned by
// Parse; the connection decides what to do with it. The Parser calls the
// Handler from the goroutine that calls Parse.
type Handler interface {
	Connect(arg []byte) error
	// Pub receives PUB (hdr < 0) and HPUB (hdr = header length); msg is
	// the headers followed by the payload.
	Pub(subject, reply []byte, hdr int, msg []byte) error
	Sub(subject, queue, sid []byte) error
	// Unsub receives max = 0 when no maximum was given.
	Unsub(sid []byte, max int64) error
	Ping() error
	Pong() error
}

// Limits bound what a Parser accepts. Zero means the default.
type Limits struct {
	// MaxControlLine bounds a control line in bytes (default 4096).
	MaxControlLine int
	// MaxPayload bounds a message, headers included (default 1 MiB).
	MaxPayload int
}

// Default limits, as in the reference server.
const (
	DefaultMaxControlLine = 4096
	DefaultMaxPayload     = 1 << 20
)

// retainMax is the largest scratch buffer a parser keeps between messages;
// a larger one, needed for one big split message, is dropped afterwards so
// that an idle connection holds little memory.
const retainMax = 64 << 10

type state uint8

const (
	stateOp      state = iota // reading a control line
	statePayload              // reading a PUB/HPUB payload and its CRLF
)

// Parser decodes the client side of the protocol. The zero value is not
// usable; call NewParser.
type Parser struct {
	h      Handler
	rh     RouteHandler // set instead of h for a route (see route.go)
	limits Limits
	state  state

	line []byte // a control line split across reads, so far

	// A PUB/HPUB whose payload did not fit in one read: its arguments,
	// copied (args holds subject then reply), and the payload so far.
	args    []byte
	subject int // length of the subject in args
	hdr     int
	size    int
	msg     []byte

	// A route's RMSG/HMSG: the lengths of its arguments in args, and the
	// fields scratch (see route.go).
	rlens  []int
	fields [][]byte
	rflags routeFlags // IMSG/IHMSG's
	rmsg   RouteMsg   // the message handed to RouteHandler.RouteMsg
}

// NewParser returns a parser that calls h.
func NewParser(h Handler, l Limits) *Parser {
	if l.MaxControlLine <= 0 {
		l.MaxControlLine = DefaultMaxControlLine
	}
	if l.MaxPayload <= 0 {
		l.MaxPayload = DefaultMaxPayload
	}
	return &Parser{h: h, limits: l}
}

// SetMaxPayload changes the payload bound, for a server that learns it
// after the parser exists (it never does in Skiff, but tests vary it).
func (p *Parser) SetMaxPayload(n int) { p.limits.MaxPayload = n }

// Parse consumes buf. It returns the first error: an *Error for malformed
// input, or whatever the Handler returned. After an error the Parser must
// not be used again.
func (p *Parser) Parse(buf []byte) error {
	for len(buf) > 0 {
		if p.state == statePayload {
			n := min(len(buf), p.size+2-len(p.msg))
			p.msg = append(p.msg, buf[:n]...)
			buf = buf[n:]
			if len(p.msg) < p.size+2 {
				return nil
			}
			if err := p.finishSplitPayload(); err != nil {
				return err
			}
			continue
		}
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			// Keep at most the operation name, a CR and one byte past the
			// limit: enough to know.
			n := min(len(buf), p.limits.MaxControlLine+opSlack-len(p.line))
			p.line = append(p.line, buf[:n]...)
			return p.checkLine(p.line)
		}
		line := buf[:i]
		if len(p.line) > 0 {
			p.line = append(p.line, line...)
			line = p.line
		}
		buf = buf[i+1:]
		// A complete line's operation is checked by dispatch; only one
		// that is too long needs checkLine, to report what a split read
		// would have reported.
		if len(line) > p.limits.MaxControlLine {
			if err := p.checkLine(line); err != nil {
				return err
			}
		}
		var err error
		buf, err = p.dispatch(trimCR(line), buf)
		p.line = p.line[:0]
		if cap(p.line) > retainMax {
			p.line = nil
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// checkLine refuses a control line, whole or partial, that cannot be a
// valid operation or is too long. The order of the checks does not depend
// on where reads split the line.
func (p *Parser) checkLine(line []byte) error {
	if !validOpPrefix(line, p.opNames()) {
		return ErrUnknownOp.withDetail("%q", snippet(line))
	}
	if n := argsLen(line); n > p.limits.MaxControlLine {
		return ErrMaxControlLine.withDetail("arguments of %d bytes or more", n)
	}
	return nil
}

// opSlack covers the operation name and separators, which MaxControlLine
// does not count (as in the reference server, the limit is on arguments).
const opSlack = 16

// argsLen returns the length of a control line's arguments: what follows
// the operation name and its separator, without a trailing CR.
func argsLen(line []byte) int {
	line = trimCR(line)
	for i, c := range line {
		if c == ' ' || c == '\t' {
			return len(line) - i - 1
		}
	}
	return 0
}

// dispatch handles one control line; for PUB and HPUB it also consumes the
// payload from rest, or starts waiting for it. It returns what is left of
// rest.
func (p *Parser) dispatch(line, rest []byte) ([]byte, error) {
	if p.rh != nil {
		return p.routeDispatch(line, rest)
	}
	op, args := cutOp(line)
	switch {
	case opIs(op, "PUB"):
		return p.pub(args, false, rest)
	case opIs(op, "HPUB"):
		return p.pub(args, true, rest)
	case opIs(op, "SUB"):
		var a [3][]byte
		f := fields(args, a[:0])
		switch len(f) {
		case 2:
			return rest, p.h.Sub(f[0], nil, f[1])
		case 3:
			return rest, p.h.Sub(f[0], f[1], f[2])
		}
		return rest, ErrUnknownOp.withDetail("SUB takes 2 or 3 arguments: %q", snippet(line))
	case opIs(op, "UNSUB"):
		var a [2][]byte
		f := fields(args, a[:0])
		switch len(f) {
		case 1:
			return rest, p.h.Unsub(f[0], 0)
		case 2:
			// A maximum that is not a positive number is no maximum, as
			// in the reference server.
			n, _ := parseSize(f[1])
			return rest, p.h.Unsub(f[0], int64(n))
		}
		return rest, ErrUnknownOp.withDetail("UNSUB takes 1 or 2 arguments: %q", snippet(line))
	case opIs(op, "PING"): // arguments are ignored, as in the reference server
		return rest, p.h.Ping()
	case opIs(op, "PONG"):
		return rest, p.h.Pong()
	case opIs(op, "CONNECT"):
		return rest, p.h.Connect(bytes.TrimSpace(args))
	case opIs(op, "+OK"), opIs(op, "INFO"):
		return rest, nil // nothing for a server to do
	case opIs(op, "-ERR"):
		return rest, ErrClientError.withDetail("client sent -ERR %s", snippet(args))
	}
	return rest, ErrUnknownOp.withDetail("%q", snippet(line))
}

// pub parses PUB/HPUB arguments and delivers the message if its payload is
// in rest, or starts buffering it.
func (p *Parser) pub(args []byte, headers bool, rest []byte) ([]byte, error) {
	var a [4][]byte
	f := fields(args, a[:0])
	var subject, reply, hdrArg, sizeArg []byte
	switch {
	case !headers && len(f) == 2:
		subject, sizeArg = f[0], f[1]
	case !headers && len(f) == 3:
		subject, reply, sizeArg = f[0], f[1], f[2]
	case headers && len(f) == 3:
		subject, hdrArg, sizeArg = f[0], f[1], f[2]
	case headers && len(f) == 4:
		subject, reply, hdrArg, sizeArg = f[0], f[1], f[2], f[3]
	default:
		return rest, ErrUnknownOp.withDetail("wrong number of arguments: %q", snippet(args))
	}
	size, ok := parseSize(sizeArg)
	if !ok {
		return rest, ErrUnknownOp.withDetail("bad or missing size: %q", snippet(args))
	}
	hdr := -1
	if headers {
		if hdr, ok = parseSize(hdrArg); !ok || hdr > size {
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
		return rest[size+2:], p.h.Pub(subject, reply, hdr, rest[:size])
	}
	// Split: keep the arguments and what there is of the payload.
	p.args = append(append(p.args[:0], subject...), reply...)
	p.subject = len(subject)
	p.hdr, p.size = hdr, size
	if cap(p.msg) < size+2 {
		p.msg = bufpool.Get(max(size+2, 512)) // pooled if large
	}
	p.msg = append(p.msg[:0], rest...)
	p.state = statePayload
	return nil, nil
}

func (p *Parser) finishSplitPayload() error {
	p.state = stateOp
	msg := p.msg
	if msg[p.size] != '\r' || msg[p.size+1] != '\n' {
		return ErrUnknownOp.withDetail("payload not followed by CRLF (wrong length?)")
	}
	var err error
	if p.rh != nil {
		err = p.finishRouteMsg(msg[:p.size])
	} else {
		var reply []byte
		if len(p.args) > p.subject {
			reply = p.args[p.subject:]
		}
		err = p.h.Pub(p.args[:p.subject], reply, p.hdr, msg[:p.size])
	}
	p.msg = msg[:0]
	if cap(p.msg) > retainMax {
		bufpool.Put(p.msg) // the handler is done with it
		p.msg = nil
	}
	return err
}

// PayloadSpace returns the part of a split message's payload (and its
// CRLF) still to come, for the caller to read into directly, or nil when
// the parser is not inside a payload. Reading straight into it saves a
// copy and lets one read take more than the caller's read buffer holds.
// Report what was read with PayloadRead.
func (p *Parser) PayloadSpace() []byte {
	if p.state != statePayload {
		return nil
	}
	return p.msg[len(p.msg) : p.size+2]
}

// PayloadRead accounts for n bytes read into the slice PayloadSpace
// returned, and hands the message to the Handler once it is complete.
func (p *Parser) PayloadRead(n int) error {
	p.msg = p.msg[:len(p.msg)+n]
	if len(p.msg) < p.size+2 {
		return nil
	}
	return p.finishSplitPayload()
}

// ops lists every operation name a client may send, for validOpPrefix.
var ops = []string{"PUB", "HPUB", "SUB", "UNSUB", "PING", "PONG", "CONNECT", "+OK", "INFO", "-ERR"}

// opNames returns the operation names this parser accepts.
func (p *Parser) opNames() []string {
	if p.rh != nil {
		return routeOps
	}
	return ops
}

// validOpPrefix reports whether an incomplete control line could still be
// a valid operation: its first token, as far as it goes, is a prefix of an
// operation name, case-insensitively, followed by a separator if complete
// (a CR only as the last byte: a line of one word). It lets garbage be
// refused at once instead of after MaxControlLine bytes.
func validOpPrefix(line []byte, ops []string) bool {
	tok := line
	for i, c := range line {
		if c == ' ' || c == '\t' || c == '\r' {
			if c == '\r' && i+1 < len(line) {
				return false // only the line's LF may follow a CR
			}
			tok = line[:i]
			break
		}
	}
	for _, op := range ops {
		if len(tok) > len(op) {
			continue
		}
		if len(tok) < len(line) && len(tok) != len(op) {
			continue // the token ended before the name did
		}
		if asciiEqualFold(tok, op[:len(tok)]) {
			return true
		}
	}
	return false
}

// cutOp splits a control line into its operation name and arguments.
func cutOp(line []byte) (op, args []byte) {
	for i, c := range line {
		if c == ' ' || c == '\t' {
			return line[:i], line[i+1:]
		}
	}
	return line, nil
}

func opIs(op []byte, name string) bool {
	return len(op) == len(name) && asciiEqualFold(op, name)
}

func asciiEqualFold(b []byte, s string) bool {
	for i := range b {
		c := b[i]
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// fields splits args on runs of spaces and tabs into dst, stopping at
// cap(dst)+1 fields (the caller only needs to know that there are too many).
func fields(args []byte, dst [][]byte) [][]byte {
	start := -1
	for i, c := range args {
		if c == ' ' || c == '\t' {
			if start >= 0 {
				if len(dst) == cap(dst) {
					return append(dst, nil) // one too many: the caller rejects
				}
				dst = append(dst, args[start:i])
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		if len(dst) == cap(dst) {
			return append(dst, nil)
		}
		dst = append(dst, args[start:])
	}
	return dst
}

// parseSize parses a non-negative decimal that fits in an int.
func parseSize(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func trimCR(line []byte) []byte {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		return line[:n-1]
	}
	return line
}

// snippet bounds what of a bad line goes into a log message.
func snippet(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}
