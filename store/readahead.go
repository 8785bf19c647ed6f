package store

import (
	"errors"
	"io"
	"sync"
)

// Read-ahead bounds: each file-backed stream has readAheadSlots buffers of
// readAheadSize bytes, allocated when a reader first reads on from where
// it left off outside the tail cache. Records larger than
// readAheadMaxRecord are always read on their own.
const (
	readAheadSize      = 64 << 10
	readAheadSlots     = 2
	readAheadMaxRecord = readAheadSize / 4
)

// readAhead serves sequential reads of a file-backed stream's records that
// are in no tail cache (a consumer replaying the stream from its start)
// from blocks of readAheadSize, one pread(2) per block instead of one per
// record. A read that continues where a slot's last read ended fills that
// slot with the block starting at it; any other miss reads only its record
// and takes the least recently used slot, to be followed. Record bytes at
// an offset never change while the segment lives (appends only add after
// log.size, a rewind only cuts what no index points to), so a block is
// good for as long as its segment, which the slot keeps by pointer.
//
// Readers hold the stream's read lock, so several can be here at once:
// mu guards the slots.
type readAhead struct {
	mu    sync.Mutex
	slots [readAheadSlots]raSlot
	tick  uint64 // use counter, for least recently used
}

type raSlot struct {
	seg  *segment // whose bytes buf holds; nil when unused
	off  int64    // file offset of buf[0]
	buf  []byte
	next int64 // where the slot's last read ended
	used uint64
}

// read fills dst with the len(dst) bytes at off in s's log file.
func (r *readAhead) read(s *segment, dst []byte, off int64) error {
	if len(dst) > readAheadMaxRecord {
		return readFull(s, dst, off)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tick++
	end := off + int64(len(dst))
	lru := 0
	for i := range r.slots {
		sl := &r.slots[i]
		if sl.seg == s && off >= sl.off && end <= sl.off+int64(len(sl.buf)) {
			copy(dst, sl.buf[off-sl.off:])
			sl.next, sl.used = end, r.tick
			return nil
		}
		if sl.seg == s && sl.next == off {
			return sl.fill(s, dst, off, r.tick)
		}
		if sl.used < r.slots[lru].used {
			lru = i
		}
	}
	sl := &r.slots[lru]
	if err := readFull(s, dst, off); err != nil {
		return err
	}
	sl.seg, sl.off, sl.buf, sl.next, sl.used = s, 0, sl.buf[:0], end, r.tick
	return nil
}

// fill reads the block at off into the slot and copies dst from it.
func (sl *raSlot) fill(s *segment, dst []byte, off int64, tick uint64) error {
	n := min(int64(readAheadSize), s.fileSize-off)
	if n < int64(len(dst)) {
		return readFull(s, dst, off) // its error says what is wrong
	}
	if sl.buf == nil {
		sl.buf = make([]byte, 0, readAheadSize)
	}
	got, err := s.log.readAt(sl.buf[:n], off)
	if got < len(dst) {
		sl.seg, sl.buf = nil, sl.buf[:0]
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	if err != nil && !errors.Is(err, io.EOF) {
		sl.seg, sl.buf = nil, sl.buf[:0]
		return err
	}
	sl.seg, sl.off, sl.buf = s, off, sl.buf[:got]
	copy(dst, sl.buf)
	sl.next, sl.used = off+int64(len(dst)), tick
	return nil
}

// forget drops the slots that hold s (a dropped segment), so that its
// memory and file are not kept.
func (r *readAhead) forget(s *segment) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.slots {
		if r.slots[i].seg == s {
			r.slots[i].seg, r.slots[i].buf = nil, r.slots[i].buf[:0]
		}
	}
}

func readFull(s *segment, dst []byte, off int64) error {
	_, err := s.log.readAt(dst, off)
	return err
}
