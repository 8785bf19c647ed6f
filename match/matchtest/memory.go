package matchtest

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// RunMemoryReturns subscribes many distinct deep patterns, unsubscribes them
// all, and checks that the heap the index holds returns to where it was:
// an engine that leaves empty nodes behind fails.
func RunMemoryReturns(t *testing.T, newMatcher Factory) {
	const n = 20000
	rng := rand.New(rand.NewPCG(1, 2))
	patterns := make([]string, n)
	for i := range patterns {
		patterns[i] = fmt.Sprintf("%d.%d.%d.%d.%d", rng.Uint32(), rng.Uint32(), rng.Uint32(), rng.Uint32(), rng.Uint32())
	}
	m := newMatcher()
	before := heapInUse()
	for _, p := range patterns {
		require.NoError(t, m.Subscribe(p, "", "s"))
	}
	full := heapInUse()
	for _, p := range patterns {
		require.NoError(t, m.Unsubscribe(p, "", "s"))
	}
	after := heapInUse()
	runtime.KeepAlive(m)
	t.Logf("heap: %d before, %d with %d subscriptions, %d after removing them", before, full, n, after)
	require.Greater(t, full-before, int64(n*50), "the subscriptions should have taken memory")
	require.Less(t, after-before, int64(1<<20), "memory did not return after every unsubscribe")
}

func heapInUse() int64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
