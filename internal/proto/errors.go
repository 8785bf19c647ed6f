package proto

import "fmt"

// Error is a protocol error: Text is exactly what a NATS server writes
// between the quotes of -ERR '...', and Close says whether the server
// closes the connection after sending it.
type Error struct {
	Text  string
	Close bool
	// Detail says what was wrong, for the server's log; it is never sent.
	Detail string
}

func (e *Error) Error() string {
	if e.Text == "" {
		return "proto: " + e.Detail
	}
	if e.Detail != "" {
		return "proto: " + e.Text + ": " + e.Detail
	}
	return "proto: " + e.Text
}

// Is makes errors.Is match an *Error with the same text, so the sentinels
// below can be compared against errors that carry a detail.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Text == e.Text
}

// withDetail returns a copy of e with a detail for the log.
func (e *Error) withDetail(format string, args ...any) *Error {
	c := *e
	c.Detail = fmt.Sprintf(format, args...)
	return &c
}

// The protocol errors, with the reference server's exact text.
var (
	ErrUnknownOp             = &Error{Text: "Unknown Protocol Operation", Close: true}
	ErrMaxControlLine        = &Error{Text: "maximum control line exceeded", Close: true}
	ErrMaxPayload            = &Error{Text: "Maximum Payload Violation", Close: true}
	ErrAuthorization         = &Error{Text: "Authorization Violation", Close: true}
	ErrAuthTimeout           = &Error{Text: "Authentication Timeout", Close: true}
	ErrMaxConnections        = &Error{Text: "maximum connections exceeded", Close: true}
	ErrMaxAccountConnections = &Error{Text: "maximum account active connections exceeded", Close: true}
	ErrTLSRequired           = &Error{Text: "Secure Connection - TLS Required", Close: true}
	ErrStaleConnection       = &Error{Text: "Stale Connection", Close: true}
	ErrInvalidProtocol       = &Error{Text: "invalid client protocol", Close: true}
	ErrUserExpired           = &Error{Text: "User Authentication Expired", Close: true}
	ErrAccountExpired        = &Error{Text: "Account Authentication Expired", Close: true}
	ErrUserRevoked           = &Error{Text: "User Authentication Revoked", Close: true}
	ErrNoRespNeedHeaders     = &Error{Text: "no responders requires headers support", Close: true}
	ErrInvalidSubject        = &Error{Text: "Invalid Subject"}
	ErrInvalidPubSubject     = &Error{Text: "Invalid Publish Subject"}
	ErrMaxSubscriptions      = &Error{Text: "maximum subscriptions exceeded"}
	// ErrClientError is a client's own -ERR: the connection closes without
	// an answer (Text is empty: nothing is sent).
	ErrClientError = &Error{Close: true}
)

// PermissionsPublish returns the error for a publish the client may not make.
func PermissionsPublish(subject []byte) *Error {
	return &Error{Text: fmt.Sprintf("Permissions Violation for Publish to %q", subject)}
}

// PermissionsSubscribe returns the error for a subscription the client may
// not make; queue is empty for a plain subscription.
func PermissionsSubscribe(subject, queue []byte) *Error {
	if len(queue) > 0 {
		return &Error{Text: fmt.Sprintf("Permissions Violation for Subscription to %q using queue %q", subject, queue)}
	}
	return &Error{Text: fmt.Sprintf("Permissions Violation for Subscription to %q", subject)}
}
