package store

import "fmt"

// A consumer's log holds the changes since its snapshot. Lost (emptied,
// cut at its start, or left behind by a snapshot put back from a copy),
// it takes that progress with it: the ack floor falls back to the
// snapshot's and messages are delivered again. So that this is seen, not
// silent, the log begins with an opStart record naming the snapshot's LSN
// it goes on from, written when the consumer is created and at every
// compaction, and every snapshot of this version says its log has one.
// At Open:
//
//   - a log without records (emptied) beside such a snapshot,
//   - a log whose first record is not its start, or, for a log of an older
//     version, whose first change is not the one after the snapshot's,
//   - a log that starts after the snapshot's LSN (the snapshot is older
//     than the log)
//
// are logged as an error with what is known of the loss: the LSNs
// missing, the ack floor before the log was replayed (the snapshot's) and
// after. Recovery goes on with what is left.

// logStart is what replay saw of the start of a consumer log.
type logStart struct {
	seen   bool   // a good record was decoded
	first  uint64 // the LSN of the first good record
	header bool   // it was opStart
}

// see notes a decoded record.
func (s *logStart) see(o consumerOp) {
	if !s.seen {
		s.seen, s.first, s.header = true, o.lsn, o.op == opStart
	}
}

// checkLogStart reports a log that lost its start. snapLSN is the
// snapshot's LSN, current whether the snapshot says its log has a start
// record, before the ack floor as of the snapshot. mu is not needed: Open
// has not returned.
func (c *ConsumerState) checkLogStart(name string, start *logStart, snapLSN uint64, current bool, before SeqPair) {
	after := c.mu.st.AckFloor
	report := func(what string, args ...any) {
		args = append([]any{"file", name, "snapshot_lsn", snapLSN,
			"ack_floor_before", before.Stream, "ack_floor_after", after.Stream}, args...)
		c.log.Error("store: "+what, append(args, "err", fmt.Errorf("%w: consumer log", ErrCorrupt))...)
	}
	switch {
	case !start.seen && current:
		report("consumer log is empty where it should begin with its start; progress recorded after the snapshot is lost (messages may be delivered again)")
	case !start.seen:
		// An older version's log, empty after a compaction or never
		// written: nothing tells it from an emptied one.
	case start.header && start.first > snapLSN:
		report("consumer snapshot is older than its log; progress between them is lost (messages may be delivered again)",
			"log_starts_after_lsn", start.first, "lost_lsns", start.first-snapLSN)
	case start.header:
	case current:
		report("consumer log lost its start; progress recorded before its first surviving record is lost (messages may be delivered again)",
			"first_lsn", start.first)
	case start.first > snapLSN+1:
		report("consumer log lost its start; progress recorded before its first surviving record is lost (messages may be delivered again)",
			"first_lsn", start.first, "lost_lsns", start.first-snapLSN-1)
	}
}
