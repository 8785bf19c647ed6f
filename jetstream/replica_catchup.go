package jetstream

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/skiffmq/skiff/internal/multiraft"
	"github.com/skiffmq/skiff/store"
)

// Catch-up of a replica from a peer's store (design 3.7). A replica that
// installs a snapshot of its stream's group (the leader compacted the log
// past what the replica has, or its own store is behind its log's
// snapshot at start) holds only a description of the state; it takes the
// state itself from a peer that has applied at least the snapshot's
// index, in chunks, over the servers' raft link (jscluster.Call): one
// chunk in flight, at most catchupChunkBytes of messages each, so memory
// stays bounded whatever the stream's size. Every message a peer has
// applied is committed, so taking a peer's store as it is now, even if
// newer than the snapshot, is safe: the entries after the snapshot,
// applied next, are idempotent over it.
//
// A request names the stream, the group, the snapshot's index and a
// range: from is where to look, dataFrom where the requester's store
// ends. Below dataFrom the peer lists the sequences it holds (the
// requester removes those it holds that the peer does not: deletes and
// purges in entries it never applied); from dataFrom on it sends the
// messages. Every sequence in [from, end) the answer does not list is
// absent on the peer.
//
//	request  magic u8 | version u8 | account bytes | stream bytes |
//	         group uvarint | index uvarint | from uvarint | dataFrom uvarint |
//	         maxBytes uvarint
//	answer   version u8 | applied uvarint | first uvarint | last uvarint |
//	         lastTS varint | end uvarint | present count uvarint, seq uvarint ... |
//	         messages (an opMsgs op, replica_ops.go)

const (
	// catchupMagic starts a catch-up request; forwarded API requests are
	// JSON and start with '{'.
	catchupMagic = 0xCA
	// catchupVersion is the format this code writes and reads.
	catchupVersion = 1
	// catchupScanMax bounds the sequences a peer looks at below dataFrom
	// for one answer.
	catchupScanMax = 1 << 16
	// catchupRetry is the pause before asking again when no peer could
	// answer.
	catchupRetry = 250 * time.Millisecond
	// catchupCallWait bounds one request.
	catchupCallWait = 10 * time.Second
)

// catchupChunkBytes bounds the messages of one answer (at least one
// message is sent, whatever its size). A variable for tests.
var catchupChunkBytes = 1 << 20

// Errors of catch-up, told back to the requester.
var (
	// errCatchupBehind: the peer has not applied the snapshot's index (or
	// is catching up itself).
	errCatchupBehind = errors.New("jetstream: catch-up: peer behind the snapshot")
	// errCatchupNoReplica: the peer has no replica of the group.
	errCatchupNoReplica = errors.New("jetstream: catch-up: no such replica on the peer")
	// errReplicaStopped: the replica closed while catching up.
	errReplicaStopped = errors.New("jetstream: replica stopped")
)

// catchupRequest is a replica's request for a chunk of a peer's store.
type catchupRequest struct {
	account, stream string
	group, index    uint64
	from, dataFrom  uint64
	maxBytes        uint64
}

// catchupAnswer is a chunk of a peer's store.
type catchupAnswer struct {
	applied     uint64
	first, last uint64
	lastTS      int64
	end         uint64
	present     []uint64
	msgs        []replicaMsg
}

func (q *catchupRequest) encode() []byte {
	b := []byte{catchupMagic, catchupVersion}
	b = appendBytes(b, []byte(q.account))
	b = appendBytes(b, []byte(q.stream))
	for _, v := range []uint64{q.group, q.index, q.from, q.dataFrom, q.maxBytes} {
		b = binary.AppendUvarint(b, v)
	}
	return b
}

// decodeCatchupRequest reads a request (with its magic byte).
func decodeCatchupRequest(b []byte) (catchupRequest, error) {
	d := opDecoder{b: b}
	var q catchupRequest
	if m, v := d.byte(), d.byte(); d.err == nil && (m != catchupMagic || v != catchupVersion) {
		return q, fmt.Errorf("%w: catch-up request %#x version %d", errBadOp, m, v)
	}
	q.account, q.stream = string(d.bytes()), string(d.bytes())
	q.group, q.index, q.from, q.dataFrom, q.maxBytes = d.uvarint(), d.uvarint(), d.uvarint(), d.uvarint(), d.uvarint()
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d bytes after the request", len(d.b))
	}
	if d.err != nil {
		return q, fmt.Errorf("%w: catch-up request: %v", errBadOp, d.err)
	}
	return q, nil
}

func (a *catchupAnswer) encode() []byte {
	b := []byte{catchupVersion}
	b = binary.AppendUvarint(b, a.applied)
	b = binary.AppendUvarint(b, a.first)
	b = binary.AppendUvarint(b, a.last)
	b = binary.AppendVarint(b, a.lastTS)
	b = binary.AppendUvarint(b, a.end)
	b = binary.AppendUvarint(b, uint64(len(a.present)))
	for _, s := range a.present {
		b = binary.AppendUvarint(b, s)
	}
	return appendOp(b, &replicaOp{kind: opMsgs, msgs: a.msgs})
}

// decodeCatchupAnswer reads an answer; its messages' slices alias b.
// Sequences out of order, or outside [first, end), are refused.
func decodeCatchupAnswer(b []byte) (catchupAnswer, error) {
	d := opDecoder{b: b}
	var a catchupAnswer
	if v := d.byte(); d.err == nil && v != catchupVersion {
		return a, fmt.Errorf("%w: catch-up answer version %d", errBadOp, v)
	}
	a.applied, a.first, a.last = d.uvarint(), d.uvarint(), d.uvarint()
	a.lastTS, a.end = d.varint(), d.uvarint()
	n := d.count(1)
	for range n {
		a.present = append(a.present, d.uvarint())
	}
	if d.err != nil {
		return a, fmt.Errorf("%w: catch-up answer: %v", errBadOp, d.err)
	}
	op, err := decodeOp(d.b)
	if err != nil {
		return a, fmt.Errorf("catch-up answer: %w", err)
	}
	if op.kind != opMsgs {
		return a, fmt.Errorf("%w: catch-up answer with op kind %d", errBadOp, op.kind)
	}
	a.msgs = op.msgs
	prev := uint64(0)
	check := func(seq uint64) error {
		if seq <= prev || seq < a.first || seq >= a.end || seq > a.last {
			return fmt.Errorf("%w: catch-up answer: sequence %d (after %d, range %d..%d, last %d)", errBadOp, seq, prev, a.first, a.end, a.last)
		}
		prev = seq
		return nil
	}
	for _, s := range a.present {
		if err := check(s); err != nil {
			return a, err
		}
	}
	for i := range a.msgs {
		if err := check(a.msgs[i].seq); err != nil {
			return a, err
		}
	}
	return a, nil
}

// answerCatchup answers a peer's catch-up request from this server's
// replica of the stream.
func (js *JetStream) answerCatchup(body []byte) ([]byte, error) {
	q, err := decodeCatchupRequest(body)
	if err != nil {
		return nil, err
	}
	ja := js.account(q.account)
	if ja == nil {
		return nil, errNoAccount
	}
	st := ja.lookup(q.stream)
	if st == nil || st.repl == nil || st.repl.group != q.group {
		return nil, errCatchupNoReplica
	}
	r := st.repl
	applied := r.fsm.applied.Load()
	if applied < q.index || r.fsm.restoring() {
		return nil, fmt.Errorf("%w: applied %d, snapshot at %d", errCatchupBehind, applied, q.index)
	}
	s := st.store
	state := s.State()
	a := catchupAnswer{applied: applied, first: state.FirstSeq, last: state.LastSeq}
	if !state.LastTime.IsZero() {
		a.lastTS = state.LastTime.UnixNano()
	}
	budget := max(q.maxBytes, 1)
	seq, scanned, size := max(q.from, state.FirstSeq), 0, uint64(0)
	for seq <= state.LastSeq {
		if seq < q.dataFrom {
			if scanned == catchupScanMax {
				break
			}
			scanned++
			if s.Has(seq) {
				a.present = append(a.present, seq)
			}
			seq++
			continue
		}
		m, err := s.Next(seq, "")
		if errors.Is(err, store.ErrNotFound) || (err == nil && m.Seq > state.LastSeq) {
			seq = state.LastSeq + 1
			break
		}
		if err != nil {
			return nil, err
		}
		n := uint64(len(m.Subject) + len(m.Header) + len(m.Data))
		if len(a.msgs) > 0 && size+n > budget {
			seq = m.Seq
			break
		}
		a.msgs = append(a.msgs, replicaMsg{seq: m.Seq, ts: m.Timestamp, subj: m.Subject, hdr: m.Header, data: m.Data})
		size += n
		seq = m.Seq + 1
	}
	a.end = seq
	return a.encode(), nil
}

// catchUp brings this replica's store to a peer's, which has applied at
// least the snapshot at d.index (on the group's apply goroutine, or before
// the group applies anything). It asks the group's leader first, then the
// other peers, until one answers the whole way, or the replica stops.
//
// A memory stream whose every peer answered that it is behind (every
// replica restarted, so none has the messages any more) takes the loss:
// its store moves on to the snapshot's last sequence, empty.
func (r *replica) catchUp(d *replicaSnapshot) error {
	s := r.st.store
	start := s.State()
	// The peer sends the store's last message back: a replica that
	// diverged from its group (it applied entries a quorum lost, and the
	// group stored others at their sequences) holds a different one there.
	// The peer lists what it holds from its own first sequence on, not
	// the store's: a store that starts past a message the group's leader
	// holds below it removed that message in an entry the group lost (a
	// purge), which only that list shows.
	c := catchupCursor{from: 1, dataFrom: max(start.LastSeq, 1), tail: start.LastSeq}
	for {
		peers := r.catchupPeers()
		behind := 0
		for _, p := range peers {
			err := r.catchUpFrom(p, d, &c)
			if err == nil {
				r.st.rebuildDedup()
				return nil
			}
			if errors.Is(err, errReplicaStopped) || errors.Is(err, multiraft.ErrDiverged) {
				return err
			}
			if errors.Is(err, errCatchupBehind) {
				behind++
			}
			r.st.js.log.Debug("replica catch-up from a peer failed", "stream", r.st.name, "peer", p, "err", err)
		}
		if behind > 0 && behind == len(peers) && r.st.config().Storage == MemoryStorage {
			r.st.js.log.Warn("replicated memory stream restarted on every replica: its messages are lost",
				"stream", r.st.name, "last", d.Last)
			if _, err := s.Purge(store.PurgeRequest{Seq: d.Last + 1}); err != nil {
				return err
			}
			return nil
		}
		select {
		case <-r.stop:
			return errReplicaStopped
		case <-r.c.Done():
			// The server shuts down: its raft layer closes before its
			// replicas do, and waits for the apply goroutine this may
			// hold up.
			return errReplicaStopped
		case <-time.After(catchupRetry):
		}
	}
}

// catchupCursor is how far a catch-up got: the store was compared with a
// peer's up to from; the peer sends messages from dataFrom on: the store's
// last message when it started (tail, 0 if none), and what came after.
type catchupCursor struct {
	from, dataFrom, tail uint64
}

// catchupPeers returns the peers to ask: the leader first.
func (r *replica) catchupPeers() []string {
	peers := r.c.GroupPeers(r.group)
	if lead := r.leaderName(); lead != "" {
		for i, p := range peers {
			if p == lead {
				peers[0], peers[i] = peers[i], peers[0]
			}
		}
	}
	return peers
}

// catchUpFrom takes the rest of the store from one peer, chunk by chunk.
func (r *replica) catchUpFrom(peer string, d *replicaSnapshot, c *catchupCursor) error {
	s := r.st.store
	for {
		q := catchupRequest{account: r.st.ja.name, stream: r.st.name, group: r.group, index: d.Index,
			from: c.from, dataFrom: c.dataFrom, maxBytes: uint64(catchupChunkBytes)}
		ctx, cancel := context.WithTimeout(context.Background(), catchupCallWait)
		go func() {
			select {
			case <-r.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		body, err := r.c.Call(ctx, peer, q.encode())
		cancel()
		select {
		case <-r.stop:
			return errReplicaStopped
		default:
		}
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return errReplicaStopped
			}
			if isCatchupBehind(err) {
				return fmt.Errorf("%w: %v", errCatchupBehind, err)
			}
			return err
		}
		a, err := decodeCatchupAnswer(body)
		if err != nil {
			return err
		}
		trusted := r.judges(peer, &a)
		if err := r.applyCatchup(&a, c, trusted); err != nil {
			return err
		}
		r.chunks.Add(1)
		if c.from > a.last {
			if last := s.State().LastSeq; last > a.last && trusted {
				// The peer applied everything this replica did, and a
				// stream's last sequence never goes back: this replica
				// holds messages the group lost.
				return fmt.Errorf("catch-up: the store ends at %d, the group's at %d: %w", last, a.last, multiraft.ErrDiverged)
			}
			if err := s.Skip(a.last, a.lastTS); err != nil {
				return fmt.Errorf("catch-up: %w", err)
			}
			return nil
		}
	}
}

// judges reports whether peer's answer a can show this replica diverged
// from its group: only the group's leader's (a follower may have diverged
// itself), once it has applied every entry this replica's store may hold
// the effects of (the last of its log when it opened, or what it applied
// since), so that whatever this store holds and the leader's does not
// was lost by the group, not yet to come to the leader.
func (r *replica) judges(peer string, a *catchupAnswer) bool {
	return peer == r.leaderName() && a.applied >= max(r.logHigh, r.fsm.applied.Load())
}

// isCatchupBehind reports whether a call failed because the peer is
// behind: the reason comes back as text.
func isCatchupBehind(err error) bool {
	return errors.Is(err, errCatchupBehind) || strings.Contains(err.Error(), errCatchupBehind.Error())
}

// applyCatchup applies one answer to the store and moves the cursor on;
// with trusted (judges), a store that differs from the peer's where it
// cannot unless the replica diverged fails with multiraft.ErrDiverged.
func (r *replica) applyCatchup(a *catchupAnswer, c *catchupCursor, trusted bool) error {
	s := r.st.store
	if a.first > c.from {
		// Everything below the peer's first sequence is gone there.
		if cur := s.State(); cur.FirstSeq < a.first {
			if _, err := s.Purge(store.PurgeRequest{Seq: a.first}); err != nil && !errors.Is(err, store.ErrSync) {
				return fmt.Errorf("catch-up: %w", err)
			}
		}
		c.from = a.first
		c.dataFrom = max(c.dataFrom, a.first)
	}
	// Below dataFrom: remove what the peer no longer holds. What the peer
	// holds and this store does not was removed here by an entry the
	// group does not have (the peer applied everything this replica did):
	// the replica diverged.
	present := a.present
	for seq := c.from; seq < min(a.end, c.dataFrom); seq++ {
		if len(present) > 0 && present[0] == seq {
			present = present[1:]
			if trusted && !s.Has(seq) {
				return fmt.Errorf("catch-up: message %d is the group's, and was removed here: %w", seq, multiraft.ErrDiverged)
			}
			continue
		}
		if s.Has(seq) {
			if err := s.Remove(seq); err != nil && !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("catch-up: remove %d: %w", seq, err)
			}
		}
	}
	// A peer's answer has no TTLs: they are in the messages' headers, as
	// in its store, and this store schedules them from there, as Open
	// does. Without them the replica would keep, at a tick, what its
	// peers expire, and once it led it would plan no expiry for them.
	// The store's last message as it started: the peer's must be the
	// same, or the replica diverged; if the peer holds none there (it
	// removed it), it goes.
	same := uint64(0) // the tail, once found the same as the peer's
	if t := c.tail; t != 0 && t >= c.from && t < a.end && s.Has(t) {
		i := slices.IndexFunc(a.msgs, func(m replicaMsg) bool { return m.seq == t })
		if i < 0 {
			if err := s.Remove(t); err != nil && !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("catch-up: remove %d: %w", t, err)
			}
		} else if err := sameMsg(s, &a.msgs[i]); err != nil && trusted {
			return err
		} else {
			same = t // the same, or kept (AppendAt would skip it)
		}
	}
	o := s.Options()
	ttls := o.AllowMsgTTL || o.SubjectDeleteMarkerTTL > 0
	for i := range a.msgs {
		m := &a.msgs[i]
		if m.seq == same {
			continue // stored already
		}
		if last := s.State().LastSeq; m.seq > last+1 {
			if err := s.Skip(m.seq-1, m.ts); err != nil {
				return fmt.Errorf("catch-up: %w", err)
			}
		}
		ttl := time.Duration(m.ttl)
		if ttl == 0 && ttls {
			ttl = store.HeaderTTL(m.hdr)
		}
		if err := s.AppendAt(m.seq, m.ts, m.subj, m.hdr, m.data, ttl); err != nil {
			return fmt.Errorf("catch-up: message %d: %w", m.seq, err)
		}
	}
	c.from = max(c.from, a.end)
	return nil
}

// sameMsg returns multiraft.ErrDiverged if the store holds another
// message than m at m's sequence: the same sequence of one group holds
// the same message, stamped once by the leader that took it, on every
// replica.
func sameMsg(s *store.Stream, m *replicaMsg) error {
	mine, err := s.Get(m.seq)
	if err != nil {
		return fmt.Errorf("catch-up: message %d: %w", m.seq, err)
	}
	if mine.Timestamp != m.ts || mine.Subject != m.subj || !bytes.Equal(mine.Data, m.data) {
		return fmt.Errorf("catch-up: message %d differs from the group's (stored at %d, the group's at %d): %w",
			m.seq, mine.Timestamp, m.ts, multiraft.ErrDiverged)
	}
	return nil
}
