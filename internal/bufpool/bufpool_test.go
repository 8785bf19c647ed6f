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

func TestGrow(t *testing.T) {
	for _, c := range []struct {
		name          string
		len, cap, n   int
		hint, atLeast int
		same          bool
	}{
		{"room enough", 10, 100, 90, 0, 100, true},
		{"doubles", 70 << 10, 80 << 10, 20 << 10, 0, 160 << 10, false},
		{"takes what it needs", 10, 100, 1 << 20, 0, 1<<20 + 10, false},
		{"takes the hint", 10, 100, 100, 300 << 10, 300 << 10, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := make([]byte, c.len, c.cap)
			for i := range b {
				b[i] = byte(i)
			}
			g := Grow(b, c.n, c.hint)
			if len(g) != c.len || cap(g)-len(g) < c.n || cap(g) < c.atLeast {
				t.Fatalf("Grow: len %d cap %d, want len %d, room %d, cap >= %d", len(g), cap(g), c.len, c.n, c.atLeast)
			}
			if (&g[:1][0] == &b[:1][0]) != c.same {
				t.Fatalf("Grow returned b: %v, want %v", !c.same, c.same)
			}
			for i := range g {
				if g[i] != byte(i) {
					t.Fatalf("byte %d not kept", i)
				}
			}
			if !c.same && cap(g) > MinSize {
				if idx, capacity := bigClass(cap(g)); idx < 0 || capacity != cap(g) {
					t.Fatalf("Grow's buffer (cap %d) is not of a pooled size", cap(g))
				}
			}
		})
	}
}
