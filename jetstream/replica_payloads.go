package jetstream

import (
	"encoding/binary"
	"errors"
	"fmt"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/skiffmq/skiff/store"
	"github.com/skiffmq/skiff/store/raftlog"
)

// Payloads written once (design 2.1). A replica of a file stream whose log
// acknowledges before it fsyncs (interval, the default, and never) writes
// each message once: when the raft log takes an opMsgs entry,
// replicaPayloads stages its messages in the stream's store (store.Stage:
// written at the end of its files, not yet indexed), and the log's record
// of the entry keeps a head in place of the op: where each message's
// record is, and the op with its messages' headers and data left out. The
// apply commits the staged records (AppendAt finds them) rather than
// writing the messages again. Under always, where the log is fsynced
// before every acknowledgement, the entries stay whole: staging would add
// the store's fsync to the log's.
//
// Leader and followers alike stage what their logs take: the leader its
// own proposals, a follower what its leader sends. A sequence that cannot
// follow the staged tail (an entry behind the store, after an op that
// takes sequences without staging, such as an expiry's markers) keeps its
// entry whole, and the apply appends it (AppendAt).
//
// head: headVersion u8 | count uvarint | per message: segment uvarint |
//
//	offset uvarint | size uvarint | crc u32 | the op, its messages'
//	headers and data empty
type replicaPayloads struct {
	store *store.Stream
	// onCorrupt hears of a message record that fails its checksum (the
	// store's OnCorrupt): the replica is rebuilt from its group.
	onCorrupt func(seqs []uint64)

	// The raft log's writer goroutine's, from one Strip to the next.
	msgs   []replicaMsg
	places []store.Place
	head   []byte
}

var _ raftlog.Payloads = (*replicaPayloads)(nil)

// headVersion is the version of a head's format.
const headVersion = 1

// stripMinAvg is the average bytes per message below which an entry is
// kept whole: staging costs a fixed amount per message (the op decoded on
// the log's writer, a record staged, a head encoded) and saves a copy of
// its bytes, which for small messages is less. Measured on 3-server R3
// clusters: servers' CPU 5% to 10% higher per 16 B message staged, 17%
// lower per 1 KiB one; the crossover is near 150 bytes. A variable for
// tests.
var stripMinAvg = 256

// Strip stages the messages of an opMsgs entry and returns its head.
func (p *replicaPayloads) Strip(e *raftpb.Entry) ([]byte, bool) {
	data := e.GetData()
	if e.GetType() != raftpb.EntryNormal || len(data) < 2 || data[0] != opsVersion {
		return nil, false
	}
	switch opKind(data[1]) {
	case opMsgs:
	case opExpire:
		p.takesSeqs(e)
		return nil, false
	default:
		return nil, false
	}
	if n := msgsCount(data); n == 0 || len(data)/n < stripMinAvg {
		p.takesSeqs(e)
		return nil, false
	}
	op, err := decodeOpInto(data, p.msgs)
	if err != nil || op.term != e.GetTerm() || len(op.msgs) == 0 {
		// Unreadable (its apply says why), or decided in another term: the
		// apply skips it, and its payloads are not needed.
		return nil, false
	}
	defer p.keep(&op)
	p.places = p.places[:0]
	key := store.StageKey{Index: e.GetIndex(), Term: e.GetTerm()}
	for i := range op.msgs {
		m := &op.msgs[i]
		pl, err := p.store.Stage(key, m.seq, m.ts, m.subj, m.hdr, m.data)
		if err != nil {
			// The entry stays whole; what was staged of it is committed by
			// its apply (AppendAt finds it), or cut by what follows.
			return nil, false
		}
		p.places = append(p.places, pl)
	}
	h := append(p.head[:0], headVersion)
	h = binary.AppendUvarint(h, uint64(len(p.places)))
	for _, pl := range p.places {
		h = binary.AppendUvarint(h, pl.Segment)
		h = binary.AppendUvarint(h, uint64(pl.Offset))
		h = binary.AppendUvarint(h, uint64(pl.Size))
		h = binary.LittleEndian.AppendUint32(h, pl.CRC)
	}
	for i := range op.msgs {
		op.msgs[i].hdr, op.msgs[i].data = nil, nil
	}
	h = appendOp(h, &op)
	p.head = h
	return h, true
}

// msgsCount reads the message count of an opMsgs op's encoding, 0 if it
// cannot.
func msgsCount(b []byte) int {
	d := opDecoder{b: b}
	d.byte()
	d.byte()
	d.uvarint()
	d.uvarint()
	d.uvarint()
	n := d.uvarint()
	if d.err != nil || n > uint64(len(b)) {
		return 0
	}
	return int(n)
}

// keep keeps op's room for the next Strip, cleared of what the entry's
// bytes were decoded into.
func (p *replicaPayloads) keep(op *replicaOp) {
	if op.kind == opMsgs && cap(op.msgs) <= maxKeptMsgs {
		clear(op.msgs)
		p.msgs = op.msgs[:0]
	}
}

// takesSeqs cuts the staged tail from the first sequence of an op that
// takes sequences without staging (an expiry's markers, the messages of
// an entry kept whole): any staged record there belongs to an entry raft
// replaced or to an op of an earlier term, which no replica applies, and
// the apply must not find it. (AppendAt checks a staged record against
// its message all the same.)
func (p *replicaPayloads) takesSeqs(e *raftpb.Entry) {
	if !p.store.HasStaged() {
		return
	}
	op, err := decodeOpInto(e.GetData(), p.msgs)
	if err != nil || op.term != e.GetTerm() || len(op.msgs) == 0 {
		return
	}
	defer p.keep(&op)
	_ = p.store.Unstage(op.msgs[0].seq) // a failure marks the file to be cut before its next write
}

// Flush writes the staged records to the store's files before the raft
// log's records that point at them. A closed store wrote them as it
// closed.
func (p *replicaPayloads) Flush() error {
	if err := p.store.Flush(); err != nil && !errors.Is(err, store.ErrClosed) {
		return err
	}
	return nil
}

// Sync fsyncs the staged records before the raft log's fsync of the
// records that point at them.
func (p *replicaPayloads) Sync() error {
	if err := p.store.SyncWritten(); err != nil && !errors.Is(err, store.ErrClosed) {
		return err
	}
	return nil
}

// Join rebuilds the op of an entry from its head and its messages'
// records.
func (p *replicaPayloads) Join(index, term uint64, head []byte) ([]byte, error) {
	places, rest, err := decodeHead(head)
	if err != nil {
		return nil, err
	}
	op, err := decodeOp(rest)
	switch {
	case err != nil:
		return nil, err
	case len(op.msgs) != len(places):
		return nil, fmt.Errorf("%w: a head of %d places for %d messages", errBadOp, len(places), len(op.msgs))
	case op.term != term:
		// Skipped by every apply (errStaleTerm): its records may be cut.
		return appendOp(nil, &op), nil
	}
	read := make([]*store.Msg, 0, len(places))
	defer func() {
		for _, m := range read {
			m.Release()
		}
	}()
	for i, pl := range places {
		pl.Seq = op.msgs[i].seq
		m, err := p.store.ReadPlace(pl) // kept while the log holds the entry (store.ReleaseThrough)
		if err != nil {
			if errors.Is(err, store.ErrCorrupt) && p.onCorrupt != nil {
				p.onCorrupt([]uint64{pl.Seq})
			}
			return nil, fmt.Errorf("entry %d: %w", index, err)
		}
		read = append(read, m)
		op.msgs[i].hdr, op.msgs[i].data = m.Header, m.Data
	}
	return appendOp(make([]byte, 0, sizeOp(&op)), &op), nil
}

// decodeHead reads a head's places and returns them with the op after
// them.
func decodeHead(b []byte) ([]store.Place, []byte, error) {
	if len(b) == 0 || b[0] != headVersion {
		return nil, nil, fmt.Errorf("%w: a head of an unknown version", errBadOp)
	}
	d := opDecoder{b: b[1:]}
	n := d.count(7) // each place takes at least 7 bytes
	places := make([]store.Place, 0, n)
	for range n {
		pl := store.Place{Segment: d.uvarint()}
		pl.Offset, pl.Size = uint32(d.uvarint()), uint32(d.uvarint())
		if len(d.b) < 4 && d.err == nil {
			d.err = errors.New("a place cut short")
		}
		if d.err != nil {
			break
		}
		pl.CRC = binary.LittleEndian.Uint32(d.b)
		d.b = d.b[4:]
		places = append(places, pl)
	}
	if d.err != nil {
		return nil, nil, fmt.Errorf("%w: head: %v", errBadOp, d.err)
	}
	return places, d.b, nil
}
