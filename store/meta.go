package store

import (
	"encoding/binary"
	"hash/crc32"
)

// The meta file holds the stream's floor: every sequence below it is gone
// (purged or removed by limits), and the next sequence is at least the
// floor. It has two fixed slots written alternately in place, so a torn
// write can damage only the slot being written and the other still holds
// the previous floor. Open uses the good slot with the highest
// generation. Integers are little-endian:
//
//	meta: two slots +------+---------+-----+------------+-------+--------+-----+
//	 at 0 and 32    | SKMT | version | pad | generation | floor | crc32c | pad |
//	                | 4    | u8      | 3   | u64        | u64   | u32    | 4   |
//	                +------+---------+-----+------------+-------+--------+-----+
//
// The CRC32C covers the 24 bytes before it. The floor also carries the last
// sequence across a purge of everything. Two more slots follow, for the
// high water mark (hwm.go); a meta file without them (64 bytes) is read as
// before.
const (
	metaName     = "meta"
	metaMagic    = "SKMT"
	metaSlotSize = 32
)

// encodeMetaSlot encodes a slot for generation gen.
func encodeMetaSlot(gen, floor uint64) []byte {
	b := make([]byte, metaSlotSize)
	copy(b, metaMagic)
	b[4] = 1 // version
	binary.LittleEndian.PutUint64(b[8:], gen)
	binary.LittleEndian.PutUint64(b[16:], floor)
	binary.LittleEndian.PutUint32(b[24:], crc32.Checksum(b[:24], castagnoli))
	return b
}

// decodeMeta returns the floor and generation of the newest good slot of a
// meta file's bytes; ok is false if neither slot is good.
func decodeMeta(b []byte) (floor, gen uint64, ok bool) {
	for i := 0; i+metaSlotSize <= len(b) && i < 2*metaSlotSize; i += metaSlotSize {
		s := b[i : i+metaSlotSize]
		if string(s[:4]) != metaMagic || s[4] != 1 ||
			crc32.Checksum(s[:24], castagnoli) != binary.LittleEndian.Uint32(s[24:]) {
			continue
		}
		if g := binary.LittleEndian.Uint64(s[8:]); !ok || g > gen {
			floor, gen, ok = binary.LittleEndian.Uint64(s[16:]), g, true
		}
	}
	return floor, gen, ok
}
