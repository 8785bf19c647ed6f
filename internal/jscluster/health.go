package jscluster

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The health of this server's meta replica, in nats-server's words (its
// healthz): /healthz answers 503 with them.
var (
	// ErrNoMetaLeader: no meta leader is known here.
	ErrNoMetaLeader = errors.New("JetStream has not established contact with a meta leader")
	// ErrMetaBehind: a leader is known, but this server has not applied
	// all it knows to be committed, or cannot hear the leader.
	ErrMetaBehind = errors.New("JetStream is not current with the meta leader")
	// ErrMetaStopped: the meta group stopped on this server (an entry it
	// could not apply, a failed write).
	ErrMetaStopped = errors.New("JetStream meta layer is not running")
)

// MetaInfo is the meta group as this server sees it: /jsz's
// meta_cluster.
type MetaInfo struct {
	Leader string // "" while none is known
	// Size is the number of voters.
	Size int
	// Replicas are the voters but the leader (but this server, while no
	// leader is known), by name.
	Replicas []PeerInfo
}

// PeerInfo is one replica of the meta group, as nats-server's PeerInfo.
type PeerInfo struct {
	Name string
	// Current: on the leader, the replica holds every entry and its link
	// is up; elsewhere, its link is up.
	Current bool
	// Offline: no link to it is up.
	Offline bool
	// Active is how long since its link last brought a frame (0 without
	// a link).
	Active time.Duration
	// Lag is how many entries it is behind, known on the leader only.
	Lag uint64
}

// MetaInfo returns the meta group as this server sees it.
func (c *Cluster) MetaInfo() (MetaInfo, error) {
	st, err := c.MetaStatus()
	if err != nil {
		return MetaInfo{}, err
	}
	var mi MetaInfo
	if st.Lead != 0 {
		mi.Leader = c.nameOf(st.Lead)
	}
	skip := st.Lead
	if skip == 0 {
		skip = c.id
	}
	last, up := c.links()
	leading := st.Lead == c.id
	leaderLast := st.Progress[c.id].Match
	now := time.Now()
	for id := range st.Config.Voters.IDs() {
		mi.Size++
		if id == skip {
			continue
		}
		pi := PeerInfo{Name: c.nameOf(id), Offline: id != c.id && !up[id]}
		if t, ok := last[id]; ok && !pi.Offline {
			pi.Active = now.Sub(t)
		}
		switch {
		case leading:
			if pr, ok := st.Progress[id]; ok && leaderLast > pr.Match {
				pi.Lag = leaderLast - pr.Match
			}
			pi.Current = !pi.Offline && pi.Lag == 0
		default:
			pi.Current = !pi.Offline
		}
		mi.Replicas = append(mi.Replicas, pi)
	}
	slices.SortFunc(mi.Replicas, func(a, b PeerInfo) int { return strings.Compare(a.Name, b.Name) })
	return mi, nil
}

// Health reports whether this server's meta replica is current: nil, or
// ErrNoMetaLeader, ErrMetaBehind or ErrMetaStopped (wrapped with detail).
func (c *Cluster) Health() error {
	if !c.joined.Load() {
		return fmt.Errorf("%w: not in the meta group yet", ErrNoMetaLeader)
	}
	st, err := c.MetaStatus()
	switch {
	case err != nil:
		return fmt.Errorf("%w: %w", ErrMetaStopped, err)
	case st.Err != nil:
		return fmt.Errorf("%w: %w", ErrMetaStopped, st.Err)
	case st.Held != 0:
		return fmt.Errorf("%w: the replica is held (%v)", ErrMetaBehind, st.Held)
	case st.Lead == 0:
		return ErrNoMetaLeader
	case st.Lead == c.id:
		return nil
	case st.Applied < st.GetCommit():
		return fmt.Errorf("%w: applied %d of %d committed", ErrMetaBehind, st.Applied, st.GetCommit())
	}
	c.mu.Lock()
	p := c.mu.peers[st.Lead]
	up := p != nil && p.up
	c.mu.Unlock()
	if !up {
		return fmt.Errorf("%w: no link to the leader", ErrMetaBehind)
	}
	return nil
}
