package jetstream

import (
	"encoding/json"
	"fmt"
	"time"
)

// A stream's sync policy is Skiff's, not the JetStream API's, so the API
// carries it in the configuration's metadata, as nats-server carries its
// own under "_nats.":
//
//	"metadata": {"_skiff.sync": "interval", "_skiff.sync_interval": "100ms"}
//
// A request may set either key; without them a create gets the server's
// policy (Options.Sync) and an update keeps the stream's. Earlier versions
// of Skiff had top-level "sync" and "sync_interval" fields (the interval
// in nanoseconds): requests with them, and stream directories written
// then, are still read.
const (
	metaSync         = "_skiff.sync"
	metaSyncInterval = "_skiff.sync_interval"
)

// legacySync is the top-level form of earlier versions.
type legacySync struct {
	Sync         *SyncPolicy    `json:"sync"`
	SyncInterval *time.Duration `json:"sync_interval"`
}

// syncDefaults sets cfg's sync policy and interval from the top-level
// fields of earlier versions in the JSON data, when it has them, else to
// the given ones. Metadata, read later by normalize, wins over both.
func syncDefaults(data []byte, cfg *StreamConfig, policy SyncPolicy, interval time.Duration) *APIError {
	cfg.Sync, cfg.SyncInterval = policy, interval
	var old legacySync
	if len(data) > 0 {
		if err := json.Unmarshal(data, &old); err != nil {
			return errInvalidJSON(err)
		}
	}
	if old.Sync != nil {
		cfg.Sync = *old.Sync
	}
	if old.SyncInterval != nil {
		cfg.SyncInterval = *old.SyncInterval
	}
	return nil
}

// syncFromMetadata reads the sync keys of cfg's metadata, if set.
func syncFromMetadata(cfg *StreamConfig) error {
	if v, ok := cfg.Metadata[metaSync]; ok {
		var p SyncPolicy
		if err := p.UnmarshalJSON([]byte(`"` + v + `"`)); err != nil {
			return fmt.Errorf("metadata %s: want interval, always or never, not %q", metaSync, v)
		}
		cfg.Sync = p
	}
	if v, ok := cfg.Metadata[metaSyncInterval]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("metadata %s: want a positive duration such as 100ms, not %q", metaSyncInterval, v)
		}
		cfg.SyncInterval = d
	}
	return nil
}

// syncToMetadata writes cfg's sync policy into its metadata, the interval
// only for the interval policy.
func syncToMetadata(cfg *StreamConfig) {
	md := make(map[string]string, len(cfg.Metadata)+2)
	for k, v := range cfg.Metadata {
		md[k] = v
	}
	name, _ := cfg.Sync.MarshalJSON()
	md[metaSync] = string(name[1 : len(name)-1])
	delete(md, metaSyncInterval)
	if cfg.Sync == SyncInterval {
		md[metaSyncInterval] = cfg.SyncInterval.String()
	}
	cfg.Metadata = md
}

// syncOnDisk reads the sync policy of a stream's recovered configuration,
// from its metadata or, for a directory written by an earlier version,
// from the top-level fields.
func syncOnDisk(path string, cfg *StreamConfig) error {
	old, err := readMeta[struct {
		Config legacySync `json:"config"`
	}](path)
	if err != nil {
		return err
	}
	if old.Config.Sync != nil {
		cfg.Sync = *old.Config.Sync
	}
	if old.Config.SyncInterval != nil {
		cfg.SyncInterval = *old.Config.SyncInterval
	}
	if err := syncFromMetadata(cfg); err != nil {
		return err
	}
	if cfg.SyncInterval <= 0 {
		cfg.SyncInterval = DefaultSyncInterval
	}
	syncToMetadata(cfg)
	return nil
}
