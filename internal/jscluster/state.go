package jscluster

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// ServerInfo is a server of the meta group.
type ServerInfo struct {
	Name string `json:"name"`
	// ID is the server's raft ID, RaftID(Name).
	ID uint64 `json:"id"`
	// Joined is when the meta leader added it.
	Joined time.Time `json:"joined"`
}

// StreamKey names a stream: streams live in accounts.
type StreamKey struct {
	Account, Name string
}

func (k StreamKey) String() string { return k.Account + " > " + k.Name }

// StreamAssignment is a stream as the meta group assigned it.
type StreamAssignment struct {
	Account string `json:"account"`
	Name    string `json:"name"`
	// Config is the stream's configuration as the JetStream API reads it;
	// this package does not look into it.
	Config json.RawMessage `json:"config,omitempty"`
	// Group is the stream's raft group ID: the meta log index of the
	// entry that assigned it, unique and never reused. Set when applied.
	Group uint64 `json:"group,omitempty"`
	// Peers are the servers that hold the stream, by name, the preferred
	// leader first.
	Peers []string `json:"peers"`
	// Created is when the meta leader assigned it.
	Created time.Time `json:"created"`
	// Raft: the stream has a raft group (Group), whatever its number of
	// peers: created with more than one replica, or scaled up since. A
	// stream scaled down to one peer keeps its group, of one voter.
	Raft bool `json:"raft,omitempty"`
	// Join: the group's members changed since it was founded (scaled, a
	// peer replaced). A server that opens the group without a log of it
	// then joins it empty, taking the state from its leader, rather than
	// founding it with Peers as its voters.
	Join bool `json:"join,omitempty"`
}

// HasGroup reports whether the stream has a raft group: Raft, or more
// than one peer (an assignment from before Raft was recorded).
func (sa *StreamAssignment) HasGroup() bool { return sa.Raft || len(sa.Peers) > 1 }

// Key returns the stream's key.
func (sa *StreamAssignment) Key() StreamKey { return StreamKey{sa.Account, sa.Name} }

func (sa *StreamAssignment) clone() *StreamAssignment {
	c := *sa
	c.Config = slices.Clone(sa.Config)
	c.Peers = slices.Clone(sa.Peers)
	return &c
}

// State is the meta group's replicated state: every server applies the
// same entries to it in the same order.
type State struct {
	// ID names the meta group: its founder's name and the time it was
	// founded. Raft links between servers of different groups are
	// refused.
	ID      string
	Servers map[string]ServerInfo
	Streams map[StreamKey]*StreamAssignment
}

func newState() State {
	return State{Servers: map[string]ServerInfo{}, Streams: map[StreamKey]*StreamAssignment{}}
}

// clone returns a deep copy of s.
func (s *State) clone() State {
	c := State{ID: s.ID, Servers: maps.Clone(s.Servers), Streams: make(map[StreamKey]*StreamAssignment, len(s.Streams))}
	for k, sa := range s.Streams {
		c.Streams[k] = sa.clone()
	}
	return c
}

// serverByID returns the server with raft ID id.
func (s *State) serverByID(id uint64) (ServerInfo, bool) {
	for _, si := range s.Servers {
		if si.ID == id {
			return si, true
		}
	}
	return ServerInfo{}, false
}

// apply applies e, the entry at index, and returns its result: nil, or
// the error the proposer is told (the state is then unchanged).
func (s *State) apply(e *Entry, index uint64) error {
	switch e.Op {
	case OpAddServer:
		s.Servers[e.Server.Name] = *e.Server
	case OpAssignStream:
		k := e.Stream.Key()
		if s.Streams[k] != nil {
			return fmt.Errorf("%w: %s", ErrStreamExists, k)
		}
		sa := e.Stream.clone()
		sa.Group = index
		s.Streams[k] = sa
	case OpUpdateStream:
		k := e.Stream.Key()
		old := s.Streams[k]
		if old == nil {
			return fmt.Errorf("%w: %s", ErrStreamNotFound, k)
		}
		sa := e.Stream.clone()
		sa.Group, sa.Created = old.Group, old.Created
		s.Streams[k] = sa
	case OpRemoveStream:
		k := e.Stream.Key()
		if s.Streams[k] == nil {
			return fmt.Errorf("%w: %s", ErrStreamNotFound, k)
		}
		delete(s.Streams, k)
	}
	return nil
}

// stateJSON is State as a snapshot holds it: lists in a fixed order, so
// that every server writes the same bytes for the same state.
type stateJSON struct {
	V       int                 `json:"v"`
	ID      string              `json:"id"`
	Servers []ServerInfo        `json:"servers"`
	Streams []*StreamAssignment `json:"streams"`
}

func encodeState(s *State) ([]byte, error) {
	j := stateJSON{V: entryVersion, ID: s.ID, Servers: slices.Collect(maps.Values(s.Servers)),
		Streams: slices.Collect(maps.Values(s.Streams))}
	slices.SortFunc(j.Servers, func(a, b ServerInfo) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(j.Streams, func(a, b *StreamAssignment) int {
		return cmp.Or(strings.Compare(a.Account, b.Account), strings.Compare(a.Name, b.Name))
	})
	return json.Marshal(&j)
}

func decodeState(b []byte) (State, error) {
	var j stateJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return State{}, fmt.Errorf("%w: snapshot: %w", ErrBadEntry, err)
	}
	if j.V != entryVersion {
		return State{}, fmt.Errorf("%w: snapshot version %d (this server reads %d)", ErrBadEntry, j.V, entryVersion)
	}
	s := newState()
	s.ID = j.ID
	for _, si := range j.Servers {
		s.Servers[si.Name] = si
	}
	for _, sa := range j.Streams {
		if sa == nil {
			return State{}, fmt.Errorf("%w: snapshot: null stream", ErrBadEntry)
		}
		s.Streams[sa.Key()] = sa
	}
	return s, nil
}
