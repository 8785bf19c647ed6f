package multiraft

import (
	"cmp"
	"fmt"
	"runtime"
	"time"

	"go.etcd.io/raft/v3"
)

// Options configure a Node. The zero value of every field but ID means its
// default (DefaultOptions).
//
// Some raft settings are not options, because the layers above rely on
// them: every group runs with PreVote and CheckQuorum (a partitioned
// replica cannot disrupt a live leader, and fast failover can forget a
// leader safely), ReadOnlySafe (ForgetLeader does nothing under the lease
// option), AsyncStorageWrites (one WAL writer serves every group),
// StepDownOnRemoval, and DisableProposalForwarding (the leader computes
// what it proposes, so a follower's proposal is refused, not forwarded).
type Options struct {
	// ID is this server's raft ID, which is also its replica ID in every
	// group it hosts. Required, non-zero.
	ID uint64

	// Tick is the interval of the server-wide ticker that ticks every
	// group (default 100 ms). Manual nodes are ticked by Node.Tick.
	Tick time.Duration
	// HeartbeatTicks is raft's HeartbeatTick: a leader sends heartbeats
	// every HeartbeatTicks ticks (default 1).
	HeartbeatTicks int
	// ElectionTicks is raft's ElectionTick: a follower that heard nothing
	// from its leader for ElectionTicks to 2×ElectionTicks ticks campaigns
	// (default 10: elections after 1 to 2 s with the default Tick). It must
	// be greater than HeartbeatTicks.
	ElectionTicks int

	// Workers is the number of scheduler goroutines that run groups' raft
	// state machines, each group on one worker at a time (default
	// min(GOMAXPROCS, 4)).
	Workers int

	// MaxSizePerMsg bounds the entries of one append message (default
	// 1 MiB); a single larger entry is still sent alone.
	MaxSizePerMsg uint64
	// MaxInflightMsgs bounds the append messages in flight to one follower
	// (default 256).
	MaxInflightMsgs int
	// MaxInflightBytes bounds the entry bytes in flight to one follower
	// (default 32 MiB, at least MaxSizePerMsg).
	MaxInflightBytes uint64
	// MaxUncommittedEntriesSize bounds a leader's uncommitted entry bytes;
	// proposals beyond it are refused with raft.ErrProposalDropped (default
	// 64 MiB).
	MaxUncommittedEntriesSize uint64
	// MaxCommittedSizePerReady bounds the committed entry bytes handed to a
	// group's apply goroutine and not yet applied (default 64 MiB).
	MaxCommittedSizePerReady uint64
	// MaxEntryBytes bounds one proposal's data: a larger one is refused
	// with ErrTooLarge, because every entry must fit in one transport frame
	// (default 16 MiB, at most MaxFrameBytes less 1 MiB).
	MaxEntryBytes int

	// FailoverGrace is how long the link to a leader's server may stay down
	// before this server's followers forget that leader (default 50 ms;
	// rounded up to whole ticks on a manual node).
	FailoverGrace time.Duration
	// CampaignStagger spaces the campaigns of a dead leader's followers:
	// the first in rank campaigns at once, the k-th after k×CampaignStagger
	// (default 150 ms).
	CampaignStagger time.Duration

	// CommitNoticeDelay is how long a leader holds an append that carries
	// no entries, only its commit index, before sending it; an append with
	// entries to the same follower and group sent meanwhile replaces it
	// (notice.go). Default 2 ms; negative: sent at once. A manual node
	// holds them only if it is set, until the Tick after it has passed.
	CommitNoticeDelay time.Duration

	// HoldTimeout is how long a replica held unsynced or lost
	// (HoldUnsynced, HoldLost) may go without knowing a leader before it
	// votes all the same (HoldVoting), and then before it is released
	// (default 10 s, rounded up to whole ticks): when every replica of a
	// group restarted unsynced, none would campaign otherwise. Wiped and
	// damaged replicas are never released by time.
	HoldTimeout time.Duration

	// Manual makes the node run nothing by itself: no ticker, no workers,
	// no apply goroutines and no timers. The caller drives it with Tick and
	// Process, from one goroutine: deterministic tests do.
	Manual bool

	// OnLeaderChange, if set, is called on a worker each time a group's
	// known leader or term changes as seen by this server (leader 0: none
	// known). It must not block.
	OnLeaderChange func(group, leader, term uint64)

	// OnCaughtUp, if set, is called once for a replica that started held
	// unsynced or lost (GroupConfig.Held, Hold), when it has applied an
	// entry of its leader's term, whether or not the hold timeout released
	// it before (held.go). It runs on the group's apply goroutine, which
	// waits for it: it must be short (a small file's write).
	OnCaughtUp func(group uint64)

	// Logger receives raft's log lines. The default drops debug and info
	// lines (every election would be logged) and writes warnings and
	// errors to the standard log package.
	Logger raft.Logger
}

// DefaultOptions returns the defaults documented on each Options field, with
// ID left zero.
func DefaultOptions() Options {
	return Options{
		Tick:                      100 * time.Millisecond,
		HeartbeatTicks:            1,
		ElectionTicks:             10,
		Workers:                   min(runtime.GOMAXPROCS(0), 4),
		MaxSizePerMsg:             1 << 20,
		MaxInflightMsgs:           256,
		MaxInflightBytes:          32 << 20,
		MaxUncommittedEntriesSize: 64 << 20,
		MaxCommittedSizePerReady:  64 << 20,
		MaxEntryBytes:             16 << 20,
		FailoverGrace:             50 * time.Millisecond,
		CampaignStagger:           150 * time.Millisecond,
		HoldTimeout:               10 * time.Second,
		CommitNoticeDelay:         2 * time.Millisecond,
	}
}

// withDefaults fills the zero fields of o and validates the result.
func (o Options) withDefaults() (Options, error) {
	d := DefaultOptions()
	o.Tick = cmp.Or(o.Tick, d.Tick)
	o.HeartbeatTicks = cmp.Or(o.HeartbeatTicks, d.HeartbeatTicks)
	o.ElectionTicks = cmp.Or(o.ElectionTicks, d.ElectionTicks)
	o.Workers = cmp.Or(o.Workers, d.Workers)
	o.MaxSizePerMsg = cmp.Or(o.MaxSizePerMsg, d.MaxSizePerMsg)
	o.MaxInflightMsgs = cmp.Or(o.MaxInflightMsgs, d.MaxInflightMsgs)
	o.MaxInflightBytes = cmp.Or(o.MaxInflightBytes, max(d.MaxInflightBytes, o.MaxSizePerMsg))
	o.MaxUncommittedEntriesSize = cmp.Or(o.MaxUncommittedEntriesSize, d.MaxUncommittedEntriesSize)
	o.MaxCommittedSizePerReady = cmp.Or(o.MaxCommittedSizePerReady, d.MaxCommittedSizePerReady)
	o.MaxEntryBytes = cmp.Or(o.MaxEntryBytes, d.MaxEntryBytes)
	o.FailoverGrace = cmp.Or(o.FailoverGrace, d.FailoverGrace)
	o.CampaignStagger = cmp.Or(o.CampaignStagger, d.CampaignStagger)
	o.HoldTimeout = cmp.Or(o.HoldTimeout, d.HoldTimeout)
	if !o.Manual {
		o.CommitNoticeDelay = cmp.Or(o.CommitNoticeDelay, d.CommitNoticeDelay)
	}
	if o.Logger == nil {
		o.Logger = quietLogger{&raft.DefaultLogger{Logger: stdLogger()}}
	}
	switch {
	case o.ID == 0 || raft.IsLocalMsgTarget(o.ID):
		return o, fmt.Errorf("%w: ID %d is not a usable raft ID", ErrInvalidOptions, o.ID)
	case o.Tick < 0 || o.FailoverGrace < 0 || o.CampaignStagger < 0 || o.HoldTimeout < 0:
		return o, fmt.Errorf("%w: negative duration", ErrInvalidOptions)
	case o.HeartbeatTicks < 0 || o.ElectionTicks <= o.HeartbeatTicks:
		return o, fmt.Errorf("%w: ElectionTicks (%d) must be greater than HeartbeatTicks (%d)",
			ErrInvalidOptions, o.ElectionTicks, o.HeartbeatTicks)
	case o.Workers < 0 || o.MaxInflightMsgs < 0 || o.MaxEntryBytes < 0:
		return o, fmt.Errorf("%w: negative count", ErrInvalidOptions)
	case o.MaxInflightBytes < o.MaxSizePerMsg:
		return o, fmt.Errorf("%w: MaxInflightBytes (%d) is below MaxSizePerMsg (%d)",
			ErrInvalidOptions, o.MaxInflightBytes, o.MaxSizePerMsg)
	case o.MaxEntryBytes > MaxFrameBytes-(1<<20):
		return o, fmt.Errorf("%w: MaxEntryBytes (%d) does not fit in a frame (%d)",
			ErrInvalidOptions, o.MaxEntryBytes, MaxFrameBytes)
	}
	return o, nil
}

// raftConfig is the raft.Config of one group (design 1.3).
func (o *Options) raftConfig(log Log, applied uint64) *raft.Config {
	return &raft.Config{
		ID:                        o.ID,
		ElectionTick:              o.ElectionTicks,
		HeartbeatTick:             o.HeartbeatTicks,
		Storage:                   log,
		Applied:                   applied,
		AsyncStorageWrites:        true,
		MaxSizePerMsg:             o.MaxSizePerMsg,
		MaxCommittedSizePerReady:  o.MaxCommittedSizePerReady,
		MaxUncommittedEntriesSize: o.MaxUncommittedEntriesSize,
		MaxInflightMsgs:           o.MaxInflightMsgs,
		MaxInflightBytes:          o.MaxInflightBytes,
		CheckQuorum:               true,
		PreVote:                   true,
		ReadOnlyOption:            raft.ReadOnlySafe,
		Logger:                    o.Logger,
		DisableProposalForwarding: true,
		StepDownOnRemoval:         true,
	}
}
