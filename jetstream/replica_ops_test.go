package jetstream

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// opSamples are one op of each kind, edge values included.
func opSamples() []replicaOp {
	return []replicaOp{
		{kind: opMsgs, proposer: 0xfeedface12345678, propID: 1, msgs: []replicaMsg{
			{seq: 1, ts: 1795559000123456789, subj: "orders.new", data: []byte("one")},
			{seq: 2, ts: 1795559000123456790, ttl: 60e9, flags: msgRollupSubject, msgID: "id-2", subj: "orders.x",
				hdr: []byte("NATS/1.0\r\nNats-Msg-Id: id-2\r\n\r\n"), data: []byte("two")},
			{seq: 1<<64 - 1, ts: -1, ttl: -1, flags: msgRollupAll, subj: "z"},
		}},
		{kind: opMsgs, propID: 2},
		{kind: opRemove, propID: 3, seqs: []uint64{5, 7, 1 << 40}, persist: true},
		{kind: opRemove, propID: 4},
		{kind: opPurge, propID: 5, subject: "orders.>", below: 100},
		{kind: opPurge, propID: 6},
		{kind: opConfig, propID: 7, config: []byte(`{"name":"ORDERS","subjects":["orders.>"]}`), metaIndex: 42},
		{kind: opTick, propID: 8, now: 1795559000123456789},
		{kind: opMsgs, propID: 9, term: 1<<64 - 1},
		{kind: opConsumer, propID: 10, term: 3, consumer: "C1", action: actCreate,
			meta: []byte(`{"config":{"durable_name":"C1"}}`), floor: 41},
		{kind: opConsumer, propID: 11, consumer: "C1", action: actUpdate, meta: []byte(`{}`)},
		{kind: opConsumer, propID: 12, consumer: "C1", action: actDelete},
		{kind: opConsumer, propID: 13, term: 7, consumer: "C1", action: actProgress, recs: []progressRec{
			{kind: recDelivered, sseq: 42, dseq: 1, dc: 1, ts: 1795559000123456789},
			{kind: recDelivered, sseq: 42, dseq: 2, dc: 2, ts: -5},
			{kind: recAcked, sseq: 42},
			{kind: recFloor, sseq: 42, dseq: 2},
			{kind: recReset, sseq: 10},
		}},
		{kind: opConsumer, propID: 14, consumer: "C1", action: actProgress},
		{kind: opExpire, propID: 15, term: 2, now: 1795559000123456789, seqs: []uint64{3, 1 << 40},
			msgs: []replicaMsg{
				{seq: 41, ts: 1795559000123456789, ttl: 60e9, subj: "kv.a"},
				{seq: 42, ts: 1795559000123456789, ttl: 1e9, flags: msgNoInterest, subj: "kv.b"},
			}, replaced: []uint64{7, 1<<64 - 1}},
		{kind: opExpire, propID: 16, now: -1},
	}
}

func TestReplicaOpsRoundTrip(t *testing.T) {
	for _, op := range opSamples() {
		b := appendOp(nil, &op)
		got, err := decodeOp(b)
		require.NoError(t, err, "kind %d", op.kind)
		require.Equal(t, op, got)
		// Appending to a buffer with bytes in it changes nothing.
		b2 := appendOp([]byte("prefix"), &op)
		require.Equal(t, b, b2[len("prefix"):])
		if op.kind == opMsgs {
			require.LessOrEqual(t, len(b), sizeOp(&op), "sizeOp bounds an opMsgs op")
		}
	}
}

// TestDecodeOpInto checks that an opMsgs op's messages are decoded into
// the room given when it is large enough, and only then, that the result
// is decodeOp's, and that consecutive messages on one subject share its
// string.
func TestDecodeOpInto(t *testing.T) {
	op := replicaOp{kind: opMsgs, msgs: []replicaMsg{
		{seq: 1, subj: "a.b", data: []byte("1")}, {seq: 2, subj: "a.b", data: []byte("2")},
		{seq: 3, subj: "c", msgID: "x"}, {seq: 4, subj: "a.b"},
	}}
	b := appendOp(nil, &op)
	want, err := decodeOp(b)
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		room  int
		share bool
	}{{"no room", 0, false}, {"too little", 3, false}, {"just enough", 4, true}, {"more", 100, true}} {
		t.Run(tc.name, func(t *testing.T) {
			room := make([]replicaMsg, 0, tc.room)
			got, err := decodeOpInto(b, room)
			require.NoError(t, err)
			require.Equal(t, want, got)
			require.Equal(t, tc.share, tc.room > 0 && &room[:1][0] == &got.msgs[0], "decoded into the room")
			require.Same(t, unsafe.StringData(got.msgs[0].subj), unsafe.StringData(got.msgs[1].subj))
			require.NotSame(t, unsafe.StringData(got.msgs[1].subj), unsafe.StringData(got.msgs[3].subj),
				"only consecutive messages share")
		})
	}
	// Other ops leave the room alone.
	rm := replicaOp{kind: opRemove, seqs: []uint64{1}}
	got, err := decodeOpInto(appendOp(nil, &rm), make([]replicaMsg, 0, 8))
	require.NoError(t, err)
	require.Equal(t, rm, got)
}

// TestSealMsgs checks that an opMsgs op encoded as a leader builds it,
// message by message into room left for the header, is what appendOp
// encodes, whatever the header's varints take.
func TestSealMsgs(t *testing.T) {
	for _, op := range opSamples() {
		if op.kind != opMsgs {
			continue
		}
		for _, head := range []struct{ proposer, propID, term uint64 }{
			{op.proposer, op.propID, op.term}, {0, 0, 0}, {1<<64 - 1, 1<<64 - 1, 1<<64 - 1},
		} {
			op.proposer, op.propID, op.term = head.proposer, head.propID, head.term
			enc := make([]byte, msgsHeadRoom)
			for i := range op.msgs {
				enc = appendMsg(enc, &op.msgs[i])
			}
			want := appendOp(nil, &op)
			sealed := op
			sealed.msgs = nil // sealMsgs reads only the header's fields
			require.Equal(t, want, sealMsgs(enc, &sealed, len(op.msgs)), "%+v", head)
		}
	}
}

func TestReplicaOpsMalformed(t *testing.T) {
	good := appendOp(nil, &opSamples()[0])
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "truncated"},
		{"another version", append([]byte{opsVersion + 1}, good[1:]...), "version 3"},
		{"unknown kind", []byte{opsVersion, 99, 0, 0, 0}, "unknown kind 99"},
		{"truncated header", []byte{opsVersion, byte(opMsgs), 0x80}, "truncated"},
		{"truncated message", good[:len(good)-1], "truncated"},
		{"bytes left over", append(append([]byte{}, good...), 0), "1 bytes after the op"},
		{"a count larger than the entry", []byte{opsVersion, byte(opMsgs), 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}, "count"},
		{"a bad boolean", []byte{opsVersion, byte(opRemove), 0, 0, 0, 0, 2}, "boolean 2"},
		{"an unknown consumer action", []byte{opsVersion, byte(opConsumer), 0, 0, 0, 1, 'C', 9}, "consumer action 9"},
		{"an unknown progress record", []byte{opsVersion, byte(opConsumer), 0, 0, 0, 1, 'C', byte(actProgress), 1, 9, 0},
			"progress record kind 9"},
		{"more markers than the entry holds", []byte{opsVersion, byte(opExpire), 0, 0, 0, 0, 0, 2, 1, 0, 0, 0, 1, 'a', 0},
			"count 2"},
		{"a truncated marker", []byte{opsVersion, byte(opExpire), 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 1, 'a'}, "truncated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeOp(tc.b)
			require.ErrorIs(t, err, errBadOp)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// FuzzDecodeOp: no input makes decodeOp panic or allocate past its
// size, and what it reads encodes back to an op it reads the same.
func FuzzDecodeOp(f *testing.F) {
	for _, op := range opSamples() {
		f.Add(appendOp(nil, &op))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		op, err := decodeOp(b)
		if err != nil {
			require.ErrorIs(t, err, errBadOp)
			return
		}
		again, err := decodeOp(appendOp(nil, &op))
		require.NoError(t, err)
		require.Equal(t, op, again)
	})
}

// TestBatchSizes checks the decaying maximum a new batch is sized by: it
// takes a larger batch at once, and a smaller one's by an eighth a batch.
func TestBatchSizes(t *testing.T) {
	var s batchSizes
	for _, c := range []struct{ msgs, enc, wantMsgs, wantEnc int }{
		{10, 1000, 10, 1000},
		{80, 64000, 80, 64000},
		{1, 100, 70, 56000},
		{1, 100, 62, 49000},
		{500, 300000, 500, 300000},
	} {
		s.add(c.msgs, c.enc)
		require.Equal(t, batchSizes{c.wantMsgs, c.wantEnc}, s, "after a batch of %d, %d bytes", c.msgs, c.enc)
	}
	for range 200 {
		s.add(1, 100)
	}
	require.Equal(t, batchSizes{7, 100}, s, "a stream whose traffic fell")
}

// TestRecycleBatches checks that a batch applied and answered is reused
// by the next one opened, emptied, and that a batch raft did not take, or
// one too large, or one past the bound of spares, is not kept.
func TestRecycleBatches(t *testing.T) {
	var r replica
	open := func() *replicaBatch {
		b := r.openLocked()
		r.mu.open = nil
		return b
	}
	fill := func(b *replicaBatch, n int) {
		for i := range n {
			b.msgs = append(b.msgs, replicaMsg{seq: uint64(i + 1), subj: "a", data: []byte("x")})
			b.replies = append(b.replies, "_INBOX.r")
		}
		b.refusals = append(b.refusals, refusal{reply: "_INBOX.f", body: []byte("no")})
		b.propID, b.bytes = 7, n
	}
	b := open()
	fill(b, 3)
	r.recycleLocked(b)
	require.Empty(t, r.mu.spare, "not taken by raft: something may hold it")

	b.taken = true
	r.recycleLocked(b)
	require.Len(t, r.mu.spare, 1)
	require.Equal(t, &replicaBatch{msgs: b.msgs[:0], replies: b.replies[:0], refusals: b.refusals[:0]}, b)
	require.Equal(t, make([]replicaMsg, 3), b.msgs[:3], "no message is kept")
	require.Equal(t, make([]string, 3), b.replies[:3], "no reply is kept")
	require.Equal(t, []refusal{{}}, b.refusals[:1], "no refusal is kept")
	require.Same(t, b, open(), "the next batch reuses it")
	require.Empty(t, r.mu.spare)

	var many []*replicaBatch
	for range maxSpareBatches + 2 {
		nb := open()
		nb.taken = true
		many = append(many, nb)
	}
	for _, nb := range many {
		r.recycleLocked(nb)
	}
	require.Len(t, r.mu.spare, maxSpareBatches, "at most maxSpareBatches kept")

	r.mu.spare = nil
	big := &replicaBatch{taken: true, msgs: make([]replicaMsg, 0, maxSpareMsgs+1)}
	r.recycleLocked(big)
	require.Empty(t, r.mu.spare, "too large to keep")
}
