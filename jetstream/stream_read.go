package jetstream

import (
	"errors"
	"slices"
	"time"

	"github.com/skiffmq/skiff/store"
)

// Reads of a stream through a consumer's filters: none means every
// subject, several mean any of them.

// nextFrom returns the first message at or after from that passes the
// filters and is durable (see store.Stream.Durable): under sync always a
// consumer never delivers a message an fsync has not covered, so that no
// machine crash can take back a message a consumer has seen, or leave an
// ack floor past the stream's end.
func (st *stream) nextFrom(from uint64, filters []string) (*store.Msg, error) {
	m, err := st.nextAny(from, filters)
	if err == nil && m.Seq > st.store.Durable() {
		return nil, store.ErrNotFound
	}
	return m, err
}

func (st *stream) nextAny(from uint64, filters []string) (*store.Msg, error) {
	switch len(filters) {
	case 0:
		return st.store.Next(from, "")
	case 1:
		return st.store.Next(from, filters[0])
	}
	var best *store.Msg
	for _, f := range filters {
		m, err := st.store.Next(from, f)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if best == nil || m.Seq < best.Seq {
			best = m
		}
	}
	if best == nil {
		return nil, store.ErrNotFound
	}
	return best, nil
}

// countFrom counts the messages at or after from that pass the filters.
func (st *stream) countFrom(from uint64, filters []string) uint64 {
	if len(filters) == 0 {
		return st.store.NumPending(from, "")
	}
	var n uint64
	for _, f := range filters {
		n += st.store.NumPending(from, f) // filters never overlap
	}
	return n
}

// lastMatching returns the sequence of the newest message passing the
// filters, or 0.
func (st *stream) lastMatching(filters []string) uint64 {
	if len(filters) == 0 {
		filters = []string{""}
	}
	var last uint64
	for _, f := range filters {
		if m, err := st.store.LastBySubject(f); err == nil {
			last = max(last, m.Seq)
		}
	}
	return last
}

// lastPerSubject returns, sorted, the sequence of the newest message of
// every subject passing the filters.
func (st *stream) lastPerSubject(filters []string) []uint64 {
	if len(filters) == 0 {
		filters = []string{""}
	}
	var seqs []uint64
	for _, f := range filters {
		for subj := range st.store.Subjects(f) {
			if m, err := st.store.LastBySubject(subj); err == nil {
				seqs = append(seqs, m.Seq)
			}
		}
	}
	slices.Sort(seqs)
	return slices.Compact(seqs)
}

// seqAtTime returns the first sequence stored at or after t.
func (st *stream) seqAtTime(t time.Time) uint64 { return st.store.SeqAtOrAfterTime(t) }
