package store

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
)

// A segment is removed once every message in it is (limits, a work queue
// acknowledging out of order, deletes, purges), which leaves a gap in the
// sequences: between its neighbours, or before the first segment until
// the floor that replaces it is on disk. So does a segment file lost or
// removed by hand: 670 acknowledged messages gone, where only num_deleted
// moved. To tell the two apart, removing a segment leaves a marker,
// <first>.gone holding its last sequence; at start a gap between two
// segments, or between the floor and the first segment, that no marker
// covers is reported as lost (logged as an error, and in
// RecoveryReport.Missing). A marker below the floor on disk says nothing
// the floor does not: it is removed, at start and once a sync round has
// made the floor above it durable. A marker is 8 bytes:
//
//	+---------------------------+
//	| last sequence, u64 little |
//	| endian                    |
//	+---------------------------+
const goneExt = ".gone"

// MissingRange is a run of sequences between two segments that no segment
// holds and no marker says was removed: a segment file lost.
type MissingRange struct {
	First, Last uint64
}

// markGone records that segment s is being removed. The marker is made
// durable (the file, then the directory) before the segment's files go:
// a power loss may keep a removal and lose a newer file that was never
// fsynced, and the gap would then read as a lost segment.
func (fb *fileBackend) markGone(s *segment) {
	if fb.gone == nil {
		fb.gone = map[uint64]uint64{}
	}
	fb.gone[s.first] = s.through()
	name := fb.path(s.first, goneExt)
	f, err := fb.fs.Create(name)
	if err == nil {
		_, err = f.Write(binary.LittleEndian.AppendUint64(nil, s.through()))
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = syncDir(fb.fs, fb.dir)
	}
	if err != nil {
		// The gap will be reported as a lost segment at the next start.
		fb.log.Warn("store: write removed-segment marker", "file", name, "err", err)
	}
	fb.dirDirty = true
}

// readGone reads the markers among the directory's file names.
func (fb *fileBackend) readGone(names []string) map[uint64]uint64 {
	gone := map[uint64]uint64{}
	for _, n := range names {
		first, ok := parseSegmentName(n, goneExt)
		if !ok {
			continue
		}
		f, err := fb.fs.OpenFile(filepath.Join(fb.dir, n), os.O_RDONLY, 0)
		if err != nil {
			continue
		}
		b := make([]byte, 8)
		_, err = io.ReadFull(f, b)
		_ = f.Close()
		if err == nil {
			gone[first] = binary.LittleEndian.Uint64(b)
		}
	}
	return gone
}

// checkGaps reports the gaps before and between segments that no marker
// covers, and removes markers no longer needed.
func (fb *fileBackend) checkGaps(names []string, rep *RecoveryReport) {
	gone := fb.readGone(names)
	floor := max(fb.floor, 1)
	for first, last := range gone {
		if last < floor {
			fb.removeFile(fb.path(first, goneExt))
			delete(gone, first)
		}
	}
	fb.gone = gone
	firsts := make([]uint64, 0, len(gone))
	for f := range gone {
		firsts = append(firsts, f)
	}
	sort.Slice(firsts, func(i, j int) bool { return firsts[i] < firsts[j] })
	for i := -1; i+1 < len(fb.segs); i++ {
		from := floor // before the first segment
		if i >= 0 {
			from = fb.segs[i].through() + 1
		}
		to := fb.segs[i+1].first - 1
		for _, f := range firsts { // markers cover the gap from its start
			if f <= from && gone[f] >= from {
				from = gone[f] + 1
			}
		}
		if from > to {
			continue
		}
		if c := corruptAt(rep, from); c != nil {
			// The unreadable rest of a sealed segment, reported already.
			c.Lost = to - from + 1
			continue
		}
		rep.Missing = append(rep.Missing, MissingRange{First: from, Last: to})
		fb.log.Error("store: segment file missing; its messages are lost",
			"dir", fb.dir, "first_lost_seq", from, "last_lost_seq", to, "lost", to-from+1,
			"err", fmt.Errorf("%w: no segment holds sequences %d-%d", ErrCorrupt, from, to))
	}
}

// dropStaleMarkers removes the markers below a floor that is durable.
func (fb *fileBackend) dropStaleMarkers() {
	for first, last := range fb.gone {
		if last < fb.savedFloor {
			fb.removeFile(fb.path(first, goneExt))
			delete(fb.gone, first)
			fb.dirDirty = true
		}
	}
}

// corruptAt returns the report of the corrupt segment whose lost
// sequences start at seq, or nil.
func corruptAt(rep *RecoveryReport, seq uint64) *CorruptSegment {
	for i := range rep.Corrupt {
		if rep.Corrupt[i].FirstLost == seq {
			return &rep.Corrupt[i]
		}
	}
	return nil
}
