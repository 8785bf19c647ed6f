package store

import (
	"math/rand/v2"
	"testing"
	"time"
)

// checkList compares l with want, element by element, and checks the
// blocks' invariant.
func checkList(t *testing.T, l *blockList[int], want []int) {
	t.Helper()
	if l.len() != len(want) {
		t.Fatalf("len %d, want %d", l.len(), len(want))
	}
	for i, w := range want {
		if got := *l.at(i); got != w {
			t.Fatalf("at(%d) = %d, want %d", i, got, w)
		}
	}
	var flat []int
	for _, p := range l.parts() {
		flat = append(flat, p...)
	}
	if len(flat) != len(want) || (len(want) > 0 && (flat[0] != want[0] || flat[len(flat)-1] != want[len(want)-1])) {
		t.Fatalf("parts hold %d elements, want %d", len(flat), len(want))
	}
	switch {
	case len(want) == 0:
		if l.blocks != nil || l.head != 0 {
			t.Fatalf("empty list holds %d blocks, head %d", len(l.blocks), l.head)
		}
	case len(l.blocks) == 1:
		if l.head != 0 || len(l.blocks[0]) != len(want) || cap(l.blocks[0]) > blockLen {
			t.Fatalf("one block: head %d, len %d, cap %d, want head 0, len %d, cap <= %d",
				l.head, len(l.blocks[0]), cap(l.blocks[0]), len(want), blockLen)
		}
	default:
		for i, b := range l.blocks[:len(l.blocks)-1] {
			if len(b) != blockLen {
				t.Fatalf("block %d of %d holds %d, want %d", i, len(l.blocks), len(b), blockLen)
			}
		}
		if last := len(l.blocks[len(l.blocks)-1]); last == 0 || l.head >= blockLen ||
			(len(l.blocks)-1)*blockLen+last-l.head != len(want) {
			t.Fatalf("blocks %d, last holds %d, head %d: not %d elements", len(l.blocks), last, l.head, len(want))
		}
	}
}

func TestBlockList(t *testing.T) {
	type op struct {
		add, trim, cut int // cut: elements dropped from the back
	}
	tests := []struct {
		name string
		ops  []op
	}{
		{"empty", nil},
		{"short", []op{{add: 3}}},
		{"one full block", []op{{add: blockLen}}},
		{"a second block", []op{{add: blockLen + 1}}},
		{"three blocks, trimmed into the second", []op{{add: 3*blockLen - 5}, {trim: blockLen + 7}}},
		{"trimmed to one block, then grows", []op{{add: 2*blockLen + 10}, {trim: 2*blockLen - 3}, {add: 3 * blockLen}}},
		{"trimmed to empty", []op{{add: 2 * blockLen}, {trim: 2 * blockLen}}},
		{"emptied, then refilled", []op{{add: 100}, {trim: 100}, {add: blockLen + 1}}},
		{"a short list trimmed as it grows", []op{{add: 10}, {trim: 5}, {add: 10}, {trim: 12}, {add: 3}}},
		{"trimmed to the end of the first block", []op{{add: 2 * blockLen}, {trim: blockLen}}},
		{"cut inside the last block", []op{{add: 2*blockLen + 10}, {cut: 4}}},
		{"cut to a block's end", []op{{add: 2*blockLen + 10}, {cut: 10}, {add: 1}}},
		{"cut into an earlier block, then grows", []op{{add: 3*blockLen + 10}, {cut: blockLen + 20}, {add: blockLen}}},
		{"trimmed, then cut to one block", []op{{add: 2*blockLen + 10}, {trim: 100}, {cut: blockLen + 20}, {add: 2 * blockLen}}},
		{"cut to empty", []op{{add: blockLen + 1}, {cut: blockLen + 1}, {add: 2}}},
		{"a short list cut", []op{{add: 10}, {cut: 3}, {add: 5}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var l blockList[int]
			var want []int
			next := 0
			for _, o := range tt.ops {
				for range o.add {
					l.append(next)
					want = append(want, next)
					next++
				}
				l.trimFront(o.trim)
				want = want[o.trim:]
				checkList(t, &l, want)
				l.truncate(len(want) - o.cut)
				want = want[:len(want)-o.cut]
				checkList(t, &l, want)
			}
			checkList(t, &l, want)
		})
	}
}

// TestBlockListRandom runs random appends and trims against a slice.
func TestBlockListRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var l blockList[int]
	var want []int
	next := 0
	for round := range 400 {
		for range rng.IntN(3 * blockLen / 2) {
			l.append(next)
			want = append(want, next)
			next++
		}
		k := rng.IntN(len(want) + 1)
		if round%3 != 0 {
			k /= 4 // mostly grow
		}
		l.trimFront(k)
		want = want[k:]
		checkList(t, &l, want)
		if round%4 == 1 {
			n := rng.IntN(len(want) + 1)
			l.truncate(n)
			want = want[:n]
			checkList(t, &l, want)
		}
	}
}

// TestBlockListOf: a list made of a slice holds its elements in blocks
// that keep the invariant, and grows and is cut as any other.
func TestBlockListOf(t *testing.T) {
	for _, n := range []int{0, 1, blockLen - 1, blockLen, blockLen + 1, 3*blockLen + 7} {
		want := make([]int, n)
		for i := range want {
			want[i] = i
		}
		l := blockListOf(append([]int(nil), want...))
		checkList(t, &l, want)
		for i := range blockLen + 3 {
			l.append(n + i)
			want = append(want, n+i)
		}
		checkList(t, &l, want)
		l.truncate(len(want) / 2)
		checkList(t, &l, want[:len(want)/2])
	}
}

// TestBlockListNeverMoves checks that appending never moves an element,
// across block boundaries and after the front was trimmed.
func TestBlockListNeverMoves(t *testing.T) {
	var l blockList[int]
	for i := range blockLen {
		l.append(i) // the single block grows, and moves, as a slice
	}
	first := l.at(blockLen - 1)
	last := l.at(blockLen / 2)
	for i := blockLen; i < 5*blockLen; i++ {
		l.append(i)
	}
	l.trimFront(blockLen / 4)
	for i := range 2 * blockLen {
		l.append(i)
	}
	if l.at(blockLen-1-blockLen/4) != first || l.at(blockLen/2-blockLen/4) != last {
		t.Fatal("an element moved")
	}
}

// TestBlockListShortStaysSmall checks that a short list holds no more
// than a slice of its length would.
func TestBlockListShortStaysSmall(t *testing.T) {
	var l blockList[int]
	for i := range 100 {
		l.append(i)
		l.trimFront(l.len() / 2)
	}
	if len(l.blocks) != 1 || cap(l.blocks[0]) > 64 {
		t.Fatalf("a list of %d holds %d blocks, the first with room for %d", l.len(), len(l.blocks), cap(l.blocks[0]))
	}
}

// BenchmarkIndexAppend grows a stream's index, one 24-byte entry per
// message, to ten million entries, in a blockList and in a plain slice,
// and reports beside the mean cost of an append the longest time taken by
// any 1,024 appends in a row: for the slice, the copy of everything it
// holds each time it outgrows its array, which a stream pays with its lock
// held.
func BenchmarkIndexAppend(b *testing.B) {
	const n, run = 10_000_000, 1024
	for _, kind := range []string{"blocklist", "slice"} {
		b.Run("index="+kind, func(b *testing.B) {
			var worst time.Duration
			for b.Loop() {
				var l blockList[entry]
				var s []entry
				for i := 0; i < n; i += run {
					start := time.Now()
					for j := i; j < i+run; j++ {
						e := entry{ts: int64(j), size: uint32(j)}
						if kind == "slice" {
							s = append(s, e)
						} else {
							l.append(e)
						}
					}
					worst = max(worst, time.Since(start))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/append")
			b.ReportMetric(float64(worst.Microseconds()), "worst-µs/1024-appends")
		})
	}
}
