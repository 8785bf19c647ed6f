package broker

import (
	"strings"

	"github.com/skiffmq/skiff/jetstream"
)

// applyJetStream reads `jetstream: enabled|disabled|true|false` or a
// block; a block turns streams on unless it says enabled: false.
func applyJetStream(c *Config, v value) error {
	switch x := v.v.(type) {
	case bool:
		c.JetStreamEnabled = x
		return nil
	case string:
		switch strings.ToLower(x) {
		case "enabled", "enable":
			c.JetStreamEnabled = true
		case "disabled", "disable":
			c.JetStreamEnabled = false
		default:
			return v.errorf(ErrInvalidValue, "want enabled, disabled or a block, not %q", x)
		}
		return nil
	}
	c.JetStreamEnabled = true
	return jsKeys.apply(c, v)
}

var jsKeys = func() keys[*Config] {
	k := newKeys[*Config]()
	k.on(func(c *Config, v value) (err error) { c.JetStreamEnabled, err = v.boolean(); return }, "enabled", "enable")
	k.on(func(c *Config, v value) (err error) { c.JetStream.StoreDir, err = v.str(); return }, "store_dir", "store", "storedir")
	k.on(func(c *Config, v value) (err error) {
		c.JetStream.MaxStreams, err = v.intIn(1, 1<<31-1)
		return
	}, "max_streams")
	k.on(func(c *Config, v value) (err error) {
		c.JetStream.MaxConsumers, err = v.intIn(1, 1<<31-1)
		return
	}, "max_consumers")
	k.on(func(c *Config, v value) (err error) {
		c.JetStream.APIQueue, err = v.intIn(1, 1<<24)
		return
	}, "request_queue_limit")
	k.on(func(c *Config, v value) error { return applySync(v, &c.JetStream) }, "sync_interval", "sync")
	k.on(func(c *Config, v value) (err error) { c.JetStream.MaxMemory, err = quotaSize(v); return },
		"max_memory_store", "max_mem_store", "max_mem")
	k.on(func(c *Config, v value) (err error) { c.JetStream.MaxStore, err = quotaSize(v); return },
		"max_file_store", "max_file")
	k.on(func(c *Config, v value) error {
		strict, err := v.boolean()
		c.JetStream.Lenient = !strict
		return err
	}, "strict")
	k.refuse("encryption at rest is not implemented; Skiff refuses to start rather than store data in the clear",
		"key", "ek", "encryption_key", "prev_key", "prev_ek", "prev_encryption_key", "cipher", "tpm")
	k.on(func(c *Config, v value) (err error) { c.JetStream.UniqueTag, err = v.str(); return }, "unique_tag")
	k.on(func(c *Config, v value) (err error) {
		c.JetStream.HoldTimeout, err = v.duration()
		if err == nil && c.JetStream.HoldTimeout <= 0 {
			err = v.errorf(ErrInvalidValue, "want a positive duration, not %v", c.JetStream.HoldTimeout)
		}
		return
	}, "hold_timeout")
	k.refuse(whyCluster, "domain", "max_outstanding_catchup", "meta_compact", "meta_compact_size",
		"meta_compact_sync")
	k.refuse(whyOther, "extension_hint", "limits", "max_buffered_size", "max_buffered_msgs", "info_queue_limit",
		"max_concurrent_io")
	return k
}()

// applySync reads nats-server's sync_interval: `always` (fsync before
// every acknowledgement), a duration (acknowledge once written, fsync that
// often), or Skiff's `never` (leave flushing to the operating system). It
// is the policy of streams whose configuration names none.
func applySync(v value, o *jetstream.Options) error {
	if s, ok := v.v.(string); ok {
		switch strings.ToLower(s) {
		case "always":
			o.Sync = jetstream.SyncAlways
			return nil
		case "never":
			o.Sync = jetstream.SyncNever
			return nil
		}
	}
	d, err := v.duration()
	if err != nil {
		return err
	}
	if d <= 0 {
		return v.errorf(ErrInvalidValue, "want always, never or a positive duration")
	}
	if d < jetstream.MinSyncInterval {
		return v.errorf(ErrInvalidValue, "sync interval %v is below the minimum %v", d, jetstream.MinSyncInterval)
	}
	o.Sync, o.SyncInterval = jetstream.SyncInterval, d
	return nil
}

// quotaSize reads max_memory_store or max_file_store: a size (`1GB`,
// `512M`, bytes), or a negative number for no bound. Zero is refused: the
// reference server reads it as "the default", which is better said by
// leaving the key out.
func quotaSize(v value) (int64, error) {
	n, err := v.size()
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, v.errorf(ErrInvalidValue, "want a positive size, or -1 for no bound")
	}
	return max(n, -1), nil
}
