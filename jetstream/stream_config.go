package jetstream

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/skiffmq/skiff/store"
	"github.com/skiffmq/skiff/subject"
)

// normalize fills a stream configuration's defaults and checks it.
func (js *JetStream) normalize(cfg StreamConfig) (StreamConfig, *APIError) {
	if err := validName(cfg.Name); err != nil {
		return cfg, errStreamConfig(fmt.Errorf("invalid stream name %q: %w", cfg.Name, err))
	}
	if len(cfg.Subjects) == 0 {
		cfg.Subjects = []string{cfg.Name}
	}
	if len(cfg.Subjects) > MaxStreamSubjects {
		return cfg, errStreamConfig(fmt.Errorf("too many subjects: %d, at most %d per stream", len(cfg.Subjects), MaxStreamSubjects))
	}
	seen := map[string]bool{}
	for _, s := range cfg.Subjects {
		if err := subject.ValidatePattern(s); err != nil {
			return cfg, errStreamConfig(fmt.Errorf("invalid subject %q: %w", s, err))
		}
		for _, reserved := range []string{"$JS.API.>", "$JS.ACK.>", "$JS.FC.>"} {
			if subject.Intersects(s, reserved) {
				return cfg, errStreamConfig(fmt.Errorf("subject %q overlaps the reserved %q", s, reserved))
			}
		}
		if seen[s] {
			return cfg, errStreamConfig(fmt.Errorf("duplicate subject %q", s))
		}
		seen[s] = true
	}
	own := newSubjectIndex()
	for _, s := range cfg.Subjects {
		if other, _, ok := own.intersecting(s); ok {
			return cfg, errStreamConfig(fmt.Errorf("subjects %q and %q overlap", other, s))
		}
		own.add(s, cfg.Name)
	}
	for _, v := range []*int64{&cfg.MaxMsgs, &cfg.MaxBytes, &cfg.MaxMsgsPerSubject} {
		if *v <= 0 {
			*v = -1
		}
	}
	if cfg.MaxMsgSize <= 0 {
		cfg.MaxMsgSize = -1
	}
	if cfg.MaxConsumers <= 0 {
		cfg.MaxConsumers = -1
	}
	if cfg.MaxAge < 0 {
		return cfg, errStreamConfig(errors.New("max_age can not be negative"))
	}
	if cfg.Duplicates == 0 {
		cfg.Duplicates = DefaultDupWindow
		if cfg.MaxAge > 0 && cfg.MaxAge < cfg.Duplicates {
			cfg.Duplicates = cfg.MaxAge
		}
	}
	if cfg.Duplicates < 0 || (cfg.MaxAge > 0 && cfg.Duplicates > cfg.MaxAge) {
		return cfg, errStreamConfig(errors.New("duplicates window can not be larger then max age"))
	}
	if cfg.DiscardNewPer {
		if cfg.Discard != DiscardNew {
			return cfg, errStreamConfig(errors.New("discard new per subject requires discard new policy to be set"))
		}
		if cfg.MaxMsgsPerSubject <= 0 {
			return cfg, errStreamConfig(errors.New("discard new per subject requires max msgs per subject > 0"))
		}
	}
	switch {
	case cfg.Replicas > 1 && js.raft == nil:
		return cfg, apiErr(500, 10074, "replicas > 1 not supported in non-clustered mode")
	case cfg.Replicas > maxReplicas:
		return cfg, errStreamConfig(fmt.Errorf("maximum replicas is %d", maxReplicas))
	case cfg.Replicas < 0:
		return cfg, apiErr(400, 10133, "replicas count cannot be negative")
	}
	cfg.Replicas = max(cfg.Replicas, 1)
	if cfg.Compression == "" {
		cfg.Compression = "none"
	}
	if cfg.Compression != "none" {
		return cfg, errStreamConfig(fmt.Errorf("compression %q is not supported", cfg.Compression))
	}
	switch sdm := cfg.SubjectDeleteMarkerTTL; {
	case sdm < 0:
		return cfg, errStreamConfig(errors.New("subject delete marker TTL must not be negative"))
	case sdm > 0 && sdm < time.Second:
		return cfg, errStreamConfig(errors.New("subject delete marker TTL must be at least 1 second"))
	case sdm > 0:
		// Markers are TTL'd rollups: both come with them, as in the
		// reference server.
		cfg.AllowMsgTTL, cfg.AllowRollup, cfg.DenyPurge = true, true, false
	}
	if cfg.Sealed {
		// A sealed stream changes no more: as the reference server,
		// its configuration says so.
		cfg.MaxAge, cfg.Discard = 0, DiscardNew
		cfg.DenyDelete, cfg.DenyPurge, cfg.AllowRollup = true, true, false
	}
	if cfg.AllowRollup && cfg.DenyPurge {
		return cfg, errStreamConfig(errors.New("roll-ups require the purge permission"))
	}
	if err := syncFromMetadata(&cfg); err != nil {
		return cfg, errStreamConfig(err)
	}
	switch {
	case cfg.SyncInterval <= 0:
		cfg.SyncInterval = DefaultSyncInterval
	case cfg.SyncInterval < MinSyncInterval:
		return cfg, errStreamConfig(fmt.Errorf("sync_interval %v is below the minimum %v", cfg.SyncInterval, MinSyncInterval))
	}
	syncToMetadata(&cfg)
	return cfg, nil
}

// validName checks a stream or consumer name: it names a directory and a
// subject token.
func validName(name string) error {
	switch {
	case name == "":
		return errors.New("empty")
	case len(name) > 255:
		return errors.New("longer than 255 bytes")
	case strings.ContainsAny(name, ".*> \t\r\n/\\\x00"):
		return errors.New("contains '.', '*', '>', whitespace or a path separator")
	}
	return nil
}

// storeOptions maps a stream configuration onto the storage engine's.
// segmentBytes is the size of the file streams' segments (0: the store's
// default). A variable for tests.
var segmentBytes int64

func (cfg *StreamConfig) storeOptions(dir string) store.Options {
	unl := func(v int64) int64 { return max(v, 0) }
	o := store.Options{
		Dir:               dir,
		MaxMsgs:           unl(cfg.MaxMsgs),
		MaxBytes:          unl(cfg.MaxBytes),
		MaxMsgsPerSubject: unl(cfg.MaxMsgsPerSubject),
		MaxAge:            cfg.MaxAge,
		// ingest checks max_msg_size (headers and data); the store's own
		// bound counts the subject too, so it keeps only its hard cap.
		MaxMsgSize:   0,
		Durability:   cfg.durability(),
		SegmentBytes: segmentBytes,
	}
	if cfg.Storage == MemoryStorage {
		o.Storage = store.MemoryStorage
	} else {
		o.Storage = store.FileStorage
	}
	o.DiscardNewPerSubject = cfg.DiscardNewPer
	o.AllowMsgTTL, o.SubjectDeleteMarkerTTL = cfg.AllowMsgTTL, cfg.SubjectDeleteMarkerTTL
	if cfg.Discard == DiscardNew {
		o.Discard = store.DiscardNew
	} else {
		o.Discard = store.DiscardOld
	}
	return o
}

// replicaStoreSync is how often a replica's store fsyncs on its own: a
// backstop, since every checkpoint fsyncs it (replica_checkpoint.go).
const replicaStoreSync = time.Hour

// replicaStoreOptions is storeOptions for a replica of a replicated
// stream. Its sync policy applies to the raft log (design 2.4); the store
// is fsynced at checkpoints, after the log, whatever the policy
// (replica.syncState), and not every interval on its own: a store fsynced
// apart from its log may hold on disk entries the log loses to a power
// loss, and then differ from its peers once the group commits others in
// their place. Nor under never, where Sync would not fsync and a
// checkpoint would name what the store had not kept.
//
// Its appends are buffered (replicaWriteBuffer) and written once per
// batch of entries applied (replicaFSM.Apply), not one write system call
// per message: what a crash takes from the store, the raft log replays.
// A file store stages (replica_payloads.go): the messages the raft log
// takes are written once, staged, and committed as they apply; the
// caller sets CommitThrough from the replica's checkpoint.
func (cfg *StreamConfig) replicaStoreOptions(dir string) store.Options {
	o := cfg.storeOptions(dir)
	o.Durability = store.Durability{Sync: store.SyncInterval, Interval: replicaStoreSync}
	o.WriteBuffer = replicaWriteBuffer
	o.Staging = o.Storage == store.FileStorage
	return o
}

// replicaWriteBuffer bounds the appends a replica's store holds in memory
// before it writes them, within one batch of applied entries.
const replicaWriteBuffer = 1 << 20

// durability maps the stream's sync policy onto the store's, for its
// messages (storeOptions) and its durable consumers' state (openProgress)
// alike.
func (cfg *StreamConfig) durability() store.Durability {
	d := store.Durability{Sync: store.SyncInterval, Interval: cfg.SyncInterval}
	switch cfg.Sync {
	case SyncAlways:
		d.Sync = store.SyncAlways
	case SyncNever:
		d.Sync = store.SyncNever
	}
	return d
}

// sameConfig reports whether two normalized configurations are equal, for
// an idempotent CREATE.
func sameConfig(a, b StreamConfig) bool { return reflect.DeepEqual(a, b) }
