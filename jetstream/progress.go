package jetstream

import (
	"errors"
	"log/slog"

	"github.com/skiffmq/skiff/store"
)

// progressLog keeps a consumer's progress across restarts: what it
// delivered, what waits for an acknowledgement, and its ack floor. The
// consumer's goroutine records changes as they happen and calls Flush once
// per round, before it confirms synchronous acks or lets CONSUMER.INFO see
// the new state; after Flush the changes survive a crash of the process
// (and, with the stream's sync policy "always", of the machine).
type progressLog interface {
	// Delivered records the dc-th delivery of stream sequence sseq as
	// consumer sequence dseq at ts (Unix ns).
	Delivered(sseq, dseq, dc uint64, ts int64)
	// Acked records that sseq no longer waits for an ack (acknowledged,
	// terminated, delivered max_deliver times, or removed).
	Acked(sseq uint64)
	// Floor records the ack floor.
	Floor(asflr, adflr uint64)
	// Flush writes the changes so far; they are durable as the stream's
	// sync policy says.
	Flush() error
	// Confirm returns once the changes so far are as safe as a
	// confirmed acknowledgement must be: at once where Flush made them
	// so, or once a replicated stream's quorum has them (quit gives up,
	// with an error).
	Confirm(quit <-chan struct{}) error
	// Reset forgets every delivery and sets the ack floor, which may
	// move back (CONSUMER.RESET); durable when it returns, as Flush.
	Reset(asflr, adflr uint64) error
	// Close flushes and releases the log.
	Close() error
}

// memProgress keeps nothing: the progress of ephemeral and memory-storage
// consumers lives and dies with the process.
type memProgress struct{}

func (memProgress) Delivered(uint64, uint64, uint64, int64) {}
func (memProgress) Acked(uint64)                            {}
func (memProgress) Floor(uint64, uint64)                    {}
func (memProgress) Flush() error                            { return nil }
func (memProgress) Confirm(<-chan struct{}) error           { return nil }
func (memProgress) Reset(uint64, uint64) error              { return nil }
func (memProgress) Close() error                            { return nil }

// fileProgress keeps a durable consumer's progress in a store.ConsumerState:
// a log of deliveries and acks, compacted into snapshots. The store
// fsyncs it as the stream's sync policy says: Flush waits for an fsync
// under "always", so that a synchronous ack is confirmed, and an ack floor
// reported, only once durable; under "interval" the store's background
// fsync covers it, off the consumer's delivery path.
//
// A record the store could not write (a full disk) changed nothing there;
// it is kept, with every record made after it, and written again, in
// order, at each Flush until the store takes it. Until then Flush fails:
// the consumer confirms no ack and delivers nothing (consumer.run), so
// what is kept is bounded by the messages pending when writing failed.
type fileProgress struct {
	cs *store.ConsumerState
	// unwritten holds the records not written yet, oldest first.
	unwritten []progressRec
	// The floor is written once per round, when it moved.
	floor      store.SeqPair
	floorDirty bool
}

// openProgress opens a consumer's progress in dir and returns what it
// recovered.
func openProgress(dir string, fs store.FS, cfg *StreamConfig, log *slog.Logger) (*fileProgress, *store.ConsumerSnapshot, error) {
	// The store reports damage it finds in the log, and failed background
	// fsyncs, to this logger.
	cs, err := store.OpenConsumerStateOptions(store.ConsumerOptions{Dir: dir, FS: fs, Durability: cfg.durability(), Logger: log})
	if err != nil {
		return nil, nil, err
	}
	snap, err := cs.Load()
	if err != nil {
		_ = cs.Close()
		return nil, nil, err
	}
	return &fileProgress{cs: cs, floor: snap.AckFloor}, &snap, nil
}

// record writes r, or keeps it if the store did not take it or holds
// records back.
func (p *fileProgress) record(r progressRec) {
	if len(p.unwritten) > 0 || applyRec(p.cs, r) != nil {
		p.unwritten = append(p.unwritten, r)
	}
}

func (p *fileProgress) Delivered(sseq, dseq, dc uint64, ts int64) {
	p.record(progressRec{kind: recDelivered, sseq: sseq, dseq: dseq, dc: dc, ts: ts})
}

func (p *fileProgress) Acked(sseq uint64) { p.record(progressRec{kind: recAcked, sseq: sseq}) }

func (p *fileProgress) Floor(asflr, adflr uint64) {
	if asflr > p.floor.Stream || adflr > p.floor.Consumer {
		p.floor = store.SeqPair{Stream: max(asflr, p.floor.Stream), Consumer: max(adflr, p.floor.Consumer)}
		p.floorDirty = true
	}
}

// Flush writes what is held back, then the floor, and waits for the
// fsync the policy asks; it fails while a record is not written.
func (p *fileProgress) Flush() error {
	if p.floorDirty {
		p.record(progressRec{kind: recFloor, sseq: p.floor.Stream, dseq: p.floor.Consumer})
		p.floorDirty = false
	}
	for len(p.unwritten) > 0 {
		if err := applyRec(p.cs, p.unwritten[0]); err != nil {
			return err
		}
		p.unwritten = p.unwritten[1:]
	}
	p.unwritten = nil
	return p.cs.WaitDurable()
}

// Confirm has nothing to wait for: Flush waited for what the sync policy
// asks.
func (p *fileProgress) Confirm(<-chan struct{}) error { return nil }

func (p *fileProgress) Close() error {
	return errors.Join(p.Flush(), p.cs.Close())
}
