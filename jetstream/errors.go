package jetstream

import (
	"errors"
	"fmt"
)

// The API errors clients branch on, with the reference server's codes and
// texts (ADR-7). Each call returns a fresh value: callers may not modify a
// shared one.
func apiErr(code int, errCode uint16, desc string) *APIError {
	return &APIError{Code: code, ErrCode: errCode, Description: desc}
}

func errBadRequest() *APIError           { return apiErr(400, 10003, "bad request") }
func errInvalidJSON(err error) *APIError { return apiErr(400, 10025, "invalid JSON: "+err.Error()) }
func errStreamNotFound() *APIError       { return apiErr(404, 10059, "stream not found") }
func errStreamNameExist() *APIError {
	return apiErr(400, 10058, "stream name already in use with a different configuration")
}
func errStreamMismatch() *APIError {
	return apiErr(400, 10056, "stream name in subject does not match request")
}
func errSubjectOverlap() *APIError {
	return apiErr(400, 10065, "subjects overlap with an existing stream")
}
func errMaxStreams() *APIError   { return apiErr(400, 10027, "maximum number of streams reached") }
func errMaxConsumers() *APIError { return apiErr(400, 10026, "maximum consumers limit reached") }
func errStreamConfig(err error) *APIError {
	return apiErr(500, 10052, err.Error())
}
func errSealed() *APIError                 { return apiErr(400, 10109, "invalid operation on sealed stream") }
func errStreamStore(err error) *APIError   { return apiErr(503, 10077, err.Error()) }
func errStreamGeneral(err error) *APIError { return apiErr(500, 10051, err.Error()) }
func errNoMessage() *APIError              { return apiErr(404, 10037, "no message found") }
func errMsgTooBig() *APIError              { return apiErr(400, 10054, "message size exceeds maximum allowed") }
func errStreamNotMatch() *APIError         { return apiErr(400, 10060, "expected stream does not match") }
func errWrongLastSeq(seq uint64) *APIError {
	return apiErr(400, 10071, fmt.Sprintf("wrong last sequence: %d", seq))
}
func errWrongLastMsgID(id string) *APIError {
	return apiErr(400, 10070, "wrong last msg ID: "+id)
}
func errConsumerNotFound() *APIError { return apiErr(404, 10014, "consumer not found") }
func errConsumerExists() *APIError   { return apiErr(400, 10148, "consumer already exists") }
func errConsumerNotExist() *APIError { return apiErr(400, 10149, "consumer does not exist") }
func errConsumerCreate(err error) *APIError {
	return apiErr(500, 10012, err.Error())
}
func errConsumerDurableMismatch() *APIError {
	return apiErr(400, 10017, "consumer name in subject does not match durable name in request")
}
func errConsumerFilterMismatch() *APIError {
	return apiErr(400, 10131, "Consumer create request did not match filtered subject from create subject")
}
func errConsumerInvalidPolicy(err error) *APIError { return apiErr(400, 10094, err.Error()) }
func errConsumerDeliverWildcards() *APIError {
	return apiErr(400, 10079, "consumer deliver subject has wildcards")
}

// errDeliverNotPermitted refuses a push consumer whose creator may not
// publish on its deliver subject: the server would publish there for it.
// The reference server has no such check; its error code for a bad
// deliver subject is the one clients know.
func errDeliverNotPermitted() *APIError {
	return apiErr(400, 10112, "invalid push consumer deliver subject: permissions do not allow publishing to it")
}
func errConsumerPushMaxWaiting() *APIError {
	return apiErr(400, 10080, "consumer in push mode can not set max waiting")
}
func errConsumerSmallHeartbeat() *APIError {
	return apiErr(400, 10083, "consumer idle heartbeat needs to be >= 100ms")
}
func errConsumerFCNeedsHeartbeat() *APIError {
	return apiErr(400, 10108, "consumer with flow control also needs heartbeats")
}
func errConsumerHBRequiresPush() *APIError {
	return apiErr(400, 10088, "consumer idle heartbeat requires a push based consumer")
}
func errConsumerFCRequiresPush() *APIError {
	return apiErr(400, 10089, "consumer flow control requires a push based consumer")
}
func errConsumerWQExplicitAck() *APIError {
	return apiErr(400, 10098, "workqueue stream requires explicit ack")
}
func errConsumerMaxDeliverBackoff() *APIError {
	return apiErr(400, 10116, "max deliver is required to be > length of backoff values")
}
func errConsumerDuplicateFilters() *APIError {
	return apiErr(400, 10136, "consumer cannot have both FilterSubject and FilterSubjects specified")
}
func errConsumerOverlappingFilters() *APIError {
	return apiErr(400, 10138, "consumer subject filters cannot overlap")
}
func errNotEnabled() *APIError { return apiErr(503, 10076, "JetStream not enabled") }

// Errors of the package itself, outside the API.
var (
	// ErrClosed is returned by operations on a closed JetStream.
	ErrClosed = errors.New("jetstream: closed")
	// ErrInvalidOptions wraps every error New returns for bad Options.
	ErrInvalidOptions = errors.New("jetstream: invalid options")
	// ErrStoreDirLocked is returned by New when another process (or
	// another JetStream in this one) holds the store directory.
	ErrStoreDirLocked = errors.New("jetstream: store directory in use")
)
