package store

import (
	"bytes"
	"fmt"

	"github.com/skiffmq/skiff/internal/bufpool"
)

// backend is where a Stream keeps its records: memory or segment files.
// The Stream owns the in-memory index (entries, subjects, limits); the
// backend only stores bytes and makes them durable. Every method except
// read and the sync plan's run is called with the stream's write lock held;
// read is called with at least its read lock.
type backend interface {
	// write stores the encoded record of seq (timestamp ts, interned
	// subject subj), head followed by data, and returns its offset. On
	// error nothing of the record remains and the backend is ready for the
	// next write.
	write(seq uint64, ts int64, subj string, head, data []byte) (uint32, error)
	// read returns the record of seq, described by e, in a buffer the
	// caller owns: new, or from bufpool for a large record.
	read(seq uint64, e *entry) ([]byte, error)
	// removed notes that seq is gone. lazy asks the backend to record an
	// interior delete at its next sync point; a removal at the front is
	// covered by the floor instead, and one persisted by persistDeletes
	// needs nothing more.
	removed(seq uint64, lazy bool)
	// setFloor notes the stream's new first sequence; everything below is
	// gone. It is persisted at the next sync point.
	setFloor(first uint64)
	// persistDeletes records seqs (ascending) as deleted before the stream
	// applies them, as durably as the sync policy promises. It returns how
	// many of seqs, a prefix, are recorded.
	persistDeletes(seqs []uint64) (int, error)
	// persistFloor records a new floor before a purge applies it.
	persistFloor(floor uint64) error
	// persistSkip records that the last sequence is at least to, though
	// no record holds it (Stream.Skip), as durably as the sync policy
	// promises.
	persistSkip(to uint64) error
	// dropAll removes every record but those staged (stage.go), whose
	// segments stay; the floor is already persisted.
	dropAll()
	// flush writes buffered appends (Options.WriteBuffer) to their file.
	flush() error
	// hold and release hold writes (writehold.go); writtenThrough is the
	// last sequence, at most last, whose record is written.
	hold() error
	release() error
	writtenThrough(last uint64) uint64
	// prepareSync starts a sync round: it writes what is buffered (delete
	// records, the floor) and returns what remains to be done without the
	// lock.
	prepareSync(fsync bool) syncPlan
	// finishSync ends a round with the plan's outcome.
	finishSync(p syncPlan, err error)
	// close releases the backend's files; destroy also removes them.
	close() error
	destroy() error
}

// syncPlan is the slow part of a sync round, run without the stream's lock.
type syncPlan interface {
	run() error
}

type noSync struct{}

func (noSync) run() error { return nil }

// memBackend keeps records in memory, in a deque indexed by sequence.
type memBackend struct {
	recs [][]byte // recs[i] is sequence base+i; nil once removed
	base uint64
}

var _ backend = (*memBackend)(nil)

func (m *memBackend) flush() error { return nil }

func (m *memBackend) write(seq uint64, _ int64, _ string, head, data []byte) (uint32, error) {
	if len(m.recs) == 0 {
		m.base = seq
	}
	for m.base+uint64(len(m.recs)) < seq { // a purge moved the stream on
		m.recs = append(m.recs, nil)
	}
	// Appending to a full-capacity head copies it into a new buffer that
	// the runtime need not zero first, as make would.
	rec := append(head[:len(head):len(head)], data...)
	if len(data) == 0 {
		rec = bytes.Clone(head)
	}
	m.recs = append(m.recs, rec)
	return 0, nil
}

func (m *memBackend) read(seq uint64, _ *entry) ([]byte, error) {
	if seq < m.base || seq-m.base >= uint64(len(m.recs)) || m.recs[seq-m.base] == nil {
		return nil, fmt.Errorf("%w: sequence %d", ErrNotFound, seq)
	}
	rec := m.recs[seq-m.base]
	return append(bufpool.Get(len(rec)), rec...), nil
}

func (m *memBackend) removed(seq uint64, _ bool) {
	if seq >= m.base && seq-m.base < uint64(len(m.recs)) {
		m.recs[seq-m.base] = nil
	}
}

func (m *memBackend) setFloor(first uint64) {
	if first <= m.base {
		return
	}
	k := first - m.base
	if k >= uint64(len(m.recs)) {
		m.recs, m.base = nil, first
		return
	}
	clear(m.recs[:k])
	m.recs, m.base = m.recs[k:], first
}

func (m *memBackend) persistDeletes(seqs []uint64) (int, error) { return len(seqs), nil }
func (m *memBackend) persistFloor(uint64) error                 { return nil }
func (m *memBackend) persistSkip(uint64) error                  { return nil }
func (m *memBackend) dropAll()                                  { m.recs = nil }
func (m *memBackend) prepareSync(bool) syncPlan                 { return noSync{} }
func (m *memBackend) finishSync(syncPlan, error)                {}
func (m *memBackend) close() error                              { m.recs = nil; return nil }
func (m *memBackend) destroy() error                            { return m.close() }
