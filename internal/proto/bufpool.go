package proto

import (
	"math/bits"
	"sync"
)

// Payload buffers for messages split across reads and larger than
// retainMax come from size-classed pools shared by every parser, so that a
// stream of large messages does not allocate (and make the collector
// sweep) a buffer per message. Classes have four steps per power of two,
// so a buffer is at most a quarter larger than asked for.
const (
	poolMinShift = 16 // the smallest pooled class is above 1<<poolMinShift
	poolMaxShift = 30 // sizes above 1<<poolMaxShift are not pooled
	poolSteps    = 4
)

var bigPools [(poolMaxShift - poolMinShift) * poolSteps]sync.Pool

// bigClass returns the pool index and buffer capacity for n bytes, or
// index -1 when n is not pooled.
func bigClass(n int) (idx, capacity int) {
	if n <= 1<<poolMinShift || n > 1<<poolMaxShift {
		return -1, n
	}
	k := bits.Len(uint(n - 1)) // 1<<(k-1) < n <= 1<<k
	step := 1 << (k - 3)       // an eighth of 1<<k
	q := (n + step - 1) / step // 5 <= q <= 8
	idx = (k-poolMinShift-1)*poolSteps + q - 5
	return idx, q * step
}

// getBig returns an empty buffer with room for n bytes.
func getBig(n int) []byte {
	idx, c := bigClass(n)
	if idx >= 0 {
		if b, ok := bigPools[idx].Get().(*[]byte); ok {
			return (*b)[:0]
		}
	}
	return make([]byte, 0, c)
}

// putBig returns a buffer from getBig to its pool.
func putBig(b []byte) {
	idx, c := bigClass(cap(b))
	if idx < 0 || c != cap(b) {
		return
	}
	b = b[:0]
	bigPools[idx].Put(&b)
}
