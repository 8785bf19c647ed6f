package jscluster

import (
	"encoding/json"
	"fmt"
)

// entryVersion is the version of meta entries and snapshots this code
// writes and reads. A server that meets another version stops its meta
// group (ErrBadEntry) rather than guess: all servers of a cluster run the
// same version of the format.
const entryVersion = 1

// Op is what a meta entry does.
type Op string

// The operations of meta entries.
const (
	// OpAddServer adds a server to the meta state. It travels only as the
	// context of the conf change that adds the server to the meta group
	// as a learner, so that the state's servers and raft's membership
	// change together.
	OpAddServer Op = "addServer"
	// OpAssignStream assigns a new stream to its peers; the result is
	// ErrStreamExists if the account has a stream of that name.
	OpAssignStream Op = "assignStream"
	// OpUpdateStream replaces an assigned stream's configuration and
	// peers; the result is ErrStreamNotFound if it is not assigned.
	OpUpdateStream Op = "updateStream"
	// OpRemoveStream removes an assigned stream; the result is
	// ErrStreamNotFound if it is not assigned.
	OpRemoveStream Op = "removeStream"
)

// Entry is one change of the meta state: the JSON data of a raft entry,
// or the context of a conf change.
//
//	{"v":1,"op":"assignStream","prop":{...},"stream":{"account":"$G","name":"ORDERS",...}}
type Entry struct {
	V  int `json:"v"`
	Op Op  `json:"op"`
	// Prop names the proposal, so that the server that proposed it learns
	// its result when it applies it. Set by Cluster.Propose.
	Prop   *PropID           `json:"prop,omitempty"`
	Server *ServerInfo       `json:"server,omitempty"`
	Stream *StreamAssignment `json:"stream,omitempty"`
}

// PropID names one proposal: its server, the run of that server (random
// at each start, so that a replayed entry never wakes a proposal of a
// later run) and a sequence within the run.
type PropID struct {
	Server uint64 `json:"server"`
	Run    uint64 `json:"run"`
	Seq    uint64 `json:"seq"`
}

// encodeEntry returns e's JSON with the current version.
func encodeEntry(e Entry) ([]byte, error) {
	e.V = entryVersion
	return json.Marshal(&e)
}

// decodeEntry reads and checks an entry.
func decodeEntry(b []byte) (Entry, error) {
	var e Entry
	if err := json.Unmarshal(b, &e); err != nil {
		return e, fmt.Errorf("%w: %w", ErrBadEntry, err)
	}
	if e.V != entryVersion {
		return e, fmt.Errorf("%w: version %d (this server reads %d)", ErrBadEntry, e.V, entryVersion)
	}
	switch e.Op {
	case OpAddServer:
		if s := e.Server; s == nil || s.Name == "" || s.ID != RaftID(s.Name) {
			return e, fmt.Errorf("%w: %s without a server, or with a wrong raft ID", ErrBadEntry, e.Op)
		}
	case OpAssignStream, OpUpdateStream, OpRemoveStream:
		if sa := e.Stream; sa == nil || sa.Account == "" || sa.Name == "" {
			return e, fmt.Errorf("%w: %s without an account and a stream name", ErrBadEntry, e.Op)
		}
	default:
		return e, fmt.Errorf("%w: unknown operation %q", ErrBadEntry, e.Op)
	}
	return e, nil
}
