package multiraft

import (
	"encoding/binary"
	"hash/crc32"
	"net"
)

// frameBuf builds frames for one write to a link's connection. Their bytes
// go into buf, except the large parts of envelopes (Envelope.Parts), which
// a vectored frameBuf leaves where they are: buffers returns buf cut
// around them, for one writev. A frameBuf that is not vectored copies them
// into buf, for a connection that would turn each piece into a write of
// its own.
type frameBuf struct {
	vectored bool
	buf      []byte
	ext      []extPart
	// The open frame: where it starts in buf, its first part in ext, and
	// the bytes of its parts.
	start, extStart, extLen int
	vec                     net.Buffers
}

// extPart is a piece written between buf[:at] and buf[at:].
type extPart struct {
	at int
	b  []byte
}

// reset empties f for the next write, keeping its memory unless a burst
// made it large.
func (f *frameBuf) reset(maxKeep int) {
	if cap(f.buf) > maxKeep {
		f.buf = nil
	}
	f.buf = f.buf[:0]
	clear(f.ext) // the parts are raft's entries: do not keep them alive
	f.ext = f.ext[:0]
	clear(f.vec)
	f.vec = f.vec[:0]
}

// size returns the bytes of the frames built.
func (f *frameBuf) size() int {
	n := len(f.buf)
	for _, p := range f.ext {
		n += len(p.b)
	}
	return n
}

// begin starts a frame of kind.
func (f *frameBuf) begin(kind frameKind) {
	f.start, f.extStart, f.extLen = len(f.buf), len(f.ext), 0
	f.buf = append(f.buf, 0, 0, 0, 0, 0, 0, 0, 0, byte(kind))
}

// part appends p to the open frame: in place if f is vectored and p is
// large, copied otherwise.
func (f *frameBuf) part(p []byte) {
	if !f.vectored || len(p) < minPartBytes {
		f.buf = append(f.buf, p...)
		return
	}
	f.ext = append(f.ext, extPart{at: len(f.buf), b: p})
	f.extLen += len(p)
}

// finish fills in the open frame's len and CRC (frame.go's layout: the CRC
// covers the len field, the kind and the payload, parts included).
func (f *frameBuf) finish() {
	h := f.buf[f.start:]
	binary.LittleEndian.PutUint32(h[0:4], uint32(len(h)-8+f.extLen))
	crc := crc32.Checksum(h[0:4], castagnoli)
	at := f.start + 8
	for _, p := range f.ext[f.extStart:] {
		crc = crc32.Update(crc, castagnoli, f.buf[at:p.at])
		crc = crc32.Update(crc, castagnoli, p.b)
		at = p.at
	}
	crc = crc32.Update(crc, castagnoli, f.buf[at:])
	binary.LittleEndian.PutUint32(h[4:8], crc)
}

// frame appends a whole frame with payload.
func (f *frameBuf) frame(kind frameKind, payload []byte) {
	f.begin(kind)
	f.buf = append(f.buf, payload...)
	f.finish()
}

// msg appends one envelope to the open msgs frame (frame.go's layout).
func (f *frameBuf) msg(e *Envelope) {
	f.buf = binary.AppendUvarint(f.buf, e.Group)
	f.buf = binary.AppendUvarint(f.buf, uint64(e.Len()))
	if e.Parts == nil {
		f.part(e.Data)
		return
	}
	for _, p := range e.Parts {
		f.part(p)
	}
}

// buffers returns the frames built, in order, as pieces for one writev.
func (f *frameBuf) buffers() net.Buffers {
	at := 0
	for _, p := range f.ext {
		if p.at > at {
			f.vec = append(f.vec, f.buf[at:p.at])
		}
		f.vec = append(f.vec, p.b)
		at = p.at
	}
	if at < len(f.buf) {
		f.vec = append(f.vec, f.buf[at:])
	}
	return f.vec
}
