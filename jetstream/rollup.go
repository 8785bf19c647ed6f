package jetstream

import (
	"errors"
	"fmt"
	"strings"

	"github.com/skiffmq/skiff/store"
)

// A rollup message replaces what came before it (ADR-8's Nats-Rollup
// header): "sub" purges the older messages on its subject, "all" every
// older message of the stream. Key-value and object store buckets build
// on it: a key's purge and an object's new metadata are rollups. A stream
// takes them with allow_rollup_hdrs, which needs the purge permission.

// rollup is what a message's Nats-Rollup header asks for.
type rollup uint8

const (
	noRollup      rollup = iota
	rollupSubject        // "sub": the message's subject
	rollupAll            // "all": the whole stream
)

// rollupHeader names the header; its values are case-insensitive.
const rollupHeader = "Nats-Rollup"

func errRollup(err error) *APIError { return apiErr(500, 10111, err.Error()) }

// rollupOf reads a message's rollup header and checks that the stream
// allows it, with the reference server's texts.
func rollupOf(hdr headers, cfg *StreamConfig) (rollup, *APIError) {
	v, ok := hdr.get(rollupHeader)
	if !ok || v == "" {
		return noRollup, nil
	}
	if !cfg.AllowRollup || cfg.DenyPurge {
		return noRollup, errRollup(errors.New("rollup not permitted"))
	}
	switch v = strings.ToLower(v); v {
	case "sub":
		return rollupSubject, nil
	case "all":
		return rollupAll, nil
	}
	return noRollup, errRollup(fmt.Errorf("rollup value invalid: %q", v))
}

// rollLocked purges what a just-stored rollup message seq on subj replaces:
// every message older than it, on its subject or in the stream. It keeps
// the newest one, which is the rollup itself while ingestMu is held. The
// rollup is made durable first, whatever the sync policy: a purge on disk
// without its rollup would lose acknowledged messages in a crash.
func (st *stream) rollLocked(r rollup, seq uint64, subj string) error {
	if err := st.store.Sync(seq); err != nil {
		return err
	}
	req := store.PurgeRequest{Keep: 1}
	if r == rollupSubject {
		req.Subject = subj
	}
	n, err := st.store.Purge(req)
	if n > 0 {
		st.changed()
	}
	return err
}
