// Package bufpool lends large byte buffers by size class, so that code
// handling a stream of large messages (the protocol parser assembling
// payloads, the store reading records) reuses buffers instead of
// allocating, zeroing and collecting one per message.
package bufpool

import (
	"math/bits"
	"sync"
)

// Buffers above MinSize and up to 1 GiB are pooled, in classes of four
// steps per power of two, so a buffer is at most a quarter larger than
// asked for. Smaller buffers are cheap to allocate and are not pooled.
const (
	poolMinShift = 16 // the smallest pooled class is above 1<<poolMinShift
	poolMaxShift = 30 // sizes above 1<<poolMaxShift are not pooled
	poolSteps    = 4

	// MinSize is the largest size Get does not pool.
	MinSize = 1 << poolMinShift
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

// Get returns an empty buffer with room for n bytes: from a pool when n is
// above MinSize, else newly allocated.
func Get(n int) []byte {
	idx, c := bigClass(n)
	if idx >= 0 {
		if b, ok := bigPools[idx].Get().(*[]byte); ok {
			return (*b)[:0]
		}
	}
	return make([]byte, 0, c)
}

// Put gives a buffer from Get back for reuse; its holder must not touch
// it afterwards. Other buffers are ignored.
func Put(b []byte) {
	idx, c := bigClass(cap(b))
	if idx < 0 || c != cap(b) {
		return
	}
	b = b[:0]
	bigPools[idx].Put(&b)
}

// Grow returns b with room for n more bytes: b itself if it has the room,
// else a buffer from Get of at least twice b's capacity (and at least
// hint bytes) holding b's bytes, b given back with Put. Growing this way
// keeps a buffer in the pooled sizes, which append's growth does not.
func Grow(b []byte, n, hint int) []byte {
	need := len(b) + n
	if need <= cap(b) {
		return b
	}
	nb := append(Get(max(need, 2*cap(b), hint)), b...)
	Put(b)
	return nb
}
