package proto

import "strconv"

// Fixed server operations.
var (
	Ping = []byte("PING\r\n")
	Pong = []byte("PONG\r\n")
	OK   = []byte("+OK\r\n")
)

// AppendMsg appends the delivery of a message to one subscription: MSG when
// hdr < 0, else HMSG with hdr bytes of headers at the start of msg. reply
// may be empty.
func AppendMsg(dst, subject, sid, reply []byte, hdr int, msg []byte) []byte {
	dst = AppendMsgLine(dst, subject, sid, reply, hdr, len(msg))
	dst = append(dst, msg...)
	return append(dst, "\r\n"...)
}

// AppendMsgLine appends only the control line of a delivery (through its
// CRLF), for a writer that copies the payload and the final CRLF itself.
func AppendMsgLine(dst, subject, sid, reply []byte, hdr, size int) []byte {
	if hdr < 0 {
		dst = append(dst, "MSG "...)
	} else {
		dst = append(dst, "HMSG "...)
	}
	dst = append(dst, subject...)
	dst = append(dst, ' ')
	dst = append(dst, sid...)
	dst = append(dst, ' ')
	if len(reply) > 0 {
		dst = append(dst, reply...)
		dst = append(dst, ' ')
	}
	if hdr >= 0 {
		dst = strconv.AppendInt(dst, int64(hdr), 10)
		dst = append(dst, ' ')
	}
	dst = strconv.AppendInt(dst, int64(size), 10)
	return append(dst, "\r\n"...)
}

// MsgSize returns how many bytes AppendMsg appends, so that a caller can
// check a bound before copying.
func MsgSize(subject, sid, reply []byte, hdr int, msg []byte) int {
	n := len("HMSG ") + len(subject) + 1 + len(sid) + 1 + 20 + 2 + len(msg) + 2
	if len(reply) > 0 {
		n += len(reply) + 1
	}
	if hdr >= 0 {
		n += 21
	}
	return n
}

// AppendErr appends -ERR '<text>'.
func AppendErr(dst []byte, text string) []byte {
	dst = append(dst, "-ERR '"...)
	dst = append(dst, text...)
	return append(dst, "'\r\n"...)
}

// NoRespondersHeader is the header block of the status message a server
// sends when a request finds no subscriber: "NATS/1.0 503" and a blank line.
const NoRespondersHeader = "NATS/1.0 503\r\n\r\n"
