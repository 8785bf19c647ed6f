package jetstream

import (
	"encoding/json"
	"fmt"
)

// Updates of a replicated stream's configuration (design 3.1's opConfig).
// The meta leader checks an update and hands it to the stream's leader,
// which checks it as a single server does and proposes the new
// configuration to the stream's group; every replica applies it at the
// same place in the log, ordered with the messages, so that the limits it
// sets evict the same messages everywhere. The meta state takes the
// configuration afterwards, as for a stream of one replica. A replica
// records the log index of the update its configuration came from
// (streamMeta.ConfigIndex), so that a log replayed after a restart does
// not apply an older configuration again over a store that has gone on
// since (lowered limits would evict what a later raise kept).

// updateConfig proposes cfg, checked, to the group and waits until it is
// applied here.
func (r *replica) updateConfig(cfg StreamConfig) error {
	b, err := json.Marshal(&cfg)
	if err != nil {
		return err
	}
	if _, err := r.proposeWait(&replicaOp{kind: opConfig, config: b}); err != nil {
		return fmt.Errorf("update not applied: %w", err)
	}
	return nil
}

// configApplied applies an opConfig at index (replicaFSM.onConfig), on the
// apply goroutine.
func (r *replica) configApplied(config []byte, index uint64) error {
	st := r.st
	if index <= st.configIndex.Load() {
		return nil // this configuration, or a later one, is applied already
	}
	var cfg StreamConfig
	if err := json.Unmarshal(config, &cfg); err != nil {
		return fmt.Errorf("%w: configuration: %v", errBadOp, err)
	}
	return st.applyConfig(cfg, index, r.isLeader())
}

// applyConfig applies a replicated stream's new configuration at index
// (setConfigLocked), the account's subject index, and, on the leader, the
// subscriptions.
func (st *stream) applyConfig(cfg StreamConfig, index uint64, leads bool) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	old, err := st.setConfigLocked(cfg, index)
	if err != nil {
		return err
	}
	ja := st.ja
	ja.mu.Lock()
	// Not once the stream is being deleted: the apply goroutine of a
	// replica just deleted here (a removed member) may apply one more
	// configuration, and indexing its subjects then left them taken, and
	// the stream, placed here again, refused as overlapping itself
	// (10065; TestClusterReplicatedScale, one run in ten).
	if !st.closing.Load() {
		ja.unindexSubjectsLocked(old.Subjects)
		ja.indexSubjectsLocked(st.name, cfg.Subjects)
	}
	ja.mu.Unlock()
	if leads && !st.mu.closed {
		st.unsubscribeLocked()
		if err := st.subscribeLocked(cfg.Subjects); err != nil {
			st.js.log.Error("replicated stream leader not subscribed", "stream", st.name, "err", err)
		}
	}
	return nil
}
