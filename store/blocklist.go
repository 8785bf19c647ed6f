package store

// blockList is a sequence that grows at its back and shrinks at its front,
// kept in blocks of blockLen elements rather than in one array: a stream's
// index of entries, one per sequence from its first to its last.
//
// A slice that outgrows its array moves to one 1.25 to 2 times larger,
// copying everything in it, and until the collector frees the old array
// both are held. For an index of millions of entries that is a copy of
// hundreds of MiB, paid by the publish that happens to cross the line,
// with the stream's lock held and every other publish and read waiting
// for it; a stream kept at its limits, trimmed at its front as it grows at
// its back, would also move its live entries each time the array's end
// was reached. A blockList never moves what it holds: a full block stays
// where it is and the next element starts a new one; blocks emptied at the
// front are dropped.
//
// Short lists cost what a slice costs: until it holds blockLen elements, a
// list is one block that grows as a slice does (and is resliced when
// trimmed), so a stream of a few messages does not hold a block of
// thousands.
//
// Invariant: while there is one block, head is 0 and it holds at most
// blockLen elements; with more, every block holds blockLen elements but
// the last, which holds at least one, and head of the first are trimmed.
// Element i is then at position head+i of the blocks laid end to end.
type blockList[T any] struct {
	blocks [][]T
	head   int // elements trimmed from the front of blocks[0]
	n      int // elements held
}

// blockShift sets blockLen, the elements in a full block: 4,096 (96 KiB of
// the stream's 24-byte entries), enough that the list of blocks stays
// short (a little over 2,400 blocks for ten million entries) and small
// enough that filling a short list's single block copies little.
const (
	blockShift = 12
	blockLen   = 1 << blockShift
	blockMask  = blockLen - 1
)

// len returns the number of elements held.
func (l *blockList[T]) len() int { return l.n }

// at returns a pointer to element i, 0 <= i < l.len(). It stays valid
// until the element is trimmed: elements never move.
func (l *blockList[T]) at(i int) *T {
	p := l.head + i
	return &l.blocks[p>>blockShift][p&blockMask]
}

// append adds v at the back.
func (l *blockList[T]) append(v T) {
	switch last := len(l.blocks) - 1; {
	case last < 0:
		l.blocks = append(l.blocks, []T{v})
	case len(l.blocks[last]) < blockLen && (last > 0 || l.head == 0):
		// The single block grows as a slice does, at most to blockLen;
		// a later block was made with room for blockLen.
		b := l.blocks[last]
		if len(b) == cap(b) {
			b = append(make([]T, 0, min(max(2*cap(b), 4), blockLen)), b...)
		}
		l.blocks[last] = append(b, v)
	default:
		nb := make([]T, 1, blockLen)
		nb[0] = v
		l.blocks = append(l.blocks, nb)
	}
	l.n++
}

// trimFront drops the first k elements, 0 <= k <= l.len().
func (l *blockList[T]) trimFront(k int) {
	if k <= 0 {
		return
	}
	l.n -= k
	if l.n == 0 {
		l.reset() // release every block
		return
	}
	if len(l.blocks) == 1 {
		l.blocks[0] = l.blocks[0][k:]
		return
	}
	l.head += k
	drop := l.head >> blockShift
	if drop > 0 {
		clear(l.blocks[:drop]) // let the collector have them
		l.blocks = l.blocks[drop:]
		l.head &= blockMask
	}
	if len(l.blocks) == 1 {
		// Back to one block: reslice it, so that it may grow as a
		// short list's does once the trimmed part is gone.
		l.blocks[0], l.head = l.blocks[0][l.head:], 0
	}
}

// reset drops every element and block.
func (l *blockList[T]) reset() { *l = blockList[T]{} }

// truncate keeps the first n elements, 0 <= n <= l.len(), and drops the
// rest.
func (l *blockList[T]) truncate(n int) {
	if n >= l.n {
		return
	}
	if n <= 0 {
		l.reset()
		return
	}
	end := l.head + n // position after the last element kept
	last := (end - 1) >> blockShift
	clear(l.blocks[last+1:])
	l.blocks = l.blocks[:last+1]
	b := l.blocks[last]
	keep := (end-1)&blockMask + 1
	clear(b[keep:]) // let the collector have what they point at
	l.blocks[last] = b[:keep]
	l.n = n
	if len(l.blocks) == 1 && l.head > 0 {
		l.blocks[0], l.head = l.blocks[0][l.head:], 0
	}
}

// parts returns the elements, in order, as the slices of the blocks that
// hold them. They alias the list.
func (l *blockList[T]) parts() [][]T {
	if l.n == 0 {
		return nil
	}
	ps := make([][]T, len(l.blocks))
	copy(ps, l.blocks)
	ps[0] = ps[0][l.head:]
	return ps
}

// blockListOf returns a list of the elements of s, which it takes: s's
// array is split into blocks, not copied.
func blockListOf[T any](s []T) blockList[T] {
	l := blockList[T]{n: len(s)}
	for len(s) > 0 {
		k := min(len(s), blockLen)
		l.blocks = append(l.blocks, s[:k:k])
		s = s[k:]
	}
	return l
}
