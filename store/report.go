package store

// RecoveryReport says what Open found and did in a stream's directory.
// Damage is reported at every Open while its bytes are on disk (the
// sequences it cost stay deleted, and are never used again).
type RecoveryReport struct {
	// Segments is the number of segment files found.
	Segments int
	// IndexesLoaded counts sealed segments recovered from their index,
	// without reading their records.
	IndexesLoaded int
	// SegmentsScanned counts segments whose records were read and
	// checksummed: always the last one, and any whose index was missing,
	// stale or corrupt.
	SegmentsScanned int
	// IndexesRebuilt counts indexes written by the scan.
	IndexesRebuilt int
	// TruncatedBytes is what was cut from the end of the last segment: a
	// record torn by a crash in the middle of a write.
	TruncatedBytes int64
	// Damaged lists runs of records lost to damage that recovery stepped
	// over, keeping the good records after them (resync.go).
	Damaged []DamagedRange
	// Corrupt lists sealed segments whose records stop at a corrupt one
	// with nothing good after it in the file; see CorruptSegment.
	Corrupt []CorruptSegment
	// Missing lists sequences between segments that no segment holds and
	// that were not removed: a lost segment file (gone.go).
	Missing []MissingRange
	// HighWater is set when the meta file says sequences up to it were
	// written but no segment holds the last of them: the end of the
	// stream (its last segment) was lost. Those sequences are not used
	// again; see LostTail.
	LostTail *MissingRange
	// Staged counts the records after Options.CommitThrough that came
	// back staged (Options.Staging; stage.go).
	Staged int
}

// LostRecords returns how many sequences the report counts as lost:
// damaged records, the unreadable rest of sealed segments, sequences of
// missing segment files and of a lost end of the stream.
func (r RecoveryReport) LostRecords() uint64 {
	var n uint64
	for _, d := range r.Damaged {
		n += d.Lost
	}
	for _, c := range r.Corrupt {
		n += c.Lost
	}
	for _, m := range r.Missing {
		n += m.Last - m.First + 1
	}
	if t := r.LostTail; t != nil {
		n += t.Last - t.First + 1
	}
	return n
}

// DamagedRange is a run of records that failed their checks with a good
// record after them in the same segment: damage to data already written,
// not a torn write. Their sequences are recorded as deleted.
type DamagedRange struct {
	// File is the segment's file name.
	File string
	// Offset and Bytes locate the damaged bytes in the file.
	Offset, Bytes int64
	// FirstLost is the first sequence lost; Lost how many.
	FirstLost, Lost uint64
	// Err says what check failed first; nil for damage an earlier Open
	// found, which the segment's index remembers.
	Err error
}

// CorruptSegment describes a sealed segment whose records stop at a
// corrupt one before the end of the file, with no good record after it:
// the segment's records before it are served, the rest of the file is
// not (its sequences count as deleted). The file is left as it is, for
// inspection.
type CorruptSegment struct {
	// File is the segment's file name.
	File string
	// Offset is where the corrupt record starts.
	Offset int64
	// FirstLost is the sequence the corrupt record should have held.
	FirstLost uint64
	// Lost is how many sequences are lost from FirstLost up to the next
	// segment's first.
	Lost uint64
	// LostBytes is the size of the unserved rest of the file.
	LostBytes int64
	// Err says what check failed.
	Err error
}
