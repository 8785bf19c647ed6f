package jetstream

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The entries of a replicated stream's raft group (design 3.1): the
// leader decides everything that depends on the stream's state (sequence,
// timestamp, dedup, expectations, admission) and proposes the result;
// every replica applies results, idempotently, since each op names the
// sequences it touches. An entry is one op, in a binary format of its
// own, versioned so that a replica meeting an op it cannot read stops
// rather than guess:
//
//	header   version u8 | kind u8 | proposer uvarint | propID uvarint |
//	         term uvarint
//	opMsgs   count uvarint, then per message:
//	           seq uvarint | ts varint | ttl varint | flags u8 |
//	           msgID bytes | subject bytes | header bytes | data bytes
//	opRemove count uvarint, seq uvarint ... | persist u8
//	opPurge  subject bytes | below uvarint
//	opConfig config bytes (StreamConfig JSON) | metaIndex uvarint
//	opTick   now varint
//	opExpire now varint | count uvarint, seq uvarint ... | count uvarint,
//	           then per marker: seq uvarint | ts varint | ttl varint |
//	           flags u8 | subject bytes | replaced uvarint
//	opConsumer name bytes | action u8, then by action:
//	           create, update: meta bytes (consumerMeta JSON) | floor uvarint
//	           delete:         nothing
//	           progress:       count uvarint, then per record: kind u8 |
//	                           delivered: sseq, dseq, dc uvarint | ts varint
//	                           acked:     sseq uvarint
//	                           floor, reset: sseq, dseq uvarint
//
// where bytes is a uvarint length and the bytes. proposer and propID name
// the proposal (the proposing server's raft ID and its sequence of
// proposals), so that the server that proposed an op finds its waiters
// when it applies it. term is the term in which the proposer led the
// group when it decided the op: an op that raft appended in another term
// (a proposal queued across a lost and regained leadership) was decided
// against a state the leader has since rebuilt, and every replica skips
// it (replicaFSM.Apply).
//
// A kind added within a version (opExpire) needs no new version: a
// replica of an older server stops at a kind it does not know, as at a
// version it does not read.

// opsVersion is the version of the format this code writes and reads.
// Version 2 added the term and opConsumer.
const opsVersion = 2

// opKind is what an op does.
type opKind uint8

// The kinds of ops.
const (
	// opMsgs appends messages at the sequences and times the leader gave
	// them (store.AppendAt).
	opMsgs opKind = iota + 1
	// opRemove removes messages: a MSG.DELETE (persist: recorded on disk
	// at once) or retention's removals.
	opRemove
	// opPurge purges the messages of a subject filter ("" for all) below
	// a sequence (0: every one).
	opPurge
	// opConfig replaces the stream's configuration, as the meta entry at
	// metaIndex assigned it.
	opConfig
	// opTick moves the stream's time on, for MaxAge and TTLs, when no
	// message does.
	opTick
	// opConsumer creates, updates or deletes a durable consumer, or
	// records its progress (replica_consumers.go).
	opConsumer
	// opExpire applies an expiry round the leader planned on a stream
	// with subject delete markers (store.ExpiryPlan, replica_clock.go):
	// the messages it removes, and the markers it appends at the
	// sequences the leader gave them.
	opExpire
)

// consumerOpAction is what an opConsumer does.
type consumerOpAction uint8

// The consumer actions.
const (
	actCreate consumerOpAction = iota + 1
	actUpdate
	actDelete
	actProgress
)

// progressKind is the kind of a consumer's progress record.
type progressKind uint8

// The progress records, as progressLog's methods (progress.go).
const (
	recDelivered progressKind = iota + 1
	recAcked
	recFloor
	recReset
)

// progressRec is one change of a consumer's progress: sseq and dseq
// are the delivered or acknowledged message's, or the floor's.
type progressRec struct {
	kind       progressKind
	sseq, dseq uint64
	dc         uint64 // recDelivered
	ts         int64  // recDelivered, Unix ns
}

// Flags of a message of opMsgs.
const (
	// msgRollupSubject: the message rolls up its subject (purges the
	// subject's earlier messages once appended).
	msgRollupSubject uint8 = 1 << iota
	// msgRollupAll: the message rolls up the whole stream.
	msgRollupAll
	// msgNoInterest: under interest retention no consumer wanted the
	// message when the leader took it: it is acknowledged and not kept
	// (appended, then removed, so that its sequence is used).
	msgNoInterest
)

// errBadOp is an entry that is not an op this code can read.
var errBadOp = errors.New("jetstream: bad replica op")

// replicaOp is one entry of a stream's group: kind says which fields
// count.
type replicaOp struct {
	kind             opKind
	proposer, propID uint64
	term             uint64

	msgs []replicaMsg // opMsgs

	seqs    []uint64 // opRemove
	persist bool

	subject string // opPurge
	below   uint64

	config    []byte // opConfig
	metaIndex uint64

	now int64 // opTick, opExpire

	// opExpire: seqs are the messages removed without a marker; msgs
	// the markers (sequence, time, TTL, flags and subject only), and
	// replaced, for each, the message it replaces.
	replaced []uint64

	// opConsumer: the consumer, what to do, and for a create or update
	// its meta and (create) its start's ack floor; for progress, the
	// records.
	consumer string
	action   consumerOpAction
	meta     []byte
	floor    uint64
	recs     []progressRec

	// purged is what an opPurge (or an opTick, an opExpire) removed,
	// set when it is applied (not encoded).
	purged uint64
}

// replicaMsg is a message of opMsgs, as the leader admitted it.
type replicaMsg struct {
	seq   uint64
	ts    int64 // Unix nanoseconds
	ttl   int64 // nanoseconds; 0 for none
	flags uint8
	msgID string // Nats-Msg-Id, for the replicas' dedup windows
	subj  string
	hdr   []byte
	data  []byte
}

// appendOp appends op's encoding to b.
//
// A batch of messages is encoded once per proposal: sizeOp gives the
// buffer its size up front, rather than growing it by copies.
func appendOp(b []byte, op *replicaOp) []byte {
	b = appendOpHead(b, op)
	switch op.kind {
	case opMsgs:
		b = binary.AppendUvarint(b, uint64(len(op.msgs)))
		for i := range op.msgs {
			b = appendMsg(b, &op.msgs[i])
		}
	case opRemove:
		b = appendSeqs(b, op.seqs)
		b = append(b, boolByte(op.persist))
	case opPurge:
		b = appendBytes(b, []byte(op.subject))
		b = binary.AppendUvarint(b, op.below)
	case opConfig:
		b = appendBytes(b, op.config)
		b = binary.AppendUvarint(b, op.metaIndex)
	case opTick:
		b = binary.AppendVarint(b, op.now)
	case opExpire:
		b = appendExpireOp(b, op)
	case opConsumer:
		b = appendConsumerOp(b, op)
	}
	return b
}

// appendOpHead appends an op's header: the version, kind, proposer,
// propID and term.
func appendOpHead(b []byte, op *replicaOp) []byte {
	b = append(b, opsVersion, byte(op.kind))
	b = binary.AppendUvarint(b, op.proposer)
	b = binary.AppendUvarint(b, op.propID)
	return binary.AppendUvarint(b, op.term)
}

// appendMsg appends a message of opMsgs.
func appendMsg(b []byte, m *replicaMsg) []byte {
	b = appendMsgHead(b, m)
	b = appendBytes(b, []byte(m.msgID))
	b = appendBytes(b, []byte(m.subj))
	b = appendBytes(b, m.hdr)
	return appendBytes(b, m.data)
}

// sizeMsg returns at least the bytes appendMsg writes for m.
func sizeMsg(m *replicaMsg) int {
	return 3*binary.MaxVarintLen64 + 1 + 4*binary.MaxVarintLen64 + len(m.msgID) + len(m.subj) + len(m.hdr) + len(m.data)
}

// msgsHeadRoom is the most an opMsgs op's header and message count take.
const msgsHeadRoom = 2 + 4*binary.MaxVarintLen64

// A leader encodes each message of a batch as it joins (replica.ingest),
// after msgsHeadRoom bytes left free: the header and the count are known
// only when the batch is proposed. sealMsgs writes them into that room and
// returns the op's encoding, what appendOp writes for op with the
// messages; op.msgs is not read.
func sealMsgs(enc []byte, op *replicaOp, count int) []byte {
	var room [msgsHeadRoom]byte
	head := binary.AppendUvarint(appendOpHead(room[:0], op), uint64(count))
	start := msgsHeadRoom - len(head)
	copy(enc[start:], head)
	return enc[start:]
}

// appendExpireOp appends an opExpire's fields.
func appendExpireOp(b []byte, op *replicaOp) []byte {
	b = binary.AppendVarint(b, op.now)
	b = appendSeqs(b, op.seqs)
	b = binary.AppendUvarint(b, uint64(len(op.msgs)))
	for i := range op.msgs {
		m := &op.msgs[i]
		b = appendMsgHead(b, m)
		b = appendBytes(b, []byte(m.subj))
		var replaced uint64
		if i < len(op.replaced) {
			replaced = op.replaced[i]
		}
		b = binary.AppendUvarint(b, replaced)
	}
	return b
}

// appendMsgHead appends what opMsgs and opExpire both say of a message:
// its sequence, time, TTL and flags.
func appendMsgHead(b []byte, m *replicaMsg) []byte {
	b = binary.AppendUvarint(b, m.seq)
	b = binary.AppendVarint(b, m.ts)
	b = binary.AppendVarint(b, m.ttl)
	return append(b, m.flags)
}

// appendSeqs appends a count and the sequences.
func appendSeqs(b []byte, seqs []uint64) []byte {
	b = binary.AppendUvarint(b, uint64(len(seqs)))
	for _, s := range seqs {
		b = binary.AppendUvarint(b, s)
	}
	return b
}

// sizeOp returns, for an opMsgs op, at least the bytes appendOp writes
// (for other kinds, a small start).
func sizeOp(op *replicaOp) int {
	n := 2 + 3*binary.MaxVarintLen64
	if op.kind == opMsgs {
		n += binary.MaxVarintLen64
		for i := range op.msgs {
			n += sizeMsg(&op.msgs[i])
		}
	}
	return n
}

func appendConsumerOp(b []byte, op *replicaOp) []byte {
	b = appendBytes(b, []byte(op.consumer))
	b = append(b, byte(op.action))
	switch op.action {
	case actCreate, actUpdate:
		b = appendBytes(b, op.meta)
		b = binary.AppendUvarint(b, op.floor)
	case actProgress:
		b = binary.AppendUvarint(b, uint64(len(op.recs)))
		for _, r := range op.recs {
			b = append(b, byte(r.kind))
			switch r.kind {
			case recDelivered:
				b = binary.AppendUvarint(b, r.sseq)
				b = binary.AppendUvarint(b, r.dseq)
				b = binary.AppendUvarint(b, r.dc)
				b = binary.AppendVarint(b, r.ts)
			case recAcked:
				b = binary.AppendUvarint(b, r.sseq)
			default:
				b = binary.AppendUvarint(b, r.sseq)
				b = binary.AppendUvarint(b, r.dseq)
			}
		}
	}
	return b
}

func appendBytes(b, p []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(p)))
	return append(b, p...)
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// decodeOp reads an op. Its byte slices alias b. Anything malformed (an
// unknown version or kind, a truncated field, bytes left over, a count
// larger than the entry could hold) is an error wrapping errBadOp.
func decodeOp(b []byte) (replicaOp, error) { return decodeOpInto(b, nil) }

// decodeOpInto is decodeOp, with an opMsgs op's messages decoded into
// room's array if it has room for them. Consecutive messages on the same
// subject share its string.
func decodeOpInto(b []byte, room []replicaMsg) (replicaOp, error) {
	d := opDecoder{b: b}
	var op replicaOp
	if v := d.byte(); v != opsVersion && d.err == nil {
		return op, fmt.Errorf("%w: version %d (this server reads %d)", errBadOp, v, opsVersion)
	}
	op.kind = opKind(d.byte())
	op.proposer, op.propID, op.term = d.uvarint(), d.uvarint(), d.uvarint()
	switch op.kind {
	case opMsgs:
		// Each message takes at least 8 bytes: seq, ts, ttl, flags and
		// four lengths.
		n := d.count(8)
		switch {
		case n > 0 && n <= cap(room):
			op.msgs = room[:0]
		case n > 0:
			op.msgs = make([]replicaMsg, 0, n)
		}
		var subj string
		for range n {
			m := d.msgHead()
			m.msgID = string(d.bytes())
			if s := d.bytes(); string(s) != subj {
				subj = string(s)
			}
			m.subj = subj
			m.hdr, m.data = d.bytes(), d.bytes()
			op.msgs = append(op.msgs, m)
		}
	case opRemove:
		op.seqs = d.seqs()
		op.persist = d.boolean()
	case opPurge:
		op.subject, op.below = string(d.bytes()), d.uvarint()
	case opConfig:
		op.config, op.metaIndex = d.bytes(), d.uvarint()
	case opTick:
		op.now = d.varint()
	case opExpire:
		d.expireOp(&op)
	case opConsumer:
		d.consumerOp(&op)
	default:
		if d.err == nil {
			return op, fmt.Errorf("%w: unknown kind %d", errBadOp, op.kind)
		}
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d bytes after the op", len(d.b))
	}
	if d.err != nil {
		return op, fmt.Errorf("%w: %v", errBadOp, d.err)
	}
	return op, nil
}

// msgHead reads what appendMsgHead wrote.
func (d *opDecoder) msgHead() replicaMsg {
	return replicaMsg{seq: d.uvarint(), ts: d.varint(), ttl: d.varint(), flags: d.byte()}
}

// seqs reads a count and the sequences.
func (d *opDecoder) seqs() []uint64 {
	n := d.count(1)
	if n == 0 {
		return nil
	}
	seqs := make([]uint64, 0, n)
	for range n {
		seqs = append(seqs, d.uvarint())
	}
	return seqs
}

// expireOp reads an opExpire's fields.
func (d *opDecoder) expireOp(op *replicaOp) {
	op.now = d.varint()
	op.seqs = d.seqs()
	// Each marker takes at least 6 bytes: seq, ts, ttl, flags, the
	// subject's length and replaced.
	n := d.count(6)
	if n > 0 {
		op.msgs, op.replaced = make([]replicaMsg, 0, n), make([]uint64, 0, n)
	}
	for range n {
		m := d.msgHead()
		m.subj = string(d.bytes())
		op.msgs, op.replaced = append(op.msgs, m), append(op.replaced, d.uvarint())
	}
}

// consumerOp reads an opConsumer's fields.
func (d *opDecoder) consumerOp(op *replicaOp) {
	op.consumer, op.action = string(d.bytes()), consumerOpAction(d.byte())
	switch op.action {
	case actCreate, actUpdate:
		op.meta, op.floor = d.bytes(), d.uvarint()
	case actDelete:
	case actProgress:
		n := d.count(2) // a kind and a sequence at least
		if n > 0 {
			op.recs = make([]progressRec, 0, n)
		}
		for range n {
			r := progressRec{kind: progressKind(d.byte())}
			switch r.kind {
			case recDelivered:
				r.sseq, r.dseq, r.dc, r.ts = d.uvarint(), d.uvarint(), d.uvarint(), d.varint()
			case recAcked:
				r.sseq = d.uvarint()
			case recFloor, recReset:
				r.sseq, r.dseq = d.uvarint(), d.uvarint()
			default:
				d.fail(fmt.Errorf("progress record kind %d", r.kind))
			}
			op.recs = append(op.recs, r)
		}
	default:
		d.fail(fmt.Errorf("consumer action %d", op.action))
	}
}

// opDecoder reads fields off b; the first failure sticks in err and makes
// every later read return zero.
type opDecoder struct {
	b   []byte
	err error
}

var errTruncated = errors.New("truncated")

func (d *opDecoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *opDecoder) byte() byte {
	if len(d.b) < 1 {
		d.fail(errTruncated)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *opDecoder) boolean() bool {
	switch v := d.byte(); v {
	case 0, 1:
		return v == 1
	default:
		d.fail(fmt.Errorf("boolean %d", v))
		return false
	}
}

func (d *opDecoder) uvarint() uint64 { return readVarint(d, binary.Uvarint) }

func (d *opDecoder) varint() int64 { return readVarint(d, binary.Varint) }

// readVarint reads a varint with read (binary.Uvarint or Varint).
func readVarint[T uint64 | int64](d *opDecoder, read func([]byte) (T, int)) T {
	v, n := read(d.b)
	if n <= 0 {
		d.fail(errTruncated)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a count of items of at least `least` bytes each, refusing one
// the rest of the entry could not hold (so a corrupt count never makes a
// huge allocation).
func (d *opDecoder) count(least int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/least) {
		d.fail(fmt.Errorf("count %d in %d bytes", n, len(d.b)))
		return 0
	}
	return int(n)
}

func (d *opDecoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail(errTruncated)
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	if n == 0 {
		return nil
	}
	return v
}
