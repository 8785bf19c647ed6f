package store

import (
	"io"

	"github.com/skiffmq/skiff/internal/bufpool"
	"github.com/skiffmq/skiff/store/vfs"
)

// appendFile is a file written only at its end. A failed or short write is
// undone by truncating back, so a full disk never leaves a partial record
// behind; if the undo fails too, the file is marked broken and the undo is
// retried before the next write.
//
// With a write buffer (limit > 0, Options.WriteBuffer), appends are
// copied into memory and written together, by flush, once the buffer
// would overflow, or before anything needs them in the file. Readers see
// them either way (readAt). A failed flush keeps the buffer, cuts the
// file back to what was written, and is tried again by the next flush.
type appendFile struct {
	f      File
	size   int64 // bytes appended, written or buffered; the next append's offset
	broken bool

	limit int    // the write buffer's size; 0: every append is written at once
	buf   []byte // appended bytes not written yet, from offset written()
	// held: the buffer grows past limit and is not written
	// (Stream.HoldWrites).
	held bool
	// lastHeld is how large the buffer grew during the last hold: the
	// next one grows to it at once (grow).
	lastHeld int

	// reserveTo bounds the file's preallocation (its segment's size); 0:
	// it preallocates nothing. reserved is the offset through which its
	// space is reserved; noReserve, that a reservation failed.
	reserveTo, reserved int64
	noReserve           bool
}

// Preallocation steps: a file reserves ahead of its writes by as much as
// it holds, at least minReserve and at most maxReserve, so that one
// written little (a stream of a key-value bucket among thousands) holds
// little disk space it does not use, and a busy one makes a call every
// few megabytes.
const (
	minReserve = 64 << 10
	maxReserve = 8 << 20
)

// reserve preallocates the space of the next n bytes written at the
// file's end, and a step beyond (vfs.Preallocate). A file that cannot
// reserve is written without: after a failure it no longer tries.
func (a *appendFile) reserve(n int) {
	if a.reserveTo == 0 || a.noReserve {
		return
	}
	w := a.written()
	end := w + int64(n)
	if end <= a.reserved {
		return
	}
	from := max(a.reserved, w)
	to := max(end, min(end+min(max(w, minReserve), maxReserve), a.reserveTo))
	if err := vfs.Preallocate(a.f, from, to-from); err != nil {
		a.noReserve = true
		return
	}
	a.reserved = to
}

// unreserve gives back the space reserved past what was written, by a
// truncate to the file's size: for a segment sealed, which takes no more
// writes. The buffer must be flushed.
func (a *appendFile) unreserve() error {
	w := a.written()
	if a.reserved <= w {
		return nil
	}
	a.reserveTo, a.reserved = 0, 0
	return a.f.Truncate(w)
}

// written is how many bytes are in the file: size less the buffer.
func (a *appendFile) written() int64 { return a.size - int64(len(a.buf)) }

// append writes the parts, one after the other, in full or, on error,
// leaves the file as it was (or broken, to be repaired by the next append).
// With a write buffer it copies them into the buffer, flushing it first
// when they would overflow it.
func (a *appendFile) append(parts ...[]byte) error {
	if a.limit > 0 {
		n := 0
		for _, b := range parts {
			n += len(b)
		}
		if a.held {
			a.grow(n)
			for _, b := range parts {
				a.buf = append(a.buf, b...)
			}
			a.size += int64(n)
			return nil
		}
		if len(a.buf)+n > a.limit {
			if err := a.flush(); err != nil {
				return err
			}
		}
		if n <= a.limit {
			for _, b := range parts {
				a.buf = append(a.buf, b...)
			}
			a.size += int64(n)
			return nil
		}
		// Larger than the buffer: written at once, the buffer empty.
	}
	if a.broken {
		if err := a.rewind(); err != nil {
			return err
		}
	}
	var total int64
	if a.reserveTo > 0 {
		n := 0
		for _, b := range parts {
			n += len(b)
		}
		a.reserve(n)
	}
	for _, b := range parts {
		if len(b) == 0 {
			continue
		}
		n, err := a.f.Write(b)
		if err == nil && n < len(b) {
			err = io.ErrShortWrite
		}
		if err != nil {
			_ = a.rewind() // on failure it marks the file broken
			return err
		}
		total += int64(n)
	}
	a.size += total
	return nil
}

// flush writes the buffered appends with one write. On error the buffer
// is kept and the file cut back to what was written before.
func (a *appendFile) flush() error {
	if len(a.buf) == 0 || a.held {
		return nil
	}
	if a.broken {
		if err := a.rewind(); err != nil {
			return err
		}
	}
	a.reserve(len(a.buf))
	n, err := a.f.Write(a.buf)
	if err == nil && n < len(a.buf) {
		err = io.ErrShortWrite
	}
	if err != nil {
		_ = a.rewind()
		return err
	}
	if len(a.buf) > a.limit {
		a.lastHeld = len(a.buf) // only a hold grows the buffer past limit
	}
	if cap(a.buf) > 4*a.limit {
		bufpool.Put(a.buf) // one huge flush: its memory goes back to the pool
		a.buf = nil
	} else {
		a.buf = a.buf[:0]
	}
	return nil
}

// grow makes room in the write buffer for n more bytes while writes are
// held. A hold lasts as long as a checkpoint's fsyncs, and its buffer grows
// to megabytes (what a replica applies meanwhile): grown by append, every
// hold allocated, faulted in and copied its way up by doubling, and the
// flush then dropped it (4.5% of an R3 cluster's CPU samples at 1 KiB
// publishes, in growslice). Here the first growth of a hold goes at once
// to the size the last hold reached, in a buffer from bufpool, where the
// flush gives it back.
func (a *appendFile) grow(n int) {
	a.buf = bufpool.Grow(a.buf, n, a.lastHeld)
}

// readAt fills p with the bytes appended at off: from the file, or from
// the write buffer past what was written. Only the file's owner, under the
// stream's lock, calls it.
func (a *appendFile) readAt(p []byte, off int64) (int, error) {
	n, written := 0, a.written()
	if off < written {
		end := min(off+int64(len(p)), written)
		m, err := a.f.ReadAt(p[:end-off], off)
		n += m
		if err != nil && !(err == io.EOF && m == int(end-off)) {
			return n, err
		}
		if n == len(p) {
			return n, nil
		}
		off += int64(m)
	}
	i := off - written
	if i >= int64(len(a.buf)) {
		return n, io.EOF
	}
	m := copy(p[n:], a.buf[i:])
	n += m
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// truncate cuts what was appended back to off, at most size: buffered
// bytes past it are dropped, written ones truncated from the file. If the
// file cannot be cut, it is marked broken, to be cut again before the
// next write.
func (a *appendFile) truncate(off int64) error {
	if w := a.written(); off >= w {
		a.buf = a.buf[:off-w]
		a.size = off
		return nil
	}
	a.buf = a.buf[:0]
	a.size = off
	return a.rewind()
}

// rewind cuts the file back to its good size: what was written, the
// buffer aside.
func (a *appendFile) rewind() error {
	written := a.written()
	if err := a.f.Truncate(written); err != nil {
		a.broken = true
		return err
	}
	a.reserved = min(a.reserved, written) // a truncate frees what was reserved past the size
	if _, err := a.f.Seek(written, io.SeekStart); err != nil {
		a.broken = true
		return err
	}
	a.broken = false
	return nil
}
