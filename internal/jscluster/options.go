package jscluster

import (
	"cmp"
	"fmt"
	"log/slog"
	"time"

	"github.com/skiffmq/skiff/store"
	"github.com/skiffmq/skiff/store/vfs"
)

// Defaults of the Options.
const (
	DefaultTick            = 100 * time.Millisecond
	DefaultBootstrapWait   = 2 * time.Second
	DefaultMaxVoters       = 7
	DefaultSnapshotEntries = 1024
	DefaultSnapshotKeep    = 256
	DefaultHoldTimeout     = 10 * time.Second
)

// Options configure a Cluster. The zero value of every field but Dir means
// its default.
type Options struct {
	// Dir is the server's raft directory (JetStream's StoreDir/raft): the
	// node file, the WAL (wal/) and the meta group's snapshots (meta/).
	// Required; created if missing.
	Dir string
	// FS is the file system of Dir (default the operating system's).
	FS vfs.FS
	// Durability is the WAL's sync policy (default store.SyncAlways: a
	// meta entry is acknowledged once fsynced on a quorum).
	Durability store.Durability
	// WALSegmentBytes is the size at which the WAL starts a new segment
	// (default raftlog.DefaultSegmentBytes, 64 MiB); tests make it small
	// to see segments come and go.
	WALSegmentBytes int64
	// Tick is the raft tick (default 100 ms): leaders send heartbeats
	// every tick, followers campaign after 10 to 20 ticks without one.
	Tick time.Duration
	// BootstrapWait is how long a server with no meta state waits after
	// Start before it may found a meta group (default 2 s), so that the
	// routes and links of servers that hold one come up first: a seed
	// restarted with an empty directory joins the group its peers hold
	// rather than found another.
	BootstrapWait time.Duration
	// MaxVoters bounds the voters of the meta group (default 7); the
	// servers past it follow as learners.
	MaxVoters int
	// SnapshotEntries is how many applied entries the meta group takes
	// between two snapshots of its state (default 1,024), and SnapshotKeep
	// how many entries it keeps behind a snapshot for followers a little
	// behind (default 256); a follower further behind gets the snapshot.
	SnapshotEntries int
	SnapshotKeep    int
	// HoldTimeout is how long a replica held after its machine restarted
	// from an unclean stop (its WAL may have lost an unsynced tail) may go
	// without knowing a leader before it is released all the same
	// (default 10 s): when a whole group lost power, none has what the
	// others lost, and releasing them is the documented loss
	// (multiraft.Options.HoldTimeout).
	HoldTimeout time.Duration
	// Logger receives the cluster's logs (default: discard).
	Logger *slog.Logger
	// OnStreams, if set, is told which stream assignments changed, once
	// they are applied to the meta state: the keys of the streams an
	// entry assigned, updated or removed, or all = true when a snapshot
	// replaced the whole state (at Start too). It runs on the meta
	// group's apply goroutine, in log order, and must not block; it reads
	// the state with Cluster.View.
	OnStreams func(keys []StreamKey, all bool)
}

func (o Options) withDefaults() (Options, error) {
	if o.FS == nil {
		o.FS = vfs.OS
	}
	if o.Durability.Interval == 0 {
		o.Durability.Interval = store.DefaultSyncInterval
	}
	o.Tick = cmp.Or(o.Tick, DefaultTick)
	o.BootstrapWait = cmp.Or(o.BootstrapWait, DefaultBootstrapWait)
	o.MaxVoters = cmp.Or(o.MaxVoters, DefaultMaxVoters)
	o.SnapshotEntries = cmp.Or(o.SnapshotEntries, DefaultSnapshotEntries)
	o.SnapshotKeep = cmp.Or(o.SnapshotKeep, DefaultSnapshotKeep)
	o.HoldTimeout = cmp.Or(o.HoldTimeout, DefaultHoldTimeout)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.Dir == "":
		return o, fmt.Errorf("%w: no Dir", ErrInvalidOptions)
	case o.Tick < 0 || o.BootstrapWait < 0 || o.HoldTimeout < 0 || o.WALSegmentBytes < 0:
		return o, fmt.Errorf("%w: negative duration", ErrInvalidOptions)
	case o.MaxVoters < 1 || o.SnapshotEntries < 1 || o.SnapshotKeep < 0:
		return o, fmt.Errorf("%w: MaxVoters %d, SnapshotEntries %d, SnapshotKeep %d", ErrInvalidOptions,
			o.MaxVoters, o.SnapshotEntries, o.SnapshotKeep)
	}
	return o, nil
}
