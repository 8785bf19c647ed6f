package raftlog

import (
	"encoding/binary"
	"fmt"
)

// A checkpoint record opens every segment. It carries the state of every
// live group but its entries, so that a segment is removed as soon as no
// group has an entry in it: the records it held that still matter are in
// the checkpoints of the segments after it. Its body:
//
//	+---------+---------+---------------------+---------------------+-----
//	| version | count   | group image 1       | group image 2       | ...
//	| u8 (1)  | uvarint |                     |                     |
//	+---------+---------+---------------------+---------------------+-----
//
// and each group image:
//
//	+-------+-------+------+------+--------+-------+----------+------+
//	| group | flags | term | vote | commit | first | prevTerm | last | ...
//	| u64   | u8    | u64  | u64  | u64    | u64   | u64      | u64  |
//	+-------+-------+------+------+--------+-------+----------+------+
//	   ... | snapIndex | snapTerm | conf len | conf state | data len | snapshot |
//	       | u64       | u64      | uvarint  | (proto)    | uvarint  | data     |
//
// flags bit 0 marks a group recovery found damaged, so that the mark
// outlives the segment with the damage. The entries [first, last] are in
// this segment or earlier ones; prevTerm is the term of first-1.
const (
	checkpointVersion = 1
	imageFixedSize    = 8 + 1 + 8*8
	imageMinSize      = imageFixedSize + 2
	imageDamaged      = 1 << 0
)

// image is what a checkpoint holds of one group.
type image struct {
	group              uint64
	flags              uint8
	term, vote, commit uint64
	first, prevTerm    uint64
	last               uint64
	snapIndex          uint64
	snapTerm           uint64
	conf               []byte
	data               []byte
}

// appendCheckpoint appends the body of a checkpoint record.
func appendCheckpoint(dst []byte, imgs []image) []byte {
	dst = append(dst, checkpointVersion)
	dst = binary.AppendUvarint(dst, uint64(len(imgs)))
	for i := range imgs {
		m := &imgs[i]
		dst = binary.LittleEndian.AppendUint64(dst, m.group)
		dst = append(dst, m.flags)
		for _, v := range [...]uint64{m.term, m.vote, m.commit, m.first, m.prevTerm, m.last, m.snapIndex, m.snapTerm} {
			dst = binary.LittleEndian.AppendUint64(dst, v)
		}
		dst = binary.AppendUvarint(dst, uint64(len(m.conf)))
		dst = append(dst, m.conf...)
		dst = binary.AppendUvarint(dst, uint64(len(m.data)))
		dst = append(dst, m.data...)
	}
	return dst
}

// decodeCheckpoint decodes a checkpoint body. The images' slices alias b.
func decodeCheckpoint(b []byte) ([]image, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: checkpoint: "+format, append([]any{ErrCorrupt}, args...)...)
	}
	if len(b) < 2 || b[0] != checkpointVersion {
		return nil, bad("no version %d header", checkpointVersion)
	}
	n, k := binary.Uvarint(b[1:])
	if k <= 0 {
		return nil, bad("count")
	}
	p := 1 + k
	if n > uint64(len(b)-p)/imageMinSize {
		return nil, bad("%d groups in %d bytes", n, len(b)-p)
	}
	imgs := make([]image, n)
	for i := range imgs {
		if len(b)-p < imageMinSize {
			return nil, bad("group %d cut short", i)
		}
		m := &imgs[i]
		m.group = binary.LittleEndian.Uint64(b[p:])
		m.flags = b[p+8]
		p += 9
		for _, v := range [...]*uint64{&m.term, &m.vote, &m.commit, &m.first, &m.prevTerm, &m.last, &m.snapIndex, &m.snapTerm} {
			*v = binary.LittleEndian.Uint64(b[p:])
			p += 8
		}
		var err error
		if m.conf, p, err = lenPrefixed(b, p); err != nil {
			return nil, bad("group %d conf state: %v", m.group, err)
		}
		if m.data, p, err = lenPrefixed(b, p); err != nil {
			return nil, bad("group %d snapshot data: %v", m.group, err)
		}
		if m.group == 0 || m.flags&^imageDamaged != 0 || m.first == 0 || m.last+1 < m.first {
			return nil, bad("group %d: impossible state", m.group)
		}
	}
	if p != len(b) {
		return nil, bad("%d bytes after the last group", len(b)-p)
	}
	return imgs, nil
}

// lenPrefixed reads a uvarint length at p and that many bytes after it.
func lenPrefixed(b []byte, p int) ([]byte, int, error) {
	n, k := binary.Uvarint(b[p:])
	if k <= 0 || n > uint64(len(b)-p-k) {
		return nil, p, fmt.Errorf("length runs past the record")
	}
	p += k
	if n == 0 {
		return nil, p, nil
	}
	return b[p : p+int(n) : p+int(n)], p + int(n), nil
}
