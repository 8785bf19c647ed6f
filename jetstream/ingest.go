package jetstream

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/skiffmq/skiff/server"
	"github.com/skiffmq/skiff/store"
)

// ingest stores a message published on one of the stream's subjects. It
// runs on the publisher's goroutine (see server.InternalHandler): checks
// and the append happen at once; the acknowledgement waits until the end
// of the publisher's read, when one fsync covers every message of the
// read (SyncAlways).
func (st *stream) ingest(m *server.Msg) {
	if !m.Permitted() {
		// The server published this for a client that may not publish
		// here (a consumer's delivery, a pull request's reply): storing
		// it would let that client write to a stream through the server.
		st.js.dropInternal(m, "stream", st.name)
		return
	}
	var hdr headers
	if m.Header != nil {
		hdr = parseHeaders(m.Header)
	}
	reply := ""
	if m.Reply != "" {
		reply = strings.Clone(m.Reply)
	}
	// The stream's configuration as stored: a pointer, not a copy per
	// message (a configuration is replaced, never changed in place).
	cfg := st.cfg.Load()
	if cfg.Sealed {
		st.nack(m, reply, errSealed())
		return
	}
	// Headers and data count, not the subject, as in the reference server.
	if cfg.MaxMsgSize > 0 && len(m.Header)+len(m.Data) > int(cfg.MaxMsgSize) {
		st.nack(m, reply, errMsgTooBig())
		return
	}
	if v, ok := hdr.get("Nats-Expected-Stream"); ok && v != st.name {
		st.nack(m, reply, errStreamNotMatch())
		return
	}
	if st.js.quotaReached(cfg.Storage) {
		st.nack(m, reply, errInsufficientResources())
		return
	}
	if st.ja.wouldExceed(cfg.Storage, len(m.Subject)+len(m.Header)+len(m.Data)) {
		st.nack(m, reply, errAccountResources())
		return
	}
	if st.repl != nil {
		st.repl.ingest(m, hdr, reply, cfg)
		return
	}
	st.ingestMu.Lock()
	if st.closing.Load() {
		// Closed meanwhile; a memory stream being turned replicated keeps
		// its store open for its messages to be copied, and must take no
		// more (stream.shut waits for ingestMu after setting closing).
		st.ingestMu.Unlock()
		st.nack(m, reply, st.appendError(store.ErrClosed))
		return
	}
	now := time.Now()
	msgID, hasID, roll, ttl, ok := st.checkPublish(m, reply, hdr, cfg, publishChecks{
		dedup:    func(id string) (uint64, bool) { return st.ingestMu.dedup.lookup(id, now) },
		expected: func() *APIError { return st.checkExpectedLocked(hdr, m.Subject) },
		unlock:   st.ingestMu.Unlock,
	})
	if !ok {
		return
	}
	// Under an account quota the account's count takes in what the
	// append removed too (discard old, per-subject limits), so that a
	// stream held at its own max_bytes does not run its account out of
	// room between two recounts.
	quota := st.ja.quota(cfg.Storage)
	var before uint64
	if quota != nil {
		before = st.store.State().Bytes
	}
	seq, _, err := st.store.Append(m.Subject, m.Header, m.Data, ttl)
	if err != nil {
		st.ingestMu.Unlock()
		st.nack(m, reply, st.appendError(err))
		return
	}
	st.js.stored(cfg.Storage, len(m.Subject)+len(m.Header)+len(m.Data))
	if quota != nil {
		quota.used.Add(int64(st.store.State().Bytes) - int64(before))
	}
	st.ingestMu.lastMsgID = "" // the ID of the last message, if it had one
	if hasID {
		st.ingestMu.dedup.add(strings.Clone(msgID), seq, now)
		st.ingestMu.lastMsgID = st.ingestMu.dedup.last
	}
	var rollErr error
	if roll != noRollup {
		rollErr = st.rollLocked(roll, seq, m.Subject)
	}
	st.ingestMu.Unlock()
	if rollErr != nil {
		// The message is stored, but what it replaces may not all be
		// gone: the publisher hears so rather than a PubAck.
		st.js.log.Warn("rollup purge failed", "stream", st.name, "seq", seq, "err", rollErr)
		st.nack(m, reply, errRollup(fmt.Errorf("stored as %d, rollup purge failed: %w", seq, rollErr)))
		st.arrived(m.Subject, seq, cfg)
		return
	}
	if cfg.Sync == SyncAlways && cfg.Storage == FileStorage {
		// Consumers read only what an fsync covered (nextFrom), so they
		// hear of the message once it is durable, with or without an ack
		// to send: one fsync still covers the publisher's whole read.
		subj := strings.Clone(m.Subject)
		m.AfterRead(func(p *server.Publisher) {
			err := st.store.WaitDurable(seq)
			st.arrived(subj, seq, cfg)
			if reply == "" || cfg.NoAck {
				return
			}
			st.pubAck(p, reply, seq, err)
		})
		return
	}
	st.arrived(m.Subject, seq, cfg)
	if reply == "" || cfg.NoAck {
		return
	}
	m.AfterRead(func(p *server.Publisher) { st.pubAck(p, reply, seq, st.store.WaitDurable(seq)) })
}

// publishChecks are what a publish is checked against before it is
// stored: the duplicate window, and the Nats-Expected-* headers against
// the state that takes it (a single server's store, or a replicated
// stream leader's projection). unlock releases the lock the caller holds
// for them, before a refusal is answered.
type publishChecks struct {
	dedup func(id string) (seq uint64, dup bool)
	// pending, if set, reports whether a duplicate's original, at seq, is
	// not stored yet (a replicated stream's leader proposed it and the
	// group has not committed it): the duplicate is then refused with
	// 10008 rather than acknowledged, since the original may still fail
	// and its sequence go to another message. The publisher retries.
	pending  func(seq uint64) bool
	expected func() *APIError
	// refuseLater, if set, takes a refusal by the Nats-Expected-* headers
	// rather than it being answered at once, with the lock held: a
	// replicated stream's leader checks them against a projection that
	// may hold messages not committed yet, and answers once they are.
	refuseLater func(*APIError)
	unlock      func()
}

// checkPublish runs a publish's checks against the stream's state, in
// nats-server's order: a message ID in the duplicate window is
// acknowledged as a duplicate; then the Nats-Expected-* headers, and the
// rollup and TTL headers, refuse what they must. A publish that fails one
// is answered (after c.unlock) and ok is false; else it returns the
// message's ID and options, with the caller's lock still held.
func (st *stream) checkPublish(m *server.Msg, reply string, hdr headers, cfg *StreamConfig, c publishChecks) (
	msgID string, hasID bool, roll rollup, ttl time.Duration, ok bool) {
	msgID, hasID = hdr.get("Nats-Msg-Id")
	if hasID {
		if seq, dup := c.dedup(msgID); dup {
			pending := c.pending != nil && c.pending(seq)
			c.unlock()
			if pending {
				st.nack(m, reply, errClusterUnavailable())
			} else {
				st.ackDuplicate(m, reply, seq)
			}
			return "", false, noRollup, 0, false
		}
	}
	aerr := c.expected()
	if aerr != nil && c.refuseLater != nil {
		c.refuseLater(aerr)
		c.unlock()
		return "", false, noRollup, 0, false
	}
	if aerr == nil {
		roll, ttl, aerr = msgOptions(hdr, cfg)
	}
	if aerr != nil {
		c.unlock()
		st.nack(m, reply, aerr)
		return "", false, noRollup, 0, false
	}
	return msgID, hasID, roll, ttl, true
}

// msgOptions reads a publish's rollup and TTL headers, checked against the
// stream's configuration.
func msgOptions(hdr headers, cfg *StreamConfig) (rollup, time.Duration, *APIError) {
	roll, aerr := rollupOf(hdr, cfg)
	if aerr != nil {
		return noRollup, 0, aerr
	}
	ttl, aerr := ttlOf(hdr, cfg)
	return roll, ttl, aerr
}

// arrived tells the consumers of a stored message; under interest
// retention a message nobody is interested in is acknowledged, with its
// sequence, and not kept.
func (st *stream) arrived(subj string, seq uint64, cfg *StreamConfig) {
	// A stream closing has no consumers to tell, not none that want the
	// message: it stays (shut sets closing before it empties the list).
	if !st.notify(subj) && cfg.Retention == InterestPolicy && !st.closing.Load() {
		_ = st.store.Remove(seq)
	}
}

// appendError turns a refused append into the reference server's error:
// the limits with its texts, anything else (a failed write, a full disk)
// as the store says it.
func (st *stream) appendError(err error) *APIError {
	switch {
	case errors.Is(err, store.ErrMaxMsgSize):
		return errMsgTooBig()
	case errors.Is(err, store.ErrMaxMsgs):
		return errStreamStore(errors.New("maximum messages exceeded"))
	case errors.Is(err, store.ErrMaxBytes):
		return errStreamStore(errors.New("maximum bytes exceeded"))
	case errors.Is(err, store.ErrMaxMsgsPerSubject):
		return errStreamStore(errors.New("maximum messages per subject exceeded"))
	}
	st.appendWarn.Log(st.js.log, slog.LevelWarn, "stream append failed", "stream", st.name, "err", err)
	return errStreamStore(err)
}

// checkExpectedLocked checks the Nats-Expected-* headers. ingestMu held.
func (st *stream) checkExpectedLocked(hdr headers, subj string) *APIError {
	return checkExpected(hdr, subj, expectedState{
		last:     func() uint64 { return st.store.State().LastSeq },
		subjLast: st.lastBySubject,
		lastID:   st.ingestMu.lastMsgID,
	})
}

// lastBySubject returns the sequence of the last stored message on subj,
// 0 if none.
func (st *stream) lastBySubject(subj string) uint64 {
	if m, err := st.store.LastBySubject(subj); err == nil {
		return m.Seq
	}
	return 0
}

// expectedState is what a publish's Nats-Expected-* headers are checked
// against: the store's for a single server, a replicated stream leader's
// projection (replica.go). The functions are called only for the headers
// present.
type expectedState struct {
	last     func() uint64
	subjLast func(subj string) uint64
	lastID   string
}

// checkExpected checks a publish's Nats-Expected-Last-Sequence,
// -Last-Subject-Sequence and -Last-Msg-Id headers, with the reference
// server's errors.
func checkExpected(hdr headers, subj string, es expectedState) *APIError {
	if v, ok := hdr.get("Nats-Expected-Last-Sequence"); ok {
		last := es.last()
		if want, err := strconv.ParseUint(v, 10, 64); err != nil || want != last {
			return errWrongLastSeq(last)
		}
	}
	if v, ok := hdr.get("Nats-Expected-Last-Subject-Sequence"); ok {
		last := es.subjLast(subj)
		if want, err := strconv.ParseUint(v, 10, 64); err != nil || want != last {
			return errWrongLastSeq(last)
		}
	}
	if v, ok := hdr.get("Nats-Expected-Last-Msg-Id"); ok && v != es.lastID {
		return errWrongLastMsgID(es.lastID)
	}
	return nil
}

// notify tells the consumers whose filters match that a message arrived,
// and reports whether there were any.
// interested reports whether a consumer's filters take subj.
func (st *stream) interested(subj string) bool {
	for _, c := range *st.clist.Load() {
		if c.wants(subj) {
			return true
		}
	}
	return false
}

func (st *stream) notify(subj string) bool {
	any := false
	for _, c := range *st.clist.Load() {
		if c.stored(subj) {
			any = true
		}
	}
	return any
}
