package bufpool

import "testing"

func TestBigClass(t *testing.T) {
	seen := map[int]int{}
	for _, n := range []int{1<<16 + 1, 80 << 10, 1 << 17, 1<<17 + 1, 1 << 20, 1<<20 + 2, 3 << 20, 1 << 30} {
		idx, c := bigClass(n)
		if idx < 0 || idx >= len(bigPools) {
			t.Fatalf("bigClass(%d) index %d out of range", n, idx)
		}
		if c < n || c > n+n/4 {
			t.Errorf("bigClass(%d) capacity %d: want n <= c <= 1.25n", n, c)
		}
		if i2, c2 := bigClass(c); i2 != idx || c2 != c {
			t.Errorf("bigClass(%d) = %d, %d; its capacity maps to %d, %d", n, idx, c, i2, c2)
		}
		if prev, ok := seen[idx]; ok && prev != c {
			t.Errorf("class %d has capacities %d and %d", idx, prev, c)
		}
		seen[idx] = c
	}
	for _, n := range []int{1, 1 << 16, 1<<30 + 1} {
		if idx, _ := bigClass(n); idx != -1 {
			t.Errorf("bigClass(%d) = %d, want unpooled", n, idx)
		}
	}
}

func TestGetPut(t *testing.T) {
	b := Get(1<<20 + 2)
	if len(b) != 0 || cap(b) < 1<<20+2 {
		t.Fatalf("Get: len %d cap %d", len(b), cap(b))
	}
	Put(append(b, 'x'))
	Put(make([]byte, 100))        // not pooled: ignored
	Put(make([]byte, 0, 1<<20+3)) // not a class capacity: ignored
	if b := Get(1<<20 + 1); len(b) != 0 {
		t.Fatalf("pooled buffer not emptied: len %d", len(b))
	}
}
