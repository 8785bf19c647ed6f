package raftlog

import (
	"fmt"
	"log/slog"

	"github.com/skiffmq/skiff/store"
	"github.com/skiffmq/skiff/store/vfs"
)

// Defaults applied by Open to zero fields.
const (
	DefaultSegmentBytes  = 64 << 20
	DefaultCacheBytes    = 4 << 20
	DefaultMaxCacheBytes = 256 << 20
	DefaultQueueBytes    = 64 << 20
	DefaultMaxBytes      = 4 << 30
	// DefaultRecycleSegments is how many removed segments wait to be
	// written over by new ones (4, a quarter GiB at the default segment
	// size).
	DefaultRecycleSegments = 4
)

// Options configures a Log. The zero value of every field but Dir means
// its default, so Options{Dir: dir} is a log that fsyncs every batch
// (store.SyncAlways).
type Options struct {
	// Dir holds the log's segments and nothing else; it is created if
	// missing.
	Dir string
	// FS is the file system (default the operating system's). Tests
	// inject faults through it, or use storetest.MemFS.
	FS vfs.FS
	// Durability is when the log fsyncs, with the store's meaning (default
	// store.SyncAlways): under SyncAlways a batch with entries is fsynced
	// before its callbacks run; under SyncInterval every Interval in the
	// background; under SyncNever never for entries. Under every policy, a
	// batch that changes a group's term or vote, or installs a received
	// snapshot, is fsynced before its callbacks run: a vote forgotten in a
	// crash could be cast twice.
	Durability store.Durability
	// SegmentBytes starts a new segment once the current one has reached
	// it (default 64 MiB). A batch is never split, so a segment may exceed
	// it by one batch.
	SegmentBytes int64
	// RecycleSegments is how many removed segments are kept, as free
	// files (NNN.free), to be written over by the next segments instead
	// of creating files (default DefaultRecycleSegments; negative: none).
	// Writing over a file whose pages the operating system still caches
	// costs a fraction of the CPU of filling new ones (page allocation,
	// the file system's block reservation), and its fsyncs have no file
	// size to commit: docs/benchmarks/raftlog.md has the measurement.
	RecycleSegments int
	// CacheBytes bounds each group's cache of its most recent entries
	// (default 4 MiB), and MaxCacheBytes all groups' together (default
	// 256 MiB). Entries not cached are read from the segments.
	CacheBytes    int64
	MaxCacheBytes int64
	// QueueBytes is how much may wait for the writer before Room reports
	// false (default 64 MiB). Save never blocks; callers that check Room
	// keep the queue near this bound.
	QueueBytes int64
	// MaxBytes is the size of the segments past which OnPressure is
	// called (default 4 GiB).
	MaxBytes int64
	// OnPressure, if set, is called on the writer goroutine, at most once
	// a segment, while the segments take more than MaxBytes, with the
	// groups whose entries keep the oldest segment from being removed:
	// they should take a snapshot and Compact. It must not block.
	OnPressure func(groups []uint64)
	// Logger receives recovery reports and background errors (default
	// slog.Default()).
	Logger *slog.Logger
	// BootID returns the operating system's boot ID, which Open records
	// and compares with the last run's (Report.Rebooted); default: the
	// FS's, if it models a machine (Machine), else DefaultBootID. Tests
	// inject reboots with it.
	BootID func() string
	// HoldRecovery keeps a lost tail on record until AckRecovery: when
	// the log opens Unclean and Rebooted, Open does not record the new
	// boot, and Close does not mark the log closed cleanly, so that a
	// caller that failed to act on the report (holding what the tail
	// may have lost) sees the same report at its next start.
	HoldRecovery bool
}

// Machine is implemented by a file system that models the machine it
// runs on, for tests of power loss (internal/chaosfs): BootID is the boot
// ID the simulated machine's operating system gives, which changes at
// each simulated restart. Open takes it as Options.BootID's default.
type Machine interface {
	BootID() string
}

// DefaultOptions returns a log in dir with every default filled in.
func DefaultOptions(dir string) Options {
	o := Options{Dir: dir}
	o.fill()
	return o
}

func (o *Options) fill() {
	if o.FS == nil {
		o.FS = vfs.OS
	}
	if o.Durability.Interval == 0 {
		o.Durability.Interval = store.DefaultSyncInterval
	}
	if o.SegmentBytes == 0 {
		o.SegmentBytes = DefaultSegmentBytes
	}
	if o.RecycleSegments == 0 {
		o.RecycleSegments = DefaultRecycleSegments
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = DefaultCacheBytes
	}
	if o.MaxCacheBytes == 0 {
		o.MaxCacheBytes = DefaultMaxCacheBytes
	}
	if o.QueueBytes == 0 {
		o.QueueBytes = DefaultQueueBytes
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.BootID == nil {
		o.BootID = DefaultBootID
		if m, ok := o.FS.(Machine); ok {
			o.BootID = m.BootID
		}
	}
}

// validate reports the first invalid field of filled-in options.
func (o *Options) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case o.Dir == "":
		return bad("no Dir")
	case o.Durability.Sync > store.SyncNever:
		return bad("unknown sync policy %d", o.Durability.Sync)
	case o.Durability.Interval < 0:
		return bad("negative sync interval %v", o.Durability.Interval)
	case o.SegmentBytes < 1<<10 || o.SegmentBytes > 1<<40:
		return bad("SegmentBytes %d outside [1 KiB, 1 TiB]", o.SegmentBytes)
	case o.CacheBytes < 0, o.MaxCacheBytes < 0, o.QueueBytes < 0, o.MaxBytes < 0:
		return bad("negative size (CacheBytes %d, MaxCacheBytes %d, QueueBytes %d, MaxBytes %d)",
			o.CacheBytes, o.MaxCacheBytes, o.QueueBytes, o.MaxBytes)
	}
	return nil
}
