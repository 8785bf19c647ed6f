package store

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// A .del file lists the sequences deleted from the middle of its segment,
// as a series of batches, one per write; integers are little-endian:
//
//	+-------+--------+----------------------+
//	| count | crc32c | count x u64 sequence |
//	| u32   | u32    |                      |
//	+-------+--------+----------------------+
//
// A batch's CRC32C covers its count and sequences; a torn last batch is
// truncated on Open.
const delBatchHeader = 8 // count, crc

// appendDelBatch appends one batch recording seqs as deleted.
func appendDelBatch(dst []byte, seqs []uint64) []byte {
	off := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(seqs)))
	dst = binary.LittleEndian.AppendUint32(dst, 0)
	for _, s := range seqs {
		dst = binary.LittleEndian.AppendUint64(dst, s)
	}
	b := dst[off:]
	c := crc32.Update(0, castagnoli, b[0:4])
	c = crc32.Update(c, castagnoli, b[8:])
	binary.LittleEndian.PutUint32(b[4:], c)
	return dst
}

// decodeDelBatches calls fn for every sequence in the good batches of a
// .del file and returns how many bytes they span. It stops at the first
// torn or corrupt batch, which a crash during its write leaves; the caller
// truncates it away.
func decodeDelBatches(b []byte, fn func(seq uint64)) (good int, err error) {
	for len(b) > 0 {
		if len(b) < delBatchHeader {
			return good, fmt.Errorf("%w: delete batch header of %d bytes", errTorn, len(b))
		}
		n := int64(binary.LittleEndian.Uint32(b))
		size := delBatchHeader + 8*n
		if size > int64(len(b)) {
			return good, fmt.Errorf("%w: delete batch of %d sequences in %d bytes", errTorn, n, len(b))
		}
		c := crc32.Update(0, castagnoli, b[0:4])
		c = crc32.Update(c, castagnoli, b[delBatchHeader:size])
		if c != binary.LittleEndian.Uint32(b[4:]) {
			return good, fmt.Errorf("%w: delete batch checksum", ErrCorrupt)
		}
		for i := int64(0); i < n; i++ {
			fn(binary.LittleEndian.Uint64(b[delBatchHeader+8*i:]))
		}
		good += int(size)
		b = b[size:]
	}
	return good, nil
}
