package store

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
)

// A stream's sequences are never used twice. Segment files carry them, so
// a lost last segment (removed by hand, lost to a damaged file system)
// would let new messages take the sequences of acknowledged ones that
// consumers may have seen. To catch it, the meta file also holds a high
// water mark: the last sequence written and the first sequence of the
// segment taking appends, in two more slots written alternately after the
// floor's (so the meta file stays readable by versions without them):
//
//	hwm: two slots  +------+--------+------------+------+--------------+
//	 at 64 and 96   | SKHW | crc32c | generation | high | active first |
//	                | 4    | u32    | u64        | u64  | u64          |
//	                +------+--------+------------+------+--------------+
//
// The CRC32C covers the 24 bytes after it. The slots are written by every
// sync round that follows a write (not fsynced for that alone: a
// process crash keeps them), and fsynced when the active segment changes.
// At Open, a high water mark above every sequence found, with the segment
// it names as active missing, means the end of the stream was lost: it is
// logged as an error, reported (RecoveryReport.LostTail) and those
// sequences are never used again. A segment that is there but shorter
// (an operating system crash took its unsynced tail) is not that: under
// SyncInterval and SyncNever those sequences are given again, as before.

const (
	hwMagic    = "SKHW"
	hwOffset   = 2 * metaSlotSize // after the floor's two slots
	hwSlotSize = 32
)

// encodeHWSlot encodes a high water slot.
func encodeHWSlot(gen, high, active uint64) []byte {
	b := make([]byte, hwSlotSize)
	copy(b, hwMagic)
	binary.LittleEndian.PutUint64(b[8:], gen)
	binary.LittleEndian.PutUint64(b[16:], high)
	binary.LittleEndian.PutUint64(b[24:], active)
	binary.LittleEndian.PutUint32(b[4:], crc32.Checksum(b[8:], castagnoli))
	return b
}

// decodeHW returns the newest good high water slot in b, the bytes of the
// meta file from hwOffset on; ok is false if there is none.
func decodeHW(b []byte) (high, active, gen uint64, ok bool) {
	for i := 0; i+hwSlotSize <= len(b) && i < 2*hwSlotSize; i += hwSlotSize {
		s := b[i : i+hwSlotSize]
		if string(s[:4]) != hwMagic || crc32.Checksum(s[8:], castagnoli) != binary.LittleEndian.Uint32(s[4:]) {
			continue
		}
		if g := binary.LittleEndian.Uint64(s[8:]); !ok || g > gen {
			high, active, gen, ok = binary.LittleEndian.Uint64(s[16:]), binary.LittleEndian.Uint64(s[24:]), g, true
		}
	}
	return high, active, gen, ok
}

// noteHighWater writes the high water mark if it moved, for a sync round.
// A change of active segment is fsynced with the round.
func (fb *fileBackend) noteHighWater() {
	active := fb.savedActive
	if fb.active != nil {
		active = fb.active.first
	}
	if fb.high <= fb.savedHigh && active == fb.savedActive {
		return
	}
	if err := fb.openMeta(); err != nil {
		fb.hwWarn.Log(fb.log, slog.LevelError, "store: write high water mark; will retry", "dir", fb.dir, "err", err)
		return
	}
	gen := fb.hwGen + 1
	_, err := fb.meta.Seek(hwOffset+int64(gen%2)*hwSlotSize, io.SeekStart)
	if err == nil {
		_, err = fb.meta.Write(encodeHWSlot(gen, fb.high, active))
	}
	if err != nil {
		fb.hwWarn.Log(fb.log, slog.LevelError, "store: write high water mark; will retry", "dir", fb.dir,
			"err", fmt.Errorf("%w: %s: %w", ErrWrite, metaName, err))
		return
	}
	if active != fb.savedActive {
		fb.metaDirty = true
	}
	fb.hwGen, fb.savedHigh, fb.savedActive = gen, fb.high, active
}

// checkLostEnd compares what recovery found with the high water mark:
// sequences above everything found, where the segment that took appends
// is missing, were lost with it.
func (fb *fileBackend) checkLostEnd(rec *recovered, rep *RecoveryReport) {
	found := max(rec.floor, 1) - 1
	for _, s := range fb.segs {
		found = max(found, s.first+uint64(s.ents.len())-1)
	}
	for q := range rec.dels {
		found = max(found, q)
	}
	fb.high = max(fb.high, found)
	if fb.savedHigh <= found || fb.savedActive == 0 {
		return
	}
	if n := len(fb.segs); n > 0 && fb.segs[n-1].first >= fb.savedActive {
		return // the active segment is there: a shorter tail is an OS crash's
	}
	rep.LostTail = &MissingRange{First: found + 1, Last: fb.savedHigh}
	rec.high = fb.savedHigh
	fb.high = fb.savedHigh
	fb.log.Error("store: the last segment file is missing; its messages are lost and their sequences will not be used again",
		"dir", fb.dir, "missing", segmentBase(fb.savedActive)+logExt, "first_lost_seq", found+1,
		"last_lost_seq", fb.savedHigh, "lost", fb.savedHigh-found,
		"err", fmt.Errorf("%w: no segment holds sequences %d-%d", ErrCorrupt, found+1, fb.savedHigh))
}
