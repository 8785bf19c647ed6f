// Package proto reads and writes the NATS client protocol.
//
// Parser consumes the bytes a client sends, in chunks split anywhere, and
// calls a Handler once per operation:
//
//	CONNECT {json}\r\n                          Handler.Connect
//	PUB <subject> [reply] <#bytes>\r\n          Handler.Pub (hdr = -1)
//	    <payload>\r\n
//	HPUB <subject> [reply] <#hdr> <#total>\r\n  Handler.Pub (hdr = #hdr)
//	    NATS/1.0\r\n<headers>\r\n\r\n<payload>\r\n
//	SUB <subject> [queue] <sid>\r\n             Handler.Sub
//	UNSUB <sid> [max]\r\n                       Handler.Unsub
//	PING\r\n / PONG\r\n                         Handler.Ping / Handler.Pong
//
// Operation names are case-insensitive, arguments are separated by spaces or
// tabs, and a control line may end in LF alone; a payload must be followed
// by exactly CRLF. The arguments a Handler receives point into the read
// buffer (or, for an operation split across reads, into the parser's own
// copy): they are valid only until the call returns. When a whole operation
// is in one read, parsing copies nothing.
//
// Malformed input yields an *Error carrying the exact text a NATS server
// sends in -ERR and whether the connection must close. Limits are explicit:
// a control line longer than MaxControlLine and a payload larger than
// MaxPayload are refused before anything is buffered.
//
// The Append functions encode what a server sends: INFO, MSG, HMSG, PING,
// PONG, +OK and -ERR.
//
// A Parser is not safe for concurrent use; a connection owns one.
package proto
